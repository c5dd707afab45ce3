"""The batch harness: load code once, then evaluate many calls, each under its own alarm (standard library only).

It runs inside the sandbox, in the child of one call: natively (the supervisor's ``batch`` op calls
:func:`batch_main`, compiled once with the supervisor) or, on a backend without that op, as a program sent through
``run_python`` (this module's source plus a call). The host side is :mod:`turnkit.sandbox.batch`.

The code's own output is discarded (it can neither flood nor forge the results): each step's result goes out as
one tagged JSON line on a private copy of the original stdout.

Example:
    >>> encode_value((1, 2.5, "a"))
    ['tuple', [['int', '1'], ['float', '2.5'], ['str', 'a']]]
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

BATCH_MARK = "@@turnkit-batch@@"
"""Prefix of every result line the harness writes."""

BATCH_NAMESPACE = "__batch__"
"""``__name__`` of the namespace the code is loaded in (so an ``if __name__ == "__main__":`` block does not run)."""

MAX_DEPTH = 40
"""Deepest nesting :func:`encode_value` looks into; a value below it is ``too_big``."""

MAX_NODES = 10_000
"""Most values :func:`encode_value` encodes in one result; the rest are ``too_big``."""

DECIMAL_INT_BITS = 2048
"""Ints up to this many bits are written in decimal (at most 617 digits, under every int-string limit Python
allows, 640 at least), longer ones in hexadecimal (``"0x..."``, which no limit covers and costs linear time)."""


def encode_value(value: Any, depth: int = 0, budget: list | None = None) -> Any:
    """A canonical, JSON-safe encoding of a returned value.

    Tags: ``none``, ``bool``, ``int`` (decimal text up to :data:`DECIMAL_INT_BITS` bits, ``"0x"``
    hexadecimal beyond, so any int is carried whatever ``sys.set_int_max_str_digits`` says), ``float``
    (``repr``), ``str``, ``list``, ``tuple``, ``dict`` and ``set`` (items sorted by their JSON text), ``other``
    (the type name: never equal) and ``too_big`` (over :data:`MAX_NODES` values or nested deeper than
    :data:`MAX_DEPTH`). Only exact built-in types are looked into, and subclasses of ``bool``, ``int``,
    ``float`` and ``str`` are read through their base class's methods, so a value cannot run code while it is
    encoded and a lookalike is carried as the built-in value it holds.

    Example:
        >>> encode_value((1, 2.5, "a", None, True))
        ['tuple', [['int', '1'], ['float', '2.5'], ['str', 'a'], ['none'], ['bool', True]]]
        >>> encode_value({"b": 1, "a": {3}})
        ['dict', [[['str', 'a'], ['set', [['int', '3']]]], [['str', 'b'], ['int', '1']]]]
        >>> encode_value(object())
        ['other', 'object']
        >>> encode_value(-(2**4096))[1][:8]
        '-0x10000'
    """
    if budget is None:
        budget = [MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        return ["too_big"]
    if value is None:
        return ["none"]
    if isinstance(value, bool):
        return ["bool", value is True]
    if isinstance(value, int):
        if int.bit_length(value) <= DECIMAL_INT_BITS:
            try:
                return ["int", int.__repr__(value)]
            except ValueError:  # a limit below Python's minimum: fall through to hexadecimal
                pass
        return ["int", int.__format__(value, "#x")]
    if isinstance(value, float):
        return ["float", float.__repr__(value)]
    if isinstance(value, str):
        return ["str", str.__getitem__(value, slice(None))]
    kind = type(value)
    if kind is list or kind is tuple:
        return [kind.__name__, [encode_value(v, depth + 1, budget) for v in value]]
    if kind is dict:
        pairs = [[encode_value(k, depth + 1, budget), encode_value(v, depth + 1, budget)] for k, v in value.items()]
        return ["dict", sorted(pairs, key=json.dumps)]
    if kind is set or kind is frozenset:
        return ["set", sorted((encode_value(v, depth + 1, budget) for v in value), key=json.dumps)]
    return ["other", kind.__name__]


class _CallTimeout(BaseException):
    """Raised by the alarm in the code being evaluated (a ``BaseException``: ``except Exception`` misses it)."""


def _alarm(signum: int, frame: Any) -> None:
    raise _CallTimeout()


def empty_directory(path: str) -> int:
    """Remove everything inside ``path``; return how many entries it held.

    Directories the owner locked (``chmod 0``, ``0o500``) are opened up first, since the caller is their owner;
    links are removed, never followed.

    Example:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> os.makedirs(os.path.join(d, "a", "b")); os.symlink("/etc", os.path.join(d, "link"))
        >>> os.chmod(os.path.join(d, "a"), 0)
        >>> empty_directory(d), os.listdir(d), os.path.exists("/etc/passwd")
        (2, [], True)
    """
    todo = [path]
    while todo:  # top-down, each directory opened up before it is listed
        directory = todo.pop()
        os.chmod(directory, 0o700)
        with os.scandir(directory) as listing:
            todo += [entry.path for entry in listing if entry.is_dir(follow_symlinks=False)]
    entries = list(os.scandir(path))
    if entries:
        import shutil

        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    return len(entries)


def _fresh_workdir() -> None:
    """Empty the working directory and take it off the import path, before any of the code runs.

    A module an earlier call planted there can then be neither found nor imported, even where emptying fails
    (a tree deeper than a path can name): that is reported on stderr, the call still runs.
    """
    cwd = os.getcwd()
    try:
        empty_directory(cwd)
    except (OSError, RecursionError) as exc:
        sys.stderr.write(f"[turnkit sandbox] the work directory was not emptied: {type(exc).__name__}: {exc}\n")
    sys.path[:] = [p for p in sys.path if p not in (cwd, "")]


def batch_main(setup: str | bytes, calls: list[str], per_call_timeout_s: float, fresh_workdir: bool = False) -> int:
    """Load ``setup`` at module level, then evaluate each call expression; write one result line per step.

    With ``fresh_workdir`` the working directory is emptied first (nothing of the code's has run yet).

    Lines (each ``BATCH_MARK`` + JSON): ``{"load": "ok" | "syntax_error" | "crash" | "timeout", "detail": ...}``,
    then for each call ``{"ok": encoded value}``, ``{"raised": type name, "message": ...}`` or
    ``{"timeout": true}``, then ``{"done": true}``. Loading and every call each get ``per_call_timeout_s``.

    Returns:
        The exit status (0: every line was written; the host checks that they all came).
    """
    if fresh_workdir:
        _fresh_workdir()
    out = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)

    def emit(obj: dict[str, Any]) -> None:  # buffered: one write at the end, not a supervisor wake-up per call
        out.write(BATCH_MARK + json.dumps(obj) + "\n")

    signal.signal(signal.SIGALRM, _alarm)
    namespace: dict[str, Any] = {"__name__": BATCH_NAMESPACE}
    try:
        signal.setitimer(signal.ITIMER_REAL, per_call_timeout_s)
        exec(compile(setup, "<setup>", "exec"), namespace)
        signal.setitimer(signal.ITIMER_REAL, 0)
    except _CallTimeout:
        emit({"load": "timeout", "detail": f"loading the code took longer than {per_call_timeout_s} s"})
        out.flush()
        return 0
    except SyntaxError as exc:
        signal.setitimer(signal.ITIMER_REAL, 0)
        emit({"load": "syntax_error", "detail": "SyntaxError: " + str(exc)[:300]})
        out.flush()
        return 0
    except BaseException as exc:  # the code failed as it loaded: that is its result
        signal.setitimer(signal.ITIMER_REAL, 0)
        emit({"load": "crash", "detail": type(exc).__name__ + ": " + _message(exc)})
        out.flush()
        return 0
    emit({"load": "ok"})
    out.flush()  # a call that kills the process still leaves "it loaded" behind
    for call in calls:
        try:
            signal.setitimer(signal.ITIMER_REAL, per_call_timeout_s)
            value = eval(call, namespace)
            signal.setitimer(signal.ITIMER_REAL, 0)
            result: dict[str, Any] = {"ok": encode_value(value)}
        except _CallTimeout:
            result = {"timeout": True}
        except BaseException as exc:  # the call raised: that is its result
            signal.setitimer(signal.ITIMER_REAL, 0)
            result = {"raised": type(exc).__name__, "message": _message(exc)}
        signal.setitimer(signal.ITIMER_REAL, 0)
        emit(result)
    emit({"done": True})
    out.flush()
    return 0


def _message(exc: BaseException) -> str:
    try:
        return str(exc)[:300]
    except BaseException:  # a hostile __str__: the type name is what the result needs
        return ""
