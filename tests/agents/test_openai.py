"""OpenAIAgent against real HTTP servers on loopback: the tiny model behind AgentServer, and small
test-only handlers for timeouts, 5xx retries, malformed replies and servers without token-level fields.

Run: python -m pytest tests/agents/test_openai.py -q
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Iterator

import gymnasium
import pytest
import torch

import turnkit
from tests.agents.conftest import Reply, make_context, scripted_http
from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.agents.openai import OpenAIAgent, parse_completion
from turnkit.agents.scripted import ScriptedAgent
from turnkit.agents.serve import AgentServer
from turnkit.errors import AgentError, ConfigError
from turnkit.types import AgentTurn, ErrorCause, Message

GOOD_REPLY = {"choices": [{"message": {"role": "assistant", "content": "ANSWER: 4"}, "finish_reason": "stop"}]}


def ok(payload: object = GOOD_REPLY) -> Reply:
    return 200, json.dumps(payload).encode()


def _agent(url: str, **kwargs) -> OpenAIAgent:
    return OpenAIAgent(url, "turnkit", **{"retries": 0, "backoff": 0.0, "timeout": 120.0, **kwargs})


# ---------------------------------------------------------------- the tiny model behind a real server


@pytest.fixture(scope="module")
def served(model, tokenizer) -> Iterator[tuple[AgentServer, HFPolicy]]:
    policy = HFPolicy(model, tokenizer, max_new_tokens=16)
    with AgentServer(policy) as server:
        yield server, policy


def test_token_ids_and_logprobs_come_back_through_the_server(served, tokenizer):
    server, policy = served
    ctx = make_context("What is 3+4?", seed=1)
    turn = _agent(server.base_url).act([ctx])[0]
    assert turn.prompt_token_ids == tuple(chat_prompt_ids(tokenizer, ctx.messages))
    assert turn.token_ids and len(turn.logprobs) == len(turn.token_ids)
    recomputed = policy.sequence_logprobs([turn.prompt_token_ids], [turn.token_ids])[0]
    assert torch.allclose(recomputed, torch.tensor(turn.logprobs), atol=1e-4)
    assert turn.text == tokenizer.decode(list(turn.token_ids), skip_special_tokens=True)


def test_same_seed_same_reply_through_the_server(served):
    server, _ = served
    contexts = [make_context("2+2?", seed=s) for s in (1, 2, 2)]
    first = _agent(server.base_url).act(contexts)
    assert [t.token_ids for t in first] == [t.token_ids for t in _agent(server.base_url).act(contexts)]
    assert len({t.token_ids for t in first}) == 3  # a same-seed pair still gets two samples


def test_request_sampling_settings_reach_the_policy(served, model, tokenizer):
    server, _ = served
    contexts = [make_context(text, seed=0) for text in ("1+1?", "hello there")]
    remote = _agent(server.base_url, temperature=0.0, max_tokens=5).act(contexts)
    local = HFPolicy(model, tokenizer, temperature=0.0, max_new_tokens=5).act(contexts)
    assert [t.token_ids for t in remote] == [t.token_ids for t in local]


def test_a_slow_server_times_out_as_an_agent_error():
    release = threading.Event()

    class Slow:
        def act(self, contexts):
            release.wait(timeout=120.0)
            return ScriptedAgent(["late"]).act(contexts)

    with AgentServer(Slow()) as server:
        start = time.monotonic()
        try:
            with pytest.raises(AgentError, match=r"no reply after 2 attempts.*timed out"):
                _agent(server.base_url, timeout=0.2, retries=1).act([make_context("hi")])
            assert time.monotonic() - start < 60  # gave up long before the server would have answered
        finally:
            release.set()


# ---------------------------------------------------------------- retries and failures


def test_5xx_replies_are_retried_until_success():
    with scripted_http(lambda i, body, h: (503, b'{"error": "busy"}') if i < 2 else ok()) as (url, received):
        turn = _agent(url, retries=2).act([make_context("hi")])[0]
    assert (turn.text, len(received)) == ("ANSWER: 4", 3)


def test_5xx_after_the_last_retry_is_an_agent_error_naming_the_status():
    with (
        scripted_http(lambda i, body, h: (502, b"bad gateway")) as (url, received),
        pytest.raises(AgentError, match=r"after 3 attempts; last error: HTTP 502: bad gateway"),
    ):
        _agent(url, retries=2).act([make_context("hi")])
    assert len(received) == 3


def test_backoff_doubles_between_attempts():
    with scripted_http(lambda i, body, h: (500, b"")) as (url, _):
        start = time.monotonic()
        with pytest.raises(AgentError):
            _agent(url, retries=2, backoff=0.1).act([make_context("hi")])
    assert time.monotonic() - start >= 0.3  # 0.1 + 0.2


def test_connection_refused_is_an_agent_error():
    with scripted_http(lambda i, body, h: ok()) as (url, _):
        pass  # the port is closed again
    with pytest.raises(AgentError, match=r"no reply after 2 attempts.*Connection refused"):
        _agent(url, retries=1).act([make_context("hi")])


def test_a_4xx_reply_is_not_retried():
    with (
        scripted_http(lambda i, body, h: (401, b'{"error": "bad key"}')) as (url, received),
        pytest.raises(AgentError, match=r"HTTP 401.*bad key"),
    ):
        _agent(url, retries=3).act([make_context("hi")])
    assert len(received) == 1


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ((200, b"{not json"), "invalid JSON"),
        (ok({"id": "x"}), "no 'choices'"),
        (ok({"choices": []}), "no 'choices'"),
        (ok({"choices": [{"message": {"role": "assistant"}}]}), "content is not text"),
        (
            ok({"choices": [{**GOOD_REPLY["choices"][0], "token_ids": [1, 2], "logprobs": {"content": [{"x": 1}]}}]}),
            "malformed token data",
        ),
    ],
)
def test_malformed_replies_are_agent_errors(reply, message):
    with scripted_http(lambda i, body, h: reply) as (url, received), pytest.raises(AgentError, match=message):
        _agent(url, retries=2).act([make_context("hi")])
    assert len(received) == 1


def test_servers_without_token_fields_get_plain_requests_from_then_on():
    def respond(i, body, headers):
        if "return_token_ids" in body:
            return 400, b'{"error": "Unrecognized request argument supplied: return_token_ids"}'
        return ok()

    with scripted_http(respond) as (url, received):
        agent = _agent(url)
        assert agent.act([make_context("a")])[0].text == "ANSWER: 4"
        agent.act([make_context("b")])
    assert ["logprobs" in r for r in received] == [True, False, False]


def test_required_token_ids_missing_from_the_reply_is_an_agent_error():
    with scripted_http(lambda i, body, h: ok()) as (url, _), pytest.raises(AgentError, match="no token ids"):
        _agent(url, token_ids=True).act([make_context("a")])


def test_token_ids_false_sends_plain_requests():
    with scripted_http(lambda i, body, h: ok()) as (url, received):
        _agent(url, token_ids=False).act([make_context("a")])
    assert not set(received[0]) & {"logprobs", "return_token_ids"}


def test_requests_carry_messages_sampling_seed_and_the_key_from_the_environment(monkeypatch):
    monkeypatch.setenv("TK_TEST_KEY", "sk-123")
    with scripted_http(lambda i, body, h: ok()) as (url, received):
        _agent(url, api_key_env="TK_TEST_KEY", temperature=0.3, max_tokens=7).act([make_context("hi", seed=4)])
        _agent(url, api_key_env="TK_TEST_KEY", temperature=0.3, max_tokens=7).act([make_context("hi", seed=4)])
    first = received[0]
    assert first["messages"] == [{"role": "user", "content": "hi"}]
    assert (first["temperature"], first["max_tokens"]) == (0.3, 7)
    assert first["_headers"]["Authorization"] == "Bearer sk-123"
    assert first["seed"] == received[1]["seed"]


def test_a_batch_is_sent_concurrently():
    # every reply waits until all four requests are in flight: sent one by one, the barrier breaks
    all_in_flight = threading.Barrier(4, timeout=30)
    broken = []

    def respond(i, body, headers):
        try:
            all_in_flight.wait()
        except threading.BrokenBarrierError:
            broken.append(i)
        return ok()

    with scripted_http(respond) as (url, _):
        turns = _agent(url, max_workers=4, timeout=60).act([make_context(str(i)) for i in range(4)])
    assert len(turns) == 4 and not broken


@pytest.mark.parametrize("url", ["localhost:8000", "ftp://x/v1", ""])
def test_a_bad_base_url_is_a_config_error(url):
    with pytest.raises(ConfigError, match="base_url"):
        OpenAIAgent(url, "m")


def test_collect_records_an_agent_error_on_the_trajectory():
    with scripted_http(lambda i, body, h: (503, b"down")) as (url, _):
        env = gymnasium.make("turnkit/MathEpisodes-v0")
        traj = turnkit.collect(env, _agent(url, retries=1), seed=0)
    assert traj.error is not None and traj.error.cause == ErrorCause.AGENT
    assert "AgentError" in traj.error.message and "HTTP 503" in traj.error.message
    assert traj.steps == () and not traj.success


# ---------------------------------------------------------------- token-in: exact prompt ids to /completions

COMPLETION = {
    "choices": [
        {
            "text": "4",
            "finish_reason": "stop",
            "token_ids": [52, 2],
            "logprobs": {"tokens": ["token_id:52", "token_id:2"], "token_logprobs": [-0.5, -0.1]},
        }
    ]
}


def token_context(ids=(1, 4, 50, 2, 5)) -> Context:
    return Context(messages=(Message("user", "2"),), episode_seed=0, prompt_token_ids=tuple(ids))


def test_a_context_with_prompt_ids_is_sent_as_a_token_id_prompt():
    with scripted_http(lambda i, body, h: ok(COMPLETION)) as (url, received):
        turn = _agent(url).act([token_context()])[0]
    assert received[0]["_path"] == "/v1/completions" and received[0]["prompt"] == [1, 4, 50, 2, 5]
    assert received[0]["logprobs"] == 0 and received[0]["return_token_ids"] is True
    assert turn == AgentTurn("4", (52, 2), (-0.5, -0.1), (1, 4, 50, 2, 5), "stop")


def test_a_server_without_token_id_prompts_gets_messages_from_then_on():
    def respond(i, body, headers):
        return (404, b'{"error": "no route"}') if "prompt" in body else ok()

    with scripted_http(respond) as (url, received):
        agent = _agent(url)
        assert agent.act([token_context()])[0].text == "ANSWER: 4"
        agent.act([token_context()])
    assert [r["_path"] for r in received] == ["/v1/completions", "/v1/chat/completions", "/v1/chat/completions"]


def test_required_token_ids_do_not_fall_back_from_token_id_prompts():
    with (
        scripted_http(lambda i, body, h: (404, b"no route")) as (url, received),
        pytest.raises(AgentError, match=r"completions: HTTP 404"),
    ):
        _agent(url, token_ids=True).act([token_context()])
    assert len(received) == 1


def test_token_id_prompts_through_the_server_are_the_local_policys_turns(served, tokenizer):
    server, policy = served
    first = make_context("What is 3+4?", seed=2)
    turn = policy.act([first])[0]
    between = tokenizer("<|user|>Again?<|end|><|assistant|>", add_special_tokens=False)["input_ids"]
    second = Context(
        messages=(*first.messages, Message("assistant", turn.text), Message("user", "Again?")),
        turn=1,
        episode_seed=2,
        prompt_token_ids=(*turn.prompt_token_ids, *turn.token_ids, *between),
    )
    batch = [first, second, second]
    remote = _agent(server.base_url, token_ids=True, max_tokens=16).act(batch)  # the policy's settings
    local = policy.act(batch)
    assert [(t.text, t.token_ids, t.prompt_token_ids) for t in remote] == [
        (t.text, t.token_ids, t.prompt_token_ids) for t in local
    ]
    for r, t in zip(remote, local, strict=True):
        assert torch.allclose(torch.tensor(r.logprobs), torch.tensor(t.logprobs), atol=1e-5)


def test_malformed_completions_are_agent_errors():
    bad = {"choices": [{"text": "4", "token_ids": [1, 2], "logprobs": {"token_logprobs": [-0.5]}}]}
    with pytest.raises(AgentError, match="2 token ids but 1 logprobs"):
        parse_completion(bad)
    with pytest.raises(AgentError, match=r"choices\[0\]\.text is not text"):
        parse_completion({"choices": [{"message": {"content": "4"}}]})


# ---------------------------------------------------------------- runtime LoRA adapters and sampling views


def test_with_sampling_copies_the_agent_and_leaves_it_unchanged():
    agent = _agent("http://127.0.0.1:9/v1", temperature=0.7, extra_body={"stop": ["X"]})
    view = agent.with_sampling(temperature=0.0, max_new_tokens=3, seed=5)
    assert (view.sampling.temperature, view.sampling.max_new_tokens, view.sampling.seed) == (0.0, 3, 5)
    assert (agent.sampling.temperature, agent.sampling.seed) == (0.7, 0)
    view.extra_body["stop"] = ["Y"]
    assert agent.extra_body == {"stop": ["X"]} and view.url == agent.url


def test_adapter_loads_and_unloads_use_vllms_routes_and_replace_resyncs(model, tokenizer, tmp_path):
    learner = HFPolicy(copy.deepcopy(model), tokenizer)
    learner.attach_lora(r=4)
    path = learner.save_adapter(tmp_path / "a")
    with AgentServer(HFPolicy(copy.deepcopy(model), tokenizer)) as server:
        agent = _agent(server.base_url)
        assert agent.load_lora_adapter("a", path) == "Success: LoRA adapter 'a' added successfully."
        with pytest.raises(AgentError, match=r"load_lora_adapter: HTTP 400: .*'a' has already been loaded"):
            agent.load_lora_adapter("a", path)
        assert agent.load_lora_adapter("a", path, replace=True).startswith("Success")
        assert agent.unload_lora_adapter("a") == "Success: LoRA adapter 'a' removed successfully."
        with pytest.raises(AgentError, match=r"unload_lora_adapter: HTTP 404: .*'a' cannot be found"):
            agent.unload_lora_adapter("a")


def test_adapter_requests_are_retried_like_completions():
    def respond(i, body, headers):
        return (503, b"busy") if i == 0 else (200, b"Success: LoRA adapter 'a' added successfully.")

    with scripted_http(respond) as (url, received):
        assert _agent(url, retries=1).load_lora_adapter("a", "/adapters/a").startswith("Success")
    assert [r["_path"] for r in received] == ["/v1/load_lora_adapter"] * 2
    assert received[1]["lora_name"] == "a" and received[1]["lora_path"] == "/adapters/a"
