"""A built-in model's batch and thread defaults reach ``turnkit train``; whatever the user writes wins."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from turnkit.cli import build_parser, main
from turnkit.cli.train import run_config
from turnkit.models.names import MODELS, SMOLLM2_TRAIN
from turnkit.train.config import TrainConfig
from turnkit.train.model_defaults import with_model_defaults

PLAIN = TrainConfig()


def train_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["train", *argv])


def batch(cfg: TrainConfig) -> tuple[int, int]:
    return cfg.groups_per_step, cfg.grpo.group_size


@pytest.mark.parametrize("model", ["smollm2", "smollm2-bf16"])
def test_a_plain_smollm2_run_gets_the_model_batch(model: str, tmp_path: Path) -> None:
    cfg = run_config(train_args("--set", f"model={model}", "--out", str(tmp_path)))
    assert batch(cfg) == (4, 4) == (SMOLLM2_TRAIN["groups_per_step"], SMOLLM2_TRAIN["grpo.group_size"])
    assert batch(cfg) != batch(PLAIN) and cfg.lora_rank() == 8
    changed = {k for k, v in cfg.to_dict().items() if v != PLAIN.to_dict()[k]}
    assert changed == {"model", "groups_per_step", "grpo", "rollout", "out_dir"}  # only the model's keys change
    assert cfg.grpo == dataclasses.replace(PLAIN.grpo, group_size=4)
    assert cfg.rollout == dataclasses.replace(PLAIN.rollout, reuse_kv=True)  # its steps are mostly re-encoding


def test_values_the_user_sets_win_even_when_they_equal_the_plain_defaults(tmp_path: Path) -> None:
    sets = ["model=smollm2", "groups_per_step=16", "grpo.group_size=8"]
    cfg = run_config(train_args(*[a for s in sets for a in ("--set", s)], "--out", str(tmp_path)))
    assert batch(cfg) == batch(PLAIN) == (16, 8)
    one = run_config(train_args("--set", "model=smollm2", "--set", "groups_per_step=2", "--out", str(tmp_path)))
    assert batch(one) == (2, 4)


def test_a_config_file_counts_as_set_key_by_key(tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text('model = "smollm2"\ngroups_per_step = 16\n\n[grpo]\nkl_coef = 0.1\n')
    cfg = run_config(train_args("--config", str(config), "--out", str(tmp_path / "run")))
    # groups_per_step is written in the file; [grpo] names kl_coef only, so group_size is the model's
    assert batch(cfg) == (16, 4) and cfg.grpo.kl_coef == 0.1
    old = tmp_path / "old.json"  # a file from before the grpo table: its flat group_size is still the user's
    old.write_text(json.dumps({"model": "smollm2", "group_size": 8}))
    with pytest.warns(FutureWarning):
        cfg = run_config(train_args("--config", str(old), "--out", str(tmp_path / "run")))
    assert batch(cfg) == (4, 8)
    # the model named by --set over a file that names none: the file's keys still win
    plain = tmp_path / "plain.toml"
    plain.write_text("groups_per_step = 16\n")
    cfg = run_config(train_args("--config", str(plain), "--set", "model=smollm2", "--out", str(tmp_path / "r")))
    assert batch(cfg) == (16, 4)


def test_other_models_and_resumed_runs_keep_their_values(tmp_path: Path) -> None:
    assert batch(run_config(train_args("--out", str(tmp_path)))) == batch(PLAIN)
    assert batch(run_config(train_args("--set", f"model={tmp_path}", "--out", str(tmp_path)))) == batch(PLAIN)
    run = tmp_path / "run"
    run.mkdir()  # a run saved before the model had defaults: resuming keeps its batch
    (run / "config.json").write_text(json.dumps(TrainConfig(model="smollm2", out_dir=str(run)).to_dict()))
    cfg = run_config(train_args("--out", str(run), "--resume"))
    assert batch(cfg) == batch(PLAIN) and cfg.model == "smollm2"


def test_with_model_defaults_counts_a_whole_table_as_given() -> None:
    cfg = TrainConfig(model="smollm2", grpo={"group_size": 2})
    assert batch(with_model_defaults(cfg, given={"grpo"})) == (4, 2)
    assert batch(with_model_defaults(cfg, given={"grpo.kl_coef"})) == (4, 4)


@pytest.mark.parametrize(
    ("argv", "threads"),
    [
        ([], 1),  # the model's
        (["--threads", "2"], 2),  # the user's
        (["--set", "device=cuda"], None),  # a GPU run keeps torch's count, whatever it is when the command starts
    ],
)
def test_train_runs_with_the_model_thread_count_unless_told(
    argv: list[str], threads: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command's wiring only: the loop itself is replaced by one that records what it was given."""
    import turnkit.train.loop as loop

    seen: dict[str, Any] = {}

    def record(cfg: TrainConfig, **_: Any) -> Any:
        seen.update(threads=torch.get_num_threads(), cfg=cfg)
        return argparse.Namespace(history=[], steps_done=0, run_dir=tmp_path, final_eval=None)

    monkeypatch.setattr(loop, "train", record)
    expected = threads if threads is not None else torch.get_num_threads()
    assert main(["train", "--set", "model=smollm2", "--out", str(tmp_path), *argv]) == 0
    assert seen["threads"] == expected and batch(seen["cfg"]) == (4, 4)
    assert MODELS["smollm2"].threads == 1
