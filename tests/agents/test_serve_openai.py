"""AgentServer against the official ``openai`` client, as its users meet it (issue #53 item 2): served model
names and ``model_not_found``, ``stop`` sequences, ``context_length_exceeded`` and OpenAI's error shape with the
API's parameter names; each streamed and not. Real HTTP on loopback, the tiny test model built locally.

Run: python -m pytest tests/agents/test_serve_openai.py -q
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.agents.conftest import TEST_CONFIG, make_context
from tests.agents.test_serve import CHAT, Spelled, events, post, post_route, stream_raw
from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.agents.openai import OpenAIAgent
from turnkit.agents.scripted import ScriptedAgent
from turnkit.agents.serve import AgentServer
from turnkit.models.tiny import build_tiny_model
from turnkit.types import Message

openai = pytest.importorskip("openai")

MESSAGES = CHAT["messages"]
WINDOW = 48
"""The context window of the short-window model (tokens)."""


@pytest.fixture(scope="module")
def server(model, tokenizer):
    with AgentServer(HFPolicy(model, tokenizer, max_new_tokens=24), model_name="tiny") as served:
        yield served


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=60) as c:
        yield c


def create(client, *, stream: bool, **kwargs):
    """A chat completion of the tiny model; streamed, the list of chunks."""
    kwargs = {"model": "tiny", "messages": MESSAGES, **kwargs}
    if stream:
        return list(client.chat.completions.create(**kwargs, stream=True))
    return client.chat.completions.create(**kwargs)


def joined(chunks, index: int = 0) -> tuple[str, str | None]:
    """A choice's streamed content and its finish reason."""
    mine = [c.choices[0] for c in chunks if c.choices and c.choices[0].index == index]
    return "".join(m.delta.content or "" for m in mine), mine[-1].finish_reason


# ---------------------------------------------------------------- served model names


def test_models_lists_the_served_name_and_replies_echo_it(client):
    assert [m.id for m in client.models.list().data] == ["tiny"]
    assert create(client, stream=False, seed=1).model == "tiny"
    assert {c.model for c in create(client, stream=True, seed=1)} == {"tiny"}


@pytest.mark.parametrize("stream", [False, True])
def test_an_unknown_model_is_a_404_model_not_found_listing_the_served_names(client, stream):
    with pytest.raises(openai.NotFoundError) as info:
        create(client, stream=stream, model="gpt-4o")
    assert info.value.status_code == 404
    assert info.value.body == {
        "message": "The model 'gpt-4o' does not exist. This server serves: 'tiny'.",
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }


def test_an_unknown_model_is_a_404_on_completions_too(client, tokenizer):
    ids = chat_prompt_ids(tokenizer, [Message("user", "2+2?")])
    with pytest.raises(openai.NotFoundError) as info:
        client.completions.create(model="turnkit", prompt=ids)
    assert (info.value.code, info.value.param) == ("model_not_found", "model")


# ---------------------------------------------------------------- stop sequences


def spanning_stop(text: str, ids: list[int], tokenizer) -> str:
    """Two characters of ``text`` around a token boundary (the last of one token's text, the first of the
    next), occurring first there: a stop sequence that no single token spells."""
    for i in range(2, len(ids)):
        before = tokenizer.decode(ids[: i - 1], skip_special_tokens=True)
        after = tokenizer.decode(ids[:i], skip_special_tokens=True)
        whole = before and not before.endswith("\ufffd") and not after.endswith("\ufffd")  # whole characters
        if not whole or not text.startswith(after) or len(after) == len(before):
            continue
        stop = text[len(before) - 1 : len(before) + 1]
        if text.find(stop) == len(before) - 1 and stop.strip() and "\ufffd" not in stop:
            return stop
    raise AssertionError(f"no clean token boundary in {text!r}")


@pytest.fixture(scope="module")
def unstopped(client, tokenizer):
    """A seeded sampled reply without ``stop`` (text, ids) and a stop sequence across two of its tokens."""
    reply = create(client, stream=False, seed=5, max_tokens=24, extra_body={"return_token_ids": True})
    text, ids = reply.choices[0].message.content, reply.choices[0].token_ids
    return text, ids, spanning_stop(text, ids, tokenizer)


def test_stop_cuts_the_reply_before_the_sequence_and_the_ids_through_it(client, tokenizer, unstopped):
    text, ids, stop = unstopped
    fields = {"seed": 5, "max_tokens": 24, "logprobs": True, "extra_body": {"return_token_ids": True}}
    reply = create(client, stream=False, stop=[stop, "never-seen"], **fields)
    choice = reply.choices[0]
    assert choice.message.content == text[: text.find(stop)] and choice.finish_reason == "stop"
    # the ids are the ones the policy made up to the token that completes the stop sequence, and no further
    kept = choice.token_ids
    assert 0 < len(kept) < len(ids) and kept == ids[: len(kept)]
    spelled = choice.message.content + stop
    assert tokenizer.decode(kept, skip_special_tokens=True).startswith(spelled)
    assert not tokenizer.decode(kept[:-1], skip_special_tokens=True).startswith(spelled)
    assert len(choice.logprobs.content) == len(kept) == reply.usage.completion_tokens
    assert create(client, stream=False, stop=stop, **fields).choices[0].token_ids == kept  # a string, not a list


def test_a_streamed_stop_joins_to_the_unstreamed_reply_and_never_passes_the_stop(client, server, unstopped):
    text, _, stop = unstopped
    whole = create(client, stream=False, seed=5, max_tokens=24, stop=[stop])
    chunks = create(client, stream=True, seed=5, max_tokens=24, stop=[stop])
    content, finish = joined(chunks)
    assert (content, finish) == (whole.choices[0].message.content, "stop") and len(chunks) > 3
    assert text.startswith(content + stop) and stop not in content  # nothing past the cut, in any chunk
    # the streamed ids join to the unstreamed ones, the stop sequence's own tokens included
    body = {**CHAT, "model": "tiny", "seed": 5, "max_tokens": 24, "stop": [stop], "return_token_ids": True}
    _, unstreamed = post(server, body)
    streamed = events(stream_raw(server, "chat/completions", body)[1])
    assert [i for c in streamed for i in c["choices"][0]["token_ids"]] == unstreamed["choices"][0]["token_ids"]


def test_stop_applies_to_each_of_n_samples(client, unstopped):
    _, _, stop = unstopped
    plain = create(client, stream=False, seed=5, max_tokens=24, n=3)
    cut = create(client, stream=False, seed=5, max_tokens=24, n=3, stop=[stop])
    chunks = create(client, stream=True, seed=5, max_tokens=24, n=3, stop=[stop])
    for before, after in zip(plain.choices, cut.choices, strict=True):
        full = before.message.content
        expected = full[: full.find(stop)] if stop in full else full
        assert after.message.content == expected and stop not in after.message.content
        assert (after.finish_reason == "stop") == (stop in full or before.finish_reason == "stop")
        assert joined(chunks, after.index) == (after.message.content, after.finish_reason)


def test_stop_cuts_a_token_id_prompt_completion(server, tokenizer, unstopped):
    text, ids, stop = unstopped
    prompt = chat_prompt_ids(tokenizer, [Message("user", "2+2?")])
    body = {"model": "tiny", "prompt": prompt, "seed": 5, "max_tokens": 24, "stop": stop, "return_token_ids": True}
    _, reply = post_route(server, "completions", body)
    choice = reply["choices"][0]
    assert (choice["text"], choice["finish_reason"]) == (text[: text.find(stop)], "stop")
    chunks = events(stream_raw(server, "completions", body)[1])
    assert "".join(c["choices"][0]["text"] for c in chunks) == choice["text"]
    assert (
        [i for c in chunks for i in c["choices"][0]["token_ids"]]
        == choice["token_ids"]
        == ids[: len(choice["token_ids"])]
    )


@pytest.mark.parametrize("stream", [False, True])
def test_an_agent_that_ignores_stop_is_cut_after_the_fact(tokenizer, stream):
    text = "Answer: 4.\nQ: and 5+5?\nA: 10"
    with (
        AgentServer(Spelled(tokenizer, text), model_name="spelled") as server,
        openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as c,
    ):
        kwargs = {"model": "spelled", "messages": MESSAGES, "stop": ["\nQ:", "\nA:"]}
        if stream:
            content, finish = joined(list(c.chat.completions.create(**kwargs, stream=True)))
        else:
            reply = c.chat.completions.create(**kwargs, extra_body={"return_token_ids": True})
            content, finish = reply.choices[0].message.content, reply.choices[0].finish_reason
            kept = reply.choices[0].token_ids
            assert tokenizer.decode(kept) == "Answer: 4.\nQ:" and reply.usage.completion_tokens == len(kept)
    assert (content, finish) == ("Answer: 4.", "stop")


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_without_token_ids_is_cut_word_by_word_streams_too(stream):
    with (
        AgentServer(ScriptedAgent(lambda ctx: "one two END three")) as server,
        openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as c,
    ):
        kwargs = {"model": "turnkit", "messages": MESSAGES, "stop": "END"}
        if stream:
            chunks = list(c.chat.completions.create(**kwargs, stream=True))
            assert [ch.choices[0].delta.content for ch in chunks] == ["", "one ", "two ", None]
            content, finish = joined(chunks)
        else:
            reply = c.chat.completions.create(**kwargs)
            content, finish = reply.choices[0].message.content, reply.choices[0].finish_reason
    assert (content, finish) == ("one two ", "stop")


# ---------------------------------------------------------------- a prompt longer than the context


@pytest.fixture(scope="module")
def short_window(tokenizer):
    config = dataclasses.replace(TEST_CONFIG, max_position_embeddings=WINDOW)
    policy = HFPolicy(build_tiny_model(tokenizer, config, seed=0), tokenizer, max_new_tokens=4)
    with AgentServer(policy, model_name="short") as served:
        yield served


LONG = [{"role": "user", "content": "x" * 200}]


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_longer_than_the_context_is_a_400_context_length_exceeded(short_window, stream):
    with openai.OpenAI(base_url=short_window.base_url, api_key="x", max_retries=0) as c:
        fits = c.chat.completions.create(model="short", messages=MESSAGES, seed=0)
        assert fits.choices[0].finish_reason in ("stop", "length")
        with pytest.raises(openai.BadRequestError) as info:
            if stream:
                list(c.chat.completions.create(model="short", messages=LONG, stream=True))
            else:
                c.chat.completions.create(model="short", messages=LONG)
    error = info.value
    assert (error.status_code, error.code, error.param, error.type) == (
        400,
        "context_length_exceeded",
        "messages",
        "invalid_request_error",
    )
    assert f"This model's maximum context length is {WINDOW} tokens, but the messages take " in error.body["message"]


def test_a_token_id_prompt_longer_than_the_context_names_prompt(short_window):
    status, reply = post_route(short_window, "completions", {"model": "short", "prompt": [60] * (WINDOW + 5)})
    assert status == 400 and (reply["error"]["code"], reply["error"]["param"]) == ("context_length_exceeded", "prompt")
    assert f"the prompt takes {WINDOW + 5} tokens" in reply["error"]["message"]


def test_openai_agent_gets_an_empty_prompt_too_long_turn_beside_the_others(short_window):
    agent = OpenAIAgent(short_window.base_url, "short", retries=0, timeout=60.0, max_tokens=4)
    long_turn, short_turn = agent.act([make_context("x" * 200, seed=1), make_context("2+2?", seed=1)])
    assert (long_turn.text, long_turn.token_ids, long_turn.finish_reason) == ("", (), "prompt_too_long")
    assert short_turn.token_ids and short_turn.finish_reason in ("stop", "length")
    (token_in,) = agent.act([Context(messages=(), prompt_token_ids=(60,) * (WINDOW + 5), episode_seed=1)])
    assert (token_in.token_ids, token_in.finish_reason) == ((), "prompt_too_long")
    assert token_in.prompt_token_ids == (60,) * (WINDOW + 5)


# ---------------------------------------------------------------- parameter errors name the API's parameter


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_completion_tokens": 0}, "max_completion_tokens"),
        ({"temperature": 3}, "temperature"),
        ({"temperature": -0.5}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"n": 0}, "n"),
        ({"n": 65}, "n"),
        ({"seed": "s"}, "seed"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"stop": [""]}, "stop"),
        ({"stop": 5}, "stop"),
        ({"logprobs": "yes"}, "logprobs"),
        ({"logprobs": True, "top_logprobs": 3}, "top_logprobs"),
        ({"extra_body": {"return_token_ids": "yes"}}, "return_token_ids"),
        ({"model": ""}, "model"),
        ({"messages": []}, "messages"),
        ({"tools": [{"type": "function"}]}, "tools"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_a_bad_parameter_is_a_400_naming_it(client, kwargs, param, stream):
    with pytest.raises(openai.BadRequestError) as info:
        create(client, stream=stream, **kwargs)
    error = info.value
    assert (error.status_code, error.param, error.type) == (400, param, "invalid_request_error")
    assert param in error.body["message"] and set(error.body) == {"message", "type", "param", "code"}
    assert not any(word in error.body["message"] for word in ("SamplingConfig", "max_new_tokens", "Context"))


def test_completions_logprobs_counts_up_to_five(server, tokenizer):
    prompt = chat_prompt_ids(tokenizer, [Message("user", "2+2?")])
    assert post_route(server, "completions", {"prompt": prompt, "logprobs": 5, "max_tokens": 2})[0] == 200
    status, reply = post_route(server, "completions", {"prompt": prompt, "logprobs": 6})
    assert status == 400 and reply["error"]["param"] == "logprobs"


def test_errors_have_openais_shape_on_every_route(server):
    status, reply = post_route(server, "embeddings", {})
    assert status == 404 and reply["error"]["type"] == "invalid_request_error"
    assert set(reply["error"]) == {"message", "type", "param", "code"}
    status, reply = post_route(server, "load_lora_adapter", {"lora_name": "a"})
    assert (status, reply["error"]["param"]) == (400, "lora_path")
    status, reply = post_route(server, "unload_lora_adapter", {"lora_name": "a"})
    assert (status, reply["error"]["param"]) == (404, "lora_name")
