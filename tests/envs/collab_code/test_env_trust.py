"""CollabCode-v0 against answers that attack their grader (issue #37), end to end through ``turnkit.collect``.

The sandbox-level suite is tests/sandbox/test_trust_boundary.py; here the whole env path is played: ten
episodes whose answer steals the earlier episodes' graded results from memory it inherits (the issue measured
10/10 on the old worker; the control with the boundary switched off wins 3 of 3), and a dead worker under a
Docker grading sandbox, recorded on the trajectory as a typed cause.

Run: python -m pytest tests/envs/collab_code/test_env_trust.py -q
"""

from __future__ import annotations

import dataclasses
import re

import pytest

import turnkit
from tests.sandbox.attack_payloads import RETURN_STOLEN, STEAL
from tests.sandbox.sabotage_payloads import SABOTAGE
from turnkit.agents.base import Context
from turnkit.agents.oracle import OracleAgent
from turnkit.agents.scripted import ScriptedAgent
from turnkit.envs.collab_code import env as env_module
from turnkit.envs.collab_code.env import CollabCodeEnv
from turnkit.envs.collab_code.grading import GradeResult, outcomes_equal, reference_outcomes, run_tests
from turnkit.rollout.collect import collect_batch
from turnkit.sandbox import DockerSandbox, LocalSandbox, _wire, docker_available
from turnkit.sandbox import local as local_backend

# The suite's stealing answer (stack frames and gc objects, then result blocks with one line per own call),
# renamed to the task's function; None (an honest wrong answer) where it finds nothing.
STEALER = (STEAL + RETURN_STOLEN.replace("__METHOD__", "any")).replace("def f(x):", "def NAME(*args, **kwargs):")


def stealer(context: Context) -> str:
    name = re.search(r"def (\w+)\(", context.messages[0].content).group(1)  # the task's signature line
    return "I WANT TO ANSWER:\n```python\n" + STEALER.replace("NAME", name) + "\n```"


def test_ten_episodes_of_stolen_results_score_nothing():
    answers = LocalSandbox(persistent=True)
    try:
        env = CollabCodeEnv(sandbox=answers)
        for seed in range(10):  # an honest answer graded first leaves its results where an old worker kept them
            assert turnkit.collect(env, OracleAgent(), seed=seed).success
            traj = turnkit.collect(env, ScriptedAgent(stealer), seed=seed)
            assert traj.error is None and traj.steps[-1].info["tests_passed"] == 0, traj.steps[-1].info
    finally:
        answers.close()


def test_the_same_attack_wins_when_the_boundary_is_switched_off(monkeypatch):
    # The control: the old worker (no zygote, dumpable supervisor) grading reference and answer in one sandbox.
    original = _wire.supervisor_source()
    monkeypatch.setattr(
        _wire, "supervisor_source", lambda: original.replace("TRUST_BOUNDARY = True", "TRUST_BOUNDARY = False", 1)
    )

    def old_grade(sandbox, reference, candidate, tests, *, per_test_timeout_s=1.0, **_):
        ref = reference_outcomes(sandbox, reference, tests, per_test_timeout_s=per_test_timeout_s, cache=False)
        run = run_tests(sandbox, candidate, tests, per_test_timeout_s=per_test_timeout_s)
        passed = sum(outcomes_equal(r, c) for r, c in zip(ref, run.outcomes or (), strict=False))
        return GradeResult(passed, len(tests), run.error)

    monkeypatch.setattr(env_module, "grade", old_grade)
    with LocalSandbox(persistent=True) as shared:
        env = CollabCodeEnv(sandbox=shared)
        won = [turnkit.collect(env, ScriptedAgent(stealer), seed=seed).success for seed in range(3)]
    assert won == [True, True, True]


@pytest.mark.docker
@pytest.mark.skipif(not docker_available(), reason="no Docker engine reachable (start one with .ci/docker.sh)")
def test_an_answer_that_kills_its_docker_supervisor_scores_as_its_own_failure():
    # The supervisor runs as root, the answer as nobody: the kill is refused inside the answer, whose load fails.
    # Before, the supervisor died and the wrong answer became a masked sandbox fault.
    with DockerSandbox() as answers:  # a docker exec per call: the answer's parent is its supervisor
        env = CollabCodeEnv(sandbox=answers, forbidden=())
        killer = "I WANT TO ANSWER:\n```python\no = __import__('os')\no.kill(o.getppid(), 9)\n```"
        traj = turnkit.collect(env, ScriptedAgent([killer]), seed=0, max_turns=1)
        assert traj.error is None and not traj.success, traj.error
        assert traj.steps[-1].info["tests_passed"] == 0, traj.steps[-1].info
        assert turnkit.collect(env, OracleAgent(), seed=1).success  # the next episode is graded as usual


# --- a saboteur in a GRPO group (issue #50) ---------------------------------------------------------------------


class _GroupWithSaboteur:
    """The oracle's answers, the first context's carrying SABOTAGE at its module level (a correct answer)."""

    uses_privileged = True

    def act(self, contexts):
        turns = OracleAgent().act(contexts)
        first = turns[0].text.replace("```python\n", "```python\n" + SABOTAGE + "\n", 1)
        return [dataclasses.replace(turns[0], text=first), *turns[1:]]


def _group_rewards(answers, control: bool = False) -> tuple[list[float], list[float]]:
    envs = [CollabCodeEnv(sandbox=answers, forbidden=()) for _ in range(4)]
    first = collect_batch(envs, _GroupWithSaboteur(), seeds=[5] * 4, groups=[0] * 4, max_turns=4)
    then = collect_batch(envs, OracleAgent(), seeds=[6] * 4, groups=[1] * 4, max_turns=4)
    for traj in first + then:
        assert traj.error is None, traj.error
    return [t.total_reward for t in first], [t.total_reward for t in then]


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_saboteur_in_a_group_leaves_its_siblings_their_rewards(backend):
    if backend == "docker" and not docker_available():
        pytest.skip("no Docker engine reachable (start one with .ci/docker.sh)")
    make = {"local": lambda: LocalSandbox(persistent=True), "docker": lambda: DockerSandbox(persistent=True)}
    with make[backend]() as answers:
        first, then = _group_rewards(answers)
    assert first == [1.0] * 4 and then == [1.0] * 4, (first, then)


def test_a_saboteur_in_a_group_control(monkeypatch):
    # Calls not isolated (the worker before issue #50): the saboteur's correct answer keeps its 1 and sinks
    # honest answers graded after it in the same worker, so in GRPO it gets the group's whole advantage.
    original = _wire.supervisor_source()
    monkeypatch.setattr(
        _wire, "supervisor_source", lambda: original.replace("CALL_ISOLATION = True", "CALL_ISOLATION = False", 1)
    )
    monkeypatch.setattr(local_backend, "SECOND_UID", False)  # bubblewrap's one uid, as before
    with LocalSandbox(persistent=True) as answers:
        first, then = _group_rewards(answers)
    assert first[0] == 1.0 and min(first[1:] + then) < 1.0, (first, then)
