"""The frozen core types: Task, AgentTurn, Step, Trajectory, ExecResult."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from turnkit.types import (
    AgentTurn,
    ErrorCause,
    ExecResult,
    Message,
    Step,
    Task,
    Trajectory,
    TrajectoryError,
)


def step(obs: str, action: str, reward: float = 0.0, *, tokens: int = 0, **kwargs) -> Step:
    turn = AgentTurn(text=action, token_ids=tuple(range(tokens)))
    return Step(observation=obs, action=turn, reward=reward, **kwargs)


@pytest.mark.parametrize(
    "value",
    [
        Message("user", "hi"),
        Task(task_id="t", prompt="p"),
        AgentTurn(text="a"),
        Step(observation="o", action=AgentTurn(text="a"), reward=0.0),
        Trajectory(env_id="e", seed=0),
        ExecResult(exit_code=0),
    ],
    ids=lambda v: type(v).__name__,
)
def test_types_are_frozen(value) -> None:
    field = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, "changed")


def test_task_defaults() -> None:
    task = Task(task_id="m-1", prompt="Compute 1+1.")
    assert (task.privileged, task.family, task.split, task.difficulty, task.metadata) == ({}, "", "id", 0.0, {})


def test_agent_turn_requires_one_logprob_per_token() -> None:
    with pytest.raises(ValueError, match="2 token ids but 1 logprobs"):
        AgentTurn(text="ab", token_ids=(1, 2), logprobs=(-0.5,))


def test_agent_turn_without_logprobs_is_fine() -> None:
    assert AgentTurn(text="ab", token_ids=(1, 2)).logprobs == ()


def test_total_reward_sums_steps() -> None:
    traj = Trajectory("e", 0, steps=(step("a", "x", 0.25), step("b", "y", -1.0), step("c", "z", 2.0)))
    assert traj.total_reward == 1.25


def test_success_reads_the_last_info() -> None:
    traj = Trajectory("e", 0, steps=(step("a", "x", 5.0), step("b", "y", 0.0, info={"success": False})))
    assert traj.success is False


def test_success_falls_back_to_positive_reward() -> None:
    assert Trajectory("e", 0, steps=(step("a", "x", 0.5),)).success is True
    assert Trajectory("e", 0, steps=(step("a", "x", 0.0),)).success is False


def test_errored_or_empty_trajectory_is_not_a_success() -> None:
    error = TrajectoryError(ErrorCause.ENV, "boom", step=0)
    assert Trajectory("e", 0, steps=(step("a", "x", 1.0, info={"success": True}),), error=error).success is False
    assert Trajectory("e", 0).success is False


def test_generated_tokens_are_counted_over_turns() -> None:
    traj = Trajectory("e", 0, steps=(step("a", "x", tokens=3), step("b", "y", tokens=4)))
    assert traj.num_generated_tokens == 7


def test_messages_alternate_observation_and_action() -> None:
    traj = Trajectory("e", 0, steps=(step("q1", "a1"), step("q2", "a2")))
    assert traj.messages() == [
        Message("user", "q1"),
        Message("assistant", "a1"),
        Message("user", "q2"),
        Message("assistant", "a2"),
    ]


def test_error_cause_values_are_stable_strings() -> None:
    assert [c.value for c in ErrorCause] == ["agent", "env", "sandbox", "browser", "timeout", "worker"]


def test_exec_result_ok() -> None:
    assert ExecResult(exit_code=0).ok
    assert not ExecResult(exit_code=1).ok
    assert not ExecResult(exit_code=0, timed_out=True).ok
    assert not ExecResult(exit_code=-9, oom_killed=True).ok


def test_trajectory_pickles_with_task_and_error() -> None:
    traj = Trajectory(
        "e",
        3,
        steps=(step("a", "x", 1.0),),
        task=Task(task_id="t", prompt="p", privileged={"answer": "4"}),
        error=TrajectoryError(ErrorCause.AGENT, "timeout", step=1),
        group=2,
    )
    assert pickle.loads(pickle.dumps(traj)) == traj
