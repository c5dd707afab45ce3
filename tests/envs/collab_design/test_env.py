"""The design env end to end, in a real headless Chromium (one shared browser per module)."""

from __future__ import annotations

import io
import os
import signal
import statistics
import time

import gymnasium
import pytest

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.browser import Browser, RenderCache, pids_with
from turnkit.cli import main as cli_main
from turnkit.envs.collab_design.baselines import FeedbackFollower
from turnkit.envs.collab_design.env import SUCCESS_THRESHOLD, CollabDesignEnv
from turnkit.envs.collab_design.protocol import NO_HTML_REPLY, PAGE_ERROR_REPLY
from turnkit.errors import ConfigError
from turnkit.types import ErrorCause

ENV_ID = "turnkit/CollabDesign-v0"  # registered by conftest.py until registration.py does it
PAGE = "```html\n<body style='margin:0;background:#10375f'><h1 style='color:white'>Hello</h1></body>\n```"


@pytest.fixture
def env(browser: Browser) -> gymnasium.Env:
    e = gymnasium.make(ENV_ID, browser=browser)
    yield e
    e.close()


@pytest.mark.parametrize("split", ["id", "ood", "combo"])
def test_oracle_always_succeeds(browser: Browser, split: str) -> None:
    env = gymnasium.make(ENV_ID, split=split, browser=browser)
    trajs = [turnkit.collect(env, OracleAgent(), seed=s) for s in range(3)]
    assert [(t.success, t.total_reward, len(t.steps)) for t in trajs] == [(True, 1.0, 1)] * 3


def test_following_feedback_beats_answering_at_once(browser: Browser) -> None:
    env = gymnasium.make(ENV_ID, browser=browser)
    once = [turnkit.collect(env, FeedbackFollower(answer_at_once=True), seed=s).total_reward for s in range(2)]
    follow = [turnkit.collect(env, FeedbackFollower(), seed=s) for s in range(2)]
    final = [t.total_reward for t in follow]
    assert all(f > o + 0.2 for f, o in zip(final, once, strict=True)), (once, final)
    assert statistics.mean(final) > 0.85
    for t in follow:  # similarity grows over the dialogue
        sims = [s.info["similarity"] for s in t.steps]
        assert sims[-1] > sims[0] and len(sims) == 10


def test_check_env_passes_including_a_fresh_process(browser: Browser) -> None:
    env = gymnasium.make(ENV_ID, split="combo", browser=browser)
    report = turnkit.check_env(env, seeds=(0, 1), raise_on_failure=False)
    assert report.ok, str(report)
    assert report.result("cross_process").status.value == "passed", str(report)


def test_feedback_quotes_texts_by_design_but_never_the_reference_html(browser: Browser) -> None:
    env = gymnasium.make(ENV_ID, browser=browser)
    report = turnkit.check_env(
        env,
        seeds=(0, 1),
        policy=FeedbackFollower().reply,
        cross_process=False,
        checks=["privileged_leak"],
        raise_on_failure=False,
    )
    assert report.ok, str(report)
    traj = turnkit.collect(env, FeedbackFollower(), seed=0)
    task = traj.task
    assert task is not None
    said = " ".join(s.observation for s in traj.steps[1:]) + traj.final_observation
    brand = str(task.privileged["description"]).split("Brand: '")[1].split("'")[0]
    assert brand in said  # the human told the agent the brand name: a described difference
    for s in traj.steps:
        assert task.privileged["reference_html"] not in s.observation
        assert all(task.privileged["reference_html"] not in str(v) for v in s.info.values())


def test_a_message_without_html_asks_for_html(env: gymnasium.Env) -> None:
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("What colours do you like?")
    assert (obs, reward, terminated) == (NO_HTML_REPLY, 0.0, False)
    assert info["rendered"] is False and info["similarity"] == 0.0


def test_a_hanging_page_is_feedback_and_the_episode_goes_on(env: gymnasium.Env, browser: Browser) -> None:
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step("<script>while (true) {}</script>")
    assert obs == PAGE_ERROR_REPLY["timeout"] and info["page_error"] == "timeout" and not terminated
    obs, _, _, _, info = env.step(PAGE)
    assert info["rendered"] and info["similarity"] > 0


def test_a_browser_killed_mid_episode_is_restarted(env: gymnasium.Env, browser: Browser) -> None:
    env.reset(seed=1)
    env.step(PAGE)
    pid, restarts = browser.pid, browser.restarts
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    _, _, _, _, info = env.step(PAGE.replace("Hello", "Hello again"))
    assert info["rendered"] and browser.pid != pid and browser.restarts == restarts + 1


def test_a_broken_browser_is_recorded_on_the_trajectory_not_raised() -> None:
    broken = Browser(executable="/bin/true", cache=RenderCache(0), start_timeout_s=5.0)
    env = gymnasium.make(ENV_ID, browser=broken)
    traj = turnkit.collect(env, OracleAgent(), seed=0)
    assert traj.error is not None and "BrowserError" in traj.error.message
    assert traj.error.cause == ErrorCause.BROWSER
    assert not traj.success


def test_the_last_turn_is_the_answer(browser: Browser) -> None:
    env = gymnasium.make(ENV_ID, browser=browser, max_turns=2)
    env.reset(seed=0)
    _, r1, t1, _, _ = env.step(PAGE)
    obs, r2, t2, _, info = env.step(PAGE)
    assert (r1, t1, t2) == (0.0, False, True)
    assert r2 == info["similarity"] > 0 and info["success"] is (r2 >= SUCCESS_THRESHOLD)
    assert obs.startswith("That was the last turn.")


def test_an_env_closes_its_own_browser_but_not_a_shared_one(browser: Browser) -> None:
    own = gymnasium.make(ENV_ID)
    own.reset(seed=0)
    own.step(PAGE.replace("Hello", "Own browser"))
    profile = own.unwrapped.browser._proc.profile
    assert pids_with(profile)
    own.close()
    assert pids_with(profile) == []
    shared = gymnasium.make(ENV_ID, browser=browser)
    shared.reset(seed=0)
    shared.step(PAGE)
    shared.close()
    assert browser.running


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="max_turns"):
        CollabDesignEnv(max_turns=0)
    with pytest.raises(ConfigError, match="success_threshold"):
        CollabDesignEnv(success_threshold=1.5)
    with pytest.raises(ConfigError, match="viewport"):
        CollabDesignEnv(browser=Browser(viewport=(320, 240)))


def test_turnkit_play_runs_an_episode(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("I WANT TO ANSWER: <body style='background:#eef'></body>\n"))
    assert cli_main(["play", ENV_ID, "--seed", "3", "--split", "ood"]) == 0
    out = capsys.readouterr().out
    assert "I need" in out and "episode over (terminated): failure" in out


def test_the_oracle_answer_is_a_cache_hit(browser: Browser) -> None:
    env = gymnasium.make(ENV_ID, browser=browser)
    renders = browser.renders
    traj = turnkit.collect(env, OracleAgent(), seed=123)
    assert traj.success and browser.renders == renders + 1  # only the reference was rendered
