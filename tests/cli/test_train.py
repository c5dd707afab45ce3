from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerFast
from transformers.utils import logging as hf_logging

from tests.train.conftest import SMALL
from turnkit.cli import main
from turnkit.models.tiny import build_tiny_model, save_tiny


def test_parser_building_does_not_import_torch() -> None:
    code = "import sys; from turnkit.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_bad_key_is_refused_before_torch_loads(tmp_path: Path) -> None:
    """``turnkit train --set`` validates the whole config (a critic table too) before the model code loads."""
    code = (
        "import sys; from turnkit.cli import main; "
        f"rc = main(['train', '--set', 'critic.prime.beta=0.1', '--set', 'optim.lrr=1', '--out', {str(tmp_path)!r}]); "
        "print(rc, sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "2 []"
    assert "unknown OptimConfig key 'lrr' (did you mean 'lr'?)" in out.stderr


@pytest.mark.parametrize("quiet", [True, False])
def test_train_command_runs_a_config_file_with_overrides(
    quiet: bool, tokenizer: PreTrainedTokenizerFast, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    model_dir = save_tiny(build_tiny_model(tokenizer, SMALL), tokenizer, tmp_path / "model")
    config = tmp_path / "run.toml"
    config.write_text(
        f'model = "{model_dir}"\nsteps = 5\ngroups_per_step = 2\n\n[grpo]\ngroup_size = 2\n'
        "\n[sampling]\nmax_new_tokens = 4\n"
    )
    argv = [
        "train",
        "--config",
        str(config),
        "--set",
        "steps=1",
        "--set",
        "max_turns=1",
        "--out",
        str(tmp_path / "run"),
        *(["--quiet"] if quiet else []),
    ]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "trained 1 steps" in out
    assert json.loads((tmp_path / "run" / "config.json").read_text())["steps"] == 1
    assert ("Loading weights" in err) is not quiet  # --quiet silences transformers' bars too ...
    assert hf_logging.is_progress_bar_enabled()  # ... while the command runs, not for the process after it
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ


def test_quiet_in_a_fresh_process_shows_no_bars_and_no_warning(
    tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    """As a user runs it: transformers is first imported by the command, under ``--quiet``."""
    model_dir = save_tiny(build_tiny_model(tokenizer, SMALL), tokenizer, tmp_path / "model")
    sets = [f"model={model_dir}", "steps=1", "grpo.group_size=2", "groups_per_step=2", "sampling.max_new_tokens=4"]
    sets.append("max_turns=1")
    argv = ["train", "--out", str(tmp_path / "run"), "--quiet", *[a for s in sets for a in ("--set", s)]]
    code = f"import sys; from turnkit.cli import main; sys.exit(main({argv!r}))"
    done = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Loading weights" not in done.stderr and "trained 1 steps" in done.stdout


def test_train_command_reports_config_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["train", "--set", "optim.lr=-1", "--out", str(tmp_path)]) == 2
    assert "TrainConfig.optim: OptimConfig.lr" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_a_bad_thread_count_is_refused_naming_the_flag(value: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["quickstart", "--threads", value])
    assert exc.value.code == 2
    assert f"--threads must be an int >= 1, got '{value}'" in capsys.readouterr().err
