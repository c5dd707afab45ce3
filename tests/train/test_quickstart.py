from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnkit.train.quickstart import QuickstartConfig, run_quickstart, run_seeds

from .conftest import MICRO_RECIPE

MICRO_TRAIN = {"groups_per_step": 2, "grpo": {"group_size": 2}, "max_new_tokens": 8, "max_turns": 2}


def micro(out: Path, **kwargs: object) -> QuickstartConfig:
    return QuickstartConfig(
        out_dir=str(out), steps=2, eval_episodes=6, recipe=MICRO_RECIPE, train_overrides=MICRO_TRAIN,
        cache=str(out / "cache"), **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip


def test_quickstart_writes_summary_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    summary = run_quickstart(micro(tmp_path), progress=False)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["before"]["episodes"] == 6 and on_disk["train_config"]["steps"] == 2
    assert on_disk["improvement"] == pytest.approx(summary["after"]["success"] - summary["before"]["success"])
    lo, hi = on_disk["after"]["ci95"]
    assert lo <= on_disk["after"]["success"] <= hi
    assert on_disk["eval_seeds"] == [1_000_000_000, 1_000_000_005]
    assert (tmp_path / "quickstart.png").stat().st_size > 1000
    assert "SFT start" in capsys.readouterr().out


@pytest.mark.slow
def test_quickstart_over_seeds_aggregates_every_seed(tmp_path: Path) -> None:
    agg = run_seeds(micro(tmp_path), [0, 1], progress=False)
    assert [r["seed"] for r in agg["runs"]] == [0, 1]
    for mode in ("sampled", "greedy"):
        lo, hi = agg[mode]["improvement_ci95"]
        assert lo <= agg[mode]["improvement_mean"] <= hi
    assert (tmp_path / "seed-1" / "summary.json").is_file()
