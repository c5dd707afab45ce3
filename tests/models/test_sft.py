from __future__ import annotations

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from tests.train.conftest import make_policy
from turnkit.errors import ConfigError
from turnkit.models.sft import SFTConfig, batch_order, train_sft
from turnkit.rollout.demos import collect_demos, demo_rows
from turnkit.train.metrics import MetricsLog, read_metrics


@pytest.fixture(scope="module")
def rows(tokenizer: PreTrainedTokenizerFast) -> list:
    demos = collect_demos("turnkit/MathEpisodes-v0", episodes=16, seed=0, env_kwargs={"difficulty": 1})
    return demo_rows(demos.trajectories, tokenizer)


def mean_nll(model: torch.nn.Module, rows: list, pad_id: int) -> float:
    from turnkit.learners.sft import sft_loss
    from turnkit.rollout.batch import collate, gather_token_logprobs

    batch = collate(rows, pad_id=pad_id)
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    return sft_loss(gather_token_logprobs(logits, batch.input_ids, batch.loss_mask), batch.loss_mask)[1]["nll"]


def test_sft_lowers_the_demonstration_nll(tokenizer: PreTrainedTokenizerFast, rows: list, tmp_path) -> None:
    policy = make_policy(tokenizer)
    before = mean_nll(policy.model, rows, tokenizer.pad_token_id)
    log = MetricsLog(tmp_path / "sft.jsonl")
    history = train_sft(
        policy.model,
        rows,
        SFTConfig(steps=20, batch_size=16, optim={"lr": 1e-2, "warmup_steps": 2}),
        pad_id=0,
        progress=False,
        on_step=log.write,
    )
    after = mean_nll(policy.model, rows, tokenizer.pad_token_id)
    assert after < 0.6 * before
    assert [r["step"] for r in read_metrics(tmp_path / "sft.jsonl")] == list(range(1, 21))
    assert history[-1]["loss"] < history[0]["loss"]


def test_sft_trains_only_the_lora_adapter(tokenizer: PreTrainedTokenizerFast, rows: list) -> None:
    policy = make_policy(tokenizer)
    policy.attach_lora(r=4)
    frozen = {n: p.detach().clone() for n, p in policy.model.named_parameters() if not p.requires_grad}
    train_sft(policy.model, rows, SFTConfig(steps=3, batch_size=8, optim={"lr": 1e-2}), pad_id=0, progress=False)
    assert all(torch.equal(p, frozen[n]) for n, p in policy.model.named_parameters() if n in frozen)


def test_batch_order_visits_every_row_once_per_epoch() -> None:
    import numpy as np

    order = batch_order(6, 3, 4, np.random.default_rng(1))
    assert sorted(order[0] + order[1]) == list(range(6))
    assert sorted(order[2] + order[3]) == list(range(6))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"steps": 0}, "steps"),
        ({"optim": {"lr": 0.0}}, "optim: OptimConfig.lr"),
        ({"optim": {"min_lr_ratio": 2.0}}, "min_lr_ratio"),
    ],
)
def test_sft_config_names_the_bad_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        SFTConfig(**kwargs)


def test_train_sft_refuses_no_rows(tokenizer: PreTrainedTokenizerFast) -> None:
    with pytest.raises(ConfigError, match="no rows"):
        train_sft(make_policy(tokenizer).model, [], SFTConfig(), pad_id=0, progress=False)
