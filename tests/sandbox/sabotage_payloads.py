"""Payloads of the sabotage suite (tests/sandbox/test_call_isolation.py): code that hurts the calls after it.

Each is the source of a call (or the module level of an answer). None forges a result: they reach for what the
kernel lets a process of the same uid change in another one (rlimits, priority, scheduler, CPU affinity), leave
processes that change pid faster than a scan can follow them, or park memory outside every per-process limit.
"""

from __future__ import annotations

SABOTAGE = r"""
import os, resource
_me = os.getpid()
_pids = {int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != _me} | {os.getppid()}
_pids.discard(0)
for _pid in sorted(_pids):
    for _act in (
        lambda p: resource.prlimit(p, resource.RLIMIT_AS, (48 << 20, 48 << 20)),
        lambda p: resource.prlimit(p, resource.RLIMIT_DATA, (48 << 20, 48 << 20)),
        lambda p: os.setpriority(os.PRIO_PROCESS, p, 19),
        lambda p: os.sched_setscheduler(p, os.SCHED_IDLE, os.sched_param(0)),
        lambda p: os.sched_setaffinity(p, {min(os.sched_getaffinity(0))}),
    ):
        try:
            _act(_pid)
        except (OSError, ValueError):
            pass
for _who in (os.PRIO_USER, os.PRIO_PGRP):
    try:
        os.setpriority(_who, 0, 19)
    except OSError:
        pass
"""
"""Lower the hard memory limits of, renice, idle-schedule and pin every process it can name, and its whole uid."""

HONEST_PROBE = r"""
import json, os, resource
_block = bytearray(96 << 20)  # an honest answer's memory, well inside the sandbox's limit
print(json.dumps({
    "nice": os.getpriority(os.PRIO_PROCESS, 0),
    "sched": os.sched_getscheduler(0),
    "cpus": sorted(os.sched_getaffinity(0)),
    "as": resource.getrlimit(resource.RLIMIT_AS)[1],
    "data": resource.getrlimit(resource.RLIMIT_DATA)[1],
}))
"""
"""What an honest call sees of its own process: the same before and after a saboteur's call, or it was hurt."""

HOPPER = r"""
import os, subprocess, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # beside the starved supervisor, on its CPU
# Each generation of the shell forks the next and exits: a new pid every ~100 us, a heartbeat every 200.
subprocess.Popen(
    ["/bin/sh", "-c", 'h() { i=$((i + 1)); [ $((i % 200)) -ne 0 ] || echo $i > /work/heartbeat; h & exit; }; i=0; h'],
    start_new_session=True,
)
time.sleep(0.3)  # the call ends once the hopper is well under way
"""
"""A leftover that changes pid every few microseconds and writes a heartbeat while it lives."""

HAMMER = (
    r"""
import os, time
if os.fork() == 0:
    os.setsid()
    _end = time.monotonic() + 3
    while time.monotonic() < _end:
"""
    + "".join(f"        {line}\n" for line in SABOTAGE.strip().splitlines())
    + r"""
    os._exit(0)
time.sleep(0.2)
"""
)
"""A leftover that repeats :data:`SABOTAGE` for 3 s, so that it still runs while its call ends and is cleaned up
(where a killer of the code's processes takes the code's effective uid for a moment)."""

RENICE_ALL = r"""
import os, time
if os.fork() == 0:
    os.setsid()
    _me, _end, _uid = os.getpid(), time.monotonic() + 5, str(os.getuid())
    _log = set()
    while time.monotonic() < _end:
        for _pid in [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != _me]:
            _ids = ["", ""]
            try:
                _ids = open(f"/proc/{_pid}/status").read().split("Uid:")[1].split()
                os.setpriority(os.PRIO_PROCESS, _pid, 19)
                _log.add("reniced" if _ids[0] != _uid else "")
            except (OSError, IndexError):
                if _ids[0] != _uid and _ids[1] == _uid:
                    _log.add("saw refused")
        if _log - {""}:
            with open("/work/renice.tmp", "w") as f:
                f.write(" ".join(sorted(_log - {""})))
            os.rename("/work/renice.tmp", "/work/renice.log")
    os._exit(0)
time.sleep(0.2)
"""
"""A leftover that renices every process it can name for 5 s, over and over, and logs to ``renice.log`` whether
it saw a process of another real uid with its effective uid (``saw refused``) or reniced one (``reniced``)."""

SHM_FILL = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
seg = libc.shmget(0, 128 << 20, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
if seg >= 0:
    addr = libc.shmat(seg, None, 0)
    if addr not in (None, ctypes.c_void_p(-1).value):
        ctypes.memset(addr, 1, 128 << 20)
written = 0
for part in range(5):  # files of 60 MB: RLIMIT_FSIZE bounds each file, not their sum
    try:
        with open(f"/dev/shm/parked{part}", "wb") as f:
            for _ in range(60):
                f.write(b"x" * (1 << 20))
                written += 1
    except OSError:
        break
try:
    open("/dev/parked", "w").write("x")
    dev = "writable"
except OSError:
    dev = "refused"
print(seg >= 0, written, dev)
"""
"""Park a 128 MB SysV segment and up to 300 MB in /dev/shm (outside RLIMIT_AS), and try to write /dev; prints
whether the segment was made, the MB written to /dev/shm, and whether /dev took a file."""

SHM_LOOK = r"""
import os
with open("/proc/sysvipc/shm") as f:
    segments = len(f.read().splitlines()) - 1
print(segments, sorted(os.listdir("/dev/shm")))
"""
"""What the next call finds of the parked memory: segments it can see and the files in /dev/shm."""
