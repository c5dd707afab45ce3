"""Resuming from damaged checkpoints of a real (tiny) GRPO run: fall back to the newest intact one, or refuse.

The last tests do the same for ``turnkit synth``'s resume state (state file, search trees, adapters).

Run: ``python -m pytest tests/train/test_checkpoint_recovery.py -q``.

A 3-step run with a checkpoint every step keeps ``step-000002`` and ``step-000003``. Each test copies it,
damages ``step-000003`` in one way and resumes to step 4. The fallback step is read off ``metrics.jsonl``:
records of steps the resumed call kept carry a marker, records it wrote do not. Resumed runs must also end
with the weights of an uninterrupted 4-step run (resume is exact, so continuing from the wrong state or
from scratch after a wrong fallback would show up as a different final step count or marker pattern).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from turnkit.agents.oracle import OracleAgent
from turnkit.checkpoint import MANIFEST, check_manifest
from turnkit.cli import main
from turnkit.errors import CheckpointError, CheckpointWarning
from turnkit.models.tiny import save_tiny
from turnkit.search.mcts import MCTSConfig
from turnkit.search.pairs import PairConfig
from turnkit.search.tree import SearchTree
from turnkit.train.config import TrainConfig
from turnkit.train.dpo import DPOConfig
from turnkit.train.loop import TrainResult, train
from turnkit.train.metrics import read_metrics
from turnkit.train.runlock import read_holder
from turnkit.train.synth import SynthConfig, synthesize

from .conftest import LETTER_ENV, make_policy


def run_config(out: Path, steps: int, **changes: object) -> TrainConfig:
    cfg = TrainConfig(
        env_id=LETTER_ENV,
        env_kwargs={},
        steps=steps,
        grpo={"group_size": 4},
        groups_per_step=2,
        optim={"lr": 3e-3},
        out_dir=str(out),
        seed=11,
        sampling={"max_new_tokens": 8},
        log={"checkpoint_every": 1},
    )
    return dataclasses.replace(cfg, **changes)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def tok() -> PreTrainedTokenizerFast:
    from turnkit.models.tiny import build_tiny_tokenizer

    return build_tiny_tokenizer()


@pytest.fixture(scope="module")
def three_steps(tok: PreTrainedTokenizerFast, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 3-step run whose metrics records are marked (so resumed records can be told apart)."""
    run = tmp_path_factory.mktemp("three") / "run"
    train(run_config(run, 3), policy=make_policy(tok, max_new_tokens=8), progress=False)
    records = [{**r, "marker": "first run"} for r in read_metrics(run / "metrics.jsonl")]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    names = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert names == ["LATEST", "step-000002", "step-000003"], names
    return run


@pytest.fixture(scope="module")
def uninterrupted(tok: PreTrainedTokenizerFast, tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    run = tmp_path_factory.mktemp("full") / "run"
    return train(run_config(run, 4), policy=make_policy(tok, max_new_tokens=8), progress=False)


def resume(run: Path, tok: PreTrainedTokenizerFast, steps: int = 4) -> TrainResult:
    return train(run_config(run, steps), policy=make_policy(tok, max_new_tokens=8), resume=True, progress=False)


def kept_steps(run: Path) -> list[int]:
    """Steps whose records survived from the first run (i.e. up to the step the resume started from)."""
    return [r["step"] for r in read_metrics(run / "metrics.jsonl") if r.get("marker") == "first run"]


def truncate(path: Path) -> None:
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)


def flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = bytes(b ^ 0xFF for b in data[middle : middle + 8])
    path.write_bytes(bytes(data))  # same size: only the checksum can tell


def half_written(ckpt: Path) -> None:
    """As if copied by a tool that died midway: no manifest, the weights folder not there yet."""
    (ckpt / MANIFEST).unlink()
    shutil.rmtree(ckpt / "model")


def bad_json_without_manifest(ckpt: Path) -> None:
    """A checkpoint without a manifest (as written before manifests existed) is verified by reading it."""
    (ckpt / MANIFEST).unlink()
    (ckpt / "state.json").write_text('{"step": 3, "config": ')


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated optimizer": (lambda c: truncate(c / "optimizer.pt"), r"optimizer\.pt: [\d,]+ bytes, .*\(truncated\)"),
    "corrupted weights": (
        lambda c: flip_bytes(c / "model" / "model.safetensors"), r"model/model\.safetensors: CRC-32 .*corrupted"
    ),
    "missing rng file": (lambda c: (c / "rng.pt").unlink(), r"rng\.pt: missing"),
    "bad JSON, checked by manifest": (lambda c: (c / "state.json").write_text("{oops"), r"state\.json: .* bytes"),
    "bad JSON, no manifest": (bad_json_without_manifest, r"state\.json: cannot be read \(JSONDecodeError"),
    "half-written folder": (half_written, r"model: cannot be read \("),
    "unreadable manifest": (lambda c: (c / MANIFEST).write_text("\x00\x01"), r"MANIFEST\.json: unreadable"),
}  # fmt: skip


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_resume_falls_back_past_a_damaged_newest_checkpoint(
    damage: str, three_steps: Path, uninterrupted: TrainResult, tok: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(three_steps, run)
    newest = run / "checkpoints" / "step-000003"
    damage_fn, reason = DAMAGE[damage]
    damage_fn(newest)
    with pytest.warns(CheckpointWarning) as caught:
        result = resume(run, tok)
    (message,) = [str(w.message) for w in caught if issubclass(w.category, CheckpointWarning)]
    assert message.startswith(f"checkpoint {newest} is damaged (")
    assert message.endswith("; moved to step-000003.damaged; resuming from step-000002 instead")
    assert re.search(reason, message), message
    # resumed from step 2: steps 1-2 kept from the first run, 3-4 written by this call
    assert kept_steps(run) == [1, 2]
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")] == [1, 2, 3, 4]
    assert result.steps_done == 4
    # training continued for real and exactly: the same weights as a run that was never interrupted
    pairs = zip(uninterrupted.policy.model.parameters(), result.policy.model.parameters(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
    checkpoints = run / "checkpoints"
    assert (checkpoints / "LATEST").read_text().strip() == "step-000004"
    assert check_manifest(checkpoints / "step-000004") is None
    assert (checkpoints / "step-000003.damaged").is_dir() and check_manifest(checkpoints / "step-000003") is None
    assert read_holder(run) is None  # the run lock was released


def test_an_intact_checkpoint_resumes_without_a_warning(
    three_steps: Path, tok: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(three_steps, run)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        resume(run, tok)
    assert kept_steps(run) == [1, 2, 3]


def test_a_missing_newest_folder_named_by_latest_falls_back(
    three_steps: Path, tok: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(three_steps, run)
    shutil.rmtree(run / "checkpoints" / "step-000003")  # LATEST still names it
    staging = run / "checkpoints" / ".step-000004.crashed"  # a save that died before its rename
    staging.mkdir()
    (staging / "optimizer.pt").write_bytes(b"partial")
    with pytest.warns(CheckpointWarning, match=r"step-000003 is damaged \(missing\); resuming from step-000002"):
        resume(run, tok)
    assert kept_steps(run) == [1, 2]
    assert not staging.exists()


def test_lora_checkpoint_with_a_damaged_adapter_falls_back(tok: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    cfg = run_config(tmp_path, 2, lora={"r": 4}, optim={"lr": 1e-2})
    train(cfg, policy=make_policy(tok, max_new_tokens=8), progress=False)
    truncate(tmp_path / "checkpoints" / "step-000002" / "adapter" / "adapter_model.safetensors")
    with pytest.warns(CheckpointWarning, match=r"adapter/adapter_model\.safetensors: .*truncated.*from step-000001"):
        result = train(dataclasses.replace(cfg, steps=3), policy=make_policy(tok, max_new_tokens=8), resume=True,
                       progress=False)  # fmt: skip
    assert result.steps_done == 3 and result.policy.has_adapter
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2, 3]


def test_no_intact_checkpoint_is_a_typed_error_naming_every_file(
    three_steps: Path, tok: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(three_steps, run)
    truncate(run / "checkpoints" / "step-000003" / "optimizer.pt")
    (run / "checkpoints" / "step-000002" / "rng.pt").unlink()
    before = (run / "metrics.jsonl").read_text()
    with pytest.raises(CheckpointError) as info:
        resume(run, tok)
    message = str(info.value)
    assert message.startswith(f"no intact checkpoint in {run / 'checkpoints'} (step-000003: optimizer.pt: ")
    assert "step-000002: rng.pt: missing" in message
    assert message.endswith("start a fresh run (without resume) or use another out_dir")
    assert [p.name for p, _ in info.value.damaged] == ["step-000003", "step-000002"]
    # nothing was changed: no folder moved aside, the log untouched, the lock released despite the error
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["LATEST", "step-000002", "step-000003"]
    assert (run / "metrics.jsonl").read_text() == before
    assert read_holder(run) is None


def test_cli_resume_reports_no_intact_checkpoint(
    three_steps: Path, tok: PreTrainedTokenizerFast, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run = tmp_path / "run"
    shutil.copytree(three_steps, run)
    for ckpt in ("step-000002", "step-000003"):
        (run / "checkpoints" / ckpt / "state.json").write_text("not json")
    model = save_tiny(make_policy(tok).model, tok, tmp_path / "model")
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume", "--quiet", "--set", f"model={model}"]) == 2
    (err,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("turnkit: error:")]
    assert err.startswith(f"turnkit: error: no intact checkpoint in {run / 'checkpoints'} (step-000003: state.json: ")
    assert "step-000002: state.json:" in err


# ---------------------------------------------------------------------------------------------- synth resume

SYNTH_MCTS = MCTSConfig(iterations=2, root_multiplier=1, n_actions=2, parallel=2, depth_limit=1)


def synth_config(**changes: object) -> SynthConfig:
    base: dict[str, object] = dict(
        env_id="turnkit/MathEpisodes-v0", iterations=2, tasks_per_iteration=2, mcts=SYNTH_MCTS, train=False,
        env_kwargs={"difficulty": 1, "token_budget": 12, "budget_unit": "chars"}, render_trees=0,
        pairs=PairConfig(require_success=False), dpo=DPOConfig(epochs=1),
    )  # fmt: skip
    base.update(changes)
    return SynthConfig(**base)  # type: ignore[arg-type]


def test_synth_falls_back_to_the_previous_state_file(tmp_path: Path) -> None:
    synthesize(synth_config(), OracleAgent(), tmp_path, progress=False)
    (tmp_path / "state.json").write_text('{"version": 1, "iter')  # torn
    with pytest.warns(CheckpointWarning) as caught:
        result = synthesize(synth_config(), OracleAgent(), tmp_path, progress=False)
    (message,) = [str(w.message) for w in caught if issubclass(w.category, CheckpointWarning)]
    assert message.startswith(f"synth state {tmp_path / 'state.json'} is damaged (not valid JSON (")
    assert message.endswith("resuming from state.prev.json (1 completed iterations) instead")
    assert [m["iteration"] for m in result.iterations] == [0, 1]
    assert result.iterations[1]["trees_reused"] == 2  # only the last iteration was redone, from its saved trees
    assert json.loads((tmp_path / "state.json").read_text())["iterations"][1]["iteration"] == 1
    assert (tmp_path / "state.json.damaged").read_text() == '{"version": 1, "iter'


def test_synth_without_any_readable_state_is_a_typed_error(tmp_path: Path) -> None:
    synthesize(synth_config(), OracleAgent(), tmp_path, progress=False)
    (tmp_path / "state.json").write_text("")
    (tmp_path / "state.prev.json").unlink()
    with pytest.raises(CheckpointError, match=r"state\.json: not valid JSON .*; state\.prev\.json: missing"):
        synthesize(synth_config(), OracleAgent(), tmp_path, progress=False)
    assert read_holder(tmp_path) is None


def test_synth_searches_a_damaged_tree_again(tmp_path: Path) -> None:
    cfg = synth_config(iterations=1)
    synthesize(cfg, OracleAgent(), tmp_path, progress=False)
    state = json.loads((tmp_path / "state.json").read_text())
    state["iterations"] = []  # as if the run died before finishing iteration 0
    (tmp_path / "state.json").write_text(json.dumps(state))
    tree = tmp_path / "iter_000" / "trees" / "seed_1.json"
    truncate(tree)
    match = rf"damaged search tree \({re.escape(str(tree))}:1: invalid JSON.*searching task seed 1 again"
    with pytest.warns(CheckpointWarning, match=match):
        result = synthesize(cfg, OracleAgent(), tmp_path, progress=False)
    assert result.iterations[0]["trees_reused"] == 1
    assert SearchTree.load(tree).seed == 1


def test_synth_falls_back_past_a_damaged_adapter(tok: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    cfg = synth_config(train=True)
    synthesize(cfg, make_policy(tok, max_new_tokens=3), tmp_path, progress=False)
    adapter = tmp_path / "iter_001" / "adapter"
    assert check_manifest(adapter) is None
    truncate(adapter / "adapter_model.safetensors")
    policy = make_policy(tok, max_new_tokens=3)
    with pytest.warns(CheckpointWarning) as caught:
        result = synthesize(cfg, policy, tmp_path, progress=False)
    (message,) = [str(w.message) for w in caught if issubclass(w.category, CheckpointWarning)]
    assert message.startswith(f"adapter {adapter} is damaged (adapter_model.safetensors: ")
    assert message.endswith(
        "resuming from iteration 0's adapter and redoing iterations 1..1 (their saved trees are reused)"
    )
    assert [m["iteration"] for m in result.iterations] == [0, 1]
    assert result.iterations[1]["trees_reused"] == 2 and "dpo" in result.iterations[1]
    assert check_manifest(adapter) is None and policy.has_adapter
