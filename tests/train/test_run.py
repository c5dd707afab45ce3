"""The run harness (turnkit.train.run): lock, config.json, resume from the newest intact checkpoint, cadence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from turnkit.checkpoint import checkpoint_path
from turnkit.errors import CheckpointError, CheckpointWarning, ConfigError, RunLockedError
from turnkit.train.metrics import read_metrics
from turnkit.train.run import Cadence, Run, read_state, save_checkpoint
from turnkit.train.runlock import RunLock, read_holder

CONFIG = {"lr": 0.1, "steps": 6, "targets": ("q", "v")}


def run_steps(folder: Path, steps: int, *, resume: bool, every: int = 2, **config: Any) -> tuple[int, Any]:
    """A toy loop on the harness: logs ``loss`` per step, checkpoints a counter file; returns (start, loaded)."""
    cfg = {**CONFIG, **config, "steps": steps}
    saves = Cadence(every, steps)

    def load(ckpt: Path, state: dict[str, Any]) -> Any:
        return (ckpt / "counter.txt").read_text(), state["extra"]

    with Run(folder, cfg, resumable={"steps"}) as run:
        start, loaded = run.start(load, resume=resume)
        for step in range(start + 1, steps + 1):
            run.log({"step": step, "loss": 1.0 / step})
            if saves.due(step):
                run.save(step, lambda tmp, s=step: (tmp / "counter.txt").write_text(str(s)), {"extra": step * 10})
        run.finish(["loss"], title="toy")
    return start, loaded


def test_cadence_is_every_n_steps_and_after_the_last() -> None:
    assert [s for s in range(1, 11) if Cadence(4, 10).due(s)] == [4, 8, 10]
    assert [s for s in range(1, 11) if Cadence(0, 10).due(s)] == [10]
    assert not any(Cadence(4, 10, enabled=False).due(s) for s in range(1, 11))


def test_a_fresh_run_writes_config_metrics_checkpoints_and_curves(tmp_path: Path) -> None:
    assert run_steps(tmp_path, 5, resume=False) == (0, None)
    assert json.loads((tmp_path / "config.json").read_text()) == {"lr": 0.1, "steps": 5, "targets": ["q", "v"]}
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2, 3, 4, 5]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["LATEST", "step-000004", "step-000005"]
    assert (tmp_path / "curves.png").stat().st_size > 0
    assert read_holder(tmp_path) is None  # released


def test_resume_picks_the_newest_checkpoint_and_truncates_the_metrics(tmp_path: Path) -> None:
    run_steps(tmp_path, 5, resume=False, every=2)
    (tmp_path / "checkpoints" / "step-000005").rename(tmp_path / "checkpoints" / "gone")  # as if killed after 4
    (tmp_path / "checkpoints" / "LATEST").write_text("step-000004\n")
    start, loaded = run_steps(tmp_path, 6, resume=True)
    assert (start, loaded) == (4, ("4", 40))
    steps = [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")]
    assert steps == [1, 2, 3, 4, 5, 6]  # step 5 of the first run was dropped and written again


def test_resume_skips_a_damaged_checkpoint_with_a_warning(tmp_path: Path) -> None:
    run_steps(tmp_path, 5, resume=False, every=2)
    (checkpoint_path(tmp_path, 5) / "counter.txt").write_text("9")  # same size, other bytes: a CRC mismatch
    with pytest.warns(CheckpointWarning, match=r"step-000005 is damaged \(counter\.txt: CRC-32 .*from step-000004"):
        start, loaded = run_steps(tmp_path, 5, resume=True)
    assert (start, loaded) == (4, ("4", 40))
    assert (tmp_path / "checkpoints" / "step-000005.damaged").is_dir()
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2, 3, 4, 5]


def test_no_intact_checkpoint_is_a_typed_error(tmp_path: Path) -> None:
    run_steps(tmp_path, 2, resume=False, every=0)
    (checkpoint_path(tmp_path, 2) / "state.json").write_text("{}")
    with pytest.raises(CheckpointError, match="no intact checkpoint"):
        run_steps(tmp_path, 3, resume=True)
    assert read_holder(tmp_path) is None


def test_a_resumed_run_with_another_config_names_the_differing_keys(tmp_path: Path) -> None:
    run_steps(tmp_path, 2, resume=False)
    with pytest.raises(ConfigError, match=r"the config differs \(lr: 0\.1 -> 0\.5, seed: None -> 3\)"):
        run_steps(tmp_path, 4, resume=True, lr=0.5, seed=3)
    start, _ = run_steps(tmp_path, 4, resume=True)  # a resumable change (steps) is fine
    assert start == 2


def test_without_resume_the_run_starts_over_and_owns_its_log(tmp_path: Path) -> None:
    run_steps(tmp_path, 3, resume=False)
    assert run_steps(tmp_path, 2, resume=False) == (0, None)
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["LATEST", "step-000002"]


def test_the_run_holds_the_lock(tmp_path: Path) -> None:
    with Run(tmp_path, CONFIG) as run:
        assert "locked=True" in repr(run)
        with pytest.raises(RunLockedError):
            RunLock(tmp_path).acquire()
    with pytest.raises(RuntimeError, match="outside its `with` block"):
        run.log({"step": 1})


def test_read_state_fills_keys_newer_than_the_checkpoint_from_defaults(tmp_path: Path) -> None:
    ckpt = save_checkpoint(tmp_path, 3, {"lr": 0.1}, lambda tmp: None)
    assert read_state(ckpt, {"lr": 0.1, "new": 1}, defaults={"new": 1})["step"] == 3
    with pytest.raises(ConfigError, match=r"new: None -> 1"):
        read_state(ckpt, {"lr": 0.1, "new": 1})
