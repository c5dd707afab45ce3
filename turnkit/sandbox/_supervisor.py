"""The in-sandbox supervisor: standard library only, run as ``python3 -I -c <this source> MODE``.

The host never runs untrusted code itself. It starts this script inside the sandbox (bubblewrap or a
container) and talks to it in length-prefixed frames over stdin/stdout. For every execution the supervisor
forks a child that sets its rlimits, gets a new session, and runs the command (``execvp``) or the Python
code (``exec`` in fresh globals). The supervisor enforces the wall timeout and the output cap, and, as a
child subreaper, kills every process the execution left behind (orphans, daemons, zombies) before it
replies.

Modes:
    ``once``: reply ``ready``, serve one request, exit (fresh-process backends, ``docker exec``).
    ``worker``: reply ``ready``, then serve requests until stdin closes (the persistent local worker).
    ``fg LIMITS_JSON ARGV...``: set rlimits, become the terminal's foreground process group and exec ARGV
    (interactive pexpect sessions).

In worker mode the supervisor never forks a call itself: a zygote forked before the first request does (see
:mod:`turnkit.sandbox._zygote`), so a call inherits no earlier request or reply. The supervisor is non-dumpable,
strips the host's request id before a call sees the request, and echoes it in the reply.

Frames are :mod:`turnkit.sandbox._frames`'s. Replies stay untrusted on the host side: the host checks each one
against its request's id, and a reply out of turn means the worker is replaced.

Example:
    >>> _serve({"op": "ping"}, [], None)[0]["ok"]
    True
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from turnkit.sandbox._calljail import (
    CALL_ISOLATION,
    CODE_UID,
    JAIL_END,
    as_code_uid,
    check_jail,
    close_user_namespaces,
    kill_code_uid,
)
from turnkit.sandbox._child import (
    _CODE_UID,
    _INHERITED_SIGNALS,
    _JAILED,
    _OWN_BEFORE_CALLS,
    _PYTHON_IGNORED_SIGNALS,
    _child_main,
    _count_own_processes,
    _default_signals,
    _set_child_limits,
    _spare_main,
)
from turnkit.sandbox._frames import Frame, encode_frame, read_frame, write_all
from turnkit.sandbox._streams import Capture, EndReport, Feeder
from turnkit.sandbox._zygote import TRUST_BOUNDARY, Zygote, become_subreaper, set_dumpable

_zygote: Zygote | None = None
"""The fork server of a serving supervisor (worker mode): calls are forked from it, never from the supervisor."""


def _kill_code(uid: int) -> bool:
    """Kill every process of the code's uid (:func:`kill_code_uid`); whether that worked."""
    try:
        kill_code_uid(uid)
    except OSError as exc:
        sys.stderr.write(f"turnkit supervisor: cannot kill the code's processes ({exc})\n")
        return False
    return True


# --- process tree bookkeeping ------------------------------------------------------------------------


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return found


def _children(pid: int) -> list[int] | None:
    """The children of a single-threaded process, from ``/proc/PID/task/TID/children``.

    ``None`` where that is not a reliable answer: the kernel does not list children, or the process has other
    threads (a child can move between them as they exit). A process that is gone or exiting has none left: they
    went, or go, to the subreaper.
    """
    if not _PROC_LISTS_CHILDREN:
        return None
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        if len(tasks) != 1:
            return None
        with open(f"/proc/{pid}/task/{tasks[0]}/children", "rb") as f:
            return [int(x) for x in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []
    except OSError:
        return None


_PROC_LISTS_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def _collect_exits() -> dict[int, tuple[int, float, float]]:
    """Every exit since the last look, ``pid -> (wait status, CPU s, peak RSS kB)``.

    Both sources: the supervisor's own children (direct forks; orphans once the zygote is gone) and what the
    zygote reaped.
    """
    found: dict[int, tuple[int, float, float]] = {}
    while True:
        try:
            pid, status, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if _zygote is not None and pid == _zygote.pid:
            _zygote.status = status
            _zygote.poll()  # its last words, if it had time for them, or its exit status name the cause
            continue
        found[pid] = (status, ru.ru_utime + ru.ru_stime, float(ru.ru_maxrss))
    if _zygote is not None:
        _zygote.poll()
        for pid, status, cpu_s, rss_kb in _zygote.exits:
            found[pid] = (status, cpu_s, rss_kb)
        _zygote.exits.clear()
    for pid in found:
        _DYING.discard(pid)
    return found


def _reap_dying() -> int:
    """Reap the killed children of earlier calls that are gone; return how many are still being torn down."""
    _collect_exits()
    return len(_DYING)


def _trusted_pids() -> set[int]:
    """The zygote and the queued spare: the processes below the supervisor that no call may take down with it."""
    if _zygote is None:
        return set()
    keep = {_zygote.pid}
    for spare in _SPARES:
        try:
            keep.add(spare.pid)
        except OSError:  # never reported: the zygote is unusable, and so is the worker
            _zygote.give_up("it never reported a spare it was asked for")
    return keep


def _has_children() -> bool:
    if _zygote is not None:
        return True  # the zygote is one; the calls' processes are below it
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


_DYING: set[int] = set()  # killed children whose end was checked, not reaped yet (no process of theirs is left)


class _Reaper:
    """Reaps children and remembers the main child's wait status, CPU seconds and peak RSS."""

    def __init__(self, child: int, direct: bool) -> None:
        self.child = child
        self.direct = direct
        """The supervisor forked the child itself (else the zygote did, and reports its exit)."""
        self.status: int | None = None
        self.cpu_s = 0.0
        self.max_rss_kb = 0.0
        self.reported: dict[str, float] | None = None
        """What the child said on its status pipe as it ended (exit code, CPU seconds, peak RSS)."""
        self.ended_by_us = False
        """The supervisor killed the call (timeout, flood, host gone, no word from the jail's init)."""
        self.final: tuple[int, float, float] | None = None
        """What a jail's init said once the code's process ended and the rest of the call was killed (its wait
        status, CPU seconds, peak RSS): trusted, the code never holds that pipe."""

    def reap(self, block: bool = False) -> None:
        """Reap every exited child; with ``block``, first wait for the main child if it runs and did not report."""
        deadline = time.monotonic() + 30.0
        while True:
            if block and self.direct and self.status is None and self.reported is None and self.final is None:
                with contextlib.suppress(ChildProcessError):
                    _pid, status, ru = os.wait4(self.child, 0)
                    _DYING.discard(self.child)
                    self.status, self.cpu_s, self.max_rss_kb = status, ru.ru_utime + ru.ru_stime, float(ru.ru_maxrss)
            found = _collect_exits()
            if self.child in found:
                self.status, self.cpu_s, self.max_rss_kb = found[self.child]
            waiting = block and self.status is None and self.reported is None and self.final is None
            if not waiting or time.monotonic() > deadline or (_zygote is not None and not _zygote.alive):
                return
            select.select([_zygote] if _zygote is not None else [], [], [], 0.002)

    def kill_all(self) -> None:
        """SIGKILL every descendant until none is left (a fork bomb needs a few rounds).

        As a subreaper the supervisor inherits every orphan, so with no child left there is no descendant: the
        common case (the code left nothing running) costs one ``waitid`` instead of a ``/proc`` scan. A child
        that reported its end and has no descendant is killed but not waited for (its teardown is reaped later),
        so the reply does not wait for the kernel to free a forked interpreter's memory. Once SIGKILL is sent it
        can no longer fork, so its children list and then the supervisor's (orphans) hold every process left:
        two small reads instead of a ``/proc`` scan.
        """
        me = os.getpid()
        keep = _trusted_pids()
        skip = self.child if self.reported is not None and self.status is None else None
        if skip is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(skip, signal.SIGKILL)  # it reported the end: no more of its code may run
            self.reap()
            left, mine = _children(skip), _children(me)
            below = _children(_zygote.pid) if _zygote is not None else []
            done = _DYING | {skip} | keep
            if left == [] and mine is not None and below is not None and set(mine) | set(below) <= done:
                self.dying()
                return
        for _ in range(500):
            self.reap()
            if not _has_children():
                return
            pids = [pid for pid in _descendants(me) if pid not in keep]
            if set(pids) <= _DYING | {skip}:  # only killed children are left: their teardown is reaped later
                self.dying()
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.001)

    def read_final(self, fd: int, wait_s: float = 0.0) -> None:
        """Take the jail init's end word from ``fd`` if it comes within ``wait_s`` (see :attr:`final`)."""
        if self.final is None and select.select([fd], [], [], wait_s)[0]:
            with contextlib.suppress(BlockingIOError, OSError):
                data = os.read(fd, JAIL_END.size)
                if len(data) == JAIL_END.size:
                    self.final = JAIL_END.unpack(data)

    def end_jail(self) -> None:
        """Kill a jailed call's keeper: its init dies with it, and the kernel kills every process of the call."""
        self.reap()  # a keeper killed from outside already has its status: that end is not ours
        if self.status is None:
            self.ended_by_us = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.child, signal.SIGKILL)

    def await_jails(self, wait_s: float = 10.0) -> bool:
        """Wait until no process of this or an earlier call is left; ``False`` if one is still there after ``wait_s``.

        Below the fork server (the zygote, or the supervisor itself in ``once`` mode) only the queued spares may
        remain: a jailed call's keeper, and its init once the keeper is gone, are reaped when the call's namespace
        is empty. Killing them again only hurries the kernel; it cannot miss a process (none is outside them).
        """
        parent = _zygote.pid if _zygote is not None else os.getpid()
        deadline = time.monotonic() + wait_s
        while True:
            self.reap()
            keep = _trusted_pids()
            kids = _children(parent)
            left = [pid for pid in (kids if kids is not None else _descendants(parent)) if pid not in keep]
            if not left:
                return True
            if time.monotonic() > deadline:
                return False
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            select.select([_zygote] if _zygote is not None and _zygote.alive else [], [], [], 0.001)

    def alone_killed(self) -> bool:
        """Once every process of the code has SIGKILL: whether the call's own process was its only one.

        Then it is remembered as dying (its teardown is reaped later, and counted against the next call's process
        limit), and the reply does not wait for the kernel to free it, as :meth:`kill_all` does.
        """
        keep = _trusted_pids()
        left, mine = _children(self.child), _children(os.getpid())
        below = _children(_zygote.pid) if _zygote is not None else []
        done = _DYING | {self.child} | keep
        if left == [] and mine is not None and below is not None and set(mine) | set(below) <= done:
            self.dying()
            return True
        return False

    def dying(self) -> None:
        """Remember a killed main child that is not reaped yet (a zombie keeps its PID, so it cannot be reused)."""
        if self.status is None:
            _DYING.add(self.child)


class _Spare:
    """A child forked and warmed while the supervisor waits for the next request (worker mode).

    Forking a warm interpreter and the copy-on-write faults of its first compile and ``exec`` cost more than the
    rest of a call; a spare pays them between calls. It runs no request until :meth:`hand_over` sends it one on
    fd 3, is forked by the zygote (never by the supervisor, which has held other calls' data), is asked for only
    after the previous call's processes are gone (see :data:`_SPARES`), and serves exactly one call.
    """

    def __init__(self, zygote: Zygote) -> None:
        in_r, self.in_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        req_r, self.req_w = os.pipe()
        self.end_r, end_w = os.pipe()
        theirs = [in_r, out_w, err_w, req_r, end_w]
        self.done_r: int | None = None
        if _JAILED[0]:  # the jail's init reports the call's end on it (the code never holds it)
            self.done_r, done_w = os.pipe()
            theirs.append(done_w)
        try:
            asked = zygote.spawn(theirs)
        finally:
            for fd in theirs:
                os.close(fd)
        if not asked:
            for fd in (self.in_w, self.out_r, self.err_r, self.req_w, self.end_r, self.done_r):
                if fd is not None:
                    os.close(fd)
            raise OSError("the zygote is gone")
        self._zygote = zygote
        self._pid: int | None = None
        os.set_blocking(self.end_r, False)

    @property
    def pid(self) -> int:
        """The spare's pid, as the zygote reports it (it forks while the supervisor reads the next request).

        Raises:
            OSError: The zygote did not report it (gone or wedged).
        """
        if self._pid is None:
            self._pid = self._zygote.spawned_pid()
            if self._pid is None:
                raise OSError("the zygote did not report the spare it forked")
        return self._pid

    def hand_over(self, req: dict[str, Any], program: list[bytes]) -> bool:
        """Send the spare its request; ``False`` if it is gone (then it has been killed and closed)."""
        try:
            os.kill(self.pid, signal.SIGCONT)  # the previous call's code may have stopped it
            write_all(self.req_w, encode_frame(req, program))
            return True
        except OSError:
            self.discard()
            return False
        finally:
            with contextlib.suppress(OSError):
                os.close(self.req_w)

    def discard(self) -> None:
        """Kill an unused spare (the zygote reaps it) and close its pipes."""
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
            _DYING.add(self.pid)
        for fd in (self.in_w, self.out_r, self.err_r, self.end_r, self.done_r):
            with contextlib.suppress(OSError, TypeError):
                os.close(fd)  # type: ignore[arg-type]


_SPARES: list[_Spare] = []
"""Spares of the next calls, oldest first. Two are asked for after each call's leftovers are killed, so the next
call's spare was forked a whole call earlier (warm by the time its request comes) and the one queued beside a
call has long been reported by the zygote when that call's leftovers are killed around it. A queued spare is
non-dumpable and holds no request while another call's code runs."""


class _DirectFork:
    """The supervisor forking a jailed call itself, as a zygote would (``once`` mode: it serves one request)."""

    alive = True
    lost = ""

    def __init__(self) -> None:
        self._pid: int | None = None

    def spawn(self, fds: Sequence[int]) -> bool:
        self._pid = os.fork()
        if self._pid == 0:
            _spare_main(fds)
        return True

    def spawned_pid(self) -> int | None:
        return self._pid


def _direct_spare() -> _Spare | None:
    try:
        return _Spare(_DirectFork())  # type: ignore[arg-type]
    except OSError:
        return None


def _next_spare() -> _Spare | None:
    if _SPARES:
        return _SPARES.pop(0)
    _fill_spares(1)
    return _SPARES.pop(0) if _SPARES else None


def _fill_spares(count: int = 2) -> None:
    """Ask the zygote for spares until ``count`` are queued (fewer when it cannot give them)."""
    while _zygote is not None and _zygote.alive and len(_SPARES) < count:
        try:
            _SPARES.append(_Spare(_zygote))
        except OSError:  # out of processes or fds, or the zygote is gone: the next call says so
            return


def _execute(req: dict[str, Any], blobs: list[bytes], watch_fd: int | None = None, tries: int = 3) -> Frame:
    """Fork (or hand a zygote's spare the request), supervise and reap one execution; return the reply.

    With a zygote the supervisor never forks a call itself: when no spare can be had, the reply is a
    ``worker_broken`` fault and the host replaces the worker.
    """
    op = req.get("op")
    program = blobs[:2] if op == "batch" else blobs[:1] if op == "python" else []
    stdin_data = blobs[len(program)] if len(blobs) > len(program) else b""
    timeout = float(req.get("timeout", 10))
    cap = int(req.get("cap", 1 << 20))
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    old_wakeup = signal.set_wakeup_fd(wake_w)
    old_handler = signal.signal(signal.SIGCHLD, lambda *_: None)
    start = time.monotonic()
    end_r: int | None = None
    done_r: int | None = None
    ahead = int(_zygote is not None and _zygote.alive)  # the next call's spare waits beside this call
    req = dict(req, others=_reap_dying() + ahead)
    isolated = _JAILED[0] or _CODE_UID[0] is not None
    spare = _next_spare() if _zygote is not None else _direct_spare() if isolated else None
    handed = spare is not None and spare.hand_over(req, program)
    try:
        pid = spare.pid if handed and spare is not None else 0
    except OSError:  # the zygote never said which child got the request: only a new worker is safe
        handed = False
        if spare is not None:
            spare.discard()
        if _zygote is not None:
            _zygote.give_up("it never reported the spare that got the request")
    if handed and spare is not None:
        in_w, out_r, err_r, end_r, done_r = spare.in_w, spare.out_r, spare.err_r, spare.end_r, spare.done_r
    elif _zygote is not None:
        signal.set_wakeup_fd(old_wakeup)
        signal.signal(signal.SIGCHLD, old_handler)
        for fd in (wake_r, wake_w):
            os.close(fd)
        if tries > 1 and _zygote.alive:
            return _execute(req, blobs, watch_fd, tries - 1)
        why = _zygote.lost or "it forked no spare that lived to take the request"
        return {"fault": "worker_broken", "detail": f"the zygote could not fork the call: {why}"}, []
    else:
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _child_main(req, program, (in_r, out_w, err_w))
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    os.set_blocking(in_w, False)
    reaper = _Reaper(pid, direct=end_r is None)
    streams = {out_r: Capture(out_r, cap), err_r: Capture(err_r, cap)}
    poller = select.poll()
    for fd in (out_r, err_r, wake_r):
        poller.register(fd, select.POLLIN)
    end = EndReport(end_r)
    if end_r is not None:
        poller.register(end_r, select.POLLIN)
    if done_r is not None:
        poller.register(done_r, select.POLLIN)
    if watch_fd is not None:
        poller.register(watch_fd, select.POLLIN)
    zygote_fd = _zygote.fileno() if _zygote is not None and _zygote.alive else None
    if zygote_fd is not None:
        poller.register(zygote_fd, select.POLLIN)  # the zygote reports the exits of the call's processes
    feeder = Feeder(in_w, stdin_data)
    if feeder.fd is not None:
        poller.register(in_w, select.POLLOUT)
    deadline = start + timeout
    timed_out = host_gone = False
    while (
        reaper.status is None
        and reaper.reported is None
        and reaper.final is None
        and not host_gone
        and not _flooded(streams)
    ):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for fd, _ev in poller.poll(remaining * 1000):
            if fd in (wake_r, zygote_fd):
                if fd == wake_r:
                    _drain_wakeups(wake_r)
                reaper.reap()
                if zygote_fd is not None and (_zygote is None or not _zygote.alive):
                    poller.unregister(zygote_fd)
                    zygote_fd = None
            elif fd == done_r:
                reaper.read_final(done_r)
                poller.unregister(done_r)
            elif fd == end_r:
                reaper.reported = end.read()
                if end.closed:
                    poller.unregister(end_r)
            elif fd == watch_fd:
                host_gone = not os.read(watch_fd, 1)
            elif fd == in_w:
                if not feeder.write():
                    poller.unregister(in_w)
            elif fd in streams and not streams[fd].read():
                poller.unregister(fd)
    # Output already written stays readable after the writers die; leftovers (orphans, daemons) go now.
    jail_gone = True
    if isolated:
        if _CODE_UID[0] is not None:
            jail_gone = _kill_code(_CODE_UID[0]) and (reaper.alone_killed() or reaper.await_jails())
        else:
            if done_r is not None and not timed_out and not host_gone and not _flooded(streams):
                reaper.read_final(done_r, wait_s=1.0)  # a reported end: the init's word follows at once
            if reaper.final is None:  # timed out, flooded, or the init never spoke: the namespace must go
                reaper.end_jail()
                jail_gone = reaper.await_jails()
    else:
        reaper.kill_all()
    _fill_spares()  # nothing of this call is left: the zygote forks the next calls' children from here on
    reaper.reap(block=True)
    for cap_stream in streams.values():
        cap_stream.drain()
    feeder.close()
    if end_r is not None and not end.started:
        with contextlib.suppress(BlockingIOError, OSError):
            end.read()  # the "S" may have come with the child's exit
    ended = reaper.status is not None or reaper.final is not None
    spare_died = end_r is not None and not end.started and ended and not timed_out
    end.close()
    if done_r is not None:
        os.close(done_r)
    for fd in (wake_r, wake_w):
        os.close(fd)
    signal.set_wakeup_fd(old_wakeup)
    signal.signal(signal.SIGCHLD, old_handler)
    if not jail_gone:  # nothing the code does outlives the kernel's teardown of its namespace: the worker is sick
        if _zygote is not None:
            _zygote.give_up("a call's processes were still there 10 s after it ended")
        return {"fault": "worker_broken", "detail": "a call's processes did not end with it"}, []
    if _JAILED[0] and end.started and reaper.final is None and reaper.reported is None and not timed_out:
        if reaper.status is not None and os.WIFSIGNALED(reaper.status) and not reaper.ended_by_us:
            # the code cannot reach the keeper: someone outside killed it
            return {"fault": "worker_broken", "detail": "a call's keeper was killed from outside"}, []
        reaper.status = signal.SIGKILL  # its init died without a word (the code can starve it): killed, its doing
    if spare_died and tries > 1:  # killed before it read the request: nothing ran, ask the zygote for another
        return _execute(req, blobs, watch_fd, tries - 1)
    if spare_died and isolated:  # the code cannot reach a spare: it died of the worker's fault
        why = bytes(streams[err_r].buf[-300:]).decode("utf-8", "replace").strip().splitlines()[-1:]
        detail = "the call's process ended before it took its request" + (f": {why[0]}" if why else "")
        return {"fault": "worker_broken", "detail": detail}, []
    return (
        _reply_header(req, reaper, time.monotonic() - start, timed_out, streams[out_r], streams[err_r], host_gone),
        [bytes(streams[out_r].buf), bytes(streams[err_r].buf)],
    )


def _flooded(streams: dict[int, Capture]) -> bool:
    return any(c.truncated for c in streams.values())


def _drain_wakeups(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _reply_header(
    req: dict[str, Any],
    reaper: _Reaper,
    duration: float,
    timed_out: bool,
    out: Capture,
    err: Capture,
    host_gone: bool,
) -> dict[str, Any]:
    status, reported = reaper.status, reaper.reported
    if reported is not None:  # a spare's own report, sent as it ended (its wait status is our SIGKILL after it)
        exit_code, cpu_s, max_rss_kb = int(reported["exit_code"]), reported["cpu_s"], reported["max_rss_kb"]
    elif reaper.final is not None:  # the jail's init: how the code's process ended
        exit_code = os.waitstatus_to_exitcode(reaper.final[0])
        cpu_s, max_rss_kb = reaper.final[1], reaper.final[2]
    else:
        exit_code = os.waitstatus_to_exitcode(status) if status is not None else -signal.SIGKILL
        cpu_s, max_rss_kb = reaper.cpu_s, reaper.max_rss_kb
    cpu_limit = req.get("cpu")
    if exit_code == -signal.SIGXCPU or (cpu_limit and exit_code == -signal.SIGKILL and cpu_s >= cpu_limit - 0.05):
        timed_out = True
    truncated = out.truncated or err.truncated
    oom = exit_code != 0 and not timed_out and b"MemoryError" in bytes(err.buf[-4096:])
    return {
        "exit_code": exit_code,
        "timed_out": timed_out,
        "truncated": truncated,
        "oom_killed": oom,
        "duration_s": duration,
        "cpu_s": cpu_s,
        "max_rss_kb": max_rss_kb,
        "host_gone": host_gone,
    }


# --- file operations (used where the host cannot reach the work directory, e.g. a container tmpfs) ---


def _file_op(req: dict[str, Any], blobs: list[bytes]) -> Frame:
    path = req.get("path", "")
    try:
        if req["op"] == "write":
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            with open(path, "wb") as f:
                f.write(blobs[0])
            return {"ok": True}, []
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            limit = int(req.get("max_bytes", 1 << 26))
            if size > limit:
                return {"ok": False, "error": f"file is {size} bytes, over the {limit}-byte limit"}, []
            return {"ok": True}, [f.read(limit + 1)[:limit]]
    except OSError as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}, []


_EXECUTIONS = ("exec", "python", "batch")


def _serve(req: dict[str, Any], blobs: list[bytes], watch_fd: int | None) -> Frame:
    op = req.get("op")
    if op in _EXECUTIONS:
        return _execute(req, blobs, watch_fd)
    if op in ("write", "read"):
        if _CODE_UID[0] is not None:
            with as_code_uid(_CODE_UID[0]):
                return _file_op(req, blobs)
        return _file_op(req, blobs)
    if op == "ping":
        return {"ok": True, "pid": os.getpid()}, []
    return {"ok": False, "error": f"unknown op {op!r}"}, []


def _serve_loop(once: bool, max_bytes: int) -> None:
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    own = _count_own_processes()  # before the supervisor is non-dumpable: then /proc shows it as root's
    if TRUST_BOUNDARY and not set_dumpable(False):  # the boundary does not hold: serve nothing (fails the start)
        sys.stderr.write("turnkit supervisor: prctl(PR_SET_DUMPABLE, 0) failed, so the code could read it\n")
        sys.stderr.flush()
        os._exit(70)
    become_subreaper()
    why = check_jail() if _JAILED[0] and not once else ""  # a fresh supervisor's call says why instead
    if _CODE_UID[0] is not None and os.geteuid() != 0:
        why = "calls run as a uid of their own only where the supervisor starts as root"
    if why:
        sys.stderr.write(f"turnkit supervisor: cannot isolate calls ({why}); see docs/sandbox.md\n")
        sys.stderr.flush()
        os._exit(70)
    global _zygote
    if not once:
        import traceback  # noqa: F401  (warm: forked children print tracebacks without importing it)

        if TRUST_BOUNDARY:
            _zygote = Zygote(_spare_main)  # before the first request: it never holds one
            own += 1
    _OWN_BEFORE_CALLS.append(own)
    write_all(proto_out, encode_frame({"ready": True, "pid": os.getpid()}))
    while True:
        _fill_spares()  # the first calls' spares, or those a call could not ask for
        try:
            req, blobs = read_frame(proto_in, max_bytes)
        except EOFError:
            return
        request_id = req.pop("id", None)  # the host's; the call's own process never sees it
        header, out = _serve(req, blobs, proto_in)
        if request_id is not None:
            header = dict(header, id=request_id)
        try:
            write_all(proto_out, encode_frame(header, out))
        except BrokenPipeError:
            return
        if once:
            return


def _foreground_exec(limits_json: str, argv: list[str]) -> NoReturn:
    limits = json.loads(limits_json)
    _set_child_limits(limits, None)
    become_subreaper()  # kept across exec: what a session's call leaves behind, in any session, stays its descendant
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.setpgid(0, 0)
        os.tcsetpgrp(0, os.getpgrp())
    except OSError:
        pass  # already a session leader in the foreground (docker exec -t)
    signal.signal(signal.SIGTTOU, old)
    _default_signals(_PYTHON_IGNORED_SIGNALS)
    os.execvp(argv[0], argv)


def main(argv: list[str]) -> None:
    """Entry point inside the sandbox."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    _default_signals(_INHERITED_SIGNALS)
    mode = argv[1] if len(argv) > 1 else "once"
    if mode == "fg":
        _foreground_exec(argv[2], argv[3:])
    max_bytes = int(argv[2]) if len(argv) > 2 else 1 << 28
    _JAILED[0] = CALL_ISOLATION and "jail" in argv[3:]
    _CODE_UID[0] = CODE_UID if CALL_ISOLATION and "uid" in argv[3:] else None
    if "nouserns" in argv[3:]:  # bubblewrap with two uids: its --disable-userns is not to be had there
        try:
            close_user_namespaces()
        except OSError as exc:
            sys.stderr.write(f"turnkit supervisor: cannot close user namespaces ({exc}); see docs/sandbox.md\n")
            sys.stderr.flush()
            os._exit(70)
    _serve_loop(mode == "once", max_bytes)


if __name__ == "__main__":
    main(sys.argv)
