"""One-step-off GRPO in one process: staleness, importance ratios from the sampling log-probs, resume."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerFast

from turnkit.configs import apply_overrides
from turnkit.errors import CheckpointWarning, ConfigError
from turnkit.train.config import TrainConfig
from turnkit.train.loop import train
from turnkit.train.metrics import read_metrics

from .conftest import LETTER_ENV, make_policy
from .test_loop import training_records


def config(out: Path, steps: int, **changes: object) -> TrainConfig:
    base = TrainConfig(
        env_id=LETTER_ENV,
        env_kwargs={},
        steps=steps,
        grpo={"group_size": 4},
        groups_per_step=3,
        optim={"lr": 3e-3},
        out_dir=str(out),
        seed=7,
        sampling={"max_new_tokens": 8},
        rollout={"async_rollout": True},
        log={"checkpoint_every": 1},
    )
    return dataclasses.replace(base, **changes)


def steps_of(path: Path) -> list[dict]:
    return [r for r in read_metrics(path) if "reward_mean" in r]


def test_async_trains_on_data_one_update_old(tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    train(config(tmp_path / "async", 4), policy=make_policy(tokenizer, max_new_tokens=8), progress=False)
    train(config(tmp_path / "sync", 1, rollout={"async": False}), policy=make_policy(tokenizer, max_new_tokens=8),
          progress=False)  # fmt: skip
    records = steps_of(tmp_path / "async" / "metrics.jsonl")
    assert [r["policy_lag"] for r in records] == [0, 1, 1, 1]
    assert all(r["optimizer_steps"] == 1 and r["sync_mb"] > 0 for r in records)
    # Step 1 is on-policy and plays the synchronous loop's episodes; later ratios correct for the lag.
    sync = steps_of(tmp_path / "sync" / "metrics.jsonl")[0]
    same = ("reward_mean", "success_rate", "completion_tokens", "turns_mean", "rows", "tied_frac")
    assert {k: records[0][k] for k in same} == {k: sync[k] for k in same}
    assert abs(records[0]["ratio_mean"] - 1) < 1e-5
    assert all(abs(r["ratio_mean"] - 1) > 1e-4 for r in records[1:])


def test_staleness_two_keeps_two_batches_ahead(tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    cfg = config(tmp_path, 4, rollout={"async": True, "max_staleness": 2}, log={"checkpoint_every": 0})
    train(cfg, policy=make_policy(tokenizer, max_new_tokens=8), progress=False)
    assert [r["policy_lag"] for r in steps_of(tmp_path / "metrics.jsonl")] == [0, 1, 2, 2]


def test_async_resume_after_a_crash_continues_the_same_run(tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    run = config(tmp_path, 4, log={"checkpoint_every": 2})
    train(run, policy=make_policy(tokenizer, max_new_tokens=8), progress=False)
    expected = training_records(tmp_path / "metrics.jsonl")
    ckpts = tmp_path / "checkpoints"
    assert (ckpts / "step-000002" / "pending.pkl").exists()  # step 3's batch, sampled by the step-1 policy
    shutil.rmtree(ckpts / "step-000004")  # the run "crashed" after step 2's checkpoint
    with pytest.warns(CheckpointWarning, match="step-000004 is damaged"):  # LATEST still names it
        train(run, policy=make_policy(tokenizer, max_new_tokens=8), resume=True, progress=False)
    assert training_records(tmp_path / "metrics.jsonl") == expected


def test_async_is_set_by_its_config_name_and_needs_the_hf_backend() -> None:
    assert apply_overrides(TrainConfig(), ["rollout.async=true", "rollout.max_staleness=2"]).rollout.async_rollout
    with pytest.raises(ConfigError, match="backend='openai'"):
        apply_overrides(TrainConfig(), ["rollout.async=true", "rollout.backend=openai"])
    with pytest.raises(ConfigError, match="max_staleness must be an int >= 1"):
        TrainConfig(rollout={"max_staleness": 0})
