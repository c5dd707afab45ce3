"""Calls of a supervisor kept apart: nothing the code changes reaches a later call (stdlib only).

The kernel lets a process change another's rlimits (``prlimit``), priority (``setpriority``, ``PRIO_USER`` too),
scheduler and CPU affinity on the uid alone; ``PR_SET_DUMPABLE`` only stops the ``ptrace`` family. So the code
never shares a uid, or else a PID namespace, with the supervisor, its zygote and the next calls' spares:

* **a uid of its own** (Docker, and bubblewrap where the host runs as root and maps three uids into the sandbox's
  user namespace): see the second half of this module, :func:`become_code_uid` and :func:`kill_code_uid`;
* **a call jail** (bubblewrap run by an unprivileged user, which can map only its own uid): described here.

On bubblewrap run unprivileged the supervisor, its zygote and a call's code share one uid. So each call's process
moves, before it takes its request, into a **call jail**: new user, PID, IPC and mount namespaces, created
without any privilege (``unshare``; the sandbox's own user namespace allows one more level):

* the code runs as PID 2 of a PID namespace whose init is the jail's own small process. Those syscalls name their
  target by pid, and ``PRIO_USER``/``PRIO_PGRP`` and ``kill(-1)`` reach only processes the caller's namespace can
  see: the supervisor, the zygote and the next calls' spares have no pid in it;
* when the code's process ends, the init ends too, and the kernel kills everything left in the namespace: no
  leftover outlives its call, whatever it does (fork, change pid, sleep), without a scan that could race it;
* SysV IPC and POSIX message queues live in the call's IPC namespace, and ``/dev/shm`` is a fresh tmpfs of
  :data:`SHM_BYTES` in the call's mount namespace (``/dev`` is read-only there, ``/proc`` shows the call's own
  processes): all of it is freed with the call;
* the code then drops every capability it held in its new user namespace, and cannot make another one
  (``user.max_user_namespaces`` is 0 inside).

The code's process is never PID 1, so it keeps the usual signal semantics (``os.abort()`` is -6, a signal it sends
itself is delivered). The call's first process outside (the *keeper*) waits for the init, which reports the code
process's wait status on a pipe, and ends the same way (same exit code or same signal), so the supervisor sees the
call end as before; killing the keeper kills the init (``PR_SET_PDEATHSIG``) and so the whole namespace.

Example:
    >>> CALL_ISOLATION, SHM_BYTES >> 20
    (True, 64)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import struct
from typing import NoReturn

from turnkit.sandbox._zygote import prctl, set_dumpable

CALL_ISOLATION = True
"""Whether calls run in a jail where the sandbox supports it. Test controls run the supervisor's source with this
switched off, to show that each attack on process attributes and leftovers wins without it."""

SHM_BYTES = 64 << 20
"""Size of a call's private ``/dev/shm`` (as Docker's default ``--shm-size``)."""

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 0x4000, 1 << 18
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38

_JAIL_LIBC = ctypes.CDLL(None, use_errno=True)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_NO_CAPS = (_CapHeader(0x20080522, 0), (_CapData * 2)())
"""capset(2) arguments that clear every capability set (version 3: two 32-bit words each); made once, before the
zygote forks, so that no call's process spends time on ctypes types."""


def _jail_check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"call jail: {what}: {os.strerror(err)}")


def _say_why(what: str, exc: BaseException) -> None:
    """Write ``what`` and the exception's type and text to fd 2, where nothing else of the call has run yet."""
    with contextlib.suppress(OSError):
        os.write(2, f"{what}: {type(exc).__name__}: {exc}\n".encode("utf-8", "replace"))


def _jail_write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _jail_mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _jail_check(_JAIL_LIBC.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def enter_jail(done_fd: int) -> None:
    """Move this call's fresh process into a jail; returns in the process that runs the call (PID 2 inside).

    The process that called it stays outside as the keeper, and the namespace's init waits between them; neither
    returns. When the code's process ends, the init kills every other process of the call and then writes
    :data:`JAIL_END` (the code's wait status, CPU seconds, peak RSS) on ``done_fd``, a pipe to the supervisor that
    the code never holds: from that word on nothing of the call can run again. Raises ``OSError`` (before any
    fork) where the kernel refuses the namespaces.
    """
    uid, gid = os.getuid(), os.getgid()
    _jail_check(_JAIL_LIBC.unshare(_CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWNS), "unshare")
    set_dumpable(True)  # a non-dumpable process's /proc/self files are root's: it could not write its own maps
    try:  # (no process of another call can name this one: they all run in namespaces of their own)
        _jail_write("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _jail_write("/proc/self/setgroups", "deny")
        _jail_write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    finally:
        set_dumpable(False)
    alive_r, alive_w = os.pipe()  # the keeper holds the read end: the init sees whether it is still there
    init = os.fork()
    if init:
        os.close(alive_w)
        _jail_keeper(init, alive_r)
    os.close(alive_r)
    _jail_set_up_init(alive_w)
    os.close(alive_w)
    code = os.fork()
    if code:
        _jail_init_loop(code, done_fd)
    os.close(done_fd)
    os.setpgid(0, 0)  # a process group of its own inside (the keeper's is outside, where it has no id)
    _jail_drop_privileges()


JAIL_END = struct.Struct("<idd")
"""What a jail's init reports as the call ends: the code process's wait status, CPU seconds, peak RSS (kB)."""


def _jail_keeper(init: int, alive_r: int) -> NoReturn:
    """Outside the jail: hold it until its init ends (the supervisor kills the keeper to kill the whole call)."""
    for fd in range(8):  # the call's pipes are the code's and the init's, never the keeper's
        if fd != alive_r:
            with contextlib.suppress(OSError):
                os.close(fd)
    while True:
        try:
            os.waitpid(init, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            pass
        os._exit(0)


def _jail_set_up_init(alive_w: int) -> None:
    """PID 1 of the call's namespace: dies with the keeper; private ``/proc``, read-only ``/dev``, own ``/dev/shm``."""
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # the keeper killed (timeout, leftovers): the namespace dies with it
    try:
        poller = select.poll()
        poller.register(alive_w, select.POLLOUT)
        if any(ev & select.POLLERR for _fd, ev in poller.poll(0)):
            os._exit(1)  # the keeper died before PR_SET_PDEATHSIG took: nothing to serve
        _jail_mount(None, "/", None, _MS_REC | _MS_PRIVATE)
        _jail_mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        _jail_mount(None, "/dev", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _jail_mount_flags("/dev"))
        size = f"size={SHM_BYTES},mode=1777,uid={os.getuid()},gid={os.getgid()}"
        _jail_mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, size)
        _jail_write("/proc/sys/user/max_user_namespaces", "0\n")
    except BaseException as exc:  # the jail is not whole: run nothing; the cause goes to the call's stderr, which
        _say_why("the call jail's init could not set up", exc)  # the worker_broken fault quotes
        os._exit(1)


def _jail_init_loop(code: int, done_fd: int) -> NoReturn:
    """PID 1's life: reap every process until the code's own ends, kill the rest, report :data:`JAIL_END`, exit."""
    for fd in range(8):
        if fd != done_fd:
            with contextlib.suppress(OSError):
                os.close(fd)
    while True:  # orphans are reaped as they end (as zombies they would count against RLIMIT_NPROC)
        try:
            pid, status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid == code:
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)  # everything else in the namespace, at once (no fork slips past)
            with contextlib.suppress(OSError):
                os.write(done_fd, JAIL_END.pack(status, usage.ru_utime + usage.ru_stime, float(usage.ru_maxrss)))
            os._exit(0)  # the kernel reaps what it killed as the namespace goes


def _jail_mount_flags(path: str) -> int:
    """The flags a bind remount of ``path`` must keep (the kernel refuses to clear locked ones in a user ns)."""
    flags = os.statvfs(path).f_flag
    keep = 0
    for st, ms in ((os.ST_NOSUID, _MS_NOSUID), (os.ST_NODEV, _MS_NODEV), (os.ST_NOEXEC, _MS_NOEXEC)):
        if flags & st:
            keep |= ms
    return keep


def _jail_drop_privileges() -> None:
    """Give up every capability of the new user namespace, for good (the code's process, before its request).

    Its uid is not 0 in the namespace and ``no_new_privs`` is set, so no ``execve`` can give any back.
    """
    prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _jail_check(_JAIL_LIBC.capset(ctypes.byref(_NO_CAPS[0]), _NO_CAPS[1]), "capset")
    set_dumpable(False)  # as forked: the call's own process turns it back on just before the code runs


def check_jail() -> str:
    """Jail one empty call: ``""`` if it worked, else why not (the supervisor then refuses to start)."""
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(done_r)
        try:
            enter_jail(done_w)
        except BaseException as exc:
            os.write(2, f"{exc}\n".encode("utf-8", "replace"))
            os._exit(1)
        os._exit(0)
    os.close(done_w)
    with open(done_r, "rb") as done:
        end = done.read(JAIL_END.size)
    status = os.waitpid(pid, 0)[1]
    if status != 0:
        return f"the jail's keeper ended with status {os.waitstatus_to_exitcode(status)}"
    if len(end) != JAIL_END.size or JAIL_END.unpack(end)[0] != 0:
        return "the jail's init did not report the end of an empty call"
    return ""


# --- Docker, and bubblewrap on a root host: a uid of the code's own ---------------------------------------
#
# A container's default seccomp profile refuses new namespaces, and a jail per call costs two processes and four
# namespaces; where the sandbox has several uids (Docker; bubblewrap whose user namespace a root host maps), the
# supervisor, the zygote and the spares run as root with only CAP_SETUID, CAP_SETGID and CAP_KILL, and a call's
# process becomes CODE_UID just before it takes its request. The uid check that let the code reach them now
# fails; every process of the code dies at once with ``kill(-1)`` sent with CODE_UID as the effective uid (no fork
# can slip past it: the kernel holds the task list while it signals, and a process with SIGKILL pending cannot
# fork), and the code's IPC objects and ``/dev/shm`` files go with them.

CODE_UID = 65534
"""The uid (``nobody``) a call's code runs as under :func:`become_code_uid`."""

KILLER_UID = 65533
"""The real uid :func:`kill_code_uid` takes for its kill: no process of the sandbox has it."""


_KEPT_CAPS = (1 << 5) | (1 << 6) | (1 << 7)  # CAP_KILL, CAP_SETGID, CAP_SETUID


def close_user_namespaces() -> None:
    """Forbid new user namespaces in this sandbox, then keep only ``CAP_SETUID``, ``CAP_SETGID`` and ``CAP_KILL``.

    For the supervisor of a bubblewrap sandbox with two uids, which starts with ``CAP_SYS_RESOURCE`` for this
    (bwrap's ``--disable-userns`` cannot be had with a user namespace the host maps). Raises ``OSError``.
    """
    _jail_write("/proc/sys/user/max_user_namespaces", "0\n")
    caps = (_CapData * 2)()
    caps[0].effective = caps[0].permitted = _KEPT_CAPS
    _jail_check(_JAIL_LIBC.capset(ctypes.byref(_NO_CAPS[0]), caps), "capset")


def become_code_uid(uid: int = CODE_UID) -> None:
    """Drop from root to ``uid`` for good: no capability is left (the process turns dumpable again itself)."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


@contextlib.contextmanager
def as_code_uid(uid: int = CODE_UID):
    """Run a file operation with the code's uid as the effective one (files it makes are the code's to change)."""
    os.setresgid(-1, uid, -1)
    os.setresuid(-1, uid, -1)
    try:
        yield
    finally:
        os.setresuid(-1, 0, -1)
        os.setresgid(-1, 0, -1)
        set_dumpable(False)  # an effective-uid change resets it


_SYS_SCHED_GETATTR = {"x86_64": 315, "aarch64": 275}.get(os.uname().machine)


def _sched_state() -> tuple[object, ...]:
    """What another process of the same effective uid can change of this one.

    Nice, policy, priority and utilization clamps (``sched_getattr``, where the syscall number is known), and CPU
    affinity.
    """
    attr = ctypes.create_string_buffer(56)  # struct sched_attr, SCHED_ATTR_SIZE_VER1
    if _SYS_SCHED_GETATTR is not None and _JAIL_LIBC.syscall(_SYS_SCHED_GETATTR, 0, attr, 56, 0) == 0:
        sched: object = attr.raw
    else:
        sched = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority, os.getpriority(os.PRIO_PROCESS, 0))
    return sched, frozenset(os.sched_getaffinity(0))


def kill_code_uid(uid: int = CODE_UID, killer: int = KILLER_UID) -> None:
    """Kill every process of ``uid`` and remove its SysV IPC objects and ``/dev/shm`` files, from this root process.

    For the moment of the kill this process takes ``uid`` as its effective uid only, with ``killer`` (a uid no
    other process has) as its real uid and root as its saved one, and sends ``kill(-1, SIGKILL)``: the kernel
    lets it signal every process whose real or saved uid is ``uid``, at once (a process with SIGKILL pending
    cannot fork), and none of them may signal it back (neither its real nor its saved uid is theirs). Nor can
    they renice, reschedule or pin it in that moment, although those check the effective uid: it keeps its
    permitted capabilities (its saved uid is root), and the kernel refuses those changes to a caller whose
    permitted capabilities are not a superset of the target's. Raises ``OSError`` if it cannot change uids.
    """
    os.setresuid(killer, uid, 0)  # effective capabilities go; the saved root uid keeps the way back
    try:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)  # every process of uid, at once (root's are not this sender's)
        _remove_ipc(uid)
        _empty_dir("/dev/shm")
    finally:
        os.setresuid(0, 0, 0)
        set_dumpable(False)  # an effective-uid change resets it


def _remove_ipc(uid: int) -> None:
    """Remove the SysV shared memory, semaphores and message queues owned by ``uid`` (listed in /proc/sysvipc)."""
    libc = _JAIL_LIBC
    ipc_rmid = 0
    for name, remove in (
        ("shm", lambda i: libc.shmctl(i, ipc_rmid, None)),
        ("sem", lambda i: libc.semctl(i, 0, ipc_rmid)),
        ("msg", lambda i: libc.msgctl(i, ipc_rmid, None)),
    ):
        try:
            with open(f"/proc/sysvipc/{name}") as f:
                header, *rows = f.read().splitlines()
        except OSError:
            continue
        cols = header.split()
        for row in rows:
            fields = dict(zip(cols, row.split(), strict=False))
            if fields.get("uid") == str(uid) or fields.get("cuid") == str(uid):
                remove(int(fields[{"shm": "shmid", "sem": "semid", "msg": "msqid"}[name]]))


def _empty_dir(path: str) -> None:
    with contextlib.suppress(OSError):
        for entry in os.scandir(path):
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    import shutil

                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
