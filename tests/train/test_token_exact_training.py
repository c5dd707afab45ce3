"""Episode-layout GRPO on a BPE tokenizer with a ChatML template: multi-turn training never stops on id drift."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from turnkit.agents.hf import HFPolicy
from turnkit.errors import ConfigError, DataError
from turnkit.models.bpe import build_bpe_tokenizer
from turnkit.models.tiny import TinyModelConfig, build_tiny_model
from turnkit.rollout.batch import find_prefix_mismatch
from turnkit.train import loop
from turnkit.train.config import TrainConfig
from turnkit.train.loop import train

SMALL = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_position_embeddings=1024)
MATH = {"max_attempts": 5, "max_invalid_actions": 5}


def bpe_policy() -> HFPolicy:
    tok = build_bpe_tokenizer()
    return HFPolicy(build_tiny_model(tok, SMALL, seed=0), tok, max_new_tokens=12)


def run_config(out: Path, **changes: Any) -> TrainConfig:
    base = TrainConfig(
        env_kwargs=MATH,
        steps=2,
        grpo={"group_size": 2, "kl_coef": 0.01},
        groups_per_step=2,
        max_turns=5,
        out_dir=str(out),
        optim={"lr": 1e-3},
        sampling={"max_new_tokens": 12},
        update={"batch_layout": "episodes"},
        log={"checkpoint_every": 0},
    )  # fmt: skip  (a KL term: rows train even when a random policy ties)
    return dataclasses.replace(base, **changes)


def test_episode_rows_train_on_five_turn_episodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batches: list = []
    real = loop.update

    def spy(learner: Any, trajs: Any, cfg: Any, **kwargs: Any) -> Any:
        batches.append(trajs)
        return real(learner, trajs, cfg, **kwargs)

    monkeypatch.setattr(loop, "update", spy)
    result = train(run_config(tmp_path), policy=bpe_policy(), progress=False)
    assert result.steps_done == 2
    trajs = [t for batch in batches for t in batch]
    assert max(len(t.steps) for t in trajs) == 5  # real multi-turn episodes
    assert all(find_prefix_mismatch(t) is None for t in trajs)
    assert any(r.get("optimizer_steps", 0) > 0 for r in result.history)


def test_without_token_exact_contexts_the_same_run_drifts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: re-rendered contexts (no ChatDelta) make episode rows impossible on the same run."""
    monkeypatch.setattr(loop, "token_exact_chat", lambda policy, cfg: None)
    with pytest.raises(DataError, match="rewrites earlier turns"):
        train(run_config(tmp_path), policy=bpe_policy(), progress=False)


def test_a_template_that_rewrites_turns_is_refused_for_episode_rows(tmp_path: Path) -> None:
    policy = bpe_policy()
    policy.tokenizer.chat_template = (  # drops every assistant message but the last: not prefix-preserving
        "{% for m in messages %}{% if m.role != 'assistant' or loop.last %}<|im_start|>{{ m.role }}\n"
        "{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
        "{% endif %}"
    )
    with pytest.raises(ConfigError, match="batch_layout='episodes' needs token-exact contexts"):
        train(run_config(tmp_path), policy=policy, progress=False)
    with pytest.warns(UserWarning, match="rendered again from text"):
        train(run_config(tmp_path / "turns", update={"batch_layout": "turns"}, steps=1), policy=policy, progress=False)


def test_kv_reuse_across_turns_records_the_log_probs_the_learner_recomputes(tmp_path: Path) -> None:
    policy = bpe_policy()
    result = train(run_config(tmp_path, rollout={"reuse_kv": True}), policy=policy, progress=False)
    assert policy.kv is not None and policy.kv.reused_tokens > 0  # later turns fed only the env's reply
    steps = [r for r in result.history if "ratio_max" in r]
    # one pass, one minibatch: the learner's log-probs of the sampled tokens are the recorded ones
    assert steps and all(abs(r["ratio_max"] - 1.0) < 5e-5 for r in steps)  # misplaced positions: 3e-4
