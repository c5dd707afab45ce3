"""A fault the graded code can cause is that answer's failure, never a masked error (issue #50, items 2-3).

Learners drop errored trajectories from the loss, so an answer that could make its grader raise would opt out
of its negative advantage. Here each class of hostile value goes through real sandboxes (bubblewrap, and Docker
where an engine runs): huge ints, deep nesting, nan and infinities, -0.0, lookalike types, and result lines the
answer forges by rewriting its harness. Each must score what an honest function returning that value scores,
by the rule of :func:`~turnkit.sandbox.values.values_equal`, and never raise. Then the same through
``turnkit.collect_batch`` as a GRPO group: the hostile answer gets reward 0, no trajectory error and a negative
advantage, while a sandbox that really fails is a masked error. Last, on Docker an answer that kills its
supervisor (or every process it sees) scores its own 0: the supervisor runs as root, the code as nobody.

Run: python -m pytest tests/envs/collab_code/test_grading_hostile.py -q
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import gymnasium
import pytest

from turnkit.agents.scripted import ScriptedAgent
from turnkit.envs.collab_code.grading import GRADING_LIMITS, grade
from turnkit.learners.advantages import trajectory_advantages
from turnkit.rollout.collect import collect_batch
from turnkit.sandbox import DockerSandbox, LocalSandbox, docker_available
from turnkit.sandbox._bwrap import bwrap_path
from turnkit.types import ErrorCause, Task

pytestmark = pytest.mark.filterwarnings("ignore:.*while copying the environment spec")  # a sandbox in kwargs

BACKENDS = [
    "local",
    pytest.param(
        "docker",
        marks=[
            pytest.mark.docker,
            pytest.mark.skipif(
                not docker_available(), reason="no Docker engine reachable (start one with .ci/docker.sh)"
            ),
        ],
    ),
]

# The answer rewrites its harness's `json` so that its result line is __LINE__ (an expression: a long line is built
# at run time, since an agent's message is capped), whatever it returned. It spells its imports the way an
# attacker would, past ColBench's "import sys" text check.
FORGE = """
_sys = __import__("sys")
_LINE = __LINE__


def f(x):
    frame = _sys._getframe()
    while frame.f_code.co_name != "batch_main":
        frame = frame.f_back
    harness, real = frame.f_globals, frame.f_globals["json"]

    class Forged:
        @staticmethod
        def dumps(obj, *args, **kwargs):
            return _LINE if "ok" in obj else real.dumps(obj, *args, **kwargs)

    harness["json"] = Forged
    return x
"""


def forged(line: str) -> str:
    """An answer whose result line is ``line`` (a Python expression giving the line's text)."""
    return FORGE.replace("__LINE__", line)


DEEP_LINE = """'{"ok": ' + '[' * 50_000 + ']' * 50_000 + '}'"""


def deep(n: int, how: str = "loop") -> str:
    """A function returning a list nested n deep (built two ways, so the answer is not the reference's text)."""
    if how == "loop":
        return f"def f(x):\n    v = []\n    for _ in range({n}):\n        v = [v]\n    return v\n"
    return f"def f(x):\n    v = []\n    i = 0\n    while i < {n}:\n        v, i = [v], i + 1\n    return v\n"


LIFT = '__import__("sys").set_int_max_str_digits(0)\n'
LIAR = "class S(str):\n    def __eq__(self, other):\n        return True\n\n    __hash__ = str.__hash__\n\n\n"


@dataclass(frozen=True)
class Case:
    reference: str
    answer: str
    passed: int  # what an honest function returning the answer's value scores (or the rule's documented 0)
    error: str | None = None


def ret(expr: str) -> str:
    return f"def f(x):\n    return {expr}\n"


CASES = {
    # huge ints: over Python's int-string limit, where the host's int() raised (or both sides were too_big)
    "huge int equal": Case(ret("10 ** 5000 + x"), ret("(10 ** 2500) ** 2 + x"), 1),
    "huge int off by one": Case(ret("10 ** 5000 + x"), ret("10 ** 5000 + x + 1"), 0),
    "huge int, sandbox limit lifted": Case(ret("10 ** 5000 + x"), LIFT + ret("10 ** 5000 + x + 1"), 0),
    "huge int, sandbox limit at its minimum": Case(
        ret("10 ** 5000 + x"), '__import__("sys").set_int_max_str_digits(640)\n' + ret("10 ** 5000 + x"), 1
    ),
    "int equal to a float": Case(ret("2.0 ** 1000"), ret("2 ** 1000"), 1),
    "int one above a float": Case(ret("2.0 ** 1000"), ret("2 ** 1000 + 1"), 0),
    "huge int against inf": Case(ret("float('inf')"), ret("10 ** 400"), 0),
    # floats
    "inf": Case(ret("float('inf')"), ret("1e308 * 10"), 1),
    "nan": Case(ret("float('nan')"), ret("float('nan')"), 0),
    "nan in a list": Case(ret("[float('nan')]"), ret("[float('inf') - float('inf')]"), 0),
    "-0.0 and 0.0": Case(ret("0.0"), ret("-0.0"), 1),
    "-0.0 and 0": Case(ret("0"), ret("-0.0"), 1),
    "sets and keys across int and float": Case(ret("{1: {2.0}}"), ret("{1.0: {2}}"), 1),
    # nesting: within the encoding's 40 levels values compare; past them nothing is equal (the rule)
    "nested 30 deep": Case(deep(30), deep(30, "while"), 1),
    "nested 50,000 deep on both sides": Case(deep(50_000), deep(50_000, "while"), 0),
    # lookalike types
    "str subclass equal to everything": Case(ret("'yes'"), LIAR + ret("S('nope')"), 0),
    "str subclass holding the right text": Case(ret("'yes'"), LIAR + ret("S('yes')"), 1),
    "int subclass with its own repr": Case(
        ret("x"), "class I(int):\n    def __repr__(self):\n        return '999'\n\n\n" + ret("I(x)"), 1
    ),
    "bool for an int": Case(ret("1"), ret("True"), 0),  # the grader's one deliberate difference from ==
    # result lines forged by the answer
    "forged int tag": Case(ret("x"), forged("""'{"ok": ["int", "x"]}'"""), 0, "malformed"),
    "forged bool tag": Case(ret("True"), forged("""'{"ok": ["bool", 1]}'"""), 0, "malformed"),
    "forged 5,000-digit JSON int": Case(ret("x"), forged("""'{"ok": ["int", ' + '9' * 5000 + ']}'"""), 0, "malformed"),
    "forged unknown tag": Case(ret("x"), forged("""'{"ok": ["frob", "x"]}'"""), 0, "malformed"),
    "forged duplicate set": Case(
        ret("{1}"), forged("""'{"ok": ["set", [["int", "1"], ["int", "1"]]]}'"""), 0, "malformed"
    ),
    "forged 50,000-deep line": Case(ret("x"), forged(DEEP_LINE), 0, "crash"),
    "forged but well-formed": Case(ret("x"), forged("""'{"ok": ["int", "1"]}'"""), 1),  # only what it could compute
}


@pytest.fixture(scope="module")
def reference_sb() -> Iterator[LocalSandbox]:
    """The trusted sandbox: references only."""
    if bwrap_path() is None:
        pytest.skip("bubblewrap is not installed")
    with LocalSandbox(GRADING_LIMITS, persistent=True) as sb:
        yield sb


@pytest.fixture(scope="module", params=BACKENDS)
def answer_sb(request: pytest.FixtureRequest) -> Iterator[LocalSandbox | DockerSandbox]:
    if request.param == "local" and bwrap_path() is None:
        pytest.skip("bubblewrap is not installed")
    make = LocalSandbox if request.param == "local" else DockerSandbox
    with make(GRADING_LIMITS, persistent=True) as sb:
        yield sb


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_hostile_values_score_what_an_honest_function_scores(answer_sb, reference_sb, case):
    g = grade(answer_sb, case.reference, case.answer, ["f(1)"], reference_sandbox=reference_sb)
    assert (g.passed, g.total, g.error) == (case.passed, 1, case.error), g
    assert g.error is None or g.detail, g


# --- a GRPO group through the one episode engine ------------------------------------------------------------

TASK = Task(
    "hostile-group",
    "Write f.\nThe signature of the function is: def f(x)",
    {"reference": ret("10 ** 5000 + x"), "tests": ["f(1)", "f(2)", "f(-3)"]},
    family="collab_code",
)
HONEST = ["(10 ** 2500) ** 2 + x", "x + 10 ** 5000", "int('1' + '0' * 500) ** 10 + x"]
HOSTILE = {
    "forged int tag": (forged("""'{"ok": ["int", "x"]}'"""), "malformed"),
    "forged 50,000-deep line": (forged(DEEP_LINE), "crash"),
    "wrong huge int, limit lifted": (LIFT + ret("10 ** 5000 + x + 1"), None),
    "nested 50,000 deep": (deep(50_000), None),
}


def answer(code: str) -> str:
    return f"I WANT TO ANSWER:\n```python\n{code}```"


def play_group(sandbox, codes: list[str], envs_sandboxes: list | None = None) -> list:
    boxes = envs_sandboxes or [sandbox] * len(codes)
    envs = [gymnasium.make("turnkit/CollabCode-v0", tasks=[TASK], sandbox=box) for box in boxes]
    replies = iter(answer(c) for c in codes)
    try:
        return collect_batch(envs, ScriptedAgent(lambda ctx: next(replies)), [7] * len(codes), groups=[0] * len(codes))
    finally:
        for env in envs:
            env.close()


@pytest.mark.parametrize("hostile", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_answer_in_a_grpo_group_is_an_honest_zero(answer_sb, hostile):
    code, error = hostile
    trajs = play_group(answer_sb, [ret(h) for h in HONEST] + [code])
    assert [t.error for t in trajs] == [None] * 4, [t.error for t in trajs]
    assert [t.total_reward for t in trajs] == [1.0, 1.0, 1.0, 0.0]
    assert trajs[-1].steps[-1].info["grading_error"] == error, trajs[-1].steps[-1].info
    advantages = trajectory_advantages(trajs, estimator="grpo")
    assert advantages[-1] is not None and advantages[-1][-1] < 0 < advantages[0][-1], advantages


def test_a_sandbox_that_really_fails_is_a_masked_error_not_a_zero(answer_sb):
    # The control: a closed sandbox is a fault no answer can cause (here the answer is even correct).
    broken = LocalSandbox(GRADING_LIMITS, persistent=True)
    broken.close()
    codes = [ret(HONEST[0]), ret("x"), ret(HONEST[1])]
    trajs = play_group(answer_sb, codes, [answer_sb, answer_sb, broken])
    assert [t.total_reward for t in trajs[:2]] == [1.0, 0.0] and [t.error for t in trajs[:2]] == [None, None]
    assert trajs[2].error is not None and trajs[2].error.cause == ErrorCause.SANDBOX, trajs[2].error
    advantages = trajectory_advantages(trajs, estimator="grpo")
    assert advantages[2] is None and advantages[1][-1] < 0 < advantages[0][-1], advantages


def test_a_reference_sandbox_that_fails_is_a_masked_error(answer_sb):
    broken = LocalSandbox(GRADING_LIMITS, persistent=True)
    broken.close()
    fresh = uuid.uuid4().hex  # a reference no earlier test has cached
    task = Task("fresh", TASK.prompt, {"reference": ret(f"x  # {fresh}"), "tests": ["f(1)"]}, family="collab_code")
    env = gymnasium.make("turnkit/CollabCode-v0", tasks=[task], sandbox=answer_sb, reference_sandbox=broken)
    try:
        [traj] = collect_batch([env], ScriptedAgent([answer(ret("x"))]), [7])
    finally:
        env.close()
    assert traj.error is not None and traj.error.cause == ErrorCause.SANDBOX and not traj.steps, traj.error


# --- faults the code tries to cause on Docker (its supervisor runs as another uid) --------------------------

KILL = 'o = __import__("os")\nfor p in [o.getppid()] if "WHO" == "parent" else o.listdir("/proc"):\n'
KILL += "    try:\n        o.kill(int(p), 9) if str(p).isdigit() and int(p) != o.getpid() else None\n"
KILL += "    except OSError:\n        pass\n\n\n" + ret("'nope'")


@pytest.mark.docker
@pytest.mark.skipif(not docker_available(), reason="no Docker engine reachable (start one with .ci/docker.sh)")
@pytest.mark.parametrize(("persistent", "who"), [(False, "parent"), (True, "all")])
def test_an_answer_that_kills_its_docker_supervisor_scores_its_own_zero(reference_sb, persistent, who):
    with DockerSandbox(GRADING_LIMITS, persistent=persistent) as sb:
        g = grade(sb, ret("'yes'"), KILL.replace("WHO", who), ["f(1)"], reference_sandbox=reference_sb)
    assert (g.passed, g.total) == (0, 1), g
