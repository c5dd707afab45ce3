"""pexpect sessions: a persistent Python REPL and a bash shell, in both backends."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

from tests.sandbox.conftest import backend_params, processes_named
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
