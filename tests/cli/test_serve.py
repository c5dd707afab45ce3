"""``turnkit serve AGENT``: a real child process serving the tiny policy on loopback, stopped with Ctrl-C.

The served turns are compared with the same agent built in process by the same resolver (``make_agent``), over
real HTTP: through :class:`~turnkit.agents.openai.OpenAIAgent` and through plain ``urllib``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gymnasium
import pytest

from turnkit.agents.base import Context
from turnkit.agents.openai import OpenAIAgent
from turnkit.cli import main
from turnkit.cli.agents import make_agent
from turnkit.models.threads import torch_threads
from turnkit.types import Message

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "integrations.md"
AS_IN_A_TERMINAL = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from turnkit.cli import main; sys.exit(main(sys.argv[1:]))"
)
"""``turnkit ARGV`` with Ctrl-C raising KeyboardInterrupt, as in a terminal, even when this test runs with SIGINT
ignored (a background job of a non-interactive shell): a child inherits an ignored SIGINT and would never see the
test's Ctrl-C."""
HANG_GUARD_S = 300
"""Upper bound for the child to import torch, load the tiny policy and bind, or to exit; reached only on a hang."""
URL_LINE = re.compile(r"turnkit serve: (\S+) at (http://127\.0\.0\.1:\d+/v1) as model '([^']+)'")
MAX_NEW_TOKENS = 2
"""The served default (``--max-new-tokens``): short enough that the tiny policy's answers are cut by it."""


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    model: str
    seen: str


def serve(argv: list[str]) -> Served:
    """Start ``turnkit serve ARGV`` and wait for the lines naming its URL (warnings and progress bars come first)."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", AS_IN_A_TERMINAL, "serve", *argv], cwd=REPO, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = ""
    while "  in Python: " not in seen:  # the line after the URL's
        line = proc.stdout.readline()
        assert line, f"turnkit serve exited with {proc.wait(HANG_GUARD_S)} before serving:\n{seen}"
        seen += line
    match = URL_LINE.search(seen)
    assert match, seen
    return Served(proc, match.group(2), match.group(3), seen)


def stop(served: Served) -> str:
    """Ctrl-C, as in a terminal; the rest of the child's output."""
    served.proc.send_signal(signal.SIGINT)
    rest, _ = served.proc.communicate(timeout=HANG_GUARD_S)
    return rest


@pytest.fixture
def tiny_server() -> Iterator[Served]:
    served = serve(["tiny", "--port", "0", "--temperature", "0", "--max-new-tokens", str(MAX_NEW_TOKENS),
                    "--threads", "1"])  # fmt: skip
    try:
        yield served
    finally:
        if served.proc.poll() is None:
            served.proc.kill()
            served.proc.communicate()


def math_contexts(seeds: range) -> list[Context]:
    env = gymnasium.make("turnkit/MathEpisodes-v0")
    contexts = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        contexts.append(Context(messages=(Message("user", obs),), env_id="turnkit/MathEpisodes-v0", episode_seed=seed))
    env.close()
    return contexts


def post_chat(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    with opener.open(request, timeout=60) as reply:
        return json.load(reply)


def get_json(url: str) -> dict:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=60) as reply:
        return json.load(reply)


def test_serve_answers_as_the_in_process_agent_and_stops_on_ctrl_c(tiny_server: Served) -> None:
    url = tiny_server.url
    assert tiny_server.model == "tiny" and f"OpenAIAgent({url!r}, 'tiny')" in tiny_server.seen
    assert "warning" not in tiny_server.seen  # loopback by default: nothing to warn about
    assert [m["id"] for m in get_json(url + "/models")["data"]] == ["tiny"]

    contexts = math_contexts(range(3))
    with torch_threads(1):
        # a request's own sampling wins over the served defaults: OpenAIAgent asks for greedy turns of 8 tokens
        local = make_agent("tiny", sampling={"temperature": 0.0, "max_new_tokens": 8}).act(contexts)
        # the served defaults are the command line's: greedy, cut at MAX_NEW_TOKENS
        short = make_agent("tiny", sampling={"temperature": 0.0, "max_new_tokens": MAX_NEW_TOKENS}).act(contexts[:1])
    remote = OpenAIAgent(url, "tiny", temperature=0.0, max_tokens=8).act(contexts)
    assert [t.text for t in remote] == [t.text for t in local]
    assert all(t.text for t in local) and len({t.text for t in local}) > 1  # real answers, not one canned reply

    question = contexts[0].messages[0].content
    plain = post_chat(url, {"model": "tiny", "messages": [{"role": "user", "content": question}]})
    [choice] = plain["choices"]
    assert choice["message"]["content"] == short[0].text
    assert choice["finish_reason"] == "length" and plain["usage"]["completion_tokens"] == MAX_NEW_TOKENS
    last = short[0].text[-1]  # the served reply, cut before (the first of) its last character
    cut = post_chat(url, {"model": "tiny", "messages": [{"role": "user", "content": question}], "stop": last})
    expected = short[0].text[: short[0].text.index(last)]
    assert (cut["choices"][0]["message"]["content"], cut["choices"][0]["finish_reason"]) == (expected, "stop")
    try:  # only the served name: OpenAI's 404 names the others
        post_chat(url, {"model": "turnkit", "messages": [{"role": "user", "content": question}]})
        status, refused = 200, {}
    except urllib.error.HTTPError as exc:
        status, refused = exc.code, json.loads(exc.read())
    assert status == 404 and refused["error"] == {
        "message": "The model 'turnkit' does not exist. This server serves: 'tiny'.",
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }

    rest = stop(tiny_server)
    assert tiny_server.proc.returncode == 0, rest
    assert "turnkit serve: stopped" in rest and "Traceback" not in rest
    with pytest.raises(urllib.error.URLError):  # the port is released
        get_json(url + "/models")


def test_an_unknown_agent_spec_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "tiny-llama", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "turnkit: error: unknown agent spec 'tiny-llama'; use one of: oracle, random, scripted:TEXT" in err
    assert main(["serve", "oracle", "--port", "0", "--temperature", "0.5"]) == 2
    assert "agent 'oracle' does not sample" in capsys.readouterr().err


def test_a_host_other_than_loopback_is_warned_about(capsys: pytest.CaptureFixture[str]) -> None:
    # 192.0.2.1 (TEST-NET-1) is on no interface here: the command warns, then cannot bind, so nothing is exposed.
    assert main(["serve", "scripted:hi", "--host", "192.0.2.1", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "warning: listening on 192.0.2.1, not a loopback address; nothing authenticates callers" in err
    assert "turnkit: error: cannot listen on 192.0.2.1:0" in err


def test_a_taken_port_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "scripted:hi", "--port", str(port)]) == 2
    assert f"turnkit: error: cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def docs_console() -> list[list[str]]:
    """The ``$ `` commands of the console block in docs/integrations.md's ``turnkit serve`` section."""
    section = DOC.read_text().split("\n### From a shell: `turnkit serve`\n", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```console\n(.*?)```", section, flags=re.S)
    return [shlex.split(re.sub(r"\s+#.*$", "", line[2:])) for line in block.splitlines() if line.startswith("$ ")]


def test_the_docs_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    served_cmd, eval_cmd = docs_console()
    assert served_cmd[:2] == ["turnkit", "serve"] and eval_cmd[:2] == ["turnkit", "eval"]
    argv = served_cmd[2:]
    argv[argv.index("--port") + 1] = "0"
    served = serve(argv)
    try:
        eval_argv = [a.replace("http://127.0.0.1:8000/v1", served.url) for a in eval_cmd[1:]]
        eval_argv[eval_argv.index("--episodes") + 1] = "4"
        assert main([*eval_argv, "--quiet", "--out", str(tmp_path / "eval")]) == 0
        assert "episodes=4: success" in capsys.readouterr().out
        episodes = (tmp_path / "eval" / "trajectories.jsonl").read_text().splitlines()
        assert len(episodes) == 4 and all(json.loads(e)["steps"] for e in episodes)
        rest = stop(served)
        assert served.proc.returncode == 0 and "Traceback" not in rest, rest
    finally:
        if served.proc.poll() is None:
            served.proc.kill()
            served.proc.communicate()


def test_an_openai_spec_without_a_model_takes_the_one_the_server_serves(tiny_server: Served) -> None:
    # `turnkit eval --agent openai:URL` against `turnkit serve tiny`: the agent asks /v1/models instead of sending
    # a name the server would answer with 404.
    agent = make_agent(f"openai:{tiny_server.url}")
    assert agent.model == tiny_server.model == "tiny"
