"""The trusted side's process hardening and the zygote that forks every call of a serving supervisor (stdlib only).

A serving supervisor reads requests (code, hidden tests) and replies (results) for many calls, and CPython keeps
freed memory, frames and caches around. A call's process must not inherit any of that, so in worker mode the
supervisor forks a **zygote** before it reads its first request: a fork server that never sees a request or a
reply. Each call's child is forked by the zygote, gets its pipes from the supervisor (``SCM_RIGHTS``) and reads
only its own request, so what it inherits is the zygote's pristine memory plus what it was sent.

The supervisor and the zygote are non-dumpable (``PR_SET_DUMPABLE`` 0). The kernel then refuses every way a
process of the same uid could read or write them (``ptrace``, ``process_vm_readv``/``writev``, ``/proc/PID/mem``,
``/proc/PID/fd``, ``pidfd_getfd``): all go through ``ptrace_may_access``, which denies a non-dumpable target to a
caller without ``CAP_SYS_PTRACE`` in the target's user namespace, and sandboxed code has no capability. A call's
child makes itself dumpable again just before it runs the call, so the code's own ``/proc/self`` works as usual.

The zygote is a child subreaper: every process a call starts stays below it, and it reports each exit (pid,
wait status, CPU seconds, peak RSS) to the supervisor, which keeps the time limits and kills leftovers.

Protocol on a ``SOCK_SEQPACKET`` pair: the supervisor sends ``F`` with a call's five pipe ends; the zygote answers
``P`` + pid, sends ``X`` + pid, status, CPU s, RSS kB for every child it reaps, and ``E`` + why, as its last words,
if it fails.

Example:
    >>> _EXIT.size, TRUST_BOUNDARY
    (24, True)
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import struct
import time
from collections.abc import Callable, Sequence
from typing import NoReturn

TRUST_BOUNDARY = True
"""Whether the supervisor forks calls from a zygote and is non-dumpable. Test controls run a copy of the
supervisor's source with this switched off, to show that each attack in the adversarial suite is real."""

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_PID = struct.Struct("<i")
_EXIT = struct.Struct("<iidd")
SPAWN_TIMEOUT_S = 3.0
"""How long the supervisor waits for the zygote to fork a call's child before it declares the worker broken."""


_LIBC: list = []


def prctl(option: int, value: int) -> bool:
    """``prctl(option, value)`` through libc; ``False`` where it fails or is unavailable."""
    try:
        if not _LIBC:
            import ctypes

            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        return int(_LIBC[0].prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError, ImportError):
        return False


def become_subreaper() -> None:
    """Make orphaned descendants this process's children (without it they go to the namespace's init)."""
    prctl(_PR_SET_CHILD_SUBREAPER, 1)


def set_dumpable(dumpable: bool) -> bool:
    """Allow (``True``) or refuse (``False``) same-uid processes access to this process's memory and fds.

    Returns:
        Whether the kernel took it (the supervisor refuses to serve when it could not become non-dumpable).
    """
    return prctl(_PR_SET_DUMPABLE, int(dumpable))


class Zygote:
    """The supervisor's handle on its zygote (see the module docstring).

    The zygote keeps none of the supervisor's descriptors but its end of the socket pair: not the host's pipes.

    Args:
        child_main: What a forked call child runs, given its five pipe ends (stdin, stdout, stderr, request,
            end report); it never returns.
    """

    def __init__(self, child_main: Callable[[Sequence[int]], NoReturn]) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover - runs in the zygote
            mine.close()
            _zygote_main(theirs, child_main)
        theirs.close()
        self.sock = mine
        self.sock.setblocking(False)
        self.alive = True
        self.exits: list[tuple[int, int, float, float]] = []
        """Exits reported by the zygote and not taken yet: (pid, wait status, CPU s, peak RSS kB)."""
        self.spawned: list[int] = []
        """Pids of forked children not taken yet (by :meth:`spawned_pid`)."""
        self.status: int | None = None
        """Its wait status once the supervisor reaped it."""
        self.lost = ""
        """Why the zygote is unusable (empty while :attr:`alive`): the worker's ``worker_broken`` fault says it."""

    def fileno(self) -> int:
        return self.sock.fileno()

    def spawn(self, fds: Sequence[int]) -> bool:
        """Ask the zygote to fork a call child on ``fds`` (:meth:`spawned_pid` says which); ``False`` if it is gone.

        The supervisor does not wait for the fork: it replies and reads the next request meanwhile.
        """
        if not self.alive:
            return False
        try:
            os.kill(self.pid, signal.SIGCONT)  # a call may have stopped it; no process of a call is left now
            socket.send_fds(self.sock, [b"F"], list(fds))
        except (ProcessLookupError, BrokenPipeError, ConnectionResetError):
            self.give_up(self._end())
            return False
        except OSError as exc:
            self.give_up(f"cannot reach it ({type(exc).__name__}: {exc})")
            return False
        return True

    def spawned_pid(self) -> int | None:
        """The pid of the child of the oldest :meth:`spawn` not answered yet, or ``None`` (the zygote is unusable)."""
        deadline = time.monotonic() + SPAWN_TIMEOUT_S
        while not self.spawned and self.alive:
            if not self._receive(wait_s=deadline - time.monotonic()) and time.monotonic() >= deadline:
                # stopped or wedged (the code can signal it): never trusted again
                self.give_up(f"it reported no fork within {SPAWN_TIMEOUT_S:.0f} s")
        return self.spawned.pop(0) if self.spawned else None

    def poll(self) -> None:
        """Take every message waiting (exits go to :attr:`exits`, forks to :attr:`spawned`)."""
        while self.alive and self._receive(wait_s=0.0):
            pass

    def _receive(self, wait_s: float) -> bool:
        """Read one message (waiting up to ``wait_s``); whether one was read."""
        if wait_s > 0 and not select.select([self.sock], [], [], wait_s)[0]:
            return False
        try:
            msg = self.sock.recv(512)
        except BlockingIOError:
            return False
        except ConnectionResetError:  # it died with messages unread: the same end as a closed socket
            msg = b""
        except OSError as exc:
            self.give_up(f"its socket failed ({type(exc).__name__}: {exc})")
            return False
        if msg[:1] == b"P" and len(msg) == 1 + _PID.size:
            self.spawned.append(int(_PID.unpack(msg[1:])[0]))
        elif msg[:1] == b"X" and len(msg) == 1 + _EXIT.size:
            self.exits.append(_EXIT.unpack(msg[1:]))
        elif msg[:1] == b"E":
            self.give_up("it failed: " + msg[1:].decode("utf-8", "replace"))
            return False
        else:
            self.give_up(self._end() if not msg else f"it sent a malformed message {msg[:16]!r}")
            return False
        return True

    def _end(self) -> str:
        """How the zygote ended, once its socket closed (it holds its end until it exits)."""
        if self.status is None:
            with contextlib.suppress(ChildProcessError):
                self.status = os.waitpid(self.pid, 0)[1]
        if self.status is None:
            return "it exited"
        return f"it exited with status {os.waitstatus_to_exitcode(self.status)}"

    def give_up(self, why: str) -> None:
        """Mark the zygote unusable and remember why (the first cause found is kept).

        Example:
            >>> z = Zygote.__new__(Zygote)
            >>> z.alive, z.lost = True, ""
            >>> z.give_up("it exited"); z.give_up("later news")
            >>> z.alive, z.lost
            (False, 'it exited')
        """
        if self.alive:
            self.alive, self.lost = False, why

    def close(self) -> None:
        """Kill the zygote (its calls are killed by the supervisor) and forget it."""
        self.give_up("closed")
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.sock.close()


def _zygote_main(sock: socket.socket, child_main: Callable[[Sequence[int]], NoReturn]) -> NoReturn:
    """The zygote's loop: fork a child per ``F`` message, report every reaped child; exit with the supervisor."""
    try:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        become_subreaper()
        keep = sock.fileno()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)
        wake_r, wake_w = os.pipe()
        for fd in (wake_r, wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        poller = select.poll()
        poller.register(keep, select.POLLIN)
        poller.register(wake_r, select.POLLIN)
        import gc

        gc.freeze()  # a call's collections skip the zygote's objects: no copy-on-write fault on each of them
        while True:
            for fd, _event in poller.poll():
                if fd == wake_r:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(wake_r, 4096):
                            pass
                    _report_exits(sock)
                    continue
                msg, fds, _flags, _addr = socket.recv_fds(sock, 16, 8)
                if not msg:
                    os._exit(0)
                pid = os.fork()
                if pid == 0:
                    child_main(fds)
                for passed in fds:
                    os.close(passed)
                sock.sendall(b"P" + _PID.pack(pid))
            _report_exits(sock)
    except BaseException as exc:  # its last words go to the supervisor, whose next fault reply carries them
        with contextlib.suppress(BaseException):
            sock.sendall(b"E" + f"{type(exc).__name__}: {exc}"[:400].encode("utf-8", "replace"))
        os._exit(1)


def _report_exits(sock: socket.socket) -> None:
    while True:
        try:
            pid, status, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock.sendall(b"X" + _EXIT.pack(pid, status, ru.ru_utime + ru.ru_stime, float(ru.ru_maxrss)))
