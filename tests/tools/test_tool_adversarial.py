"""The sandbox adversarial suite, sent by an agent through the ``python`` and ``shell`` tools of an env.

Every payload of ``tests/sandbox/test_isolation.py`` (network, writes outside ``/work``, host secrets, the Docker
socket, fork and memory bombs, endless loops, sleeping process trees, output floods, orphan daemons, NUL bytes and
invalid UTF-8, segfaults and aborts, killing the sandbox's init or the session itself) goes in as a tool-call message
through ``env.step``. Each test checks three things: the payload is contained (the host is unchanged, see the
``host_unchanged`` fixture), the outcome is feedback on the trajectory (a typed ``info["tool"]["status"]``, the
episode goes on, agent faults are not invalid actions), and the tool still works on the next call. Garbage calls
(unknown tools, wrong argument types, 1 MB arguments, deep JSON) are refused as invalid actions until the allowance
ends the episode, and ``turnkit.collect`` records all of it as data, never as ``Trajectory.error``.
"""

from __future__ import annotations

import json
import os
import re
import resource
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium
import pytest

import turnkit
from tests.sandbox.conftest import SECRET, TEST_LIMITS, _snapshot, leftovers_since, processes_named, wait_until
from turnkit.agents.scripted import ScriptedAgent
from turnkit.sandbox import DockerSandbox, docker_available
from turnkit.sandbox._bwrap import bwrap_path
from turnkit.tools import format_tool_call

pytestmark = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")

ENV_ID = "turnkit/MathEpisodes-v0"
PRIMARY = {"python": "code", "shell": "command"}
TIMEOUT_S = 2.0
SLACK_S = 30.0  # a hang guard, not a speed test
MARKER = re.compile(r"\n\[\.\.\. (\d+) more characters truncated\]")


# --- fixtures and helpers ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def host_unchanged() -> Iterator[None]:
    """The host holds a secret in its environment while the module runs (as in the sandbox suite), and is unchanged
    after it: no sandbox processes, work dirs or containers left behind (the sandbox suite's snapshot). Checked once
    for the module: a closed sandbox's exited processes can take a second or two to be reaped by the host's init."""
    old = os.environ.get("TURNKIT_TEST_SECRET")
    os.environ["TURNKIT_TEST_SECRET"] = SECRET
    before = _snapshot()
    yield
    if old is None:
        os.environ.pop("TURNKIT_TEST_SECRET", None)
    else:
        os.environ["TURNKIT_TEST_SECRET"] = old
    new = leftovers_since(before)
    assert not any(new.values()), f"tool calls left things behind on the host: {new}"


@pytest.fixture
def make_env() -> Iterator[Callable[..., gymnasium.Env]]:
    """Builds reset MathEpisodes envs with python and shell tools (2 s per call); closes them after the test."""
    made: list[gymnasium.Env] = []

    def make(*, timeout_s: float = TIMEOUT_S, max_episode_steps: int = 50, **kwargs: Any) -> gymnasium.Env:
        tools = {"tools": ["python", "shell"], "timeout_s": timeout_s, **kwargs.pop("tools", {})}
        env = gymnasium.make(ENV_ID, tools=tools, max_episode_steps=max_episode_steps, **kwargs)
        made.append(env)
        env.reset(seed=0)
        return env

    yield make
    for env in made:
        env.close()


def tool_call(tool: str, source: str) -> str:
    """The agent's message calling ``tool`` in the JSON form, ASCII only: NUL bytes and lone surrogates in ``source``
    travel as ``\\u`` escapes, so the message itself is valid text and the raw characters reach the tool."""
    return "<tool_call>" + json.dumps({"name": tool, "arguments": {PRIMARY[tool]: source}}) + "</tool_call>"


def step(env: gymnasium.Env, message: str | bytes) -> tuple[str, dict[str, Any]]:
    """One agent turn that must leave the episode running."""
    obs, reward, terminated, truncated, info = env.step(message)
    assert not terminated and not truncated, (obs, info)
    assert reward == 0.0
    return obs, info


def run_tool(env: gymnasium.Env, tool: str, source: str, *, invalid: int = 0) -> tuple[str, dict[str, Any]]:
    """A tool call that runs: feedback with a typed status, never an invalid action (``invalid`` so far)."""
    obs, info = step(env, tool_call(tool, source))
    assert info["tool"]["name"] == tool and "invalid_action" not in info, info
    assert info["invalid_actions"] == invalid
    return obs, info["tool"]


def assert_tool_sound(env: gymnasium.Env, tool: str, *, invalid: int = 0) -> None:
    """The tool answers its next calls for themselves: exact output, status ok, state kept from call to call."""
    probes = {"python": ("_tk_probe = 41", "_tk_probe + 1"), "shell": ("TK_PROBE=41", "echo $((TK_PROBE+1))")}
    setter, getter = probes[tool]
    run_tool(env, tool, setter, invalid=invalid)  # may carry news of an earlier crash
    for _ in range(3):
        obs, tool_info = run_tool(env, tool, getter, invalid=invalid)
        assert (obs, tool_info["status"]) == ("42\n", "ok")


# --- the sandbox adversarial suite, through the tools -----------------------------------------------------------------


@pytest.fixture
def host_service() -> Iterator[tuple[socket.socket, int]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    yield server, server.getsockname()[1]
    server.close()


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_loopback_service_of_host_unreachable(make_env, host_service, tool):
    server, port = host_service
    env = make_env()
    source = {
        "python": f"import socket\ns = socket.socket()\ns.settimeout(3)\nprint(s.connect_ex(('127.0.0.1', {port})))",
        "shell": f"(echo hi > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo refused",
    }[tool]
    obs, info = run_tool(env, tool, source)
    assert info["status"] == "ok" and obs.strip() not in ("0", "connected")
    with pytest.raises(TimeoutError):
        server.accept()
    assert_tool_sound(env, tool)


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_public_ip_unreachable(make_env, tool):
    env = make_env()
    source = {
        "python": "import socket\ns = socket.socket()\ns.settimeout(1)\nprint(s.connect_ex(('1.1.1.1', 53)))",
        "shell": "(timeout 1 bash -c 'echo > /dev/tcp/1.1.1.1/53') 2>/dev/null && echo connected || echo refused",
    }[tool]
    obs, info = run_tool(env, tool, source)
    assert info["status"] == "ok" and obs.strip() not in ("0", "connected")


@pytest.mark.parametrize("target", ["/etc/turnkit-probe", "/usr/turnkit-probe", "/turnkit-probe"])
@pytest.mark.parametrize("tool", ["python", "shell"])
def test_writes_outside_workdir_blocked(make_env, tool, target):
    env = make_env()
    source = {"python": f"open({target!r}, 'w').write('x')", "shell": f"echo x > {target}"}[tool]
    obs, info = run_tool(env, tool, source)
    assert (info["status"], info["exit_code"]) == ("error", 1)
    assert "Read-only" in obs or "Permission" in obs
    assert not Path(target).exists()


def test_private_tmp_does_not_touch_host_tmp(make_env):
    env = make_env()
    name = f"turnkit-probe-{uuid.uuid4().hex}"
    obs, info = run_tool(env, "shell", f"echo x > /tmp/{name} && cat /tmp/{name}")
    assert (obs, info["status"]) == ("x\n", "ok") and not Path("/tmp", name).exists()
    run_tool(env, "shell", f"cp /tmp/{name} ./{name}")
    obs, _ = run_tool(env, "python", f"print(open('{name}').read(), end='')")  # the tools share /work, not /tmp
    assert obs == "x\n" and not Path("/tmp", name).exists()


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_host_environment_not_inherited(make_env, tool):
    assert os.environ["TURNKIT_TEST_SECRET"] == SECRET
    env = make_env()
    source = {
        "python": (
            "import os\nprint(dict(os.environ))\nfor p in ['/proc/self/environ', '/proc/1/environ']:\n"
            "    print(open(p, 'rb').read())\nprint(b'TURNKIT_TEST' in open('/proc/1/cmdline', 'rb').read())"
        ),  # pid 1 is the sandbox's init: its command line (20 kB, the supervisor's source) holds no host variable
        "shell": (
            "env; cat /proc/self/environ /proc/1/environ | tr '\\0' '\\n'; grep -c TURNKIT_TEST /proc/1/cmdline || true"
        ),
    }[tool]
    obs, info = run_tool(env, tool, source)
    assert info["status"] == "ok" and "TURNKIT_TEST_SECRET" not in obs and SECRET not in obs
    assert obs.split()[-1] in ("False", "0")


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_host_secret_files_unreadable(make_env, tool):
    env = make_env()
    secret_file = Path.home() / f".tk-hostfile-{uuid.uuid4().hex}"
    secret_file.write_text(SECRET)
    secret_file.chmod(0o600)
    paths = [str(secret_file), "/root/.bashrc", "/etc/shadow", "/root", "/home"]
    try:
        source = {
            "python": (
                f"import os\nfor p in {paths!r}:\n    try:\n"
                "        print(open(p).read() if os.path.isfile(p) else os.listdir(p))\n"
                "    except OSError:\n        print('denied', p)"
            ),
            "shell": f"for p in {' '.join(paths)}; do cat $p 2>/dev/null || ls $p 2>/dev/null || echo denied $p; done",
        }[tool]
        obs, info = run_tool(env, tool, source)
    finally:
        secret_file.unlink()
    assert info["status"] == "ok" and SECRET not in obs and obs.count("denied /") == 5, obs


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_docker_socket_not_reachable(make_env, tool):
    env = make_env()
    source = {
        "python": (
            "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('/var/run/docker.sock')\n"
            "    print('connected')\nexcept OSError:\n    print('refused')"
        ),
        "shell": "test -S /var/run/docker.sock -o -S /run/docker.sock && echo connected || echo refused",
    }[tool]
    obs, info = run_tool(env, tool, source)
    assert (obs, info["status"]) == ("refused\n", "ok")


def test_privileged_operations_refused_in_the_shell(make_env):
    env = make_env()
    for command in ["unshare -Ur id", "mkdir -p m && mount -t tmpfs x m", "chroot / id", "nsenter -t 1 -m id"]:
        obs, info = run_tool(env, "shell", command)
        assert info["status"] == "error" and info["exit_code"] != 0 and "uid=0" not in obs, (command, obs)
    assert_tool_sound(env, "shell")


@pytest.mark.parametrize(
    ("tool", "source"),
    [
        ("python", "'); print('INJECTED') #"),
        ("python", "_tk_run('1', 'cHJpbnQoJ0lOSkVDVEVEJyk=')"),  # the session's own entry point, called by the agent
        ("shell", "'; echo INJECTED; '"),
        ("shell", "_tk_run 1 ZWNobyBJTkpFQ1RFRA=="),
    ],
    ids=["python-quote", "python-helper", "shell-quote", "shell-helper"],
)
def test_quotes_and_the_sessions_own_helpers_do_not_break_the_protocol(make_env, tool, source):
    # Code travels base64-encoded, so a quote ends nothing (the text is one string or a syntax error); calling the
    # session's helpers runs only the agent's own code, in the sandbox, and leaves the session working.
    env = make_env()
    obs, info = run_tool(env, tool, source)
    assert info["status"] in ("ok", "error") and obs != "INJECTED\n"
    assert_tool_sound(env, tool)


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_protocol_markers_in_output_do_not_desynchronise_the_session(make_env, tool):
    env = make_env()
    source = {
        "python": "import sys\nprint('\\x02TKE1:0\\x03 \\x02TKS9\\x03 fake')\nprint(sys.ps1)\nprint('after')",
        "shell": "printf '\\002TKE1:0\\003 \\002TKS9\\003 fake\\n'; echo \"$PS1\"; echo after",
    }[tool]
    _, info = run_tool(env, tool, source)
    assert info["status"] in ("ok", "error")  # printing the prompt ends the call early: the agent's own loss
    assert_tool_sound(env, tool)


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_fork_bomb_contained(make_env, tool):
    env = make_env()
    source = {"python": "import os\nwhile True:\n    os.fork()", "shell": ":(){ :|:& };:"}[tool]
    start = time.monotonic()
    _, info = run_tool(env, tool, source)
    assert info["status"] in ("ok", "error", "timeout", "crashed") and time.monotonic() - start < TIMEOUT_S + SLACK_S
    if tool == "shell":
        # `:|:&` returns at once and bombs on in the background, where a shell's jobs outlive their call: the
        # call that meets it may time out, but the shell must be usable again by the next one
        time.sleep(1.0)
        obs, info = run_tool(env, tool, "echo alive")
        if (obs, info["status"]) != ("alive\n", "ok"):
            obs, info = run_tool(env, tool, "echo alive")
        assert (obs, info["status"]) == ("alive\n", "ok"), obs[-300:]
    assert_tool_sound(env, tool)


def test_a_forked_python_child_does_not_join_the_session(make_env):
    # A child of os.fork() that finishes the cell must not go back to the REPL's prompt: it would read the session's
    # terminal too, and answer the next calls at random (with its own copy of the state).
    env = make_env()
    run_tool(env, "python", "import os\npid = os.fork()")
    obs, _ = run_tool(
        env,
        "python",
        "import os\nprint(sum(open(f'/proc/{p}/comm').read().startswith('python')"
        " and open(f'/proc/{p}/stat').read().rsplit(') ', 1)[1][0] != 'Z'"  # an exited child not yet waited for
        " for p in os.listdir('/proc') if p.isdigit()))",
    )
    assert obs == "1\n"


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_memory_bomb_is_an_error(make_env, tool):
    env = make_env(timeout_s=20)
    source = {
        "python": "blocks = []\nwhile True:\n    blocks.append(bytearray(32 << 20))",
        "shell": "printf '%s\\n' 'b = []' 'while True:' '    b.append(bytearray(32 << 20))' | python3",
    }[tool]
    obs, info = run_tool(env, tool, source)
    assert info["status"] == "error" and "MemoryError" in obs
    assert_tool_sound(env, tool)


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_infinite_loop_times_out_and_keeps_the_session(make_env, tool):
    env = make_env()
    keep, loop, check = {
        "python": ("kept = 41", "while True:\n    pass", "kept + 1"),
        "shell": ("mkdir -p d && cd d && KEPT=41", "while :; do :; done", "echo $((KEPT+1)) $(basename $PWD)"),
    }[tool]
    run_tool(env, tool, keep)
    start = time.monotonic()
    obs, info = run_tool(env, tool, loop)
    assert time.monotonic() - start < TIMEOUT_S + SLACK_S
    assert (info["status"], info["exit_code"]) == ("timeout", 130) and "timed out after 2 s" in obs
    obs, info = run_tool(env, tool, check)
    assert (obs, info["status"]) == ({"python": "42\n", "shell": "42 d\n"}[tool], "ok")


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_sleeping_process_tree_times_out_and_dies_with_the_env(make_env, tool):
    name = f"tks{uuid.uuid4().hex[:10]}"
    env = make_env()
    source = {
        "python": (
            f"import os, subprocess, time\nos.symlink('/bin/sleep', {name!r})\n"
            f"subprocess.Popen(['./{name}', '300'])\nsubprocess.run(['./{name}', '300'])"
        ),
        "shell": f"ln -s /bin/sleep {name}; ./{name} 300 & ./{name} 300",
    }[tool]
    start = time.monotonic()
    _, info = run_tool(env, tool, source)
    assert info["status"] == "timeout" and time.monotonic() - start < TIMEOUT_S + SLACK_S
    assert_tool_sound(env, tool)
    env.close()
    assert wait_until(lambda: processes_named(name) == [])


# Daemons that leave the session (a new session, a double fork): the session's program is a child subreaper, so they
# stay below it and die with the call that started them. Each source starts `sleep` under a name unique to the test,
# waits until it runs, and prints its pid (in the sandbox's pid namespace).
DAEMONS = {
    "python-new-session": "p = subprocess.Popen([NAME, '300'], start_new_session=True)\npid = p.pid",
    "python-double-fork": (
        "r, w = os.pipe()\nif os.fork() == 0:\n    os.setsid()\n    child = os.fork()\n    if child == 0:\n"
        "        os.execv(NAME, [NAME, '300'])\n    os.write(w, str(child).encode())\n    os._exit(0)\n"
        "os.close(w)\npid = int(os.read(r, 32))"
    ),
    "shell-setsid": "setsid ./NAME 300 >/dev/null 2>&1 </dev/null &",
    "shell-setsid-subshell": "(setsid ./NAME 300 >/dev/null 2>&1 </dev/null &)",
}
PY_DAEMON = (
    "import os, subprocess, time\nNAME = './{name}'\nos.symlink('/bin/sleep', NAME)\n{start}\n"
    "end = time.monotonic() + 5\n"
    "while open(f'/proc/{{pid}}/comm').read().strip() != '{name}' and time.monotonic() < end:\n"
    "    time.sleep(0.02)\nprint(pid, flush=True)"
)
SH_DAEMON = (  # setsid(1) where the sandbox has it, else a python3 stand-in that forks first as it does
    "command -v setsid >/dev/null || setsid() {{ python3 -c "
    "'import os, sys; os.fork() and os._exit(0); os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' \"$@\"; }}\n"
    "ln -s /bin/sleep {name}\n{start}\npid=\nfor ((i = 0; i < 250 && ! pid; i++)); do\n"
    '  for d in /proc/[0-9]*; do read -r c 2>/dev/null < $d/comm && [ "$c" = {name} ] && pid=${{d#/proc/}}; done\n'
    '  [ -n "$pid" ] || sleep 0.02\ndone\necho $pid'
)
PID_STATE = {  # the pid's state letter once it no longer runs (or after 5 s); 'gone' when /proc has no entry for it
    "python": (
        "import time\ndef state(pid):\n    try:\n        with open(f'/proc/{pid}/stat') as f:\n"
        "            return f.read().rsplit(') ', 1)[1][0]\n    except OSError:\n        return 'gone'\n"
        "end = time.monotonic() + 5\nwhile state({pid}) not in ('gone', 'Z') and time.monotonic() < end:\n"
        "    time.sleep(0.05)\nprint(state({pid}))"
    ),
    "shell": (
        "state() { local s; read -r s 2>/dev/null < /proc/$1/stat || { echo gone; return; }; s=${s##*) }; "
        "echo ${s:0:1}; }\nfor ((i = 0; i < 100; i++)); do case $(state {pid}) in gone|Z) break ;; esac; "
        "sleep 0.05; done; state {pid}"
    ),
}
DOCKER = pytest.mark.skipif(not docker_available(), reason="no Docker engine reachable (start one with .ci/docker.sh)")


def daemon_source(kind: str, name: str) -> tuple[str, str]:
    """The tool and the source that starts the daemon ``kind`` as ``name`` and prints its pid once it runs."""
    tool = kind.split("-")[0]
    start = DAEMONS[kind].replace("NAME", name) if tool == "shell" else DAEMONS[kind]
    return tool, (PY_DAEMON if tool == "python" else SH_DAEMON).format(name=name, start=start)


def daemon_pid(obs: str) -> int:
    """The pid the source printed (the only line that is a number)."""
    return next(int(line) for line in obs.splitlines() if line.isdigit())


def assert_gone_after_the_call(env: gymnasium.Env, kind: str, name: str, pid: int) -> None:
    """From the host and from the next call: the daemon no longer runs. A Popen the code holds keeps its zombie for
    the code to wait for (it reads SIGKILL's -9); a shell may not have waited for its children yet."""
    tool = kind.split("-")[0]
    assert wait_until(lambda: all(state == "Z" for _, state in processes_named(name)))
    if kind == "python-new-session":
        assert run_tool(env, tool, "p.poll()")[0] == "-9\n"
    obs, info = run_tool(env, tool, PID_STATE[tool].replace("{pid}", str(pid)))
    assert info["status"] == "ok" and obs in (("gone\n",) if tool == "python" else ("gone\n", "Z\n")), obs


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=[pytest.mark.docker, DOCKER])])
@pytest.mark.parametrize("kind", list(DAEMONS))
def test_orphaned_daemon_dies_with_its_call(make_env, kind, backend):
    name = f"tko{uuid.uuid4().hex[:10]}"  # a command name (comm) unique to this test
    tools: dict[str, Any] = {} if backend == "local" else {"sandbox": lambda: DockerSandbox(TEST_LIMITS)}
    env = make_env(timeout_s=10, tools=tools)
    tool, source = daemon_source(kind, name)
    obs, info = run_tool(env, tool, source)  # the daemon runs before the call returns (the source waits for it)...
    note = obs.splitlines()[-1]
    assert info["status"] == "ok" and re.fullmatch(r"\[\d+ leftover process(es)? stopped\]", note), obs
    assert_gone_after_the_call(env, kind, name, daemon_pid(obs))  # ...and is gone once it has, not only at close
    assert_tool_sound(env, tool)


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_daemon_of_a_timed_out_call_dies_with_it(make_env, tool):
    name = f"tko{uuid.uuid4().hex[:10]}"
    env = make_env(timeout_s=4)
    kind = {"python": "python-double-fork", "shell": "shell-setsid"}[tool]
    _, source = daemon_source(kind, name)
    source += {"python": "\nwhile True:\n    pass", "shell": "\nsleep 60"}[tool]
    obs, info = run_tool(env, tool, source)
    assert info["status"] == "timeout" and "leftover process" in obs.splitlines()[-1], obs
    assert_gone_after_the_call(env, kind, name, daemon_pid(obs))
    assert_tool_sound(env, tool)


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_output_flood_cut_without_host_memory(make_env, tool):
    env = make_env(tools={"output_chars": 1000})
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    source = {
        "python": "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(100):\n    sys.stdout.buffer.write(chunk)",
        "shell": "head -c 100000000 /dev/zero | tr '\\0' x",
    }[tool]
    obs, info = run_tool(env, tool, source)
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    assert info["truncated"] and info["status"] in ("error", "timeout") and grown_kb < 64 * 1024
    assert obs.startswith("x" * 1000 + "\n[... ") and MARKER.search(obs) and "output flood cut off" in obs
    assert len(obs) < 1200
    assert_tool_sound(env, tool)


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_long_output_cut_with_a_marker_at_output_chars(make_env, tool):
    env = make_env(tools={"output_chars": 500})
    source = {"python": "print('y' * 2000)", "shell": "printf 'y%.0s' $(seq 2000); echo"}[tool]
    obs, info = run_tool(env, tool, source)
    assert (info["status"], info["truncated"]) == ("ok", True)
    assert obs == "y" * 500 + "\n[... 1501 more characters truncated]"


def test_nul_byte_in_the_message_is_an_invalid_action(make_env):
    env = make_env()
    _, info = step(env, "<python>print(1)\x00</python>")
    assert info["invalid_action"] == "nul_bytes" and "tool" not in info and info["invalid_actions"] == 1


def test_invalid_utf8_message_is_an_invalid_action(make_env):
    env = make_env()
    _, info = step(env, b"<python>print('\xff\xfe')</python>")
    assert info["invalid_action"] == "invalid_utf8" and "tool" not in info and info["invalid_actions"] == 1


@pytest.mark.parametrize(
    ("tool", "source", "status", "expected"),
    [
        ("python", "print(1)\x00", "error", "null bytes"),  # a JSON \u0000 escape reaches the code
        ("python", "print('\udcff')", "error", "SyntaxError"),  # a lone surrogate reaches the code as bytes
        ("shell", "echo a\x00b", "ok", "ab\n"),
        ("python", "import sys\nsys.stdout.buffer.write(b'a\\x00b\\xffc')", "ok", "a\x00b\ufffdc"),
        ("shell", "printf 'a\\000b\\377c'", "ok", "a\x00b\ufffdc"),
    ],
    ids=["python-nul-code", "python-surrogate-code", "shell-nul-command", "python-bytes-out", "shell-bytes-out"],
)
def test_nul_and_invalid_utf8_are_results(make_env, tool, source, status, expected):
    env = make_env()
    obs, info = run_tool(env, tool, source)
    assert info["status"] == status and expected in obs, obs
    assert_tool_sound(env, tool)


@pytest.mark.parametrize(
    ("tool", "source", "exit_code"),
    [
        ("python", "import ctypes\nctypes.string_at(0)", -11),
        ("python", "import os\nos.abort()", -6),
        ("python", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", -9),
        ("python", "import os\nos._exit(5)", 5),
        ("shell", "kill -SEGV $$", -11),
        ("shell", "kill -9 $$", -9),
        ("shell", "exit 4", 4),
    ],
    ids=[
        "python-segv",
        "python-abort",
        "python-kill-self",
        "python-exit",
        "shell-segv",
        "shell-kill-self",
        "shell-exit",
    ],
)
def test_crash_is_recorded_and_the_session_restarts_empty(make_env, tool, source, exit_code):
    env = make_env()
    state, check, gone = {
        "python": ("x = 1", "'x' in dir()", "False\n"),
        "shell": ("X=1", "echo ${X:-unset}", "unset\n"),
    }[tool]
    run_tool(env, tool, state)
    obs, info = run_tool(env, tool, source)
    assert (info["status"], info["exit_code"]) == ("crashed", exit_code)
    assert "the session ended and its state is gone" in obs
    obs, info = run_tool(env, tool, check)
    assert obs.startswith(gone)  # a fresh session: the state is gone
    assert_tool_sound(env, tool)


@pytest.mark.parametrize(("tool", "crash"), [("python", "import os\nos.abort()"), ("shell", "kill -9 $$")])
def test_a_crash_is_reported_once(make_env, tool, crash):
    # The call that crashed says so; the next call runs in the restarted session and reports its own outcome.
    env = make_env()
    _, info = run_tool(env, tool, crash)
    assert info["status"] == "crashed"
    obs, info = run_tool(env, tool, {"python": "print('after')", "shell": "echo after"}[tool])
    assert (obs, info["status"], info["exit_code"]) == ("after\n", "ok", 0)


@pytest.mark.parametrize(
    ("tool", "source"),
    [
        ("python", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('sent')"),
        ("python", "import os, signal\nos.kill(1, signal.SIGKILL)\nprint('sent')"),
        ("shell", "kill -9 $PPID; kill -9 1; echo sent"),
    ],
    ids=["python-parent", "python-init", "shell"],
)
def test_killing_the_sandbox_init_is_contained(make_env, tool, source):
    # The session's parent is the sandbox's init (pid 1 of its pid namespace): SIGKILL from inside does not reach it.
    env = make_env()
    run_tool(env, tool, {"python": "kept = 41", "shell": "KEPT=41"}[tool])
    obs, info = run_tool(env, tool, source)
    assert (obs, info["status"]) == ("sent\n", "ok")
    obs, info = run_tool(env, tool, {"python": "kept + 1", "shell": "echo $((KEPT+1))"}[tool])
    assert (obs, info["status"]) == ("42\n", "ok")


def test_host_processes_are_out_of_reach(make_env):
    env = make_env()
    obs, info = run_tool(env, "python", f"import os, signal\nos.kill({os.getpid()}, signal.SIGKILL)")
    assert info["status"] == "error" and "ProcessLookupError" in obs  # its own pid namespace: no such process
    obs, info = run_tool(env, "shell", "kill -9 -1; echo $?")
    assert info["status"] == "ok"  # signals everything it may: nothing outside the sandbox
    assert_tool_sound(env, "shell")


# --- huge arguments ---------------------------------------------------------------------------------------------------


def test_megabyte_message_is_too_long_by_default(make_env):
    env = make_env()
    obs, info = step(env, tool_call("python", "s = '" + "q" * 1_000_000 + "'"))
    assert info["invalid_action"] == "too_long" and "tool" not in info and len(obs) < 500


@pytest.mark.parametrize(("tool", "size"), [("python", 1_000_000), ("shell", 200_000)])
def test_long_argument_runs_when_messages_may_be_that_long(make_env, tool, size):
    # the shell's upload grows faster than linearly (1 MB: over 10 s here), so it gets a smaller one
    env = make_env(timeout_s=30, max_action_chars=3_000_000)
    source = {"python": f"s = '{'q' * size}'\nprint(len(s))", "shell": f"s={'q' * size}\necho ${{#s}}"}[tool]
    obs, info = run_tool(env, tool, source)
    assert (obs, info["status"]) == (f"{size}\n", "ok")


@pytest.mark.parametrize(
    ("message", "status", "says"),
    [
        (format_tool_call("p" * 1_000_000, {"code": "1"}), "unknown_tool", "There is no tool named 'ppp"),
        (format_tool_call("python", {"code": ["x"] * 200_000}), "bad_arguments", "must be a string, got list"),
        (format_tool_call("shell", {"command": "true", "x" * 1_000_000: 1}), "bad_arguments", "unexpected argument"),
    ],
    ids=["name", "code-list", "argument-name"],
)
def test_megabyte_garbage_is_refused_briefly(make_env, message, status, says):
    env = make_env(max_action_chars=3_000_000)
    obs, info = step(env, message)
    assert (info["tool"]["status"], info["invalid_action"]) == (status, "bad_tool_call")
    assert says in obs and len(obs) < 1000 and len(info["tool"]["name"]) <= 67, obs[:2000]


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_call_cut_off_while_its_code_is_sent_leaves_nothing_behind(make_env, tool):
    # The time limit can run out while a long argument is still going over (in 2 KiB lines): what was sent of it
    # must not end up in front of the next call's code.
    env = make_env(timeout_s=0.5, max_action_chars=3_000_000)
    source = {"python": "print('stale')\n#", "shell": "echo stale\n#"}[tool] + "q" * 2_000_000
    _, info = run_tool(env, tool, source)
    assert info["status"] == "timeout"
    for _ in range(3):
        obs, info = run_tool(env, tool, {"python": "print('fresh')", "shell": "echo fresh"}[tool])
        assert (obs, info["status"]) == ("fresh\n", "ok")


# --- garbage calls: refused, counted as invalid actions ---------------------------------------------------------------


def _nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


BAD_CALLS = {
    "unknown-tool": (format_tool_call("rm_rf", {"path": "/"}), "unknown_tool", "There is no tool named 'rm_rf'"),
    "submit-not-offered": (format_tool_call("submit", {"answer": "1"}), "unknown_tool", "no tool named 'submit'"),
    "name-10k": (format_tool_call("p" * 10_000, {}), "unknown_tool", "'" + "p" * 64 + "...'"),
    "code-int": (format_tool_call("python", {"code": 1}), "bad_arguments", "'code' must be a string, got int"),
    "code-null": (format_tool_call("python", {"code": None}), "bad_arguments", "'code' must be a string"),
    "code-list": (format_tool_call("python", {"code": ["x"] * 2000}), "bad_arguments", "must be a string, got list"),
    "command-object": (format_tool_call("shell", {"command": {"x": 1}}), "bad_arguments", "must be a string"),
    "missing-argument": (format_tool_call("shell", {}), "bad_arguments", "missing argument 'command'"),
    "extra-argument": (
        format_tool_call("python", {"code": "1", "sudo": True}),
        "bad_arguments",
        "unexpected argument 'sudo'",
    ),
    "arguments-list": ('<tool_call>{"name": "python", "arguments": [1, 2]}</tool_call>', "bad_arguments", "got list"),
    "arguments-number": ('<tool_call>{"name": "python", "arguments": 42}</tool_call>', "bad_arguments", "got int"),
    "arguments-null": ('<tool_call>{"name": "python", "arguments": null}</tool_call>', "bad_arguments", "JSON object"),
    "arguments-json-string": (
        '<tool_call>{"name": "python", "arguments": "\\"print(1)\\""}</tool_call>',
        "bad_arguments",
        "got str",
    ),
    "arguments-deep": (
        '<tool_call>{"name": "python", "arguments": {"code": ' + _nested(500) + "}}</tool_call>",
        "bad_arguments",
        "must be a string, got dict",
    ),
    "whole-message-unknown": ('{"name": "browser", "arguments": {"url": "http://x"}}', "unknown_tool", "browser"),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_bad_call_is_refused_as_an_invalid_action(make_env, name):
    message, status, says = BAD_CALLS[name]
    env = make_env()
    obs, info = step(env, message)
    assert info["tool"]["status"] == status and info["invalid_action"] == "bad_tool_call"
    assert info["invalid_actions"] == 1 and says in obs and len(obs) < 1000, obs
    assert set(info["tool"]) == {"name", "status"} and len(info["tool"]["name"]) <= 67
    assert_tool_sound(env, "python", invalid=1)  # nothing ran, nothing broke


MALFORMED = {
    "broken-json": "<tool_call>{oops</tool_call>",
    "unclosed-block": '<tool_call>{"name": "python", "arguments": {"code": "1"}}',
    "unclosed-tag": "<python>print(1)",
    "name-not-string": '<tool_call>{"name": 42, "arguments": {}}</tool_call>',
    "not-an-object": "<tool_call>[1, 2, 3]</tool_call>",
    "arguments-not-json": '<tool_call>{"name": "python", "arguments": "print(1)"}</tool_call>',
    "nested-too-deep": "<tool_call>" + "[" * 5000 + "]" * 5000 + "</tool_call>",
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_call_is_feedback_and_an_invalid_action(make_env, name):
    env = make_env()
    obs, info = step(env, MALFORMED[name])
    assert obs.startswith("Your tool call was not understood:") and len(obs) < 1000
    assert "tool" not in info and info["invalid_action"] == "bad_tool_call" and info["invalid_actions"] == 1


@pytest.mark.parametrize(
    "message",
    ["[" * 5000 + "]" * 5000, '{"name": "python", "arguments": ' + "[" * 5000 + "]" * 5000 + "}"],
    ids=["list", "call"],
)
def test_deep_json_message_without_a_block_is_no_call(make_env, message):
    env = make_env()
    _, info = step(env, message)  # handled by the task, as any other text
    assert "tool" not in info


def test_tag_of_a_tool_not_offered_is_plain_text(make_env):
    env = make_env()
    _, info = step(env, "<submit>42</submit>")
    assert "tool" not in info and "invalid_action" not in info


def test_bad_calls_spend_the_invalid_action_allowance_then_end_the_episode(make_env):
    env = make_env()  # max_invalid_actions=3: the fourth invalid message ends the episode
    messages = [
        BAD_CALLS["unknown-tool"][0],
        BAD_CALLS["code-int"][0],
        MALFORMED["broken-json"],
        tool_call("python", "print('q' * 10000)"),  # only its result is long: a valid call, not counted
        tool_call("python", "1 / 0"),  # the agent's code failed: an error result, not counted
    ]
    seen = []
    for message in messages:
        obs, info = step(env, message)
        seen.append((info.get("tool", {}).get("status"), info.get("invalid_action"), info["invalid_actions"]))
    assert seen == [
        ("unknown_tool", "bad_tool_call", 1),
        ("bad_arguments", "bad_tool_call", 2),
        (None, "bad_tool_call", 3),
        ("ok", None, 3),
        ("error", None, 3),
    ]
    assert "ZeroDivisionError" in obs
    obs, reward, terminated, truncated, info = env.step(BAD_CALLS["submit-not-offered"][0])
    assert terminated and not truncated and reward == 0.0
    assert info["invalid_action"] == "bad_tool_call" and info["success"] is False
    assert obs.endswith("The episode is over.")


def test_tool_call_limit_is_an_invalid_action(make_env):
    env = make_env(tools={"max_calls": 2})
    run_tool(env, "python", "1")
    run_tool(env, "shell", "true")
    obs, info = step(env, tool_call("python", "1"))
    assert info["tool"]["status"] == "limit" and info["invalid_action"] == "bad_tool_call"
    assert "The tool-call limit (2) is used up." in obs


# --- the trajectory records all of it as data -------------------------------------------------------------------------


def test_collect_records_agent_faults_as_data(make_env):
    env = make_env(max_episode_steps=20)
    script = [
        tool_call("python", "x = 41"),
        tool_call("python", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
        tool_call("python", "'x' in dir()"),
        tool_call("python", "while True:\n    pass"),
        tool_call("shell", "yes"),
        tool_call("shell", "echo $(( 6 * 7 ))"),
        BAD_CALLS["unknown-tool"][0],
        BAD_CALLS["code-int"][0],
        MALFORMED["broken-json"],
        BAD_CALLS["submit-not-offered"][0],
    ]
    traj = turnkit.collect(env, ScriptedAgent(script), seed=0)
    assert traj.error is None and [s.action.text for s in traj.steps] == script
    statuses = [s.info.get("tool", {}).get("status") for s in traj.steps]
    assert statuses == [
        "ok",
        "crashed",
        "ok",  # a fresh session; the crash was reported by the call before
        "timeout",
        "error",  # the flood, cut off
        "ok",
        "unknown_tool",
        "bad_arguments",
        None,  # malformed
        "unknown_tool",
    ]
    invalid = [s.info["invalid_actions"] for s in traj.steps]
    assert invalid == [0, 0, 0, 0, 0, 0, 1, 2, 3, 4]  # agent faults at run time are results, bad calls are invalid
    assert traj.steps[-1].terminated and not traj.success and traj.steps[4].info["tool"]["truncated"]
    replies = [s.observation for s in traj.steps[1:]] + [traj.final_observation]
    assert replies[2].startswith("False\n") and replies[5] == "42\n"
    roles = [m.role for m in traj.messages()]
    assert roles[0] == "user" and roles[1::2] == ["assistant"] * len(script)
    assert roles[2::2] == ["tool"] * 8 + ["user"]  # the malformed call is answered as a user message
    assert traj.steps[-1].info["tool"]["status"] == "unknown_tool"  # the last reply (final_observation) too


# --- Docker -----------------------------------------------------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.skipif(not docker_available(), reason="no Docker engine reachable (start one with .ci/docker.sh)")
def test_payloads_through_docker_tools_are_contained(make_env):
    env = make_env(tools={"sandbox": lambda: DockerSandbox(TEST_LIMITS)})
    connect = "import socket\ns = socket.socket()\ns.settimeout(1)\nprint(s.connect_ex(('1.1.1.1', 53)))"
    cases = [
        ("shell", "env; cat /proc/1/environ 2>&1", ("ok", "error")),
        ("python", connect, ("ok",)),
        ("python", "while True:\n    pass", ("timeout",)),
        ("python", "import os\nos.abort()", ("crashed",)),
        ("shell", "yes", ("error", "timeout")),
        ("shell", "echo x > /usr/turnkit-probe", ("error",)),
    ]
    for tool, source, statuses in cases:
        obs, info = run_tool(env, tool, source)
        assert info["status"] in statuses and SECRET not in obs, (source, obs, info)
        assert source != connect or obs.strip() != "0"
        assert_tool_sound(env, tool)
