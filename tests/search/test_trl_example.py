"""The TRL example of docs/synth.md runs offline on a dataset exported by turnkit (slow: imports TRL)."""

import re
from pathlib import Path

import pytest

from turnkit.search.pairs import PreferencePair, write_pairs
from turnkit.types import Message

DOC = Path(__file__).resolve().parents[2] / "docs" / "synth.md"


def trl_block() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    [block] = [b for b in blocks if "DPOTrainer" in b]
    return block


@pytest.mark.slow
# TRL 1.16's trainer calls transformers' deprecated gradient_checkpointing names itself (not turnkit code)
@pytest.mark.filterwarnings("ignore:.*gradient_checkpointing.* is deprecated:FutureWarning")
def test_docs_trl_example_trains_on_exported_pairs(tmp_path):
    pytest.importorskip("trl")
    from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer, save_tiny

    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64))
    model_dir = save_tiny(model, tok, tmp_path / "model")
    pairs = [
        PreferencePair(
            (Message("user", f"{i}+1?"), Message("assistant", "hm"), Message("user", "Try again.")),
            f"ANSWER: {i + 1}",
            f"ANSWER: {i + 2}",
            q_chosen=1.0,
            q_rejected=-1.0,
            n_chosen=3,
            n_rejected=1,
            confidence=0.75,
            seed=i,
            env_id="demo",
            step=1,
        )
        for i in range(8)
    ]
    data = write_pairs(pairs, tmp_path / "dataset.jsonl")
    code = trl_block().replace("runs/synth-math/dataset.jsonl", str(data)).replace("runs/tiny-model", str(model_dir))
    code = code.replace("runs/trl-dpo", str(tmp_path / "trl-out"))
    scope: dict = {}
    exec(compile(code, str(DOC), "exec"), scope)
    history = scope["trainer"].state.log_history
    assert scope["trainer"].state.global_step == 3
    assert any(h.get("train_loss", 0) > 0 for h in history)
