"""Rule critics on hand-built trajectories (python -m pytest tests/critics/test_rules.py)."""

from __future__ import annotations

import gymnasium
import pytest

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.agents.scripted import ScriptedAgent
from turnkit.critics.rules import EnvReward, FormatPenalty, InvalidActionPenalty, LengthPenalty, OutcomeReward
from turnkit.errors import ConfigError
from turnkit.types import AgentTurn, ErrorCause, Step, Trajectory, TrajectoryError


def _step(text: str, reward: float = 0.0, ids: tuple[int, ...] = (), **info) -> Step:
    return Step("obs", AgentTurn(text, token_ids=ids), reward, terminated="success" in info, info=info)


def test_outcome_on_last_step_only() -> None:
    traj = Trajectory("d", 0, (_step("a"), _step("b"), _step("c", 1.0, success=True)))
    assert OutcomeReward(success=2.0).score(traj).step_rewards == (0.0, 0.0, 2.0)


def test_outcome_failure_value() -> None:
    traj = Trajectory("d", 0, (_step("a"), _step("b", success=False)))
    assert OutcomeReward(failure=-1.0).score(traj).step_rewards == (0.0, -1.0)


def test_outcome_errored_trajectory_is_a_failure() -> None:
    error = TrajectoryError(ErrorCause.AGENT, "boom", 0)
    traj = Trajectory("d", 0, (_step("c", 1.0, success=True),), error=error)
    assert OutcomeReward(failure=-0.5).score(traj).step_rewards == (-0.5,)


def test_outcome_on_real_episodes() -> None:
    env = gymnasium.make("turnkit/MathEpisodes-v0")
    win = turnkit.collect(env, OracleAgent(), seed=1)
    lose = turnkit.collect(env, ScriptedAgent(["ANSWER: -123456"]), seed=1)
    assert OutcomeReward().score(win).step_rewards[-1] == 1.0
    assert OutcomeReward().score(lose).total == 0.0
    assert len(OutcomeReward().score(lose).step_rewards) == len(lose.steps)


def test_env_reward_passthrough() -> None:
    traj = Trajectory("d", 0, (_step("a", 0.5), _step("b", -2.0)))
    assert EnvReward().score(traj).step_rewards == (0.5, -2.0)


def test_length_penalty_in_tokens() -> None:
    traj = Trajectory("d", 0, (_step("x", ids=(1, 2, 3, 4)), _step("y", ids=(5,))))
    result = LengthPenalty(per_unit=0.5, unit="tokens", free=1).score(traj)
    assert result.step_rewards == (-1.5, 0.0)  # (4 - 1) * 0.5 and max(0, 1 - 1)
    assert result.metrics["length"] == 5.0


def test_length_penalty_in_chars() -> None:
    traj = Trajectory("d", 0, (_step("abcd"),))
    assert LengthPenalty(per_unit=0.25, unit="chars").score(traj).step_rewards == (-1.0,)


def test_length_penalty_rejects_bad_config() -> None:
    with pytest.raises(ConfigError, match="unit"):
        LengthPenalty(1.0, unit="bytes")
    with pytest.raises(ConfigError, match=">= 0"):
        LengthPenalty(-1.0)


def test_format_penalty_every_step() -> None:
    traj = Trajectory("d", 0, (_step("ANSWER: 3"), _step("no"), _step("ANSWER: 4")))
    result = FormatPenalty(r"ANSWER:\s*\S", penalty=0.5).score(traj)
    assert result.step_rewards == (0.0, -0.5, 0.0)
    assert result.metrics["violations"] == 1.0


def test_format_penalty_last_step_only() -> None:
    traj = Trajectory("d", 0, (_step("thinking"), _step("ANSWER: 4")))
    assert FormatPenalty(r"ANSWER:", steps="last").score(traj).step_rewards == (0.0, 0.0)


def test_format_penalty_bad_regex() -> None:
    with pytest.raises(ConfigError, match="not a valid regex"):
        FormatPenalty("(")


def test_invalid_action_penalty() -> None:
    traj = Trajectory("d", 0, (_step("", invalid_action="empty"), _step("ok"), _step("", invalid_action="too_long")))
    assert InvalidActionPenalty(0.3).score(traj).step_rewards == (-0.3, 0.0, -0.3)
