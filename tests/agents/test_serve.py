"""AgentServer's OpenAI protocol: routes, request validation, n samples, batching, agent faults, token-id
prompts (/v1/completions), runtime LoRA adapters (vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter) and
streamed replies (stream=true, read with the real openai client and as raw Server-Sent Events).

Run: python -m pytest tests/agents/test_serve.py -q
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from tests.agents.conftest import TEST_CONFIG
from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.agents.scripted import ScriptedAgent
from turnkit.agents.serve import AgentServer
from turnkit.models.tiny import build_tiny_model, save_tiny
from turnkit.tools import PYTHON_SPEC, format_tool_call
from turnkit.types import AgentTurn, Message

CHAT = {"messages": [{"role": "user", "content": "2+2?"}]}
"""A chat request; :func:`post` names the server's model in it."""


def post(server: AgentServer, body: object, raw: bytes | None = None) -> tuple[int, dict]:
    if isinstance(body, dict) and "model" not in body:
        body = {"model": server.model_name, **body}
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
    ("body", "param", "message"),
    [
        ({"model": "x"}, "messages", "messages must be a non-empty list"),
        ({**CHAT, "messages": [{"role": "robot", "content": "x"}]}, "messages", "needs a role"),
        ({**CHAT, "messages": [{"role": "user", "content": 5}]}, "messages", "content must be a string"),
        ({**CHAT, "stream": "yes"}, "stream", "stream must be a boolean"),
        ({**CHAT, "stream_options": {"include_usage": True}}, "stream_options", "stream_options is only allowed when"),
        ({**CHAT, "stream": True, "stream_options": {"include_usage": 1}}, "stream_options", "stream_options must be"),
        ({**CHAT, "stream": True, "n": 0}, "n", "n must be an integer"),
        ({**CHAT, "n": 0}, "n", "n must be an integer"),
        ({**CHAT, "temperature": "hot"}, "temperature", "temperature must be a number"),
        ({**CHAT, "temperature": -1}, "temperature", "temperature must be a number between 0 and 2, got -1"),
        ({**CHAT, "max_tokens": 2.5}, "max_tokens", "max_tokens must be an integer"),
        ({**CHAT, "seed": "s"}, "seed", "seed must be an integer"),
        ({**CHAT, "tool_choice": "required"}, "tool_choice", 'tool_choice must be "auto" or "none"'),
        ({**CHAT, "tools": [{"type": "function"}]}, "tools", "tools[0].function must be an object"),
        ([1, 2], None, "must be a JSON object"),
    ],
)
def test_bad_requests_get_400_with_the_reason(tiny_server, body, param, message):
    status, reply = post(tiny_server, body)
    assert status == 400 and message in reply["error"]["message"]
    assert reply["error"]["param"] == param and reply["error"]["type"] == "invalid_request_error"


def test_a_body_that_is_not_json_gets_400(tiny_server):
    status, reply = post(tiny_server, None, raw=b"{oops")
    assert status == 400 and "not JSON" in reply["error"]["message"]
    assert set(reply["error"]) == {"message", "type", "param", "code"}


def test_unknown_routes_get_404(tiny_server):
    request = urllib.request.Request(tiny_server.base_url + "/embeddings", data=b"{}", method="POST")
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


# ---------------------------------------------------------------- token-id prompts (/v1/completions)


def post_route(server: AgentServer, route: str, body: object) -> tuple[int, dict | str]:
    """POST to any route; JSON replies are parsed, plain-text ones (the adapter routes) returned as text."""
    request = urllib.request.Request(f"{server.base_url}/{route}", data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, raw, kind = response.status, response.read(), response.headers.get_content_type()
    except urllib.error.HTTPError as exc:
        status, raw, kind = exc.code, exc.read(), exc.headers.get_content_type()
    return status, json.loads(raw) if kind == "application/json" else raw.decode()


def test_a_token_id_prompt_is_sampled_exactly_like_the_same_chat(tiny_server, tokenizer):
    ids = chat_prompt_ids(tokenizer, [Message("user", "2+2?")])
    fields = {"seed": 5, "return_token_ids": True, "return_tokens_as_token_ids": True}
    _, chat = post(tiny_server, {**CHAT, **fields, "logprobs": True})
    status, reply = post_route(tiny_server, "completions", {"model": "tiny", "prompt": ids, **fields, "logprobs": 0})
    assert status == 200 and reply["object"] == "text_completion"
    choice, chat_choice = reply["choices"][0], chat["choices"][0]
    assert choice["prompt_token_ids"] == ids == chat["prompt_token_ids"]
    assert choice["token_ids"] == chat_choice["token_ids"] and choice["text"] == chat_choice["message"]["content"]
    assert choice["logprobs"]["tokens"] == [f"token_id:{i}" for i in choice["token_ids"]]
    assert choice["logprobs"]["token_logprobs"] == pytest.approx(
        [e["logprob"] for e in chat_choice["logprobs"]["content"]]
    )
    _, plain = post_route(tiny_server, "completions", {"prompt": [ids], "seed": 5})  # a batch of one prompt
    assert plain["choices"][0]["logprobs"] is None and "token_ids" not in plain["choices"][0]


@pytest.mark.parametrize("prompt", ["2+2?", [], [1, -2], [[1], [2]], None])
def test_a_prompt_that_is_not_token_ids_gets_400(tiny_server, prompt):
    status, reply = post_route(tiny_server, "completions", {"prompt": prompt})
    assert status == 400 and "prompt must be a non-empty list of token ids" in reply["error"]["message"]


def test_a_request_seed_is_the_seed_of_its_first_sample(tiny_server):
    _, one = post(tiny_server, {**CHAT, "seed": 21, "return_token_ids": True})
    _, three = post(tiny_server, {**CHAT, "seed": 21, "n": 3, "return_token_ids": True})
    assert one["choices"][0]["token_ids"] == three["choices"][0]["token_ids"]


# ---------------------------------------------------------------- runtime LoRA adapters


def saved_adapter(tokenizer, path, *, seed: int, r: int = 4):
    """A LoRA adapter of the tiny test model with random B matrices, saved at ``path``; returns its policy."""
    policy = HFPolicy(build_tiny_model(tokenizer, TEST_CONFIG, seed=0), tokenizer)
    policy.attach_lora(r=r)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen))
    policy.save_adapter(path)
    return policy


@pytest.fixture
def lora_server(tokenizer, tmp_path):
    """A server over a fresh base model (no adapter), and two saved adapters with their reference policies."""
    refs = {name: saved_adapter(tokenizer, tmp_path / name, seed=i) for i, name in enumerate(("a1", "a2"))}
    base = HFPolicy(build_tiny_model(tokenizer, TEST_CONFIG, seed=0), tokenizer, max_new_tokens=6)
    refs["base"] = HFPolicy(build_tiny_model(tokenizer, TEST_CONFIG, seed=0), tokenizer)
    with AgentServer(base, model_name="base") as server:
        yield server, refs, tmp_path


def served_by(server: AgentServer, refs: dict[str, HFPolicy], model: str) -> str:
    """Which reference policy's log-probs the server's reply for ``model`` has."""
    status, reply = post(server, {**CHAT, "model": model, "seed": 1, "logprobs": True, "return_token_ids": True})
    assert status == 200, reply
    ids, lps = reply["choices"][0]["token_ids"], [e["logprob"] for e in reply["choices"][0]["logprobs"]["content"]]
    matches = [
        name
        for name, ref in refs.items()
        if torch.allclose(ref.sequence_logprobs([reply["prompt_token_ids"]], [ids])[0], torch.tensor(lps), atol=1e-5)
    ]
    assert len(matches) == 1, matches
    return matches[0]


def test_loaded_adapters_serve_requests_that_name_them(lora_server):
    server, refs, adapters = lora_server
    assert served_by(server, refs, "base") == "base"
    status, text = post_route(server, "load_lora_adapter", {"lora_name": "a1", "lora_path": str(adapters / "a1")})
    assert (status, text) == (200, "Success: LoRA adapter 'a1' added successfully.")
    assert post_route(server, "load_lora_adapter", {"lora_name": "a2", "lora_path": str(adapters / "a2")})[0] == 200
    with urllib.request.urlopen(server.base_url + "/models", timeout=10) as response:
        listed = json.load(response)["data"]
    assert [(m["id"], m.get("parent")) for m in listed] == [("base", None), ("a1", "base"), ("a2", "base")]
    # the agent holds one adapter at a time: alternating requests reload each in turn; the served name gets the base
    assert [served_by(server, refs, m) for m in ("a1", "a2", "a1", "base")] == ["a1", "a2", "a1", "base"]
    status, reply = post(server, {**CHAT, "model": "anything"})
    assert (status, reply["error"]["code"], reply["error"]["param"]) == (404, "model_not_found", "model")
    assert reply["error"]["message"] == "The model 'anything' does not exist. This server serves: 'base', 'a1', 'a2'."


def test_an_unloaded_adapter_is_404_for_unload_and_for_completions(lora_server):
    server, _, adapters = lora_server
    post_route(server, "load_lora_adapter", {"lora_name": "a1", "lora_path": str(adapters / "a1")})
    assert post_route(server, "unload_lora_adapter", {"lora_name": "a1"}) == (
        200,
        "Success: LoRA adapter 'a1' removed successfully.",
    )
    status, reply = post(server, {**CHAT, "model": "a1"})
    assert status == 404 and reply["error"]["code"] == "model_not_found"
    assert (
        reply["error"]["message"]
        == "The model 'a1' does not exist (its LoRA adapter was unloaded). This server serves: 'base'."
    )
    status, reply = post_route(server, "unload_lora_adapter", {"lora_name": "a1"})
    assert status == 404 and reply["error"]["message"] == "The lora adapter 'a1' cannot be found."


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"lora_path": "x"}, "lora_name must be a non-empty string"),
        ({"lora_name": "a"}, "lora_path must be a non-empty string"),
        ({"lora_name": "a", "lora_path": "{tmp}/nowhere"}, "lora_path '{tmp}/nowhere' is not a peft adapter folder"),
        ({"lora_name": "a1", "lora_path": "{tmp}/a2"}, "The lora adapter 'a1' has already been loaded."),
        ({"lora_name": "base", "lora_path": "{tmp}/a2"}, "lora_name 'base' is the served model's name"),
        ({"lora_name": "r2", "lora_path": "{tmp}/r2"}, "cannot load adapter 'r2' from {tmp}/r2: adapter at"),
        ([1], "request body must be a JSON object"),
    ],
)
def test_bad_adapter_loads_get_400_with_the_reason(lora_server, tokenizer, body, message):
    server, refs, tmp = lora_server
    saved_adapter(tokenizer, tmp / "r2", seed=3, r=2)  # another rank than a1's
    post_route(server, "load_lora_adapter", {"lora_name": "a1", "lora_path": str(tmp / "a1")})
    if isinstance(body, dict):
        body = {k: v.replace("{tmp}", str(tmp)) for k, v in body.items()}
    status, reply = post_route(server, "load_lora_adapter", body)
    assert status == 400 and message.replace("{tmp}", str(tmp)) in reply["error"]["message"]
    assert served_by(server, refs, "a1") == "a1"  # a refused load leaves the loaded adapters working


def test_an_agent_without_load_adapter_refuses_adapters(tmp_path, tokenizer):
    saved_adapter(tokenizer, tmp_path / "a", seed=0)
    with AgentServer(ScriptedAgent(["x"])) as server:
        status, reply = post_route(server, "load_lora_adapter", {"lora_name": "a", "lora_path": str(tmp_path / "a")})
    assert status == 400 and "the served agent (ScriptedAgent) cannot load adapters" in reply["error"]["message"]


# ---------------------------------------------------------------- streaming (stream=true)


def stream_raw(server: AgentServer, route: str, body: dict) -> tuple[str, str]:
    """POST a streamed request; returns the Content-Type and the whole body, decoded as UTF-8."""
    data = json.dumps({**body, "stream": True}).encode()
    request = urllib.request.Request(f"{server.base_url}/{route}", data=data, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.headers["Content-Type"], response.read().decode("utf-8")


def events(body: str) -> list[dict]:
    """The JSON chunks of an SSE body, checking OpenAI's framing: only ``data: `` events, then ``[DONE]``."""
    assert body.endswith("data: [DONE]\n\n")
    blocks = body.split("\n\n")
    assert blocks[-2:] == ["data: [DONE]", ""] and all(b.startswith("data: ") and "\n" not in b for b in blocks[:-1])
    return [json.loads(b.removeprefix("data: ")) for b in blocks[:-2]]


@pytest.fixture
def openai_client(tiny_server):
    openai = pytest.importorskip("openai")
    with openai.OpenAI(base_url=tiny_server.base_url, api_key="unused", max_retries=0, timeout=30) as client:
        yield client


@pytest.mark.parametrize("seed", [3, 11])
def test_a_stream_joins_to_the_unstreamed_reply(openai_client, seed):
    kwargs = {"model": "tiny", "messages": CHAT["messages"], "seed": seed, "temperature": 1.0}
    whole = openai_client.chat.completions.create(**kwargs)
    chunks = list(openai_client.chat.completions.create(**kwargs, stream=True))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({(c.id, c.created, c.model) for c in chunks}) == 1 and chunks[0].model == "tiny"
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert content == whole.choices[0].message.content and len(chunks) > 3
    last = chunks[-1].choices[0]
    assert last.finish_reason == whole.choices[0].finish_reason and last.delta.content is None
    assert [c.choices[0].finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert all(c.usage is None for c in chunks)


def test_include_usage_adds_a_usage_chunk_equal_to_the_unstreamed_usage(openai_client):
    kwargs = {"model": "tiny", "messages": CHAT["messages"], "seed": 4}
    whole = openai_client.chat.completions.create(**kwargs)
    chunks = list(openai_client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True}))
    *body, tail = chunks
    assert tail.choices == [] and tail.usage == whole.usage and whole.usage.completion_tokens > 0
    assert all(c.usage is None for c in body) and body[-1].choices[0].finish_reason is not None


def test_n_streams_each_choice_under_its_index(openai_client):
    kwargs = {"model": "tiny", "messages": CHAT["messages"], "seed": 9, "n": 3}
    whole = openai_client.chat.completions.create(**kwargs)
    chunks = list(openai_client.chat.completions.create(**kwargs, stream=True))
    for choice in whole.choices:
        mine = [c.choices[0] for c in chunks if c.choices[0].index == choice.index]
        assert "".join(m.delta.content or "" for m in mine) == choice.message.content
        assert mine[0].delta.role == "assistant" and mine[-1].finish_reason == choice.finish_reason


def test_the_raw_stream_has_openais_sse_framing(tiny_server):
    kind, body = stream_raw(tiny_server, "chat/completions", {**CHAT, "seed": 2})
    assert kind == "text/event-stream"
    chunks = events(body)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1]["choices"][0]["delta"] == {} and chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    assert all(c["object"] == "chat.completion.chunk" and "usage" not in c for c in chunks)


def test_streamed_chunks_carry_their_own_token_ids_and_logprobs(tiny_server):
    fields = {**CHAT, "seed": 6, "logprobs": True, "return_token_ids": True}
    _, whole = post(tiny_server, fields)
    chunks = events(stream_raw(tiny_server, "chat/completions", fields)[1])
    assert chunks[0]["prompt_token_ids"] == whole["prompt_token_ids"]
    assert all("prompt_token_ids" not in c for c in chunks[1:])
    choices = [c["choices"][0] for c in chunks]
    assert [i for c in choices for i in c["token_ids"]] == whole["choices"][0]["token_ids"]
    assert [e for c in choices if c["logprobs"] for e in c["logprobs"]["content"]] == whole["choices"][0]["logprobs"][
        "content"
    ]
    for c in choices:  # a chunk's log-probs are those of its own tokens
        assert len(c["token_ids"]) == len(c["logprobs"]["content"] if c["logprobs"] else [])


def test_a_token_id_prompt_streams_text_completion_chunks(tiny_server, tokenizer):
    ids = chat_prompt_ids(tokenizer, [Message("user", "2+2?")])
    body = {"model": "tiny", "prompt": ids, "seed": 5, "return_token_ids": True}
    _, whole = post_route(tiny_server, "completions", body)
    chunks = events(stream_raw(tiny_server, "completions", {**body, "stream_options": {"include_usage": True}})[1])
    *parts, usage = chunks
    assert all(c["object"] == "text_completion" for c in chunks) and usage["usage"] == whole["usage"]
    assert "".join(c["choices"][0]["text"] for c in parts) == whole["choices"][0]["text"]
    assert [i for c in parts for i in c["choices"][0]["token_ids"]] == whole["choices"][0]["token_ids"]
    assert parts[0]["choices"][0]["prompt_token_ids"] == ids
    assert parts[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]


class Spelled:
    """An agent that answers ``text`` with its byte-level token ids, as a token-level policy would."""

    def __init__(self, tokenizer, text: str) -> None:
        self.tokenizer, self.text = tokenizer, text

    def act(self, contexts):
        ids = tuple(self.tokenizer.encode(self.text, add_special_tokens=False))
        return [AgentTurn(self.text, ids, tuple(-0.5 for _ in ids), (1, 2), "stop") for _ in contexts]


def test_multi_byte_characters_stream_intact_at_token_boundaries(tokenizer):
    text = "héllo ✓ 日本"
    assert len(tokenizer.encode(text, add_special_tokens=False)) > len(text)  # some characters span tokens
    with AgentServer(Spelled(tokenizer, text)) as server:
        _, body = stream_raw(server, "chat/completions", {**CHAT, "return_token_ids": True})
    pieces = [c["choices"][0] for c in events(body)[1:-1]]
    assert "".join(p["delta"]["content"] for p in pieces) == text
    assert all("\ufffd" not in p["delta"]["content"] for p in pieces)
    assert "✓" in [p["delta"]["content"] for p in pieces]  # one chunk for the character's three tokens
    assert max(len(p["token_ids"]) for p in pieces) == 3


def test_text_without_token_ids_streams_word_by_word():
    pytest.importorskip("openai")
    import openai

    with (
        AgentServer(ScriptedAgent(["héllo ✓  wörld "])) as server,
        openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as client,
    ):
        chunks = list(client.chat.completions.create(model="turnkit", messages=CHAT["messages"], stream=True))
    assert [c.choices[0].delta.content for c in chunks] == ["", "héllo ", "✓  ", "wörld ", None]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_a_tool_call_streams_as_a_tool_calls_delta():
    tools = [PYTHON_SPEC.openai_schema()]
    reply = "Let me run it.\n" + format_tool_call("python", {"code": "print(1)"})
    with AgentServer(ScriptedAgent([reply, reply])) as server:
        _, whole = post(server, {**CHAT, "tools": tools})
        chunks = events(stream_raw(server, "chat/completions", {**CHAT, "tools": tools})[1])
    message = whole["choices"][0]["message"]
    assert whole["choices"][0]["finish_reason"] == "tool_calls"
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert message["content"] == "Let me run it." == "".join(d.get("content") or "" for d in deltas)
    (calls,) = [d["tool_calls"] for d in deltas if "tool_calls" in d]
    assert [{**c, "id": "same"} for c in calls] == [{"index": 0, **message["tool_calls"][0], "id": "same"}]
    assert calls[0]["id"].startswith("call_")
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_a_streamed_request_that_fails_validation_is_a_json_400(tiny_server):
    status, reply = post(tiny_server, {**CHAT, "stream": True, "temperature": "hot"})
    assert status == 400 and "temperature must be a number" in reply["error"]["message"]


def test_the_docs_streaming_example_runs(model, tokenizer, tmp_path, capsys):
    pytest.importorskip("openai")
    doc = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
    section = doc.read_text().split("\n## OpenAI clients: serving a turnkit agent\n", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    folder = save_tiny(model, tokenizer, tmp_path / "tiny")
    exec(compile(code.replace("path/to/model", str(folder)), str(doc), "exec"), {})
    assert "completion_tokens=" in capsys.readouterr().out
