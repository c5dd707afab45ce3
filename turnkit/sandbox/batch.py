"""Many small evaluations in one sandbox round trip: load code once, then evaluate each call under its own alarm.

Grading an answer against hidden tests, checking examples, scoring a program on many inputs: one
:func:`run_batch` runs the set-up code at module level in a fresh process, then evaluates every call expression
in that namespace with its own time limit, and returns one :class:`CallResult` per call. The sandbox's limits
(memory, processes, output, network, filesystem) hold for the whole batch; time is limited per call.

On :class:`~turnkit.sandbox.LocalSandbox` and :class:`~turnkit.sandbox.DockerSandbox` the harness is part of the
in-sandbox supervisor (compiled once, forked warm), so a batch costs about one plain call; any other
:class:`~turnkit.sandbox.Sandbox` runs the same harness as a program through ``run_python``.

Returned values cross the sandbox boundary as a canonical JSON encoding (:func:`encode_value`), never pickled or
``eval``-ed on the host. The code's own ``print`` output is discarded: it can neither flood nor forge results. The
code can still rewrite the harness it runs in, so the host reads every line within bounds
(:mod:`turnkit.sandbox.values`): nothing the code writes makes :func:`run_batch` raise. A value the encoding never
produces is that call's ``"malformed"`` result; a stream that cannot be read fails the batch as a ``"crash"``.

Example:
    >>> from turnkit.sandbox import LocalSandbox
    >>> with LocalSandbox(persistent=True) as sb:
    ...     batch = run_batch(sb, "def f(x):\\n    return 10 // x", ["f(2)", "f(0)", "g()"])
    >>> [c.status for c in batch.calls]
    ['ok', 'raised', 'raised']
    >>> batch.calls[0].value, batch.calls[1].error, batch.calls[2].error
    (['int', '5'], 'ZeroDivisionError', 'NameError')
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from turnkit.errors import ConfigError
from turnkit.sandbox import _harness
from turnkit.sandbox._harness import BATCH_MARK, encode_value
from turnkit.sandbox.base import Sandbox, SandboxBase
from turnkit.sandbox.values import read_line, value_problem
from turnkit.types import ExecResult

__all__ = ["BATCH_ERRORS", "BatchResult", "CallResult", "batch_program", "encode_value", "run_batch"]

BATCH_ERRORS = ("syntax_error", "crash", "timeout", "memory", "output_limit", "sandbox")
"""Values of :attr:`BatchResult.error`: why the batch failed as a whole (per-call timeouts are ``"timeout"`` too).
``"sandbox"``: the sandbox itself failed (:attr:`~turnkit.types.ExecResult.fault`), so nothing is known of the code."""


@dataclass(frozen=True)
class CallResult:
    """The outcome of one call expression.

    Attributes:
        status: ``"ok"`` (returned), ``"raised"``, ``"timeout"``, or ``"malformed"``: the call's result line held
            something :func:`encode_value` never writes (the code rewrote its harness or its result channel), so
            nothing is known of what it returned. The code caused it: it is the call's result, not a sandbox fault.
        value: The returned value, encoded by :func:`encode_value` (``None`` unless ``ok``).
        error: The exception's type name when it ``raised``.
        message: The exception's message (first 300 characters); for ``malformed``, what was wrong.
    """

    status: Literal["ok", "raised", "timeout", "malformed"]
    value: Any = None
    error: str = ""
    message: str = ""


@dataclass(frozen=True)
class BatchResult:
    """What one batch produced.

    Attributes:
        calls: One result per call, in order; ``None`` when the batch failed as a whole (see ``error``).
        error: ``None``, or one of :data:`BATCH_ERRORS`. ``"timeout"`` with ``calls`` set means some calls
            timed out (the others have results); without ``calls``, the code ignored the alarm.
        detail: A short human-readable cause.
        exec_result: The underlying execution (exit code, duration, resource use).
    """

    calls: tuple[CallResult, ...] | None
    error: str | None = None
    detail: str = ""
    exec_result: ExecResult | None = None

    @property
    def ok(self) -> bool:
        """No call timed out and the batch itself did not fail (each call returned, raised or was malformed)."""
        return self.error is None


def run_batch(
    sandbox: Sandbox,
    setup: str | bytes,
    calls: Sequence[str],
    *,
    per_call_timeout_s: float = 1.0,
    fresh_workdir: bool = False,
) -> BatchResult:
    """Load ``setup`` once in a fresh process, then evaluate every call expression in its namespace.

    Args:
        sandbox: Where to run (a persistent :class:`~turnkit.sandbox.LocalSandbox` is fastest).
        setup: Python source run at module level (``__name__`` is ``"__batch__"``): definitions, imports.
        calls: Expressions evaluated one by one in the set-up's namespace, e.g. ``"f(3)"``.
        per_call_timeout_s: Alarm for loading the set-up and for each call.
        fresh_workdir: Empty the work directory before the set-up loads, so that nothing an earlier call left
            there (a planted ``heapq.py`` on the import path, data files) reaches this one. Graders set it.

    Returns:
        The :class:`BatchResult`; crashes, timeouts, oversized and malformed results are results, not exceptions.

    Raises:
        ConfigError: ``calls`` is not a sequence of strings, or the timeout is not positive.
        SandboxError: The sandbox infrastructure failed (not the code).

    Example:
        >>> from turnkit.sandbox import LocalSandbox
        >>> with LocalSandbox(persistent=True) as sb:
        ...     slow = run_batch(sb, "import time", ["time.sleep(5)", "1 + 1"], per_call_timeout_s=0.2)
        >>> [c.status for c in slow.calls], slow.error
        (['timeout', 'ok'], 'timeout')
    """
    if isinstance(calls, str | bytes) or not all(isinstance(c, str) for c in calls):
        raise ConfigError(f"calls must be a sequence of expression strings, got {calls!r:.80}")
    if (
        not isinstance(per_call_timeout_s, int | float)
        or isinstance(per_call_timeout_s, bool)
        or not per_call_timeout_s > 0
    ):
        raise ConfigError(f"per_call_timeout_s must be a positive number of seconds, got {per_call_timeout_s!r}")
    calls = list(calls)
    per_call = float(per_call_timeout_s)
    wall = per_call * (len(calls) + 1) + 2.0
    setup_bytes = setup.encode("utf-8") if isinstance(setup, str) else setup
    result = None
    if isinstance(sandbox, SandboxBase):
        encoded = json.dumps(calls).encode()
        result = sandbox.run_batch_natively(setup_bytes, encoded, per_call, wall, fresh_workdir=fresh_workdir)
    if result is None:
        result = sandbox.run_python(batch_program(setup_bytes, calls, per_call, fresh_workdir), timeout=wall)
    return parse_batch(result, len(calls), per_call, wall)


def batch_program(
    setup: str | bytes, calls: Sequence[str], per_call_timeout_s: float, fresh_workdir: bool = False
) -> str:
    """The harness as one Python program, for sandboxes that run it through ``run_python``.

    Example:
        >>> program = batch_program("x = 2", ["x * 3"], 1.0)
        >>> compile(program, "<batch>", "exec") is not None
        True
    """
    args = f"{setup!r}, {list(calls)!r}, {float(per_call_timeout_s)!r}, {bool(fresh_workdir)!r}"
    call = f"raise SystemExit(batch_main({args}))\n"
    return _harness_source() + "\n\n" + call


@functools.cache
def _harness_source() -> str:
    return inspect.getsource(_harness)


def parse_batch(result: ExecResult, n_calls: int, per_call_timeout_s: float, wall_s: float) -> BatchResult:
    """Read the harness's result lines out of an execution; anything missing or malformed fails the batch.

    Example:
        >>> from turnkit.types import ExecResult
        >>> lines = [{"load": "ok"}, {"ok": ["int", "3"]}, {"done": True}]
        >>> out = "".join(BATCH_MARK + json.dumps(x) + "\\n" for x in lines)
        >>> parse_batch(ExecResult(0, out, "", False, False, 0.01), 1, 1.0, 4.0).calls
        (CallResult(status='ok', value=['int', '3'], error='', message=''),)
    """

    def failed(error: str, detail: str) -> BatchResult:
        return BatchResult(None, error, detail, result)

    if result.fault:
        return failed("sandbox", f"{result.fault}: {result.stderr.strip()[:200]}")
    if result.truncated:
        return failed("output_limit", "the results exceeded the sandbox's output cap")
    if result.oom_killed:
        return failed("memory", "the memory limit killed the code")
    if result.timed_out:
        return failed("timeout", f"the whole batch exceeded {wall_s:.1f} s (the code ignored the alarm)")
    lines = []
    for line in result.stdout.splitlines():
        if line.startswith(BATCH_MARK):
            try:
                lines.append(read_line(line[len(BATCH_MARK) :]))
            except ValueError as exc:
                return failed("crash", f"the result stream was garbled ({str(exc)[:80]})")
    if not lines or not isinstance(lines[0], dict) or "load" not in lines[0]:
        tail = result.stderr.strip().splitlines()[-1:] or [f"exit status {result.exit_code}"]
        why = "the code exited, was killed or wrote into the result stream before it loaded"
        return failed("crash", f"{why} ({tail[0][:200]})")
    load = lines[0]["load"]
    if load not in ("ok", "syntax_error", "crash", "timeout"):
        return failed("crash", "the result stream was tampered with")
    if load != "ok":
        return failed(str(load), str(lines[0].get("detail", ""))[:300])
    body = lines[1:]
    if not body or body[-1] != {"done": True} or len(body) != n_calls + 1:
        finished = sum(1 for o in body if isinstance(o, dict) and ("ok" in o or "raised" in o or "timeout" in o))
        why = f"{finished} results for {n_calls} calls"
        return failed("crash", f"the code exited, forked or wrote into the result stream ({why})")
    calls = tuple(_call_result(o) for o in body[:-1])
    timeouts = sum(c.status == "timeout" for c in calls)
    if timeouts:
        return BatchResult(calls, "timeout", f"{timeouts} call(s) exceeded {per_call_timeout_s} s", result)
    return BatchResult(calls, None, "", result)


def _call_result(line: Any) -> CallResult:
    if isinstance(line, dict) and "ok" in line:
        problem = value_problem(line["ok"])
        if problem:
            return CallResult("malformed", message=problem)
        return CallResult("ok", value=line["ok"])
    if isinstance(line, dict) and isinstance(line.get("raised"), str):
        return CallResult("raised", error=line["raised"][:200], message=str(line.get("message", ""))[:300])
    if isinstance(line, dict) and line.get("timeout") is True:
        return CallResult("timeout")
    return CallResult("malformed", message="the result line was tampered with")
