"""CollabCode with a python tool: the oracle runs its draft before answering; grading never sees the session."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium
import pytest

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.envs.collab_code.env import CollabCodeEnv
from turnkit.envs.collab_code.oracle import EXAMPLE_CALLS

ENV_ID = "turnkit/CollabCode-v0"
GOOD = "def grade_outcome(score):\n    return score >= 65"
"""The right answer for ``kinds=("grade",)``, seed 12 (cutoff 65, inclusive, True/False)."""


def answer(code: str) -> str:
    return f"I WANT TO ANSWER:\n```python\n{code}\n```"


@pytest.fixture
def env() -> Iterator[gymnasium.Env]:
    env = gymnasium.make(ENV_ID, kinds=["grade"], tools={"tools": ["python"], "timeout_s": 1})
    env.reset(seed=12)
    yield env
    env.close()


def test_oracle_runs_its_draft_then_answers_and_solves_every_task() -> None:
    for split in ("id", "ood", "combo"):
        env = gymnasium.make(ENV_ID, split=split, tools=["python"])
        try:
            trajs = [turnkit.collect(env, OracleAgent(), seed=seed) for seed in range(10)]
        finally:
            env.close()
        assert all(t.error is None and t.success and t.total_reward == 1.0 for t in trajs), split
        for t in trajs:
            trial, final = t.steps
            assert trial.action.text.startswith("<python>") and trial.info["tool"]["status"] == "ok"
            tests = t.task.privileged["tests"][:EXAMPLE_CALLS]
            assert [line.split(" -> ")[0] for line in final.observation.splitlines()] == list(tests)
            assert final.action.text.startswith("I WANT TO ANSWER:") and final.info["answered"]
            assert [m.role for m in t.messages()] == ["user", "assistant", "tool", "assistant"]


def test_oracle_submits_through_the_tool_when_offered() -> None:
    env = gymnasium.make(ENV_ID, split="ood", tools=["python", "submit"])
    try:
        trajs = [turnkit.collect(env, OracleAgent(), seed=seed) for seed in range(3)]
    finally:
        env.close()
    for t in trajs:
        assert t.success and [s.info["tool"]["name"] for s in t.steps] == ["python", "submit"]
        assert t.steps[-1].info["answered"] and t.steps[-1].info["tests_passed"] == 10


def test_oracle_skips_the_trial_run_when_the_budget_has_no_room() -> None:
    env = CollabCodeEnv(split="id", max_turns=1, tools=["python"])
    try:
        traj = turnkit.collect(env, OracleAgent(), seed=4)
    finally:
        env.close()
    assert traj.success and len(traj.steps) == 1 and "tool" not in traj.steps[0].info


def test_oracle_is_a_function_of_the_context() -> None:
    env = CollabCodeEnv(split="combo", tools=["python"])
    try:
        first, second = (turnkit.collect(env, OracleAgent(), seed=8) for _ in range(2))
    finally:
        env.close()
    assert [s.action.text for s in first.steps] == [s.action.text for s in second.steps]
    assert [s.observation for s in first.steps] == [s.observation for s in second.steps]


def test_check_env_passes_with_tools() -> None:
    env = gymnasium.make(ENV_ID, tools=["python"])
    try:
        report = turnkit.check_env(env)
    finally:
        env.close()
    assert report.ok, str(report)
    assert report.result("snapshot").status.value == "passed"


def test_names_and_files_of_the_tool_session_do_not_reach_grading(env: gymnasium.Env) -> None:
    helper = "def _passes(score):\n    return score >= 65"
    _, _, _, _, info = env.step(f"<python>{helper}\nopen('draft.py', 'w').write({GOOD!r})\n_passes(65)</python>")
    assert info["tool"]["status"] == "ok"
    base = env.unwrapped
    # The session knows the helper and the file; the grader's fresh executions know neither.
    uses_helper = base.grade_code("def grade_outcome(score):\n    return _passes(score)")
    assert uses_helper.passed == 0 and "NameError" in str(uses_helper.detail)
    reads_file = base.grade_code("exec(open('draft.py').read())")
    assert (reads_file.passed, reads_file.error) == (0, "crash")
    assert base.grade_code(f"{helper}\ndef grade_outcome(score):\n    return _passes(score)").success
    # Grading leaves the session alone: its state survives the grader's runs.
    check = f"<python>_passes(64), open('draft.py').read() == {GOOD!r}</python>"
    assert env.step(check)[0] == "(False, True)\n"
    _, reward, terminated, _, info = env.step(answer("def grade_outcome(score):\n    return _passes(score)"))
    assert terminated and reward == 0.0 and "NameError" in info["grading_detail"]


@pytest.mark.parametrize(
    ("draft", "status"),
    [
        ("import os; os._exit(3)", "crashed"),
        ("while True:\n    pass", "timeout"),
        ("raise ValueError('draft broke')", "error"),
        ("import sys\nx = [0] * 10 ** 6", "ok"),  # forbidden text counts only in the answer
    ],
)
def test_a_draft_that_breaks_the_tool_session_does_not_affect_grading(
    env: gymnasium.Env, draft: str, status: str
) -> None:
    info = env.step(f"<python>{draft}</python>")[4]
    assert info["tool"]["status"] == status and info["turns_left"] == 9
    obs, reward, terminated, truncated, info = env.step(answer(GOOD))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert obs == "Your function passed 10 of 10 hidden tests." and info["success"] and "tool" not in info


def test_tool_calls_count_as_turns_but_are_never_the_forced_answer() -> None:
    env = CollabCodeEnv(kinds=("grade",), max_turns=2, tools=["python"])
    try:
        env.reset(seed=12)
        turns_left = [env.step("<python>1 + 1</python>")[4]["turns_left"] for _ in range(3)]
        assert turns_left == [1, 0, 0]
        _, reward, terminated, _, info = env.step(GOOD)  # the budget is spent: this message is the answer
        assert terminated and reward == 1.0 and info["answered"] is False
    finally:
        env.close()


def test_the_registered_time_limit_counts_tool_calls() -> None:
    env = gymnasium.make(ENV_ID, kinds=["grade"], tools=["python"])
    try:
        env.reset(seed=12)
        steps = [env.step("<python>0</python>") for _ in range(10)]
    finally:
        env.close()
    assert [s[3] for s in steps] == [False] * 9 + [True]  # truncated on the 10th step, never graded
    assert not any(s[2] for s in steps) and "success" not in steps[-1][4]
