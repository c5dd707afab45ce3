"""pexpect sessions: a persistent Python REPL and a bash shell, in both backends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from tests.sandbox.conftest import backend_params, processes_named, wait_until
from turnkit.errors import SandboxError
from turnkit.sandbox import PythonSession, ShellSession
from turnkit.sandbox._bwrap import bwrap_path


@pytest.fixture(params=backend_params(["local", "docker"]))
def host(request, shared_sandboxes):
    return shared_sandboxes(request.param)


@pytest.fixture
def py(host):
    with PythonSession(host, timeout=10) as session:
        yield session


@pytest.fixture
def sh(host):
    with ShellSession(host, timeout=10) as session:
        yield session


def test_python_state_persists_between_calls(py):
    py.run("import math\nradius = 2")
    assert py.run("round(math.pi * radius ** 2, 3)").stdout == "12.566\n"


def test_python_exception_is_a_result_with_traceback(py):
    r = py.run("def f():\n    raise KeyError('k')\nf()")
    assert r.exit_code == 1 and r.stdout.rstrip().endswith("KeyError: 'k'")


def test_python_timeout_interrupts_and_keeps_state(py):
    # the loop never ends by itself: a result at all proves the interrupt, and no restart proves it kept state
    py.run("kept = 41")
    r = py.run("while True:\n    pass", timeout=1)
    assert r.timed_out and r.exit_code == 130 and r.stderr == ""
    assert py.run("kept + 1").stdout == "42\n" and py.restarts == 0


def test_python_timeout_keeps_output_printed_before_it(py):
    r = py.run("import time\nprint('partial', flush=True)\ntime.sleep(30)", timeout=1)
    assert r.timed_out and r.stdout == "partial\n"


def test_python_crash_restarts_on_next_call(py):
    py.run("x = 1")
    crash = py.run("import os\nos.kill(os.getpid(), 11)")
    after = py.run("'x' in dir()")
    assert crash.exit_code == -11 and after.stdout == "False\n" and py.restarts == 1


def test_python_output_is_capped(host):
    with PythonSession(host, output_bytes=10_000) as py:
        r = py.run("import sys\nwhile True:\n    sys.stdout.write('y' * 4096)", timeout=10)
        assert r.truncated and len(r.stdout) == 10_000 and py.run("1 + 1").stdout == "2\n"


def test_python_long_code_and_binary_output(py):
    code = f"s = '{'q' * 9000}'\nprint(len(s))\nimport sys\n_ = sys.stdout.buffer.write(b'\\x00\\xff\\n')"
    r = py.run(code)
    assert r.ok and r.stdout == "9000\n\x00\ufffd\n"


def test_python_explicit_interrupt_from_another_thread(py):
    import threading

    timer = threading.Timer(0.5, py.interrupt)
    timer.start()
    r = py.run("import time\ntime.sleep(30)", timeout=20)
    timer.join()
    assert r.exit_code == 130 and "KeyboardInterrupt" in r.stdout and not r.timed_out


def test_shell_directory_and_variables_persist(sh):
    sh.run("mkdir -p /tmp/tk-d && cd /tmp/tk-d && export GREETING=hi")
    assert sh.run('pwd; echo "$GREETING"').stdout == "/tmp/tk-d\nhi\n"


def test_shell_exit_status_is_reported(sh):
    assert sh.run("(exit 7)").exit_code == 7


def test_shell_timeout_interrupts_foreground_job(sh):
    r = sh.run("sleep 60", timeout=1)
    assert r.timed_out and sh.run("echo back").stdout == "back\n" and sh.restarts == 0


def test_shell_programs_die_of_a_closed_pipe(sh):
    # Python ignores SIGPIPE; the programs a session runs must not inherit that (`yes` would report EPIPE)
    r = sh.run("yes | head -n 1")
    assert r.exit_code == 0 and r.stdout == "y\n"


@pytest.mark.parametrize("session", [PythonSession, ShellSession])
def test_the_setup_line_fits_a_terminal_line(session):
    # a tty in canonical mode cuts input lines at 4095 bytes: a longer setup line never starts the session
    line = session._exec_line(None, session._setup_source(None).replace("PROMPT", "'[tk-0123456789ab]> '"))
    assert len(line.encode()) < 4095


_HOSTILE_HOST = r"""
import signal
from turnkit.sandbox import LocalSandbox, PythonSession, ShellSession
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGALRM})
signal.signal(signal.SIGINT, signal.SIG_IGN)
ALARM = (
    "import signal\ndef ring(*_):\n    raise TimeoutError\n"
    "signal.signal(signal.SIGALRM, ring)\nsignal.alarm(1)\nwhile True:\n    pass"
)
with LocalSandbox() as sb, PythonSession(sb) as py, ShellSession(sb) as sh:
    py.run("kept = 41")
    interrupted = py.run("while True:\n    pass", timeout=1).exit_code
    alarm = py.run(ALARM, timeout=20).stdout.strip().splitlines()[-1]
    job = sh.run("sleep 60", timeout=1).exit_code
    print(interrupted, py.run("kept + 1").stdout.strip(), alarm, job, py.restarts + sh.restarts)
"""


def test_sessions_start_from_default_signals_whatever_the_host_had():
    # a host process that blocks and ignores SIGINT (libraries and threads do) must not pass that on:
    # Ctrl-C still interrupts the REPL and the shell's job, and alarm() still fires, without restarts
    if bwrap_path() is None:
        pytest.skip("bubblewrap is not installed")
    out = subprocess.run([sys.executable, "-c", _HOSTILE_HOST], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["130", "42", "TimeoutError", "130", "0"]


def test_shell_exit_is_a_result_then_restart(sh):
    r = sh.run("exit 3")
    assert r.exit_code == 3 and sh.run("echo fresh").stdout == "fresh\n" and sh.restarts == 1


def test_closed_session_refuses_calls(host):
    session = ShellSession(host)
    session.close()
    session.close()
    with pytest.raises(SandboxError, match="closed"):
        session.run("true")


def test_closing_a_session_ends_its_programs_and_jobs(host):
    name = f"tkj{uuid.uuid4().hex[:10]}"
    session = ShellSession(host)
    session.run(f"ln -s /bin/sleep /tmp/{name} && /tmp/{name} 600 &")
    deadline = time.monotonic() + 10
    while not processes_named(name) and time.monotonic() < deadline:
        time.sleep(0.1)  # the background job starts asynchronously
    running = processes_named(name)
    session.close()
    deadline = time.monotonic() + 10
    while processes_named(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert running and processes_named(name) == []


# --- what a call leaves running: gone when stop_background returns, whatever session it moved to ----------------------
#
# The program is a child subreaper (turnkit.sandbox._supervisor), so a daemon that double-forks or calls setsid() stays
# its descendant, and stop_background kills every descendant. Each test starts a `sleep` under a unique name, sees it
# running (in the session and from the host), then checks from the next call that its pid is gone.

_PY_DAEMONS = {
    "new-session": "p = subprocess.Popen([NAME, '300'], start_new_session=True)\npid = p.pid",
    "double-fork-setsid": (
        "r, w = os.pipe()\nif os.fork() == 0:\n    os.setsid()\n    child = os.fork()\n    if child == 0:\n"
        "        os.execv(NAME, [NAME, '300'])\n    os.write(w, str(child).encode())\n    os._exit(0)\n"
        "os.close(w)\npid = int(os.read(r, 32))"
    ),
}
_PY_RUNNING = (  # waits until the daemon runs as NAME (exec done), then prints its pid
    "import os, subprocess, time\nNAME = '/tmp/{name}'\nos.symlink('/bin/sleep', NAME)\n{start}\n"
    "end = time.monotonic() + 5\n"
    "while open(f'/proc/{{pid}}/comm').read().strip() != '{name}' and time.monotonic() < end:\n"
    "    time.sleep(0.02)\nprint(pid)"
)
_PY_STATE = (  # the pid's state letter once it is no longer running, or after 5 s; 'gone' when it has no /proc entry
    "import time\ndef state(pid):\n    try:\n        with open(f'/proc/{{pid}}/stat') as f:\n"
    "            return f.read().rsplit(') ', 1)[1][0]\n    except OSError:\n        return 'gone'\n"
    "end = time.monotonic() + 5\nwhile state({pid}) not in ('gone', 'Z') and time.monotonic() < end:\n"
    "    time.sleep(0.05)\nprint(state({pid}))"
)
# setsid(1) forks when it leads a process group (a background job does); where the image has no setsid, a python3
# stand-in does the same
_SH_SETSID = (
    'command -v setsid >/dev/null || setsid() {{ [ "$1" = -f ] && shift; python3 -c '
    "'import os, sys; os.fork() and os._exit(0); os.setsid(); os.execv(sys.argv[1], sys.argv[1:])' \"$@\"; }}"
)
_SH_DAEMONS = {
    "setsid-job": "setsid /tmp/{name} 300 >/dev/null 2>&1 </dev/null &",
    "setsid-fork": "setsid -f /tmp/{name} 300 >/dev/null 2>&1 </dev/null",
    "subshell-setsid": "(setsid /tmp/{name} 300 >/dev/null 2>&1 </dev/null &)",
}
_SH_RUNNING = (
    _SH_SETSID + "\nln -s /bin/sleep /tmp/{name}\n{start}\npid=\n"
    "for ((i = 0; i < 250 && ! pid; i++)); do\n  for d in /proc/[0-9]*; do\n"
    '    read -r c 2>/dev/null < $d/comm && [ "$c" = {name} ] && pid=${{d#/proc/}}\n  done\n'
    '  [ -n "$pid" ] || sleep 0.02\ndone\necho $pid'
)
_SH_STATE = (
    "state() {{ local s; read -r s 2>/dev/null < /proc/$1/stat || {{ echo gone; return; }}; s=${{s##*) }}; "
    "echo ${{s:0:1}}; }}\n"
    "for ((i = 0; i < 100; i++)); do case $(state {pid}) in gone|Z) break ;; esac; sleep 0.05; done; state {pid}"
)


def _running_on_host(name: str) -> bool:
    return any(state != "Z" for _, state in processes_named(name))


@pytest.mark.parametrize("start", list(_PY_DAEMONS))
def test_python_daemon_that_leaves_the_session_is_stopped(py, start):
    name = f"tkd{uuid.uuid4().hex[:10]}"
    py.run("kept = 41")
    r = py.run(_PY_RUNNING.format(name=name, start=_PY_DAEMONS[start]))
    pid = int(r.stdout)
    assert r.exit_code == 0 and _running_on_host(name)
    assert py.stop_background() == 1  # the daemon (the double fork's middle process exited by itself)
    if start == "new-session":  # the code holds its Popen: the exit status is still its to read
        assert py.run("p.poll()").stdout == "-9\n"
    assert py.run(_PY_STATE.format(pid=pid)).stdout == "gone\n"
    assert wait_until(lambda: not _running_on_host(name))
    assert py.run("kept + 1").stdout == "42\n" and py.restarts == 0


@pytest.mark.parametrize("start", list(_SH_DAEMONS))
def test_shell_daemon_that_leaves_the_session_is_stopped(sh, start):
    name = f"tkd{uuid.uuid4().hex[:10]}"
    sh.run("KEPT=41")
    r = sh.run(_SH_RUNNING.format(name=name, start=_SH_DAEMONS[start].format(name=name)))
    pid = int(r.stdout.split()[-1])
    assert _running_on_host(name)
    assert sh.stop_background() >= 1
    assert sh.run(_SH_STATE.format(pid=pid)).stdout in ("gone\n", "Z\n")  # Z: killed, not yet waited for by bash
    assert wait_until(lambda: not _running_on_host(name))
    assert sh.run("echo $((KEPT + 1))").stdout == "42\n" and sh.restarts == 0


def test_python_daemon_of_a_timed_out_call_is_stopped(py):
    name = f"tkd{uuid.uuid4().hex[:10]}"
    source = _PY_RUNNING.format(name=name, start=_PY_DAEMONS["double-fork-setsid"])
    r = py.run(source.replace("print(pid)", "print(pid, flush=True)\nwhile True:\n    pass"), timeout=3)
    pid = int(r.stdout.split()[0])
    assert r.timed_out and _running_on_host(name)
    assert py.stop_background() == 1 and py.restarts == 0
    assert py.run(_PY_STATE.format(pid=pid)).stdout == "gone\n"
    assert wait_until(lambda: not _running_on_host(name))


def test_python_sibling_made_by_clone_parent_is_stopped(py):
    # clone(CLONE_PARENT) in the REPL's own process makes a sibling, not a descendant: it is still in the program's
    # session, and the reaper kills that too
    if os.uname().machine not in ("x86_64", "aarch64"):
        pytest.skip("the clone syscall number is known here for x86_64 and aarch64 only")
    name = f"tkd{uuid.uuid4().hex[:10]}"
    start = (
        "import ctypes\nnr = {'x86_64': 56, 'aarch64': 220}[os.uname().machine]\n"
        "pid = ctypes.CDLL(None, use_errno=True).syscall(nr, 0x8000 | 17, 0, 0, 0, 0)  # CLONE_PARENT | SIGCHLD\n"
        "if pid == 0:\n    os.execv(NAME, [NAME, '300'])"
    )
    r = py.run(_PY_RUNNING.format(name=name, start=start))
    pid = int(r.stdout)
    assert r.exit_code == 0 and _running_on_host(name)
    assert py.run(f"open('/proc/{pid}/stat').read().rsplit(') ', 1)[1].split()[1] != str(os.getpid())").stdout == (
        "True\n"
    )
    assert py.stop_background() == 1
    assert py.run(_PY_STATE.format(pid=pid)).stdout in ("gone\n", "Z\n")  # its parent, not the REPL, waits for it
    assert wait_until(lambda: not _running_on_host(name))


_PY_UNTIL_EXITED = (  # waits (10 s at most) until the pids in `pids` have exited (zombies, or waited for already)
    "\nimport time\ndef _exited(p):\n    try:\n        with open(f'/proc/{p}/stat') as f:\n"
    "            return f.read().rsplit(') ', 1)[1][0] == 'Z'\n    except OSError:\n        return True\n"
    "end = time.monotonic() + 10\nwhile time.monotonic() < end and not all(map(_exited, pids)):\n    time.sleep(0.02)"
)


def test_python_keeps_the_exit_status_of_children_it_holds(py):
    # Zombies of what the code started through subprocess and still holds are left for it to wait for, as before
    py.run(
        "import subprocess\nfailed = subprocess.Popen(['sh', '-c', 'exit 3'])\npids = [failed.pid]" + _PY_UNTIL_EXITED
    )
    assert py.stop_background() == 0
    assert py.run("failed.wait()").stdout == "3\n"


def test_python_reaps_orphans_that_exit_by_themselves(py):
    # An orphan comes to the program (the subreaper); one that exits before the call ends must not stay a zombie
    # (a zombie holds a pid of the sandbox's process limit until its parent waits for it)
    orphans = (
        "import subprocess\nsh = ['sh', '-c', 'sleep 0.05 >/dev/null & echo $!; sleep 0.05 >/dev/null & echo $!']\n"
        "pids = subprocess.run(sh, capture_output=True, text=True).stdout.split()" + _PY_UNTIL_EXITED
    )
    for _ in range(3):
        assert py.run(orphans).exit_code == 0
        assert py.stop_background() == 0
    zombies = (
        "import os\nkids = [p for p in os.listdir('/proc') if p.isdigit() and open(f'/proc/{p}/stat').read()"
        ".rsplit(') ', 1)[1].split()[1] == str(os.getpid())]\nlen(kids)"
    )
    assert py.run(zombies).stdout == "0\n"


@pytest.mark.parametrize("end", ["restart", "close"])
def test_restart_and_close_end_the_daemons_of_the_program(host, end):
    name = f"tkd{uuid.uuid4().hex[:10]}"
    py = PythonSession(host, timeout=10)
    try:
        py.run(_PY_RUNNING.format(name=name, start=_PY_DAEMONS["double-fork-setsid"]))
        assert _running_on_host(name)
        getattr(py, end)()
        assert wait_until(lambda: not _running_on_host(name))
        if end == "restart":
            assert py.run("1 + 1").stdout == "2\n" and py.restarts == 1
    finally:
        py.close()


@pytest.mark.parametrize(
    "host",
    [
        "local",
        pytest.param("docker", marks=pytest.mark.docker),
    ],
    indirect=True,
)
def test_daemons_die_with_a_crashed_program(py, host):
    # Locally the program's pid namespace ends with it, and everything in it. In Docker its daemons were adopted
    # by the container's init, and end_interactive kills what init adopted.
    name = f"tkd{uuid.uuid4().hex[:10]}"
    source = _PY_RUNNING.format(name=name, start=_PY_DAEMONS["new-session"])
    py.run(source)
    assert _running_on_host(name)
    assert py.run("os.abort()").exit_code == -6
    assert wait_until(lambda: not _running_on_host(name))
    assert py.run("1 + 1").stdout == "2\n" and py.restarts == 1
