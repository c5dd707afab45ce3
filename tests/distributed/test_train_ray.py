"""The GRPO loop with its rollouts on Ray workers (``TrainConfig.rollout.ray``), synchronous and one-step-off."""

from __future__ import annotations

from pathlib import Path

import torch

from turnkit.agents.hf import HFPolicy
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from turnkit.train.config import TrainConfig
from turnkit.train.loop import train
from turnkit.train.metrics import read_metrics

from .helpers import LETTERS

SAMPLED = ("reward_mean", "success_rate", "completion_tokens", "turns_mean", "rows", "tied_frac", "episodes")
"""Step metrics set by the sampled episodes alone."""


def policy() -> HFPolicy:
    tok = build_tiny_tokenizer()
    cfg = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    return HFPolicy(build_tiny_model(tok, cfg, seed=0), tok, max_new_tokens=8)


def config(out: Path, steps: int, **changes: object) -> TrainConfig:
    return TrainConfig(
        env_id=LETTERS, env_kwargs={}, steps=steps, grpo={"group_size": 4}, groups_per_step=3,
        sampling={"max_new_tokens": 8}, optim={"lr": 3e-3}, log={"checkpoint_every": 0}, out_dir=str(out), seed=7,
        **changes,  # type: ignore[arg-type]
    )  # fmt: skip


def steps_of(path: Path) -> list[dict]:
    return [r for r in read_metrics(path / "metrics.jsonl") if "reward_mean" in r]


def test_a_ray_run_plays_the_local_run_s_episodes(ray_cluster: object, tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the worker's (cpus_per_worker=2): one batch on the same float path
    try:
        train(config(tmp_path / "local", 3), policy=policy(), progress=False)
        ray = {"address": "local", "workers": 1, "cpus_per_worker": 2}
        train(config(tmp_path / "ray", 3, rollout={"ray": ray}), policy=policy(), progress=False)
    finally:
        torch.set_num_threads(threads)
    on_ray, local = steps_of(tmp_path / "ray"), steps_of(tmp_path / "local")
    assert [{k: r[k] for k in SAMPLED} for r in on_ray] == [{k: r[k] for k in SAMPLED} for r in local]
    assert all(r["policy_lag"] == 0 and r["masked_errors"] == 0 and r["optimizer_steps"] == 1 for r in on_ray)
    assert all(r["sync_mb"] > 0 and r["load_s"] >= 0 for r in on_ray)


def test_one_step_off_on_ray_workers(ray_cluster: object, tmp_path: Path) -> None:
    ray = {"address": "local", "workers": 2}
    train(config(tmp_path, 3, rollout={"ray": ray, "async": True}), policy=policy(), progress=False)
    records = steps_of(tmp_path)
    assert [r["policy_lag"] for r in records] == [0, 1, 1]
    assert all(r["episodes"] == 12 and r["masked_errors"] == 0 for r in records)
