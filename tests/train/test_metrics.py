from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerFast

from turnkit.train.config import TrainConfig
from turnkit.train.loop import train
from turnkit.train.metrics import MetricsLog, read_metrics

from .conftest import LETTER_ENV, make_policy


def test_tensorboard_run_writes_the_logged_scalars(tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = TrainConfig(
        env_id=LETTER_ENV,
        env_kwargs={},
        steps=1,
        grpo={"group_size": 2},
        groups_per_step=2,
        out_dir=str(tmp_path),
        sampling={"max_new_tokens": 4},
        log={"tensorboard": True},
    )
    train(cfg, policy=make_policy(tokenizer, max_new_tokens=4), progress=False)

    assert list((tmp_path / "tb").glob("events.out.tfevents.*")), "no TensorBoard event file under out_dir/tb"
    (record,) = read_metrics(tmp_path / "metrics.jsonl")
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    scalars = set(events.Tags()["scalars"])
    assert {"reward_mean", "success_rate", "loss"} <= scalars
    assert "step" not in scalars
    (point,) = events.Scalars("reward_mean")
    assert point.step == 1
    assert point.value == pytest.approx(record["reward_mean"], rel=1e-6, abs=1e-7)


def test_missing_tensorboard_package_is_a_config_error_at_construction(tmp_path: Path) -> None:
    # A fresh interpreter where `import tensorboard` fails exactly as it would without the package.
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["tensorboard"] = None
        from turnkit.errors import ConfigError
        from turnkit.train.metrics import MetricsLog
        try:
            MetricsLog({str(tmp_path / "m.jsonl")!r}, tensorboard_dir={str(tmp_path / "tb")!r})
        except ConfigError as exc:
            print("CONFIG_ERROR:", exc)
        else:
            print("NO_ERROR")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "CONFIG_ERROR:" in proc.stdout, proc.stdout + proc.stderr
    assert "pip install tensorboard" in proc.stdout
    assert "turnkit[train]" in proc.stdout
    assert not (tmp_path / "tb").exists()


def test_without_tensorboard_dir_no_events_are_written(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / "m.jsonl")
    log.write({"step": 3, "reward_mean": 0.5})
    assert read_metrics(tmp_path / "m.jsonl") == [{"step": 3, "reward_mean": 0.5}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.jsonl"]
