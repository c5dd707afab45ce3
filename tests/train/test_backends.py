"""Generation backends: the learner itself, an OpenAI-compatible server synced by adapter reload (turnkit's own
AgentServer on real loopback HTTP), and vLLM (GPU only, skipped without CUDA).

Run: python -m pytest tests/train/test_backends.py -q -p no:cacheprovider      (vLLM test: add -m gpu on CUDA)
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import urllib.request

import gymnasium
import pytest
import torch

from tests.agents.test_vllm import needs_vllm_gpu
from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy
from turnkit.agents.serve import AgentServer
from turnkit.errors import AgentError, ConfigError
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, save_tiny
from turnkit.rollout.batch import build_episode_batch, build_turn_batch
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect_batch
from turnkit.train.backends import (
    BACKENDS,
    GenerationBackend,
    HFBackend,
    OpenAIBackend,
    VLLMBackend,
    build_backend,
    export_base_model,
    generator_copy,
    vllm_unavailable,
)
from turnkit.types import AgentTurn, ErrorCause, Message

from .conftest import LETTER_ENV, make_policy

MATH_ENV = "turnkit/MathEpisodes-v0"


def perturb_adapter(policy: HFPolicy, seed: int, scale: float = 0.5) -> None:
    """Give the adapter's B matrices random values, so the adapter changes the model's outputs."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.copy_(scale * torch.randn(param.shape, generator=gen))


def learner(tokenizer, **kwargs) -> HFPolicy:
    """A tiny random policy with a non-trivial LoRA adapter (its outputs differ from the base model's)."""
    policy = make_policy(tokenizer, max_new_tokens=8, **kwargs)
    policy.attach_lora(r=4)
    perturb_adapter(policy, seed=1)
    return policy


def contexts() -> list[Context]:
    """A GRPO-like batch: a same-seed group of three, two other tasks, and a second-turn context."""
    group = [Context(messages=(Message("user", "What is 2+2?"),), episode_seed=7)] * 3
    multi = Context(
        messages=(Message("user", "Name a color."), Message("assistant", "red"), Message("user", "Another one?")),
        turn=1,
        episode_seed=11,
    )
    return [*group, Context(messages=(Message("user", "hi"),), episode_seed=3), multi]


def assert_same_turns(got: list[AgentTurn], expected: list[AgentTurn]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert (g.text, g.token_ids, g.prompt_token_ids, g.finish_reason) == (
            e.text,
            e.token_ids,
            e.prompt_token_ids,
            e.finish_reason,
        )
        assert len(g.logprobs) == len(e.logprobs) == len(e.token_ids) > 0
        assert torch.allclose(torch.tensor(g.logprobs), torch.tensor(e.logprobs), atol=1e-5, rtol=0)


def logprob_gap(a: list[AgentTurn], b: list[AgentTurn]) -> float:
    """Largest log-prob difference between turns with the same ids (inf when any ids differ)."""
    if [t.token_ids for t in a] != [t.token_ids for t in b]:
        return float("inf")
    return max(abs(x - y) for s, t in zip(a, b, strict=True) for x, y in zip(s.logprobs, t.logprobs, strict=True))


def list_models(url: str) -> list[str]:
    with urllib.request.urlopen(url + "/models", timeout=10) as response:
        return [m["id"] for m in json.load(response)["data"]]


@pytest.fixture
def served(tokenizer, tmp_path):
    """A learner and an openai backend over a loopback AgentServer that serves a separate copy of it."""
    policy = learner(tokenizer)
    with build_backend("openai", policy, run_dir=tmp_path, timeout=30.0, retries=0) as backend:
        yield policy, backend


# ---------------------------------------------------------------- the seam


def test_every_backend_name_is_listed_and_hf_is_the_learner_itself(tokenizer):
    assert BACKENDS == ("hf", "openai", "vllm")
    policy = make_policy(tokenizer)
    backend = build_backend("hf", policy, run_dir=".")
    assert isinstance(backend, HFBackend) and isinstance(backend, GenerationBackend)
    assert backend.agent() is policy and backend.sync(policy, 1) == {"sync_s": 0.0}
    view = backend.agent(temperature=0.0)
    assert view.sampling.temperature == 0.0 and view.model is policy.model and policy.sampling.temperature == 1.0


# ---------------------------------------------------------------- (a) same turns as the learner


def test_the_server_backend_gives_the_learners_own_turns(served):
    policy, backend = served
    assert isinstance(backend, OpenAIBackend) and isinstance(backend, GenerationBackend)
    assert backend.server is not None and backend.server.agent.model is not policy.model  # two model objects
    batch = contexts()
    assert_same_turns(backend.agent().act(batch), policy.act(batch))


def test_the_agent_follows_the_learners_per_step_seed_and_an_eval_temperature(served):
    policy, backend = served
    batch = contexts()
    first = backend.agent().act(batch)
    policy.sampling = dataclasses.replace(policy.sampling, seed=12345)  # what the loop does at each step
    second = backend.agent().act(batch)
    assert [t.token_ids for t in second] != [t.token_ids for t in first]
    assert_same_turns(second, policy.act(batch))
    assert_same_turns(backend.agent(temperature=0.5).act(batch), policy.with_sampling(temperature=0.5).act(batch))
    assert policy.sampling.temperature == 1.0  # the learner's own settings are untouched


@pytest.mark.parametrize("token_exact", [True, False], ids=["token-exact", "rendered"])
def test_rollouts_through_the_server_build_the_same_training_batch(served, token_exact):
    policy, backend = served
    seeds, groups = [5, 5, 9, 9], [0, 0, 1, 1]
    chat = ChatDelta(policy.tokenizer) if token_exact else None  # turn 2 sent as ids to /v1/completions

    def batch_of(agent):
        envs = [gymnasium.make(MATH_ENV, max_attempts=3) for _ in seeds]
        trajs = collect_batch(envs, agent, seeds, groups=groups, max_turns=2, chat=chat)
        assert all(t.error is None for t in trajs)
        build = build_episode_batch if token_exact else build_turn_batch
        return trajs, build(trajs, pad_id=policy.pad_token_id)

    remote, remote_batch = batch_of(backend.agent())
    local, local_batch = batch_of(policy)
    assert [len(t.steps) for t in remote] == [len(t.steps) for t in local] == [2, 2, 2, 2]
    if token_exact:
        assert remote_batch.num_prefix_fallbacks == 0 and len(remote_batch) == len(seeds)
    assert torch.equal(remote_batch.input_ids, local_batch.input_ids)
    assert torch.equal(remote_batch.loss_mask, local_batch.loss_mask)
    assert remote_batch.old_logprobs is not None and local_batch.old_logprobs is not None
    assert torch.allclose(remote_batch.old_logprobs, local_batch.old_logprobs, atol=1e-5, rtol=0)


# ---------------------------------------------------------------- (b) weight sync


def test_sync_makes_the_server_follow_an_optimizer_step(served):
    policy, backend = served
    batch = contexts()
    before = policy.act(batch)
    turn = before[0]
    optimizer = torch.optim.AdamW([p for p in policy.model.parameters() if p.requires_grad], lr=0.05)
    loss = -policy.sequence_logprobs([turn.prompt_token_ids], [turn.token_ids], grad=True).sum()
    loss.backward()
    optimizer.step()
    after = policy.act(batch)
    assert logprob_gap(after, before) > 1e-3  # the step changed the learner

    stale = backend.agent().act(batch)
    assert_same_turns(stale, before)  # not synced yet: the server still has the old weights
    metrics = backend.sync(policy, 1)
    assert metrics["sync_s"] >= 0
    synced = backend.agent().act(batch)
    assert_same_turns(synced, after)
    assert logprob_gap(synced, stale) > 1e-3


def test_sync_loads_a_new_adapter_name_unloads_the_old_and_keeps_one_folder(served, tmp_path):
    policy, backend = served
    first = backend.adapter_name
    assert first.endswith("-step-0") and first in list_models(backend.url)
    perturb_adapter(policy, seed=2)
    backend.sync(policy, 1)
    assert backend.adapter_name.endswith("-step-1")
    assert list_models(backend.url) == ["turnkit-base", backend.adapter_name]
    assert sorted(p.name for p in (tmp_path / "generator").iterdir()) == ["adapter-step-000001"]
    ctx = contexts()[:1]
    assert_same_turns(backend.agent().act(ctx), policy.act(ctx))


def test_a_url_backend_syncs_an_external_server_and_a_resume_resyncs_its_step(tokenizer, tmp_path):
    policy = learner(tokenizer)
    server_policy = generator_copy(policy)  # the same base model, as a real server would load from disk ...
    perturb_adapter(server_policy, seed=5)  # ... with another adapter: only sync makes them agree
    batch = contexts()
    with AgentServer(server_policy, model_name="base") as server:
        assert logprob_gap(server_policy.act(batch), policy.act(batch)) > 1e-3
        backend = OpenAIBackend(policy, run_dir=tmp_path / "run", url=server.base_url, start_step=4, retries=0)
        assert backend.server is None and backend.adapter_name == "turnkit-run-step-4"
        assert_same_turns(backend.agent().act(batch), policy.act(batch))
        perturb_adapter(policy, seed=3)
        again = OpenAIBackend(policy, run_dir=tmp_path / "run", url=server.base_url, start_step=4, retries=0)
        assert_same_turns(again.agent().act(batch), policy.act(batch))  # replaced, not refused as already loaded
        assert list_models(server.base_url) == ["base", "turnkit-run-step-4"]


# ---------------------------------------------------------------- (c) errors


def test_an_unknown_backend_name_lists_the_valid_ones(tokenizer):
    with pytest.raises(ConfigError, match=r"unknown generation backend 'sglang'; choose one of: hf, openai, vllm"):
        build_backend("sglang", make_policy(tokenizer), run_dir=".")


def test_a_url_for_another_backend_and_options_for_hf_are_config_errors(tokenizer):
    policy = make_policy(tokenizer)
    with pytest.raises(ConfigError, match="used only by backend=openai"):
        build_backend("hf", policy, run_dir=".", url="http://127.0.0.1:1/v1")
    with pytest.raises(ConfigError, match=r"backend=hf takes no options, got \['timeout'\]"):
        build_backend("hf", policy, run_dir=".", timeout=3)


@pytest.mark.parametrize("name", ["openai", "vllm"])
def test_adapter_sync_without_an_adapter_asks_for_lora(tokenizer, tmp_path, name):
    with pytest.raises(ConfigError, match=rf"backend={name} .*; set lora.r > 0"):
        build_backend(name, make_policy(tokenizer), run_dir=tmp_path)
    assert not (tmp_path / "generator").exists()


def test_an_unreachable_server_is_an_agent_error_at_once(tokenizer, tmp_path):
    with AgentServer(generator_copy(learner(tokenizer))) as server:
        url = server.base_url
    start = time.monotonic()
    with pytest.raises(AgentError, match=r"load_lora_adapter: no reply after 2 attempts.*Connection refused"):
        build_backend("openai", learner(tokenizer), run_dir=tmp_path, url=url, retries=1, timeout=2.0)
    assert time.monotonic() - start < 30


def test_a_server_that_goes_away_is_recorded_on_the_trajectories_and_sync_fails(tokenizer, tmp_path):
    policy = learner(tokenizer)
    server = AgentServer(generator_copy(policy)).start()
    backend = build_backend("openai", policy, run_dir=tmp_path, url=server.base_url, retries=0, timeout=2.0)
    server.close()
    envs = [gymnasium.make(LETTER_ENV) for _ in range(2)]
    start = time.monotonic()
    trajs = collect_batch(envs, backend.agent(), [1, 2])
    assert all(t.error is not None and t.error.cause == ErrorCause.AGENT for t in trajs)
    assert "Connection refused" in trajs[0].error.message
    with pytest.raises(AgentError, match="load_lora_adapter"):
        backend.sync(policy, 1)
    assert time.monotonic() - start < 30


def test_a_bad_adapter_path_is_a_400_naming_it(served, tmp_path):
    _, backend = served
    with pytest.raises(AgentError, match=r"HTTP 400: .*lora_path '.*nowhere' is not a peft adapter folder"):
        backend.client.load_lora_adapter("x", tmp_path / "nowhere")


def test_an_adapter_of_another_rank_is_a_400_and_the_server_keeps_its_adapter(served, tokenizer, tmp_path):
    policy, backend = served
    other = make_policy(tokenizer)
    other.attach_lora(r=2)
    with pytest.raises(AgentError, match=r"HTTP 400: .*cannot load adapter 'r2'.* has r=2"):
        backend.client.load_lora_adapter("r2", other.save_adapter(tmp_path / "r2"))
    ctx = contexts()[:2]
    assert_same_turns(backend.agent().act(ctx), policy.act(ctx))


def test_the_vllm_backend_without_vllm_names_the_extra(tokenizer, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # vLLM counts as missing even where it is installed
    with pytest.raises(ConfigError, match=r"backend=vllm cannot run here: vLLM is not installed .*turnkit\[vllm\]"):
        build_backend("vllm", learner(tokenizer), run_dir=tmp_path)
    assert not (tmp_path / "generator").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is here")
def test_the_vllm_backend_without_cuda_says_so(tokenizer, tmp_path):
    problem = vllm_unavailable()
    assert problem is not None and ("vLLM is not installed" in problem or "no CUDA device" in problem)
    with pytest.raises(ConfigError, match="backend=vllm cannot run here"):
        build_backend("vllm", learner(tokenizer), run_dir=tmp_path)


def test_the_exported_base_model_is_the_learner_without_its_adapter(tokenizer, tmp_path):
    policy = learner(tokenizer)
    base = HFPolicy.from_pretrained(export_base_model(policy, tmp_path / "base"))
    prompt, completion = [[1, 4, 50, 60, 2, 5]], [[70, 71, 72]]
    with policy.reference() as ref:
        expected = ref.sequence_logprobs(prompt, completion)
    assert not base.has_adapter
    assert torch.allclose(base.sequence_logprobs(prompt, completion), expected, atol=1e-6)
    assert not torch.allclose(policy.sequence_logprobs(prompt, completion), expected, atol=1e-3)


# ---------------------------------------------------------------- (d) vLLM (GPU)

GPU_CONFIG = TinyModelConfig(hidden_size=128, num_layers=2, num_heads=2, intermediate_size=256)


@needs_vllm_gpu
def test_the_vllm_backend_hot_swaps_the_learners_adapter(tokenizer, tmp_path):
    folder = save_tiny(build_tiny_model(tokenizer, GPU_CONFIG, seed=0), tokenizer, tmp_path / "tiny")
    policy = HFPolicy.from_pretrained(folder, temperature=1.0, max_new_tokens=12)
    policy.attach_lora(r=4)
    perturb_adapter(policy, seed=1)
    backend = build_backend(
        "vllm", policy, run_dir=tmp_path, dtype="float32", gpu_memory_utilization=0.2, enforce_eager=True
    )
    try:
        assert isinstance(backend, VLLMBackend)
        batch = contexts()

        def check(turns):
            for turn in turns:
                assert len(turn.token_ids) == len(turn.logprobs) > 0
                expected = policy.sequence_logprobs([turn.prompt_token_ids], [turn.token_ids])[0]
                assert torch.allclose(torch.tensor(turn.logprobs), expected, atol=1e-3)

        before = backend.agent().act(batch)
        check(before)
        assert backend.engine.adapter_id == 1
        perturb_adapter(policy, seed=2)
        backend.sync(policy, 1)
        assert backend.engine.adapter_id == 2
        after = backend.agent().act(batch)
        check(after)
        assert logprob_gap(after, before) > 1e-3
    finally:
        backend.close()


def test_turnkit_train_through_the_server_backend_equals_training_in_process(tokenizer, tmp_path):
    """backend=openai (a loopback AgentServer synced by adapter reload) runs the very same run as backend=hf."""
    from turnkit.train.config import TrainConfig
    from turnkit.train.loop import train

    def run(backend: str) -> list[dict]:
        cfg = TrainConfig(
            env_id=LETTER_ENV,
            env_kwargs={},
            steps=3,
            grpo={"group_size": 4},
            groups_per_step=2,
            lora={"r": 4},
            optim={"lr": 5e-3},
            out_dir=str(tmp_path / backend),
            sampling={"max_new_tokens": 6, "temperature": 1.0},
            rollout={"backend": backend},
            eval={"every": 3, "episodes": 8},
            log={"checkpoint_every": 0},
        )
        result = train(cfg, policy=make_policy(tokenizer), progress=False)
        return result.history

    hf, served = run("hf"), run("openai")
    keys = ("reward_mean", "eval_success", "eval_reward", "completion_tokens")  # the same samples, exactly
    assert [{k: r.get(k) for k in keys} for r in served] == [{k: r.get(k) for k in keys} for r in hf]
    # the same losses up to float rounding: the server's log-probs come from another forward pass
    assert [r.get("loss", 0.0) for r in served] == pytest.approx([r.get("loss", 0.0) for r in hf], abs=1e-6)
    assert all(r["sync_s"] > 0 for r in served if "reward_mean" in r)
    assert len({r["reward_mean"] for r in hf if "reward_mean" in r}) > 1  # the policy really changed
