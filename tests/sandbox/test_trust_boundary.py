"""Adversarial suite for issue #37, "Rewards the graded code cannot forge".

Every attack here is submitted as the *answer* (or run as a call) in a sandbox, and comes in two tests:

* the **hardened** test runs it against the real sandbox (non-dumpable supervisor, calls forked by a zygote,
  request ids, references graded in a separate trusted sandbox) and asserts that the attack fails: the answer
  scores what its honest algorithm earns (0 of N here), or the access it tries is refused;
* the **control** test runs the identical payload against the same backend with the trust boundary switched off
  (the supervisor's source with ``TRUST_BOUNDARY = False`` and ``CALL_ISOLATION = False``; before those switches
  existed, the code itself) and
  grades the old way (reference and answer in one sandbox), and asserts that the attack wins: proof that the
  payload is real and that the hardened test can fail.

Every test gets fresh sandboxes: a state left by one attack must not help or hide another. The answers' reference
returns strings carrying a marker unique to the test, so a stolen value cannot come from elsewhere.
"""

from __future__ import annotations

import importlib.util
import json
import uuid
from collections.abc import Iterator

import pytest

from tests.sandbox.attack_payloads import (
    DESYNC,
    N_TESTS,
    POISON,
    POISONS,
    PROBE,
    SIGNALS,
    Task,
    daemon_payload,
    forge_payload,
    new_task,
    steal_payload,
)
from tests.sandbox.conftest import TEST_LIMITS, backend_params, make_sandbox
from turnkit.envs.collab_code import grading
from turnkit.errors import ConfigError, SandboxError
from turnkit.sandbox import DockerSandbox, LocalSandbox, _wire
from turnkit.sandbox import local as local_backend
from turnkit.sandbox._bwrap import bwrap_path
from turnkit.sandbox.batch import BatchResult, run_batch
from turnkit.types import ExecResult

ALL = ["local", "local-persistent", "docker", "docker-persistent"]
PERSISTENT = ["local-persistent", "docker-persistent"]
PER_TEST_S = 5.0  # generous: a memory scan takes a few hundred ms; no test here measures time

# --- sandboxes ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ref_sb() -> Iterator[LocalSandbox]:
    """The trusted reference sandbox: it runs references only, never an answer."""
    if bwrap_path() is None:
        pytest.skip("bubblewrap is not installed")
    sb = LocalSandbox(TEST_LIMITS, persistent=True)
    yield sb
    sb.close()


@pytest.fixture
def answer_sb(request: pytest.FixtureRequest) -> Iterator[LocalSandbox | DockerSandbox]:
    """A fresh hardened sandbox of the backend named by the parameter."""
    sb = make_sandbox(request.param)
    yield sb
    sb.close()


@pytest.fixture
def control_sb(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalSandbox | DockerSandbox]:
    """A fresh sandbox of the named backend whose supervisor runs with ``TRUST_BOUNDARY = False``."""
    original = _wire.supervisor_source()
    if "TRUST_BOUNDARY = True" in original:
        control = original.replace("TRUST_BOUNDARY = True", "TRUST_BOUNDARY = False", 1)
        # the call jail is a second wall around the same processes: off too, so each attack meets neither
        control = control.replace("CALL_ISOLATION = True", "CALL_ISOLATION = False", 1)
    else:  # the code before the trust boundary existed is the control
        assert importlib.util.find_spec("turnkit.sandbox._zygote") is None, "TRUST_BOUNDARY = True not in the source"
        control = original
    monkeypatch.setattr(_wire, "supervisor_source", lambda: control)
    monkeypatch.setattr(local_backend, "SECOND_UID", False)  # bubblewrap's one uid, as before
    sb = make_sandbox(request.param)
    yield sb
    sb.close()


def hardened(names: list[str]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("answer_sb", backend_params(names), indirect=True)


def controlled(names: list[str]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("control_sb", backend_params(names), indirect=True)


# --- grading -----------------------------------------------------------------------------------------


def grade_hardened(sb, ref_sb, task: Task, candidate: str, *, per_test_s: float = PER_TEST_S) -> grading.GradeResult:
    """Grade as the hardened grader does: the reference in the trusted sandbox, the answer in ``sb``."""
    return grading.grade(
        sb,
        task.reference,
        candidate,
        list(task.tests),
        reference_sandbox=ref_sb,
        per_test_timeout_s=per_test_s,
        forbidden=(),  # the payloads say "import os": the ColBench text check must not hide what they do
        cache_reference=False,
    )


def old_outcomes(sb, code: str, task: Task, per_test_s: float) -> tuple[dict, ...]:
    """What the old run_tests() returned: one plain batch, in whatever the work directory holds."""
    batch = run_batch(sb, code, list(task.tests), per_call_timeout_s=per_test_s)
    assert batch.calls is not None, f"the code failed as a whole: {batch.error}: {batch.detail}"
    return tuple(
        {"ok": c.value} if c.status == "ok" else {"raised": c.error} if c.status == "raised" else {"timeout": True}
        for c in batch.calls
    )


def grade_control(sb, task: Task, candidate: str, *, per_test_s: float = PER_TEST_S) -> int:
    """Grade as the old grade() did: reference, then answer, in the same sandbox; the tests passed."""
    ref = old_outcomes(sb, task.reference, task, per_test_s)
    run = old_outcomes(sb, candidate, task, per_test_s)
    return sum(grading.outcomes_equal(r, c) for r, c in zip(ref, run, strict=True))


def warm_with_correct_answer(sb, ref_sb, task: Task) -> None:
    """Grade a correct answer first: a shared answer sandbox has seen other rollouts' correct results."""
    good = grade_hardened(sb, ref_sb, task, task.honest)
    assert (good.passed, good.error) == (len(task.tests), None), good


def sandbox_failed(result: ExecResult | None, batch: BatchResult | None = None) -> bool:
    """The call's supervisor died, hung or desynchronised (a fault, or before faults existed, an infra result)."""
    if batch is not None and batch.error == "sandbox":
        return True
    return result is not None and (bool(getattr(result, "fault", "")) or "[turnkit sandbox]" in result.stderr)


# --- a, b, c, d: reading what the supervisor's memory still holds --------------------------------------

STEAL_METHODS = ["stack", "gc", "mem", "parent-mem"]


@pytest.mark.parametrize("method", STEAL_METHODS)
@hardened(ALL)
def test_steal_earlier_results_fails(answer_sb, ref_sb, method):
    task = new_task()
    warm_with_correct_answer(answer_sb, ref_sb, task)
    g = grade_hardened(answer_sb, ref_sb, task, steal_payload(method))
    assert (g.passed, g.total, g.error) == (0, N_TESTS, None), g


@pytest.mark.parametrize("method", STEAL_METHODS)
@controlled(PERSISTENT)
def test_steal_earlier_results_control(control_sb, method):
    task = new_task()  # only the reference runs before the answer: a memory scan takes the first block it finds
    assert grade_control(control_sb, task, steal_payload(method)) == N_TESTS


# --- d: the supervisor's (and every other process's) memory, descriptors, ptrace ------------------------

ACCESSES = ("mem_read", "mem_write", "fd_list", "fd_write", "fd_getfd", "ptrace", "vm_read")


def probe(sb) -> dict:
    r = sb.run_python(PROBE, timeout=30)
    assert r.exit_code == 0 and not r.timed_out, r.stderr[-2000:]
    return json.loads(r.stdout)


@hardened(ALL)
def test_other_processes_out_of_reach(answer_sb):
    found = probe(answer_sb)
    reached = {pid: [k for k in ACCESSES if v[k] == "ok"] for pid, v in found["report"].items()}
    assert not any(reached.values()), f"a call reached other processes (parent {found['ppid']}): {reached}"


@controlled(PERSISTENT)
def test_other_processes_out_of_reach_control(control_sb):
    found = probe(control_sb)
    parent = found["report"][str(found["ppid"])]
    assert [parent[k] for k in ("mem_read", "mem_write", "fd_list", "fd_write")] == ["ok"] * 4, parent


# --- e: forging the result channel -----------------------------------------------------------------------

FORGERIES = ["fd", "json", "globals"]


@pytest.mark.parametrize("how", FORGERIES)
@hardened(ALL)
def test_forged_results_score_nothing(answer_sb, ref_sb, how):
    task = new_task()
    warm_with_correct_answer(answer_sb, ref_sb, task)
    g = grade_hardened(answer_sb, ref_sb, task, forge_payload(how))
    assert (g.passed, g.total) == (0, N_TESTS), g


@pytest.mark.parametrize("how", FORGERIES)
@controlled(PERSISTENT)
def test_forged_results_control(control_sb, how):
    task = new_task()
    assert grade_control(control_sb, task, forge_payload(how)) == N_TESTS


# --- f: a daemon left behind by one answer ---------------------------------------------------------------


@pytest.mark.parametrize("how", ["fork", "clone-parent"])
@hardened(ALL)
def test_daemon_does_not_outlive_its_answer(answer_sb, ref_sb, how):
    task = new_task()
    attack = grade_hardened(answer_sb, ref_sb, task, daemon_payload(how))
    assert attack.passed == 0, attack
    slow_honest = "import time\n" + task.honest.replace("def f(x):\n", "def f(x):\n    time.sleep(0.3)\n")
    g = grade_hardened(answer_sb, ref_sb, task, slow_honest)  # its calls run while the daemon would still hunt
    assert (g.passed, g.error) == (N_TESTS, None), g


@pytest.mark.parametrize("how", ["fork", "clone-parent"])
@controlled(["local-persistent"])
def test_daemon_control(control_sb, how):
    # The daemon runs and kills what starts after it (here the answer's own victims). The code before the trust
    # boundary already killed every leftover of a call before replying, so there is no control in which the
    # daemon outlives its call: this shows the payload is live, the hardened test that the boundary kept that.
    batch = run_batch(control_sb, daemon_payload(how), ["f(1)", "f(2)"], per_call_timeout_s=PER_TEST_S)
    assert batch.calls is not None, batch
    assert [c.value for c in batch.calls] == [["str", "victim-killed"]] * 2, batch.calls


# --- g: files that persist from one answer to the next ---------------------------------------------------


def _heapq_honest(task: Task) -> str:
    return f"import heapq\n\n\ndef f(x):\n    return '{task.mark}-' + str(heapq.nlargest(1, [x * 7, 0])[0])\n"


@pytest.mark.parametrize("how", sorted(POISONS))
@hardened(ALL)
def test_files_left_by_one_answer_do_not_change_the_next_grade(answer_sb, ref_sb, how):
    task = new_task()
    before = grade_hardened(answer_sb, ref_sb, task, _heapq_honest(task))
    assert (before.passed, before.error) == (N_TESTS, None), before
    grade_hardened(answer_sb, ref_sb, task, POISONS[how])
    after = grade_hardened(answer_sb, ref_sb, task, _heapq_honest(task))
    assert (after.passed, after.error) == (N_TESTS, None), after


@hardened(PERSISTENT)
def test_a_locked_work_directory_never_fails_the_next_answer(answer_sb):
    # The worker's spare child for the next call is forked while the directory is still locked; its warm-up must
    # not trip on that (the call itself opens the directory up). Before the fix most rounds failed, so several
    # rounds make the test fail however the spares happen to be timed.
    for _ in range(6):
        run_batch(answer_sb, POISONS["locked-workdir"], ["f(1)"], per_call_timeout_s=PER_TEST_S, fresh_workdir=True)
        honest = run_batch(answer_sb, "def f(x):\n    return x\n", ["f(1)"], per_call_timeout_s=PER_TEST_S,
                           fresh_workdir=True)  # fmt: skip
        assert honest.calls is not None and honest.calls[0].value == ["int", "1"], honest


@controlled(["local-persistent"])
def test_files_left_by_one_answer_control(control_sb):
    task = new_task()
    assert grade_control(control_sb, task, _heapq_honest(task)) == N_TESTS
    grade_control(control_sb, task, POISON)
    assert grade_control(control_sb, task, _heapq_honest(task)) == 0


# --- h: a forged frame on the host's pipe -----------------------------------------------------------------


def desync_calls(sb) -> tuple[str, ExecResult, ExecResult, ExecResult]:
    mark = uuid.uuid4().hex[:10]
    forger = sb.run_python(DESYNC.replace("__MARK__", mark), timeout=20)
    first = sb.run_python(f"print('HONEST1-{mark}')", timeout=20)
    second = sb.run_python(f"print('HONEST2-{mark}')", timeout=20)
    return mark, forger, first, second


@hardened(ALL)
def test_forged_frame_does_not_shift_later_replies(answer_sb):
    mark, forger, first, second = desync_calls(answer_sb)
    assert sandbox_failed(forger) or forger.stdout == f"ATTACKER-{mark}\n", forger
    assert (first.exit_code, first.stdout, getattr(first, "fault", "")) == (0, f"HONEST1-{mark}\n", ""), first
    assert (second.exit_code, second.stdout, getattr(second, "fault", "")) == (0, f"HONEST2-{mark}\n", ""), second


@controlled(PERSISTENT)
def test_forged_frame_control(control_sb):
    # The forged frame reaches the host's pipe. Before request ids the host took it for the forger's reply and the
    # next call got the forger's real reply; with them (host side, on whatever the sandbox runs) it is a desync.
    mark, forger, first, _second = desync_calls(control_sb)
    if getattr(forger, "fault", "") != "desync":
        assert forger.stdout == f"FORGED-{mark}\n", forger
        assert first.stdout == f"ATTACKER-{mark}\n", first


# --- beyond the list: signals to the supervisor or the zygote ----------------------------------------------

SIGNAL_CASES = [("SIGKILL", "parent"), ("SIGKILL", "all"), ("SIGSTOP", "parent"), ("SIGSTOP", "all")]


def signal_payload(sig: str, target: str) -> str:
    return SIGNALS.replace("__SIGNAL__", sig).replace("__TARGET__", target)


@pytest.mark.parametrize(("sig", "target"), SIGNAL_CASES)
@hardened(PERSISTENT)
def test_signals_to_the_supervisor_do_not_hurt_the_next_answer(answer_sb, ref_sb, sig, target):
    task = new_task(1)
    try:
        attack = grade_hardened(answer_sb, ref_sb, task, signal_payload(sig, target), per_test_s=0.5)
    except SandboxError:
        pass  # the attacker's own call may be a sandbox fault
    else:
        assert attack.passed == 0, attack
    g = grade_hardened(answer_sb, ref_sb, task, task.honest, per_test_s=0.5)
    assert (g.passed, g.error) == (1, None), g
    wrong = grade_hardened(answer_sb, ref_sb, task, task.wrong, per_test_s=0.5)
    assert (wrong.passed, wrong.error) == (0, None), wrong


@pytest.mark.parametrize(("sig", "target"), [("SIGKILL", "parent"), ("SIGSTOP", "parent")])
@controlled(["docker-persistent"])
def test_signals_control(control_sb, sig, target):
    # Shows the signal lands: the attacker's own call loses its supervisor (killed, or stopped until the host's
    # deadline). The host always started a new worker after that, so the later answer was never hurt here either.
    # Docker only: with the boundary the local supervisor is its namespace's PID 1, which ignores these signals
    # from inside even with TRUST_BOUNDARY off, so a local control has nothing to hit.
    batch = run_batch(control_sb, signal_payload(sig, target), ["f(1)"], per_call_timeout_s=0.5)
    assert sandbox_failed(batch.exec_result, batch), batch
    after = run_batch(control_sb, "def f(x):\n    return x", ["f(1)"], per_call_timeout_s=0.5)
    assert after.calls is not None and after.calls[0].value == ["int", "1"], after


# --- beyond the list: descriptors a call inherits -----------------------------------------------------------

FDS = r"""
import os

_FDS = []
for _name in os.listdir("/proc/self/fd"):
    try:
        _FDS.append(os.readlink("/proc/self/fd/" + _name))
    except OSError:  # the descriptor listdir itself used
        pass


def f(x):
    return [link for link in _FDS if link.startswith("socket:")]
"""


@hardened(ALL)
def test_call_holds_no_socket_to_the_supervisor(answer_sb):
    # A call that held the zygote's or the supervisor's socket could send them forged spawn or exit reports.
    batch = run_batch(answer_sb, FDS, ["f(1)"], per_call_timeout_s=PER_TEST_S)
    assert batch.calls is not None and batch.calls[0].value == ["list", []], batch


# --- the grader's own contract --------------------------------------------------------------------------------


@hardened(["local-persistent"])
def test_grade_refuses_one_sandbox_for_reference_and_answer(answer_sb):
    task = new_task()
    with pytest.raises(ConfigError):
        grading.grade(answer_sb, task.reference, task.honest, list(task.tests), reference_sandbox=answer_sb)
