"""The contract suite: turnkit.check_env over every registered ``turnkit/`` env and every split it offers.

A family that cannot be imported yet (or whose sandbox infrastructure is unavailable) shows up as its own
failing (or skipped) case instead of breaking collection of the others.
"""

from __future__ import annotations

import gymnasium
import pytest
from gymnasium.envs.registration import load_env_creator

import turnkit
from turnkit.errors import SandboxError


def _turnkit_ids() -> list[str]:
    return sorted(env_id for env_id in gymnasium.registry if env_id.startswith("turnkit/"))


def _cases() -> list:
    cases = []
    for env_id in _turnkit_ids():
        try:
            splits = load_env_creator(gymnasium.spec(env_id).entry_point).splits
        except Exception as exc:  # reported by the test below, with the import error
            cases.append(pytest.param(env_id, None, f"{type(exc).__name__}: {exc}", id=f"{env_id}[unloadable]"))
            continue
        cases += [pytest.param(env_id, split, None, id=f"{env_id}[{split}]") for split in splits]
    return cases


def test_turnkit_registers_envs() -> None:
    assert "turnkit/MathEpisodes-v0" in _turnkit_ids()
    assert "turnkit/PhysicsPrediction-v0" in _turnkit_ids()


@pytest.mark.parametrize("env_id", _turnkit_ids())
def test_registered_env_has_a_time_limit(env_id: str) -> None:
    """Truncation comes only from TimeLimit, so every registered env must declare max_episode_steps."""
    steps = gymnasium.spec(env_id).max_episode_steps
    assert isinstance(steps, int) and steps > 0, f"{env_id} is registered without max_episode_steps"


@pytest.mark.parametrize(("env_id", "split", "load_error"), _cases())
def test_env_follows_the_contract(env_id: str, split: str | None, load_error: str | None) -> None:
    assert load_error is None, f"{env_id} cannot be loaded: {load_error}"
    env = gymnasium.make(env_id, split=split)
    try:
        env.reset(seed=0)
    except SandboxError as exc:
        pytest.skip(f"{env_id} needs sandbox infrastructure that is unavailable here: {exc}")
    report = turnkit.check_env(env, seeds=(0, 1, 2, 3), raise_on_failure=False)
    assert report.ok, str(report)
    assert report.result("cross_process").status.value == "passed", str(report)
    env.close()


def test_math_leak_check_searches_real_answers_at_difficulty_3() -> None:
    """Difficulty-3 answers are long enough to be searched as plain strings (short ones: tests/envs/test_checker.py)."""
    env = gymnasium.make("turnkit/MathEpisodes-v0", split="ood", difficulty=3)
    report = turnkit.check_env(env, cross_process=False, checks=["privileged_leak"])
    searched = int(report.result("privileged_leak").detail.split()[0])
    assert report.ok and searched > 0


TOOL_ENVS = [
    ("turnkit/MathEpisodes-v0", {"difficulty": 3, "tools": ["python", "shell", "submit"]}),
    ("turnkit/CollabCode-v0", {"tools": ["python"]}),
]


@pytest.mark.parametrize(("env_id", "kwargs"), TOOL_ENVS, ids=[e for e, _ in TOOL_ENVS])
def test_tool_equipped_env_follows_the_contract(env_id: str, kwargs: dict) -> None:
    """With tools the oracle calls them (python state across calls), so snapshots must replay the sessions."""
    env = gymnasium.make(env_id, **kwargs)
    try:
        env.reset(seed=0)
    except SandboxError as exc:
        pytest.skip(f"{env_id} needs sandbox infrastructure that is unavailable here: {exc}")
    try:
        report = turnkit.check_env(env, seeds=(0, 1, 2), raise_on_failure=False)
        assert report.ok, str(report)
        assert report.result("cross_process").status.value == "passed", str(report)
    finally:
        env.close()
