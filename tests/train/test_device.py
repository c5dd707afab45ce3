"""`TrainConfig.device`: checked names, a clear error without CUDA, and (on a CUDA machine) the same numbers as the CPU.

Run: python -m pytest tests/train/test_device.py -q       (the CUDA tests run where torch sees a GPU: -m gpu)
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from turnkit.errors import ConfigError
from turnkit.train.config import TrainConfig
from turnkit.train.loop import place_policy, train, update
from turnkit.train.metrics import read_metrics

from .conftest import LETTER_ENV, learner_of, make_policy
from .test_loop import group_of_two

CUDA_MARKS = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
"""Marked gpu, skipped where torch sees no CUDA device."""


def needs_cuda(test):
    """Apply :data:`CUDA_MARKS` to a test."""
    for mark in CUDA_MARKS:
        test = mark(test)
    return test


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "cuda:", "", "CPU", 0])
def test_a_device_that_torch_would_not_name_is_refused(name: object) -> None:
    with pytest.raises(ConfigError, match=r"TrainConfig\.device must be 'cpu', 'cuda' or 'cuda:N'"):
        TrainConfig(device=name)  # type: ignore[arg-type]


def test_device_names_round_trip() -> None:
    assert [TrainConfig(device=d).device for d in (None, "cpu", "cuda", "cuda:1")] == [None, "cpu", "cuda", "cuda:1"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is here")
def test_cuda_without_a_gpu_names_the_problem(tokenizer: PreTrainedTokenizerFast) -> None:
    policy = make_policy(tokenizer)
    with pytest.raises(ConfigError, match=r"device='cuda', but torch .* sees 0 CUDA device"):
        place_policy(policy, "cuda")
    assert policy.device.type == "cpu"  # nothing moved


def test_none_leaves_the_policy_where_it_is(tokenizer: PreTrainedTokenizerFast) -> None:
    policy = make_policy(tokenizer)
    place_policy(policy, None)
    assert policy.device.type == "cpu"


@needs_cuda
def test_an_update_on_cuda_matches_the_cpu(tokenizer: PreTrainedTokenizerFast) -> None:
    """One GRPO step (plain SGD, so the step is the gradient itself) gives the same loss and weights on both."""
    cpu = make_policy(tokenizer)
    trajs, prompt, good = group_of_two(cpu, tokenizer)
    gpu = copy.deepcopy(cpu)
    place_policy(gpu, "cuda")
    assert gpu.device.type == "cuda"
    cpu_logp, gpu_logp = (p.sequence_logprobs([prompt], [good])[0] for p in (cpu, gpu))
    assert torch.allclose(gpu_logp.cpu(), cpu_logp, atol=1e-5)
    cfg = TrainConfig(grpo={"group_size": 2})
    results = [update(learner_of(p, 0.5, sgd=True), trajs, cfg) for p in (cpu, gpu)]
    assert results[0]["optimizer_steps"] == results[1]["optimizer_steps"] == 1
    assert results[1]["loss"] == pytest.approx(results[0]["loss"], rel=1e-4, abs=1e-6)
    pairs = zip(gpu.model.parameters(), cpu.model.parameters(), strict=True)
    moved = [(a.cpu() - b).abs().max().item() for a, b in pairs]
    assert max(moved) < 1e-5
    start = make_policy(tokenizer).model.parameters()
    assert any(not torch.equal(a, b) for a, b in zip(cpu.model.parameters(), start, strict=True))  # the step moved


CUDA = pytest.param("cuda", marks=CUDA_MARKS)


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_the_memory_path_on_a_device_takes_the_cpu_one_pass_step(
    tokenizer: PreTrainedTokenizerFast, device: str
) -> None:
    """Chunked log-probs in token-budget micro-batches, rows sorted by length (SmolLM2's path; the tiny model takes
    it when its logits may not fit one pass): the one-pass step on the CPU, on either device."""
    from .test_update_layout import step

    one, one_metrics, _ = step(tokenizer, sort=True, budget=0, plain_logits=True)
    policy = make_policy(tokenizer)
    place_policy(policy, device)
    micro, metrics, seen = step(tokenizer, sort=True, budget=160, policy=policy)
    assert micro.device.type == device and len(seen) > 1
    moved = [
        (a.cpu() - b).abs().max().item() for a, b in zip(micro.model.parameters(), one.model.parameters(), strict=True)
    ]
    assert max(moved) < 1e-5
    assert metrics["loss"] == pytest.approx(one_metrics["loss"], rel=1e-4, abs=1e-6)


SMALL_CRITIC = {"mrt": {"samples": 2}, "pav": {"samples": 2, "best_of": 2}, "prime": {},
                "sweet": {"steps": 2, "reference_key": None}, "afd": {}}  # fmt: skip
"""Each critic at test size."""


def device_run(out: Path, steps: int, device: str, critic: str | None, **keys: object) -> TrainConfig:
    return TrainConfig(
        env_id=LETTER_ENV,
        env_kwargs={},
        steps=steps,
        grpo={"group_size": 4},
        groups_per_step=2,
        optim={"lr": 1e-3},
        out_dir=str(out),
        seed=5,
        device=device,
        critic={critic: {**SMALL_CRITIC[critic], **keys}} if critic else {},
        sampling={"max_new_tokens": 6},
        log={"checkpoint_every": 1},
    )


def rollout_records(run: Path) -> list[tuple]:
    """Per step: what was sampled and scored (the part of the log that does not depend on float rounding)."""
    rows = [r for r in read_metrics(run / "metrics.jsonl") if "reward_mean" in r]
    return [(r["step"], r["reward_mean"], r["completion_tokens"], r["success_rate"]) for r in rows]


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("critic", [None, "mrt", "pav", "prime", "sweet"])
def test_training_on_a_device_runs_resumes_and_repeats(
    tokenizer: PreTrainedTokenizerFast, tmp_path: Path, device: str, critic: str | None
) -> None:
    whole = train(device_run(tmp_path / "whole", 2, device, critic), policy=make_policy(tokenizer), progress=False)
    assert whole.policy.device.type == device
    records = [r for r in read_metrics(tmp_path / "whole" / "metrics.jsonl") if "reward_mean" in r]
    assert len(records) == 2 and all(math.isfinite(r["loss"]) for r in records)
    train(device_run(tmp_path / "cut", 1, device, critic), policy=make_policy(tokenizer), progress=False)
    resumed = train(
        device_run(tmp_path / "cut", 2, device, critic), policy=make_policy(tokenizer), resume=True, progress=False
    )
    assert resumed.policy.device.type == device
    # Sampling is seeded per episode on the GPU too: the run cut and resumed samples the same rollouts.
    assert rollout_records(tmp_path / "cut") == rollout_records(tmp_path / "whole")


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_a_critic_loaded_from_disk_scores_a_learner_on_a_device(tmp_path: Path, device: str) -> None:
    """AfD's reward model stays where it was loaded (the CPU) and scores the text of a learner's episodes."""
    from turnkit.agents.hf import HFPolicy
    from turnkit.critics.afd import AfDCritic, RewardModel
    from turnkit.models.tiny import build_tiny_model, build_tiny_tokenizer

    from .conftest import SMALL

    tok = build_tiny_tokenizer()
    folder = AfDCritic(RewardModel.from_causal_lm(build_tiny_model(tok, SMALL), seed=1), tok).save(tmp_path / "rm")
    cfg = device_run(tmp_path / "run", 1, device, "afd", model=str(folder))
    result = train(cfg, policy=HFPolicy(build_tiny_model(tok, SMALL, seed=2), tok, max_new_tokens=4), progress=False)
    assert result.policy.device.type == device
    assert math.isfinite(result.history[0]["afd/total"])


@needs_cuda
def test_a_cpu_run_resumes_on_cuda(tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    train(device_run(tmp_path, 1, "cpu", None), policy=make_policy(tokenizer), progress=False)
    resumed = train(device_run(tmp_path, 2, "cuda", None), policy=make_policy(tokenizer), resume=True, progress=False)
    assert resumed.policy.device.type == "cuda" and [r["step"] for r in resumed.history if "loss" in r] == [1, 2]


def test_ray_rollouts_refuse_a_learner_off_the_cpu(tokenizer: PreTrainedTokenizerFast) -> None:
    from turnkit.distributed.cluster import RayConfig
    from turnkit.distributed.worker import EnvSpec
    from turnkit.train.rollouts import RayRollouts

    policy = make_policy(tokenizer)
    policy.model.to("meta")  # any device but the CPU; refused before a cluster starts
    with pytest.raises(ConfigError, match=r"ray rollouts need the learner on the CPU for now \(it is on meta\)"):
        RayRollouts(EnvSpec(LETTER_ENV), policy, RayConfig(address="local"), max_turns=None, chat=None)
