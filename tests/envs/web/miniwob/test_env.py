"""MiniWoB-v0: pages, actions, rewards from MiniWoB's JavaScript, invalid actions, failures and sharing."""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Iterator

import gymnasium
import pytest

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.browser import BrowserError, launched_profiles
from turnkit.envs.web.miniwob.env import MiniWoBEnv
from turnkit.envs.web.miniwob.tasks import CURATED
from turnkit.envs.web.miniwob.view import parse_page
from turnkit.errors import ConfigError
from turnkit.types import AgentTurn, ErrorCause


@pytest.fixture(scope="module")
def env(chromium: None) -> Iterator[MiniWoBEnv]:
    """One env for the module; tests pick the task per episode with ``options={"task": ...}`` where needed."""
    e = MiniWoBEnv(task=["click-button", "enter-text", "choose-list", "click-checkboxes"])
    yield e
    e.close()


def _reset(env: MiniWoBEnv, task: str, seed: int) -> str:
    """Reset ``env`` to MiniWoB task ``task`` with page seed ``seed``."""
    return env.reset(options={"task": env.make_task(task, seed)})[0]


def test_the_registered_default_is_click_button_with_a_12_step_limit(chromium: None) -> None:
    env = gymnasium.make("turnkit/MiniWoB-v0")
    try:
        assert env.spec is not None and env.spec.max_episode_steps == 12
        obs, info = env.reset(seed=0)
        assert 'MiniWoB task "click-button"' in obs and info["miniwob_task"] == "click-button"
        page = parse_page(obs)
        assert page is not None and page.instruction.startswith("Click on the")
        traj = turnkit.collect(env, OracleAgent(), seed=0)
        assert traj.success and traj.total_reward == 1.0 and len(traj.steps) == 1
    finally:
        env.close()


def test_a_wrong_click_ends_the_episode_with_minwobs_negative_reward(env: MiniWoBEnv) -> None:
    page = parse_page(_reset(env, "click-test-2", 5))  # "Click button ONE." next to a button TWO, or the reverse
    assert page is not None
    want = page.instruction.split()[-1].rstrip(".")
    wrong = next(e for e in page.find("button") if e.text != want)
    obs, reward, terminated, truncated, info = env.step(f"click[{wrong.ref}]")
    assert (reward, terminated, truncated, info["success"], info["raw_reward"]) == (-1.0, True, False, False, -1.0)
    assert "reward -1.00 (failure)" in obs


def test_type_replaces_the_field_and_an_empty_type_clears_it(env: MiniWoBEnv) -> None:
    _reset(env, "enter-text", 1)
    for text in ("first", 'sécond, with "quotes" and ]', ""):
        obs, *_ = env.step(f"type[1, {text}]")
        assert env.tab.evaluate("document.getElementById('tt').value") == text
    page = parse_page(obs)
    assert page is not None and page.elements[0].value == ""


def test_select_chooses_by_text_and_reports_the_options_otherwise(env: MiniWoBEnv) -> None:
    page = parse_page(_reset(env, "choose-list", 3))
    assert page is not None
    (lst,) = page.find("select")
    obs, _, _, _, info = env.step(f"select[{lst.ref}, {lst.options[-1].upper()}]")  # case-insensitive fallback
    assert "invalid_action" not in info and parse_page(obs).elements[0].selected == lst.options[-1]  # type: ignore[union-attr]
    obs, _, terminated, _, info = env.step(f"select[{lst.ref}, No Such Place]")
    assert info["invalid_action"] == "wrong_element" and lst.options[0] in obs and not terminated


@pytest.mark.parametrize(
    ("action", "reason", "says"),
    [
        ("hello", "malformed_action", "no action found"),
        ("click[99]", "unknown_ref", "no element [99]"),
        ("type[2, x]", "wrong_element", "not a text field"),
        ("select[1, x]", "wrong_element", "not a list"),
        ("x" * (1 << 20), "too_long", "longer than 4096"),
        ("", "empty", "empty"),
    ],
)
def test_invalid_actions_are_feedback_not_exceptions(env: MiniWoBEnv, action: str, reason: str, says: str) -> None:
    _reset(env, "enter-text", 1)  # [1] input, [2] button
    obs, reward, terminated, _, info = env.step(action)
    assert info["invalid_action"] == reason and says in obs and reward == 0.0 and not terminated
    assert info["invalid_actions"] == 1


def test_the_fourth_invalid_action_ends_the_episode(env: MiniWoBEnv) -> None:
    _reset(env, "enter-text", 1)
    outs = [env.step(a) for a in ("click[99]", "nonsense", "type[2, x]", "click[98]")]
    assert [o[2] for o in outs] == [False, False, False, True]
    assert outs[-1][4]["success"] is False and "The episode is over." in outs[-1][0]


def test_same_seed_same_page_in_two_envs_and_different_seeds_differ(chromium: None) -> None:
    a, b = MiniWoBEnv(task="click-checkboxes"), MiniWoBEnv(task="click-checkboxes")
    try:
        assert a.reset(seed=11)[0] == b.reset(seed=11)[0]
        assert a.step("click[2]")[0] == b.step("click[2]")[0]
        assert a.reset(seed=12)[0] != b.reset(seed=11)[0]
        assert a.task.task_id != b.task.task_id and "page_seed" in a.privileged()
    finally:
        a.close()
        b.close()


def test_a_group_of_eight_shares_one_chromium(chromium: None) -> None:
    before = len(launched_profiles())
    env = gymnasium.make("turnkit/MiniWoB-v0", task="click-option")
    trajs = turnkit.collect_group(env, OracleAgent(), seed=7, group_size=8)
    assert all(t.success for t in trajs)
    assert len({t.steps[0].observation for t in trajs}) == 1  # the same page for the whole group
    assert len(launched_profiles()) <= before + 1
    env.close()
    del trajs
    gc.collect()


def test_a_killed_browser_is_recorded_as_a_browser_error_and_reset_recovers(chromium: None) -> None:
    env = MiniWoBEnv(task="enter-text")
    try:
        env.reset(seed=0)
        pid = env.tab.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(BrowserError):
            env.step("click[2]")
        obs, _ = env.reset(seed=0)
        assert env.tab.pid != pid and parse_page(obs) is not None
        os.kill(env.tab.pid, signal.SIGKILL)  # type: ignore[arg-type]
        traj = turnkit.collect(env, OracleAgent(), seed=1)  # a dead browser before the episode: reset recovers
        assert traj.error is None and traj.success
        traj = turnkit.collect(env, _KillsTheBrowser(env), seed=1)  # one that dies mid-episode: data, not a crash
        assert traj.error is not None and traj.error.cause is ErrorCause.BROWSER
    finally:
        env.close()


class _KillsTheBrowser:
    """An agent that kills the env's Chromium before answering."""

    def __init__(self, env: MiniWoBEnv) -> None:
        self.env = env

    def act(self, contexts: list) -> list[AgentTurn]:
        os.kill(self.env.tab.pid, signal.SIGKILL)  # type: ignore[arg-type]
        return [AgentTurn(text="click[2]") for _ in contexts]


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown MiniWoB task 'drag-box'"):
        MiniWoBEnv(task="drag-box")
    with pytest.raises(ConfigError, match="at least one"):
        MiniWoBEnv(task=[])
    assert MiniWoBEnv(task="drag-box", allow_uncurated=True).task_names == ("drag-box",)
    assert "click-button" in CURATED


def test_browser_errors_are_typed_for_the_rollout_layer() -> None:
    from turnkit.rollout.collect import env_fault_cause

    assert env_fault_cause(BrowserError("gone")) is ErrorCause.BROWSER
