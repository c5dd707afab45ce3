"""Hidden-test grading of collaborative-coding answers, executed in a :mod:`turnkit.sandbox`.

An answer is graded by running the reference and the candidate in **two separate fresh executions** (fresh
processes, fresh globals) of the same harness. The harness ``exec``\\ s the code at module level (so imports,
helpers and recursion work), then evaluates each hidden test call with a per-test alarm and prints one
tagged JSON line per test. The host compares the two result lists with a safe equality protocol
(:func:`outcomes_equal`); nothing the candidate returns is ever unpickled or ``eval``-ed on the host.

How this differs from ColBench's evaluator (which ``exec``\\ s the answer inside a function's local namespace
in the grading process, with a 1 s ``SIGALRM`` per test):

* isolation: the code runs in a sandbox (no network, read-only filesystem, rlimits), never in-process;
* fresh globals at module level: top-level imports, helper functions and recursion work (ColBench scores
  them 0), so scores here can be higher for the same answers;
* results are compared through a canonical encoding (:func:`encode_value`), not ``==`` on live objects
  (:func:`values_equal` states the rule): numbers as Python compares them (``1 == 1.0``, ``nan`` never equal,
  ints of any size), but ``True`` does not match ``1``, lists do not match tuples, a subclass of ``str`` or
  ``int`` compares as the built-in value it holds, and objects of other types (custom classes, numpy arrays) or
  values nested deeper than 40 never match; a test where both sides raise the same exception type passes
  (ColBench has no such case);
* the candidate's own ``print`` output is discarded (it cannot flood the grader), so "huge output" only
  fails when a *returned value* exceeds the sandbox's output cap.

**A fault the graded code can cause is that answer's failure**: a crash, a timeout, forbidden text, an oversized
result, or a result the code forged or garbled (``malformed``: a value no function returns, a line the host cannot
read) is a :class:`GradeResult` with a zero (or partial) score, ``error`` set and the cause in ``detail``. It is a
reward like any other, and learners train on it. Only faults the code cannot cause raise, and
:func:`turnkit.collect` records them on the trajectory, which learners mask: :class:`~turnkit.errors.SandboxError`
(the executor itself failed: ``ExecResult.fault``, bubblewrap or Docker missing, the trusted sandbox failing on the
reference) and :class:`~turnkit.errors.EnvError` (the reference itself fails: broken task data).

Trust boundary (docs/sandbox.md): the reference runs in a **trusted sandbox** that never runs an answer
(:func:`trusted_sandbox`, or the ``reference_sandbox`` you pass), and its outcomes stay on the host. The answer's
process only ever holds its own code and the test calls, so whatever it writes into its result channel, it
can only report values it could compute; the host compares them with the reference's.

Example:
    >>> from turnkit.sandbox import LocalSandbox
    >>> ref = "def f(x):\\n    return x * 2"
    >>> with LocalSandbox(persistent=True) as answers:
    ...     good = grade(answers, ref, "def f(x):\\n    return x + x", ["f(1)", "f(2.5)"])
    ...     bad = grade(answers, ref, "def f(x):\\n    while True: pass", ["f(1)"], per_test_timeout_s=0.2)
    >>> good.passed, good.total, good.success
    (2, 2, True)
    >>> bad.passed, bad.error
    (0, 'timeout')
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from turnkit.errors import ConfigError, EnvError, SandboxError
from turnkit.sandbox import Limits, LocalSandbox, Sandbox
from turnkit.sandbox.batch import CallResult, encode_value, run_batch
from turnkit.sandbox.values import values_equal

ANSWER_MARKER = "I WANT TO ANSWER:"
"""The text that ends an episode: what follows it is the answer."""

COLBENCH_FORBIDDEN = ("import os", "import sys", "sudo", "exit(", "quit(")
"""Substrings that make ColBench score an answer 0 (a plain text check, kept for comparability)."""

GRADING_LIMITS = Limits(wall_time_s=15.0, memory_mb=512, pids=16, output_bytes=1_000_000)
"""Limits of the shared grading sandbox (the per-call wall time is set from the number of tests)."""

ERRORS = ("forbidden", "no_code", "syntax_error", "crash", "timeout", "memory", "output_limit", "malformed")
"""Values of :attr:`GradeResult.error`, each a failure of the answer (a zero or partial score, never masked).
``malformed``: some tests reported a value that no function returns (the answer rewrote its result channel)."""

_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(text: str) -> str:
    """The code in an answer: the first fenced block's content if there is one, else the stripped text.

    Example:
        >>> extract_code("Here:\\n```python\\ndef f():\\n    return 1\\n```\\nDone.")
        'def f():\\n    return 1'
        >>> extract_code("  def g(): return 2  ")
        'def g(): return 2'
    """
    match = _FENCE.search(text)
    body = match.group(1) if match else text
    return body.strip("\n").rstrip() if match else body.strip()


def split_answer(message: str) -> str | None:
    """The code after :data:`ANSWER_MARKER` in an agent message, or ``None`` when there is no marker.

    Example:
        >>> split_answer("I WANT TO ANSWER:\\n```\\ndef f(): return 1\\n```")
        'def f(): return 1'
        >>> split_answer("What is the cutoff?") is None
        True
    """
    at = message.find(ANSWER_MARKER)
    if at < 0:
        return None
    return extract_code(message[at + len(ANSWER_MARKER) :])


def outcomes_equal(ref: dict[str, Any], cand: dict[str, Any]) -> bool:
    """Whether a candidate's test outcome matches the reference's.

    Outcomes are ``{"ok": encoded}``, ``{"raised": "ExcType"}``, ``{"timeout": True}`` or ``{"malformed": why}``.
    Values compare with :func:`values_equal`; two raised exceptions match when their type names are equal; a
    timeout or a malformed result matches nothing.

    Example:
        >>> outcomes_equal({"raised": "ValueError"}, {"raised": "ValueError"})
        True
        >>> outcomes_equal({"ok": ["int", "1"]}, {"timeout": True})
        False
    """
    if "ok" in ref and "ok" in cand:
        return values_equal(ref["ok"], cand["ok"])
    if "raised" in ref and "raised" in cand:
        return bool(ref["raised"] == cand["raised"])
    return False


@dataclass(frozen=True)
class RunOutcome:
    """What one harness execution produced.

    Attributes:
        outcomes: One outcome per test (see :func:`outcomes_equal`), or ``None`` when the run failed as a whole.
        error: ``None``, or one of :data:`ERRORS`.
        detail: A short human-readable cause.
    """

    outcomes: tuple[dict[str, Any], ...] | None
    error: str | None = None
    detail: str = ""


def run_tests(sandbox: Sandbox, code: str, tests: Sequence[str], *, per_test_timeout_s: float = 1.0) -> RunOutcome:
    """Run ``code`` and evaluate each test call in one fresh sandbox execution (:func:`~turnkit.sandbox.run_batch`).

    The work directory is emptied first: an earlier answer's files (a module planted on the import path to
    sabotage the answers graded after it) never reach this one.

    Raises:
        SandboxError: The sandbox infrastructure failed (not the code).

    Example:
        >>> from turnkit.sandbox import LocalSandbox
        >>> with LocalSandbox(persistent=True) as sb:
        ...     run_tests(sb, "def f(x):\\n    return 1 // x", ["f(1)", "f(0)"]).outcomes
        ({'ok': ['int', '1']}, {'raised': 'ZeroDivisionError'})
    """
    batch = run_batch(sandbox, code, tests, per_call_timeout_s=per_test_timeout_s, fresh_workdir=True)
    if batch.calls is None:
        return RunOutcome(None, batch.error, batch.detail)
    return RunOutcome(tuple(_outcome(c) for c in batch.calls), batch.error, batch.detail)


def _outcome(call: CallResult) -> dict[str, Any]:
    if call.status == "ok":
        return {"ok": call.value}
    if call.status == "raised":
        return {"raised": call.error}
    if call.status == "malformed":
        return {"malformed": call.message}
    return {"timeout": True}


def run_tests_in_process(code: str, tests: Sequence[str]) -> tuple[dict[str, Any], ...]:
    """Evaluate *trusted* code in-process (fresh globals): only for our own generated references.

    Example:
        >>> run_tests_in_process("def f(x):\\n    return [x]", ["f(2)"])
        ({'ok': ['list', [['int', '2']]]},)
    """
    namespace: dict[str, Any] = {"__name__": "__answer__"}
    exec(compile(code, "<reference>", "exec"), namespace)
    out = []
    for test in tests:
        try:
            out.append({"ok": encode_value(eval(test, namespace))})
        except Exception as exc:  # recorded as the outcome, like the sandbox harness does
            out.append({"raised": type(exc).__name__})
    return tuple(out)


@dataclass(frozen=True)
class GradeResult:
    """The grade of one answer.

    Attributes:
        passed: Tests whose outcome matched the reference's.
        total: Number of hidden tests.
        error: ``None`` or one of :data:`ERRORS` (the cause of a zero or partial score).
        detail: Human-readable cause (from the candidate's run only, never the reference's).
        per_test: Pass/fail per test, in order (empty when the run failed as a whole).
    """

    passed: int
    total: int
    error: str | None = None
    detail: str = ""
    per_test: tuple[bool, ...] = ()

    @property
    def reward(self) -> float:
        """Fraction of tests passed."""
        return self.passed / self.total if self.total else 0.0

    @property
    def success(self) -> bool:
        """All tests passed."""
        return self.total > 0 and self.passed == self.total


class _ReferenceCache:
    """A bounded LRU of reference outcomes, keyed by a hash of (code, tests, timeout)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._data: OrderedDict[str, tuple[dict[str, Any], ...]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(code: str, tests: Sequence[str], per_test: float) -> str:
        return hashlib.sha256(json.dumps([code, list(tests), per_test]).encode("utf-8", "surrogatepass")).hexdigest()

    def get(self, key: str) -> tuple[dict[str, Any], ...] | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def put(self, key: str, value: tuple[dict[str, Any], ...]) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)


REFERENCE_CACHE = _ReferenceCache()
"""Process-wide cache of reference outcomes (references are deterministic; the cache changes no result)."""


def reference_outcomes(
    sandbox: Sandbox, reference: str, tests: Sequence[str], *, per_test_timeout_s: float = 1.0, cache: bool = True
) -> tuple[dict[str, Any], ...]:
    """The reference's test outcomes, run in its own fresh sandbox execution (cached by content).

    ``sandbox`` must be trusted: one that has never run an answer (see :func:`trusted_sandbox`).

    Raises:
        EnvError: The reference itself fails as a whole (broken task data).
        SandboxError: The sandbox infrastructure failed.

    Example:
        >>> from turnkit.sandbox import LocalSandbox
        >>> with LocalSandbox(persistent=True) as sb:
        ...     reference_outcomes(sb, "def f():\\n    return 'x'", ["f()"], cache=False)
        ({'ok': ['str', 'x']},)
    """
    key = _ReferenceCache.key(reference, tests, per_test_timeout_s)
    hit = REFERENCE_CACHE.get(key) if cache else None
    if hit is not None:
        return hit
    run = run_tests(sandbox, reference, tests, per_test_timeout_s=per_test_timeout_s)
    if run.error == "sandbox":
        raise SandboxError(f"the trusted sandbox failed while running the reference ({run.detail})")
    if run.outcomes is None or run.error is not None:
        raise EnvError(f"the reference solution fails in the sandbox ({run.error}: {run.detail})")
    if any("malformed" in o for o in run.outcomes):  # the trusted harness never writes one
        raise EnvError("the reference's results came back malformed from the trusted sandbox")
    if cache:
        REFERENCE_CACHE.put(key, run.outcomes)
    return run.outcomes


def forbidden_hit(code: str, forbidden: Sequence[str]) -> str | None:
    """The first forbidden substring in ``code``, or ``None``.

    Example:
        >>> forbidden_hit("import os\\nos.remove('x')", COLBENCH_FORBIDDEN)
        'import os'
    """
    return next((f for f in forbidden if f in code), None)


def grade(
    sandbox: Sandbox,
    reference: str,
    candidate: str,
    tests: Sequence[str],
    *,
    per_test_timeout_s: float = 1.0,
    forbidden: Sequence[str] = COLBENCH_FORBIDDEN,
    cache_reference: bool = True,
    reference_sandbox: Sandbox | None = None,
) -> GradeResult:
    """Grade candidate code against the reference on hidden test calls (see the module docstring).

    Args:
        sandbox: Where the answer runs (a :class:`~turnkit.sandbox.LocalSandbox` in persistent mode is fast).
        reference: The reference code.
        candidate: The answer's code (already extracted, see :func:`split_answer`).
        tests: Call expressions, e.g. ``"f(3)"``.
        per_test_timeout_s: Alarm per test call.
        forbidden: Substrings that score the candidate 0 without running it (``()`` turns the check off).
        cache_reference: Reuse reference outcomes for identical (reference, tests) pairs.
        reference_sandbox: Where the reference runs: a sandbox that never runs answers (:func:`trusted_sandbox`
            by default). A sandbox that has run an answer is never trusted with a reference.

    Returns:
        The :class:`GradeResult`: whatever the answer does (timeouts, crashes, forged or unreadable results) gives
        a zero or partial score with the cause in ``error``, never an exception.

    Raises:
        SandboxError: The sandbox infrastructure failed (a dead, hung or desynchronised worker, which the sandbox
            replaces): the answer was not graded.
        EnvError: The reference fails as a whole. ConfigError: no tests, a non-positive timeout, or the same
            sandbox given for the answer and the reference.
    """
    if not tests:
        raise ConfigError("grade() needs at least one test call")
    if not per_test_timeout_s > 0:
        raise ConfigError(f"per_test_timeout_s must be positive, got {per_test_timeout_s!r}")
    trusted = reference_sandbox if reference_sandbox is not None else trusted_sandbox()
    if trusted is sandbox:
        raise ConfigError("grade() runs the reference in a sandbox that never runs answers: pass another one")
    total = len(tests)
    if not candidate.strip():
        return GradeResult(0, total, "no_code", "the answer contained no code")
    hit = forbidden_hit(candidate, forbidden)
    if hit is not None:
        return GradeResult(0, total, "forbidden", f"the answer contains the forbidden text {hit!r}")
    ref = reference_outcomes(trusted, reference, tests, per_test_timeout_s=per_test_timeout_s, cache=cache_reference)
    run = run_tests(sandbox, candidate, tests, per_test_timeout_s=per_test_timeout_s)
    if run.error == "sandbox":
        raise SandboxError(f"the sandbox failed while running the answer ({run.detail})")
    if run.outcomes is None:
        return GradeResult(0, total, run.error, run.detail)
    per_test = tuple(outcomes_equal(r, c) for r, c in zip(ref, run.outcomes, strict=True))
    error, detail = run.error, run.detail
    malformed = [c["malformed"] for c in run.outcomes if "malformed" in c]
    raised = [c["raised"] for r, c in zip(ref, run.outcomes, strict=True) if "raised" in c and "raised" not in r]
    if malformed and error is None:
        error = "malformed"
        detail = f"{len(malformed)} of {total} tests reported a value no function returns ({malformed[0][:80]})"
    elif raised and not detail:  # the test calls themselves stay hidden: only counts and exception types
        detail = f"{len(raised)} of {total} tests raised an exception (first: {str(raised[0])[:60]})"
    return GradeResult(sum(per_test), total, error, detail, per_test)


_SHARED: dict[str, dict[int, LocalSandbox]] = {"answers": {}, "references": {}}
_SHARED_LOCK = threading.Lock()


def _process_sandbox(role: str) -> LocalSandbox:
    pid = os.getpid()
    with _SHARED_LOCK:
        mine = _SHARED[role]
        sandbox = mine.get(pid)
        if sandbox is None or sandbox.closed:
            mine.clear()  # a fork inherits the parent's entry: drop it without closing the parent's sandbox
            sandbox = LocalSandbox(GRADING_LIMITS, persistent=True)
            mine[pid] = sandbox
        return sandbox


def shared_sandbox() -> LocalSandbox:
    """This process's shared persistent :class:`~turnkit.sandbox.LocalSandbox` for answers (made on first use).

    A forked child gets its own (the parent's supervisor pipes are not usable there).

    Raises:
        SandboxError: Bubblewrap is missing or cannot create namespaces here.

    Example:
        >>> shared_sandbox() is shared_sandbox()
        True
    """
    return _process_sandbox("answers")


def trusted_sandbox() -> LocalSandbox:
    """This process's persistent sandbox for references: no answer ever runs in it (made on first use).

    Raises:
        SandboxError: Bubblewrap is missing or cannot create namespaces here.

    Example:
        >>> trusted_sandbox() is trusted_sandbox(), trusted_sandbox() is shared_sandbox()
        (True, False)
    """
    return _process_sandbox("references")
