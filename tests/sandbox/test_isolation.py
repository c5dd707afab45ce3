"""Security and robustness properties, one per test, for every backend (parametrised by the ``sb`` fixture)."""

from __future__ import annotations

import os
import resource
import socket
import time
import uuid
from pathlib import Path

import pytest

from tests.sandbox.conftest import SECRET, runnable_processes_named

SLACK_S = 30.0  # a hang guard, not a speed test: without the kill these would run for a minute or forever


def test_runs_code_and_feeds_stdin(sb):
    r = sb.run(["cat"], stdin=b"hello", timeout=10)
    assert (r.exit_code, r.stdout) == (0, "hello")


def test_loopback_service_of_host_unreachable(sb):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    try:
        code = f"import socket; s = socket.socket(); s.settimeout(3); print(s.connect_ex(('127.0.0.1', {port})))"
        r = sb.run_python(code, timeout=10)
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()
    assert r.ok and r.stdout.strip() != "0"


def test_public_ip_unreachable(sb):
    # In an empty network namespace connect() fails at once (no route); nothing leaves the machine.
    code = "import socket; s = socket.socket(); s.settimeout(3); print(s.connect_ex(('1.1.1.1', 53)))"
    r = sb.run_python(code, timeout=10)
    assert r.ok and int(r.stdout) != 0


def test_no_network_interface_but_loopback(sb):
    r = sb.run_python("import socket; print(sorted(n for _, n in socket.if_nameindex()))", timeout=10)
    assert r.stdout.strip() in ("['lo']", "[]")


@pytest.mark.parametrize("target", ["/etc/turnkit-probe", "/usr/turnkit-probe", "/turnkit-probe"])
def test_writes_outside_workdir_blocked(sb, target):
    r = sb.run_python(f"open({target!r}, 'w').write('x')", timeout=10)
    assert r.exit_code == 1 and ("Read-only" in r.stderr or "Permission" in r.stderr)
    assert not Path(target).exists()


def test_private_tmp_does_not_touch_host_tmp(sb):
    name = f"turnkit-probe-{uuid.uuid4().hex}"
    r = sb.run(f"echo x > /tmp/{name} && cat /tmp/{name}", timeout=10)
    assert r.stdout == "x\n" and not Path("/tmp", name).exists()


def test_host_environment_not_inherited(sb):
    assert os.environ["TURNKIT_TEST_SECRET"] == SECRET
    r = sb.run("env; cat /proc/self/environ; cat /proc/1/environ 2>/dev/null || echo 'no access'", timeout=10)
    assert r.ok and "TURNKIT_TEST_SECRET" not in r.stdout and SECRET not in r.stdout


def test_host_secret_files_unreadable(sb):
    secret_file = Path.home() / f".tk-hostfile-{uuid.uuid4().hex}"
    secret_file.write_text(SECRET)
    secret_file.chmod(0o600)
    try:
        code = (
            f"import os\nfor p in [{str(secret_file)!r}, '/root/.bashrc', '/etc/shadow']:\n"
            "    try:\n        print(open(p).read())\n    except OSError as e:\n        print('denied', p)\n"
            "for d in ['/root', '/home']:\n    try:\n        print(os.listdir(d))\n"
            "    except OSError:\n        print('denied', d)\n"
        )
        r = sb.run_python(code, timeout=10)
    finally:
        secret_file.unlink()
    assert r.ok and SECRET not in r.stdout and r.stdout.count("denied /") == 5


def test_docker_socket_not_reachable(sb):
    r = sb.run_python(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('/var/run/docker.sock')\n"
        "    print('connected')\nexcept OSError as e:\n    print('refused')",
        timeout=10,
    )
    assert r.stdout.strip() == "refused"


def test_fork_bomb_contained(sb):
    start = time.monotonic()
    r = sb.run_python("import os\nwhile True:\n    os.fork()", timeout=5)
    assert not r.ok and time.monotonic() - start < 5 + SLACK_S
    assert sb.run("echo alive", timeout=10).stdout == "alive\n"


def test_memory_bomb_reported(sb):
    r = sb.run_python("blocks = []\nwhile True:\n    blocks.append(bytearray(32 << 20))", timeout=20)
    assert r.oom_killed and not r.ok and "MemoryError" in r.stderr


def test_infinite_loop_killed_within_timeout(sb):
    start = time.monotonic()
    r = sb.run_python("while True:\n    pass", timeout=1)
    assert r.timed_out and time.monotonic() - start < 1 + SLACK_S


def test_sleeping_process_tree_killed_at_wall_timeout(sb):
    start = time.monotonic()
    r = sb.run("sleep 60 & sleep 60", timeout=1)
    assert r.timed_out and r.exit_code == -9 and time.monotonic() - start < 1 + SLACK_S


def test_output_flood_truncated_without_host_memory(sb):
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(100):\n    sys.stdout.buffer.write(chunk)"
    r = sb.run_python(code, timeout=30)
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    assert r.truncated and len(r.stdout) == sb.limits.output_bytes and grown_kb < 64 * 1024


def test_orphaned_daemon_killed_after_call(sb):
    name = f"tko{uuid.uuid4().hex[:10]}"  # a command name (comm) unique to this test
    code = (
        f"import os\nos.symlink('/bin/sleep', {name!r})\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        f"        os.execv({name!r}, [{name!r}, '300'])\n    os._exit(0)\n"
        "import time\ntime.sleep(0.3)\nprint('parent done')"
    )
    r = sb.run_python(code, timeout=10)
    assert r.stdout == "parent done\n" and runnable_processes_named(name) == []


def test_zombies_reaped_after_call(sb):
    name = f"tkz{uuid.uuid4().hex[:10]}"
    code = (
        f"import os, time\nos.symlink('/bin/true', {name!r})\n"
        f"for _ in range(3):\n    if os.fork() == 0:\n        os.execv({name!r}, [{name!r}])\n"
        "time.sleep(0.3)\nprint(open('/proc/self/status').read().count('State'))"
    )
    r = sb.run_python(code, timeout=10)
    assert r.ok and runnable_processes_named(name) == []


def test_nul_byte_in_code_is_a_result(sb):
    r = sb.run_python("print(1)\x00", timeout=10)
    assert r.exit_code == 1 and "null bytes" in r.stderr


def test_invalid_utf8_in_code_is_a_result(sb):
    r = sb.run_python(b"print('\xff\xfe')", timeout=10)
    assert r.exit_code == 1 and "SyntaxError" in r.stderr


def test_nul_and_invalid_utf8_in_output_survive(sb):
    r = sb.run_python("import sys\nsys.stdout.buffer.write(b'a\\x00b\\xffc')", timeout=10)
    assert r.ok and r.stdout == "a\x00b\ufffdc"


def test_nul_byte_in_argv_is_a_result(sb):
    r = sb.run(["echo", "a\x00b"], timeout=10)
    assert r.exit_code == 127 and "null byte" in r.stderr


def test_segfault_is_a_result(sb):
    r = sb.run_python("import ctypes\nctypes.string_at(0)", timeout=10)
    assert r.exit_code == -11


def test_abort_is_a_result(sb):
    r = sb.run_python("import os\nos.abort()", timeout=10)
    assert r.exit_code == -6


def test_killing_its_parent_is_the_calls_own_result(sb):
    # The parent runs as root beside the code's own uid (Docker; bubblewrap on a root host: the kill is refused) or
    # is a jail's init (a signal from inside its namespace is ignored). Either way the call's own result, never a
    # fault, and later calls work.
    r = sb.run_python("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('after')", timeout=10)
    assert r.fault == "", r
    assert (r.ok and r.stdout == "after\n") or (r.exit_code == 1 and "PermissionError" in r.stderr), r
    assert sb.run_python("print('recovered')", timeout=10).stdout == "recovered\n"


def test_files_roundtrip_through_workdir(sb):
    sb.write_file("sub/in.txt", "data\x00\n")
    r = sb.run("tr a A < sub/in.txt > sub/out.txt", timeout=10)
    assert r.ok and sb.read_file("/work/sub/out.txt") == b"dAtA\x00\n"


def test_fresh_globals_per_call(sb):
    sb.run_python("leak = 1", timeout=10)
    r = sb.run_python("print('leak' in globals())", timeout=10)
    assert r.stdout == "False\n"


def test_no_state_in_memory_survives_a_call(sb):
    """Each call runs in a fresh process: module attributes, sys.modules, builtins and the warm-up code of the
    persistent worker's pre-forked child are as the supervisor has them, whatever the previous call changed."""
    sb.run_python(
        "import json, sys, builtins\njson.LEAK = 1\nsys.modules['tk_leak'] = json\nbuiltins.tk_leak = 1\n"
        "import os\nos.environ['TK_LEAK'] = '1'",
        timeout=10,
    )
    r = sb.run_python(
        "import json, sys, builtins, os\n"
        "print(hasattr(json, 'LEAK'), 'tk_leak' in sys.modules, hasattr(builtins, 'tk_leak'), 'TK_LEAK' in os.environ,"
        " sorted(k for k in globals() if not k.startswith('__')))",
        timeout=10,
    )
    assert r.stdout == "False False False False ['builtins', 'json', 'os', 'sys']\n", r
