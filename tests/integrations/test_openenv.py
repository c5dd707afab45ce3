"""OpenEnv interop for real: openenv-core's server and client, real HTTP and WebSocket on 127.0.0.1.

The servers run in background threads (one import of openenv-core, ~10 s, for the whole module) or, for
``turnkit serve-env``, in a subprocess; every one is shut down by its fixture or ``finally``.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from websockets.sync.client import connect

import turnkit
from turnkit.agents.scripted import ScriptedAgent
from turnkit.cli import main
from turnkit.envs.core import TextEnv, Transition
from turnkit.errors import EnvError
from turnkit.integrations.openenv import (
    SPEC_PATH,
    AppServer,
    EnvServer,
    OpenEnvTextEnv,
    make_app,
    make_remote_env,
)
from turnkit.types import Task

MATH = "turnkit/MathEpisodes-v0"
MATH_KW = {"difficulty": 3}
DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class VaultEnv(TextEnv):
    """Guess a hidden vault code. The code is privileged; ``crash`` makes the env raise with the code."""

    splits = ("id",)
    leak = False

    def generate_task(self, rng: np.random.Generator) -> Task:
        code = "vault-" + "".join(rng.choice(list("0123456789abcdef"), 16))
        return Task(
            task_id=f"vault-{rng.integers(10**9)}",
            prompt="Guess the vault code.",
            privileged={"code": code},
            family="vault",
        )

    def begin(self, task: Task) -> str:
        self.left = 3
        return task.prompt

    def respond(self, action: str) -> Transition:
        code = self.privileged()["code"]
        if action == "crash":
            raise RuntimeError(f"internal failure near {code}")
        if action == code:
            return Transition("Open.", reward=1.0, terminated=True, info={"success": True})
        self.left -= 1
        info: dict[str, Any] = {"guesses_left": self.left, **({"debug": code} if self.leak else {})}
        if self.left == 0:
            info["success"] = False
        return Transition("Closed.", terminated=self.left == 0, info=info)

    def extra_info(self) -> dict[str, Any]:
        return {"turns_left": 8 - self._turn}  # like CollabCode's: counts invalid turns too

    def get_state(self) -> int:
        return self.left

    def set_state(self, state: int) -> None:
        self.left = state


class LeakyVaultEnv(VaultEnv):
    """The control: puts the code into ``info``, so the wire inspection below must find it."""

    leak = True


gymnasium.register(id="openenv_test/Vault-v0", entry_point=VaultEnv, max_episode_steps=8)
gymnasium.register(id="openenv_test/LeakyVault-v0", entry_point=LeakyVaultEnv, max_episode_steps=8)


@pytest.fixture(scope="module")
def math_server() -> Iterator[EnvServer]:
    with EnvServer(MATH, env_kwargs=MATH_KW) as server:
        yield server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def transcript(env: gymnasium.Env, seed: int, actions: list[Any]) -> list[tuple]:
    out: list[tuple] = [env.reset(seed=seed)]
    for action in actions:
        out.append(env.step(action))
        if out[-1][2] or out[-1][3]:
            break
    return out


# ------------------------------------------------------------------------------------------ round trip
def test_episodes_through_the_wire_equal_the_local_env(math_server: EnvServer) -> None:
    remote = make_remote_env(math_server.url, env_id=MATH)
    local = gymnasium.make(MATH, **MATH_KW)
    try:
        assert remote.spec.max_episode_steps == local.spec.max_episode_steps == 10
        for seed in range(4):
            local.reset(seed=seed)
            answer = "ANSWER: " + str(local.unwrapped.privileged()["answer"])
            # wrong, then every kind of invalid action (answered by the client, mirrored to the server), then right
            actions = ["ANSWER: -1", "", None, "x" * 20_000, "\ud800", "ANSWER: 0.5", answer]
            if seed == 3:
                actions = ["", "", "", "", "after the end"]  # the invalid-action allowance ends the episode
            expected = transcript(local, seed, actions)
            assert transcript(remote, seed, actions) == expected
        assert expected[-1][2] and expected[-1][4]["invalid_actions"] == 4
        # unseeded episodes draw their seed from the client's RNG: reproducible from the first seed
        remote.reset(seed=11)
        first = [remote.reset()[0] for _ in range(2)]
        remote.reset(seed=11)
        assert [remote.reset()[0] for _ in range(2)] == first and first[0] != first[1]
        # snapshot and restore across the wire (restore replays through the server)
        remote.reset(seed=2)
        remote.step("ANSWER: 1")
        snap = turnkit.snapshot_env(remote)
        ahead = [remote.step(a) for a in ("", "ANSWER: 2")]
        turnkit.restore_env(remote, snap)
        assert [remote.step(a) for a in ("", "ANSWER: 2")] == ahead
    finally:
        remote.close()
        local.close()


def test_invalid_actions_keep_a_turnkit_server_in_step() -> None:
    """Invalid actions are answered by the client and mirrored, so turn-dependent info and time limits agree."""
    local = gymnasium.make("openenv_test/Vault-v0", max_episode_steps=5)
    with EnvServer("openenv_test/Vault-v0", env_kwargs={"max_episode_steps": 5}) as server:
        remote = make_remote_env(server.url)
        ends = []
        for seed, actions in [(0, ["a", "", None, "b", "\x00"]), (1, ["", None, "", "a" * 20_000])]:
            expected = transcript(local, seed, actions)
            assert transcript(remote, seed, actions) == expected
            ends.append(expected[-1])
        remote.close()
    assert ends[0][3] and not ends[0][2] and ends[0][4]["turns_left"] == 3  # cut by the served time limit
    assert ends[1][2] and ends[1][4]["invalid_action"] == "too_long" and ends[1][4]["turns_left"] == 4  # 4th invalid
    assert not ends[1][3] and len(ends) == 2


def test_collect_through_the_wire_keeps_privileged_data_on_the_server(math_server: EnvServer) -> None:
    remote = make_remote_env(math_server.url)
    local = gymnasium.make(MATH, **MATH_KW)
    agent = ScriptedAgent(["ANSWER: 1", "", "ANSWER: 2"])
    try:
        a, b = turnkit.collect(remote, agent, seed=5), turnkit.collect(local, agent, seed=5)
    finally:
        remote.close()
        local.close()
    assert [(s.observation, s.reward, s.terminated, s.truncated, s.info) for s in a.steps] == [
        (s.observation, s.reward, s.terminated, s.truncated, s.info) for s in b.steps
    ]
    assert a.initial_observation == b.initial_observation == a.task.prompt and a.task.task_id == b.task.task_id
    assert a.task.privileged == {} and b.task.privileged["answer"]


def test_the_wrapped_env_passes_check_env(math_server: EnvServer) -> None:
    env = make_remote_env(math_server.url)
    try:
        report = turnkit.check_env(env, raise_on_failure=False)
    finally:
        env.close()
    assert report.ok, str(report)
    assert report.result("cross_process").status.value == "passed", str(report)  # a fresh process, same server
    assert report.result("snapshot").status.value == "passed", str(report)


def test_a_turnkit_server_sets_the_limits(math_server: EnvServer) -> None:
    env = OpenEnvTextEnv(math_server.url, max_invalid_actions=3)
    assert (env.split, env.splits, env.max_invalid_actions, env.max_action_chars) == ("id", ("id",), 3, 16_384)
    assert env.server_spec == {
        "env_id": MATH,
        "max_episode_steps": 10,
        "split": "id",
        "max_invalid_actions": 3,
        "max_action_chars": 16_384,
    }
    with pytest.raises(EnvError, match="serves max_invalid_actions=3; serve it with --env-kwarg max_invalid_act"):
        OpenEnvTextEnv(math_server.url, max_invalid_actions=5)


def test_openenv_generic_client_plays_a_turnkit_server(math_server: EnvServer) -> None:
    from openenv.core import GenericEnvClient

    local = gymnasium.make(MATH, **MATH_KW)
    obs, info = local.reset(seed=1)
    answer = "ANSWER: " + str(local.unwrapped.privileged()["answer"])
    with GenericEnvClient(base_url=math_server.url).sync() as client:
        result = client.reset(seed=1)
        assert result.observation == {"message": obs, "info": info, "terminated": False, "truncated": False}
        result = client.step({"message": answer})
        expected = local.step(answer)
        assert (result.observation["message"], result.reward, result.done) == (expected[0], expected[1], True)
        assert result.observation["info"] == expected[4] and result.observation["terminated"]
        assert client.state()["step_count"] == 1
    local.close()


def test_the_envs_own_invalid_actions_count_remotely() -> None:
    """WebShop rejects malformed commands itself (on the server); the client adopts the served count (issue 40)."""
    actions = ["click[nothing]", "search[]", "click[Buy Now]", "look"]
    local = gymnasium.make("turnkit/WebShop-v0")
    with EnvServer("turnkit/WebShop-v0") as server:
        remote = make_remote_env(server.url)
        expected, got = transcript(local, 0, actions), transcript(remote, 0, actions)
        remote.close()
    local.close()
    assert got == expected
    assert [step[4]["invalid_actions"] for step in got[1:]] == [1, 2, 3, 4] and got[-1][2]  # the 4th ends it


# ------------------------------------------------------------------------------------------ the protocol's edges
def post_json(url: str, body: Any) -> tuple[int, dict[str, str], Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with NO_PROXY.open(request, timeout=10) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, json.loads(exc.read())


def test_step_over_plain_http_is_a_405_naming_the_websocket_session(math_server: EnvServer) -> None:
    """openenv-core builds a fresh env per HTTP request, so a stateless step has no episode: 405, never a 500."""
    for body in ({"action": {"message": "ANSWER: 1"}}, {"action": {}}, {}):
        code, headers, reply = post_json(math_server.url + "/step", body)
        assert code == 405 and headers.get("allow") == "" and reply["code"] == "SESSION_REQUIRED"
        assert "not served over plain HTTP" in reply["detail"] and "WebSocket session at /ws" in reply["detail"]
    code, _, reply = post_json(math_server.url + "/reset", {"seed": 1})  # stateless reset: the first message
    local = gymnasium.make(MATH, **MATH_KW)
    assert code == 200 and reply["observation"]["message"] == local.reset(seed=1)[0]
    local.close()
    with NO_PROXY.open(math_server.url + "/openapi.json", timeout=10) as response:
        step_doc = json.loads(response.read())["paths"]["/step"]["post"]
    assert "Not served" in step_doc["summary"] and "405" in step_doc["responses"]


def test_malformed_frames_get_a_clear_error_and_the_session_stays_usable(math_server: EnvServer) -> None:
    frames: list[tuple[str | bytes, str]] = [
        ("[1, 2]", "a JSON array"),
        (b"\x00\x01binary", "a binary frame"),
        ("42", "a JSON number"),
        ('"reset"', "a JSON string"),
        ("null", "a JSON null"),
        ("{not json", "text that is not JSON"),
        ('{"data": {"seed": 1}}', 'a JSON object without a string "type" field'),
        ('{"type": ["reset"]}', 'a JSON object without a string "type" field'),
    ]
    local = gymnasium.make(MATH, **MATH_KW)
    first = local.reset(seed=1)[0]
    local.close()
    with connect(math_server.url.replace("http", "ws", 1) + "/ws", proxy=None) as ws:
        for frame, got in frames:
            ws.send(frame)
            reply = json.loads(ws.recv(timeout=10))
            assert reply["type"] == "error" and reply["data"]["code"] == "INVALID_JSON", reply
            message = reply["data"]["message"]
            assert message.startswith(f"malformed message: got {got}"), message
            assert 'expected a text frame holding a JSON object with a "type" field ("reset", "step"' in message
        ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))  # the same session still plays
        reply = json.loads(ws.recv(timeout=10))
        assert reply["type"] == "observation" and reply["data"]["observation"]["message"] == first
        ws.send(b"\xff")
        assert json.loads(ws.recv(timeout=10))["data"]["code"] == "INVALID_JSON"
        ws.send(json.dumps({"type": "step", "data": {"message": "ANSWER: 1"}}))
        assert json.loads(ws.recv(timeout=10))["data"]["observation"]["info"]["turn"] == 1


def test_a_refused_session_is_readable_by_openenvs_client_and_ours() -> None:
    """At max_sessions the server answers the client's first message with CAPACITY_REACHED (no race with close)."""
    from openenv.core import GenericEnvClient

    with EnvServer("turnkit/PAVDidactic-v0", max_sessions=1) as server:
        holder = OpenEnvTextEnv(server.url)
        holder.reset(seed=0)
        refusals: list[str] = []
        for _ in range(10):
            try:
                with GenericEnvClient(base_url=server.url).sync() as client:
                    client.reset(seed=1)
            except Exception as exc:  # openenv-core raises RuntimeError("Server error: ... (code: ...)")
                refusals.append(f"{type(exc).__name__}: {exc}")
        assert len(refusals) == 10 and all(r.startswith("RuntimeError: Server error:") for r in refusals), refusals
        assert all("Server at capacity: 1/1 sessions" in r and "CAPACITY_REACHED" in r for r in refusals), refusals
        for _ in range(10):
            env = OpenEnvTextEnv(server.url)
            with pytest.raises(EnvError, match=r"answered reset with an error: Server at capacity.*CAPACITY_REACHED"):
                env.reset(seed=1)
            env.close()
        assert holder.step("1 2")[4]["turn"] == 1  # the admitted session was not disturbed
        holder.close()
        time.sleep(0.2)  # the server closes the freed env asynchronously
        with GenericEnvClient(base_url=server.url).sync() as client:
            assert client.reset(seed=1).observation["message"]


# ------------------------------------------------------------------------------------------ privileged data
def received(base_url: str, seed: int) -> list[str]:
    """Everything the server sends back to a client that probes every endpoint and message type."""
    out = []
    for path in (SPEC_PATH, "/health", "/metadata", "/schema", "/state"):
        with NO_PROXY.open(base_url + path, timeout=10) as r:
            out.append(r.read().decode())
    tools = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for path, body in (("/reset", {"seed": seed}), ("/mcp", tools)):
        headers = {"Content-Type": "application/json"}
        request = urllib.request.Request(base_url + path, data=json.dumps(body).encode(), headers=headers)
        with NO_PROXY.open(request, timeout=10) as r:
            out.append(r.read().decode())
    ws_url = base_url.replace("http://", "ws://") + "/ws"
    with connect(ws_url, proxy=None, open_timeout=10) as ws:
        messages: list[Any] = [
            {"type": "step", "data": {"message": "before reset"}},
            {"type": "reset", "data": {"seed": seed}},
            {"type": "state"},
            {"type": "step", "data": {"message": "vault-0"}},
            {"type": "step", "data": {"message": ""}},
            {"type": "step", "data": {"message": None}},
            {"type": "step", "data": {"message": "x", "unknown_field": 1}},
            {"type": "step", "data": {"message": "crash"}},
            {"type": "mcp", "data": tools},
            {"type": "teleport"},
            "not json",
            {"type": "step", "data": {"message": "vault-1"}},
            {"type": "step", "data": {"message": "vault-2"}},
            {"type": "step", "data": {"message": "after the end"}},
            {"type": "state"},
        ]
        for message in messages:
            ws.send(message if isinstance(message, str) else json.dumps(message))
            out.append(str(ws.recv(timeout=10)))
        ws.send(json.dumps({"type": "close"}))
    return out


@pytest.mark.filterwarnings("ignore:.*step\\(\\) called after the episode ended")
@pytest.mark.parametrize(("env_id", "leaks"), [("openenv_test/Vault-v0", False), ("openenv_test/LeakyVault-v0", True)])
def test_privileged_data_never_crosses_the_wire(env_id: str, leaks: bool, caplog: pytest.LogCaptureFixture) -> None:
    seed = 3
    local = gymnasium.make(env_id)
    local.reset(seed=seed)
    code = local.unwrapped.privileged()["code"]
    local.close()
    with EnvServer(env_id) as server:
        frames = received(server.url, seed)
        env = make_remote_env(server.url, env_id=env_id)
        traj = turnkit.collect(env, ScriptedAgent(["vault-0", "", "vault-1"]), seed=seed)
        env.close()
    wire = "\n".join(frames)
    assert ("Closed." in wire) and ("Invalid message" in wire) and ("Unknown message type" in wire)
    assert wire.count("does not support MCP") == 2
    assert "RuntimeError in step (see the server log)" in wire  # the crash arrives as its type only...
    assert any(code in r.getMessage() + str(r.exc_info) for r in caplog.records)  # ...its message stays in the log
    assert (code in wire) is leaks  # the leaky control shows that the search finds a leak when there is one
    assert traj.task.privileged == {} and traj.steps and traj.error is None
    seen = [traj.initial_observation] + [json.dumps([s.observation, s.info]) for s in traj.steps]
    assert any(code in text for text in seen) is leaks


# ------------------------------------------------------------------------------------------ other OpenEnv servers
def test_wraps_a_plain_openenv_env() -> None:
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    class Say(Action):
        say: str

    class Heard(Observation):
        text: str = ""
        count: int = 0

    class CountdownEnvironment(Environment):
        """Say 'stop' to end; reward 1 for stopping after at least two other messages."""

        SUPPORTS_CONCURRENT_SESSIONS = True

        def reset(self, seed=None, episode_id=None, **kwargs):
            self.count = 0
            return Heard(text=f"Talk to me (seed {seed}).")

        def step(self, action, timeout_s=None, **kwargs):
            self.count += 1
            done = action.say == "stop"
            return Heard(
                text=f"heard {action.say!r}", count=self.count, done=done, reward=float(done and self.count > 2)
            )

        @property
        def state(self):
            return State(step_count=self.count)

    app = create_fastapi_app(CountdownEnvironment, Say, Heard, max_concurrent_envs=4)
    with AppServer(app) as server:
        env = OpenEnvTextEnv(server.url, action_key="say", observation_key="text", env_id="CountdownEnvironment")
        assert not env.turnkit_server and env.remote_env_id == "CountdownEnvironment"
        obs, info = env.reset(seed=4)
        assert obs == "Talk to me (seed 4)." and info["task_id"] == "CountdownEnvironment-seed4"
        first = env.step("hello")
        invalid = env.step("")  # answered by the client: the server never hears it
        assert first[0] == "heard 'hello'" and first[4]["count"] == 1 and invalid[4]["invalid_action"] == "empty"
        second = env.step("hi")
        assert second[4]["count"] == 2 and not second[2]
        last = env.step("stop")
        assert last[1:4] == (1.0, True, False) and last[4]["count"] == 3 and last[4]["turn"] == 4
        env.close()
        with pytest.raises(EnvError, match="serves 'CountdownEnvironment', not 'turnkit/MathEpisodes-v0'"):
            OpenEnvTextEnv(server.url, env_id=MATH)


# ------------------------------------------------------------------------------------------ errors
class _NotOpenEnv(http.server.BaseHTTPRequestHandler):
    """A web server that is not an OpenEnv server: plain text, or JSON health and 404 elsewhere."""

    json_health = False

    def do_GET(self) -> None:
        if self.json_health and self.path != "/health":
            self.send_error(404)
            return
        body = b'{"status": "healthy"}' if self.json_health else b"hello"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def serve_plain(json_health: bool) -> http.server.ThreadingHTTPServer:
    handler = type("Handler", (_NotOpenEnv,), {"json_health": json_health})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_clear_errors() -> None:
    port = free_port()
    with pytest.raises(EnvError, match=rf"no OpenEnv server answers at http://127.0.0.1:{port}/turnkit/spec"):
        OpenEnvTextEnv(f"http://127.0.0.1:{port}")
    with pytest.raises(EnvError, match="not an OpenEnv base URL"):
        make_remote_env("ftp://127.0.0.1:1")
    with pytest.raises(EnvError, match=r"unknown env id 'turnkit/MathEpisode-v0' .*did you mean 'turnkit/MathEp"):
        make_app("turnkit/MathEpisode-v0")
    with pytest.raises(EnvError, match=re.escape("cannot make 'turnkit/MathEpisodes-v0' with {'bogus': 1}")):
        make_app(MATH, {"bogus": 1})
    plain = serve_plain(json_health=False)
    try:
        with pytest.raises(EnvError, match=r"bad response from .*/turnkit/spec: not JSON"):
            OpenEnvTextEnv(f"http://127.0.0.1:{plain.server_address[1]}")
    finally:
        plain.shutdown()
        plain.server_close()
    health_only = serve_plain(json_health=True)
    try:
        env = OpenEnvTextEnv(f"http://127.0.0.1:{health_only.server_address[1]}")
        with pytest.raises(EnvError, match=r"cannot open an OpenEnv session at ws://127\.0\.0\.1:\d+/ws"):
            env.reset(seed=0)
    finally:
        health_only.shutdown()
        health_only.server_close()


def test_a_lost_server_is_an_env_error() -> None:
    server = EnvServer(MATH).start()
    try:
        env = OpenEnvTextEnv(server.url)
        env.reset(seed=0)
        assert env.step("ANSWER: 1")[4]["turn"] == 1
    finally:
        server.stop()
    with pytest.raises(EnvError, match=r"lost the OpenEnv session|cannot open an OpenEnv session"):
        env.step("ANSWER: 2")
    with pytest.raises(EnvError, match="cannot open an OpenEnv session"):
        env.reset(seed=0)
    env.close()


# ------------------------------------------------------------------------------------------ the command
def test_serve_env_command_serves_until_interrupted() -> None:
    kwargs = {"difficulty": 2, "max_episode_steps": 2}
    # Ctrl-C raises KeyboardInterrupt as in a terminal, even when this test runs with SIGINT ignored (a background
    # job of a non-interactive shell): a child inherits an ignored SIGINT and would never see the test's Ctrl-C.
    as_in_a_terminal = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from turnkit.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    cmd = [sys.executable, "-c", as_in_a_terminal, "serve-env", MATH, "--port", "0"]
    cmd += [arg for k, v in kwargs.items() for arg in ("--env-kwarg", f"{k}={v}")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert proc.stdout is not None
        seen, match = [], None
        for line in proc.stdout:  # it prints the URL once the port is bound (warnings may come first)
            seen.append(line)
            match = re.search(r"serving turnkit/MathEpisodes-v0 over OpenEnv at (http://127\.0\.0\.1:\d+)", line)
            if match:
                break
        assert match, "".join(seen)
        remote, local = make_remote_env(match.group(1), env_id=MATH), gymnasium.make(MATH, **kwargs)
        actions = ["ANSWER: -1", "ANSWER: -2", "ANSWER: -3"]
        expected = transcript(local, 0, actions)
        assert transcript(remote, 0, actions) == expected and expected[-1][3]  # truncated by the served limit
        remote.close()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) in (0, 130)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_env_command_rejects_an_unknown_env(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve-env", "turnkit/MathEpisode-v0", "--port", "0"]) == 2
    assert "unknown env id 'turnkit/MathEpisode-v0'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ the docs
def openenv_blocks() -> list[str]:
    section = DOC.read_text().split("\n## OpenEnv\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_docs_examples_run(math_server: EnvServer, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = openenv_blocks()
    assert len(blocks) == 3
    start = time.perf_counter()
    for code in blocks:
        code = code.replace("http://127.0.0.1:8000", math_server.url)
        exec(compile(code, str(DOC), "exec"), {})
    out = capsys.readouterr().out
    assert "check_env(openenv/Remote-v0): OK" in out and "{}" in out
    assert time.perf_counter() - start < 120
