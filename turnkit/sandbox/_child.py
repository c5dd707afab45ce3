"""What a call's own process does, from its fork to its exit (standard library only).

Part of the supervisor's script (see :func:`turnkit.sandbox._wire.supervisor_source`): a spare forked by the
zygote (:func:`_spare_main`) sets up its pipes, enters its jail where calls have one, rehearses, then takes its
request and runs it (:func:`_child_run`): the code's environment, directory and rlimits, then the command
(``execvp``), the Python code (``exec`` in fresh globals) or a batch (:mod:`turnkit.sandbox._harness`).

Example:
    >>> _exit_status(SystemExit(None)), _exit_status(SystemExit(3))
    (0, 3)
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import resource
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from turnkit.sandbox._calljail import become_code_uid, enter_jail
from turnkit.sandbox._frames import read_frame
from turnkit.sandbox._harness import batch_main
from turnkit.sandbox._zygote import set_dumpable

_JAILED: list[bool] = [False]
"""Whether every call runs in a jail of its own (:mod:`turnkit.sandbox._calljail`; bubblewrap)."""
_CODE_UID: list[int | None] = [None]
"""The uid every call's code runs as, apart from the supervisor's (root; Docker), or ``None``."""

_OWN_BEFORE_CALLS: list[int] = []  # processes of this uid when the supervisor started serving (counted once)


def _count_own_processes() -> int:
    uid, count = os.getuid(), 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                count += os.stat("/proc/" + name).st_uid == uid
    return count


# --- one execution ---------------------------------------------------------------------------------


_CHILD_RLIMITS = {
    "as": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
    "fsize": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
}
"""The request's ``limits`` keys and the rlimits a call's child sets from them."""


def _set_child_limits(limits: dict[str, int], cpu: int | None, others: int = 0) -> None:
    for key, which in _CHILD_RLIMITS.items():
        value = limits.get(key)
        if value:
            if key == "nproc" and _JAILED[0]:
                value += 2  # the jail's user namespace counts only the call's processes: its init and this one
            elif key == "nproc":
                # RLIMIT_NPROC counts every process of this uid that the kernel charges to our user
                # namespace, so the budget is what already runs (init, supervisor, this child) plus the
                # allowance. A serving supervisor counted init and itself once; leftovers die after every call,
                # but the killed children of earlier calls may still be torn down (``others``).
                value += _OWN_BEFORE_CALLS[0] + 1 + others if _OWN_BEFORE_CALLS else _count_own_processes()
            resource.setrlimit(which, (value, value))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))


def _exit_status(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")
    return 1


def _child_prepare(fds: tuple[int, int, int], keep: tuple[int, ...] = ()) -> None:
    """A child's set-up that needs no request: own session, stdio on the pipes, default signals, no other fd.

    ``keep`` (a spare's request and status pipes) become fds 3, 4, ...
    """
    os.setpgid(0, 0)  # not setsid(): a new session costs 2-10 ms where the kernel gives it its own autogroup
    in_r, out_w, err_w = fds
    os.dup2(in_r, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    high = [os.dup(fd) for fd in keep]  # above 3 + len(keep) before they are moved down
    for target, fd in enumerate(high, start=3):
        os.dup2(fd, target, inheritable=False)  # a program the call execs does not get them
    os.closerange(3 + len(keep), 1 << 16)
    signal.set_wakeup_fd(-1)  # the supervisor's wake-up pipe is closed here; a handler must not write its fd number
    for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _child_main(req: dict[str, Any], program: list[bytes], fds: tuple[int, int, int]) -> NoReturn:
    """Runs in the forked child: never returns."""
    try:
        _child_prepare(fds)
    except BaseException as exc:  # the set-up failed before any code ran: say why on the call's stderr
        _report_setup_failure(exc)
    _child_run(req, program)


def _child_run(req: dict[str, Any], program: list[bytes]) -> NoReturn:
    """The request's part of a child: environment, directory, limits, then the command, the code or the batch.

    ``program`` is the code (``python``), or the set-up code and the JSON list of call expressions (``batch``).
    """
    status = 1
    try:
        if _CODE_UID[0] is not None:
            become_code_uid(_CODE_UID[0])
            resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))  # POSIX queues would outlive the call
        set_dumpable(True)  # the call's own process: its /proc/self as usual (it was forked non-dumpable)
        env = _request_env(req)
        cwd = req.get("cwd") or "/"
        if req.get("fresh_workdir"):
            os.chmod(cwd, 0o700)  # an earlier call may have locked it; the harness then empties it
        os.chdir(cwd)
        _set_child_limits(req.get("limits") or {}, req.get("cpu"), int(req.get("others", 0)))
        if req["op"] == "exec":
            _default_signals(_PYTHON_IGNORED_SIGNALS)
            argv = req["argv"]
            try:
                os.execvpe(argv[0], argv, env)
            except (OSError, ValueError) as exc:
                sys.stderr.write(f"{argv[0]}: {exc}\n")
                status = 126 if isinstance(exc, PermissionError) else 127
        else:
            _set_environ(env)
            sys.argv = ["<sandbox>"]
            sys.path[0] = os.getcwd()
            if req["op"] == "batch":
                fresh = bool(req.get("fresh_workdir"))
                status = batch_main(program[0], json.loads(program[1]), float(req["item_timeout"]), fresh)
            else:
                status = _run_python(program[0] if program else b"")
    except SystemExit as exc:
        status = _exit_status(exc)
    except BaseException as exc:  # report and exit: the sandboxed code failed, not the supervisor
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        if req.get("report"):
            _report_end(status)
        os._exit(status)


def _request_env(req: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (req.get("env") or {}).items()}


def _set_environ(env: dict[str, str]) -> None:
    """Make ``os.environ`` exactly ``env``."""
    if os.environ != env:
        os.environ.clear()
        os.environ.update(env)


def _report_end(status: int) -> None:
    """Tell the supervisor on fd 4 that the call is over, with its exit code and resource use.

    If the code closed or replaced fd 4, the write fails and the supervisor learns the end from the exit instead.
    """
    ru = resource.getrusage(resource.RUSAGE_SELF)
    end = {"exit_code": status, "cpu_s": ru.ru_utime + ru.ru_stime, "max_rss_kb": ru.ru_maxrss}
    with contextlib.suppress(OSError):
        os.write(4, json.dumps(end).encode() + b"\n")


def _report_setup_failure(exc: BaseException) -> NoReturn:
    """A child whose set-up failed writes the traceback to its stderr (the call's, once set up) and exits 1."""
    with contextlib.suppress(BaseException):  # stderr itself may be what failed: then only the exit status tells
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__)
        sys.stderr.flush()
    os._exit(1)


def _run_python(code: bytes) -> int:
    glb = {"__name__": "__main__", "__builtins__": builtins, "__file__": "<sandbox>"}
    try:
        compiled = compile(code, "<sandbox>", "exec")
    except (SyntaxError, ValueError) as exc:
        import traceback

        traceback.print_exception(type(exc), exc, None)
        return 1
    try:
        exec(compiled, glb)
    except SystemExit as exc:
        return _exit_status(exc)
    except BaseException as exc:  # as Python's own top level: print the traceback, exit 1
        import traceback

        tb = exc.__traceback__
        traceback.print_exception(type(exc), exc, tb.tb_next if tb is not None else None)
        return 1
    return 0


_WARM_UP = compile("def _warm(x):\n    return [x * i for i in range(3)]\n_warm(2)\n", "<warm-up>", "exec")


def _rehearse() -> None:
    """A spare's dry run of the steps of a call that need no request, so that their copy-on-write faults come first.

    Nothing of an earlier call is rehearsed (not even its environment): the zygote never holds any of it.
    """
    for which in _CHILD_RLIMITS.values():
        resource.setrlimit(which, resource.getrlimit(which))
    with contextlib.suppress(OSError):  # an earlier call's code may have locked the directory (``chmod 0``): the
        os.chdir(os.getcwd())  # call that comes opens it up (``fresh_workdir``) or fails on it as its own error
    exec(_WARM_UP, {"__name__": "__main__", "__builtins__": builtins})
    ru = resource.getrusage(resource.RUSAGE_SELF)
    json.loads(json.dumps({"exit_code": 0, "cpu_s": ru.ru_utime + ru.ru_stime, "max_rss_kb": ru.ru_maxrss}))
    for stream in (sys.stdout, sys.stderr):
        stream.flush()


def _spare_main(fds: Sequence[int]) -> NoReturn:
    """A spare child, forked by the zygote: set up, rehearse, then wait for its one request on fd 3."""
    try:
        _child_prepare((fds[0], fds[1], fds[2]), keep=tuple(fds[3:6]))
        if _JAILED[0]:
            enter_jail(5)  # the init's pipe to the supervisor, which the code's process closes
        _rehearse()
        req, blobs = read_frame(3, 1 << 30)
        os.close(3)
        os.write(4, b"S")  # started: from here on, whatever happens is the call's
    except EOFError:  # the supervisor went away before a request came: nothing to do
        os._exit(0)
    except BaseException as exc:  # nothing of a call ran; the supervisor asks for another spare
        _report_setup_failure(exc)
    _child_run(dict(req, report=True), blobs)


# SIG_IGN survives exec, and so does a blocked mask: whatever the host process had (a library that ignores
# SIGINT, a thread that blocks it) would reach every sandboxed program. A Python REPL started with SIGINT ignored
# never raises KeyboardInterrupt, so Ctrl-C and timeouts could not interrupt it. The supervisor starts from the
# defaults a fresh login has; Python itself then ignores SIGPIPE and SIGXFSZ, which programs it execs get back.
_INHERITED_SIGNALS = ("SIGINT", "SIGQUIT", "SIGTERM", "SIGHUP", "SIGALRM", "SIGCHLD")
_PYTHON_IGNORED_SIGNALS = ("SIGPIPE", "SIGXFSZ")


def _default_signals(names: Sequence[str]) -> None:
    for name in names:
        signal.signal(getattr(signal, name), signal.SIG_DFL)
