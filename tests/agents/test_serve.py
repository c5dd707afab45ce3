"""AgentServer's OpenAI protocol: routes, request validation, n samples, batching and agent faults.

Run: python -m pytest tests/agents/test_serve.py -q
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from turnkit.agents.hf import HFPolicy
from turnkit.agents.scripted import ScriptedAgent
from turnkit.agents.serve import AgentServer

CHAT = {"model": "turnkit", "messages": [{"role": "user", "content": "2+2?"}]}


def post(server: AgentServer, body: object, raw: bytes | None = None) -> tuple[int, dict]:
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(server.base_url + "/chat/completions", data=data, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def tiny_server(model, tokenizer):
    with AgentServer(HFPolicy(model, tokenizer, max_new_tokens=8), model_name="tiny") as server:
        yield server


def test_models_lists_the_served_name(tiny_server):
    with urllib.request.urlopen(tiny_server.base_url + "/models", timeout=10) as response:
        assert [m["id"] for m in json.load(response)["data"]] == ["tiny"]


def test_a_completion_has_the_openai_shape(tiny_server):
    status, reply = post(tiny_server, CHAT)
    assert status == 200 and reply["object"] == "chat.completion"
    choice = reply["choices"][0]
    assert choice["message"]["role"] == "assistant" and isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length") and choice["logprobs"] is None
    assert reply["usage"]["total_tokens"] == reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"]


def test_token_fields_are_returned_only_when_asked(tiny_server, tokenizer):
    _, plain = post(tiny_server, CHAT)
    assert "prompt_token_ids" not in plain and "token_ids" not in plain["choices"][0]
    _, rich = post(tiny_server, {**CHAT, "seed": 3, "logprobs": True, "return_token_ids": True})
    choice = rich["choices"][0]
    assert len(choice["logprobs"]["content"]) == len(choice["token_ids"]) > 0
    assert tokenizer.decode(rich["prompt_token_ids"]) == "<|bos|><|user|>2+2?<|end|><|assistant|>"
    _, as_ids = post(tiny_server, {**CHAT, "seed": 3, "logprobs": True, "return_tokens_as_token_ids": True})
    assert [e["token"] for e in as_ids["choices"][0]["logprobs"]["content"]] == [
        f"token_id:{i}" for i in choice["token_ids"]
    ]


def test_n_gives_distinct_samples_and_a_seed_repeats_them(tiny_server):
    _, first = post(tiny_server, {**CHAT, "n": 3, "seed": 9, "return_token_ids": True})
    _, again = post(tiny_server, {**CHAT, "n": 3, "seed": 9, "return_token_ids": True})
    ids = [c["token_ids"] for c in first["choices"]]
    assert len({tuple(i) for i in ids}) == 3 and ids == [c["token_ids"] for c in again["choices"]]


def test_max_tokens_limits_the_reply(tiny_server):
    _, reply = post(tiny_server, {**CHAT, "temperature": 0, "max_tokens": 2, "return_token_ids": True})
    assert len(reply["choices"][0]["token_ids"]) <= 2


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"model": "x"}, "messages must be a non-empty list"),
        ({**CHAT, "messages": [{"role": "robot", "content": "x"}]}, "needs a role"),
        ({**CHAT, "messages": [{"role": "user", "content": 5}]}, "content must be a string"),
        ({**CHAT, "stream": True}, "stream=true is not supported"),
        ({**CHAT, "n": 0}, "n must be an integer"),
        ({**CHAT, "temperature": "hot"}, "temperature must be a number"),
        ({**CHAT, "temperature": -1}, "temperature must be >= 0"),
        ({**CHAT, "max_tokens": 2.5}, "max_tokens must be an integer"),
        ({**CHAT, "seed": "s"}, "seed must be an integer"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_bad_requests_get_400_with_the_reason(tiny_server, body, message):
    status, reply = post(tiny_server, body)
    assert status == 400 and message in reply["error"]["message"]


def test_a_body_that_is_not_json_gets_400(tiny_server):
    status, reply = post(tiny_server, None, raw=b"{oops")
    assert status == 400 and "not JSON" in reply["error"]["message"]


def test_unknown_routes_get_404(tiny_server):
    request = urllib.request.Request(tiny_server.base_url + "/completions", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)
    assert info.value.code == 404


def test_content_parts_are_joined():
    with AgentServer(ScriptedAgent(lambda ctx: ctx.messages[-1].content.upper())) as server:
        parts = [{"type": "text", "text": "ab"}, {"type": "image_url", "image_url": {}}, {"type": "text", "text": "c"}]
        _, reply = post(server, {**CHAT, "messages": [{"role": "user", "content": parts}]})
    assert reply["choices"][0]["message"]["content"] == "ABC"


def test_an_agent_fault_is_a_500_and_the_server_keeps_serving():
    class Flaky:
        calls = 0

        def act(self, contexts):
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise RuntimeError("model crashed")
            return ScriptedAgent(["fine"]).act(contexts)

    with AgentServer(Flaky()) as server:
        status, reply = post(server, CHAT)
        assert status == 500 and "RuntimeError: model crashed" in reply["error"]["message"]
        assert post(server, CHAT)[1]["choices"][0]["message"]["content"] == "fine"


def test_concurrent_requests_are_batched_into_one_act_call():
    sizes: list[int] = []
    first_call, release = threading.Event(), threading.Event()

    class Recording:
        def act(self, contexts):
            sizes.append(len(contexts))
            if len(sizes) == 1:
                first_call.set()
                release.wait(timeout=30)  # held until the other requests have queued up
            return ScriptedAgent(["ok"]).act(contexts)

    with AgentServer(Recording()) as server, ThreadPoolExecutor(8) as pool:
        head = pool.submit(post, server, CHAT)
        assert first_call.wait(timeout=30)
        rest = [pool.submit(post, server, CHAT) for _ in range(7)]
        deadline = time.monotonic() + 30
        while server._jobs.qsize() < 7 and time.monotonic() < deadline:  # no sleep-based timing: wait for them
            time.sleep(0.01)
        release.set()
        assert all(f.result()[0] == 200 for f in [head, *rest])
    assert sizes == [1, 7]


def test_close_releases_the_port():
    server = AgentServer(ScriptedAgent(["x"])).start()
    url = server.base_url
    server.close()
    server.close()  # idempotent
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/models", timeout=2)
