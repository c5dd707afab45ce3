"""The update sorts a split minibatch's rows by length: less padding through the model, the same step."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from turnkit.agents.hf import chat_prompt_ids
from turnkit.learners import logprobs
from turnkit.learners.learner import Learner
from turnkit.rollout.batch import TokenRow, collate
from turnkit.rollout.demos import completion_ids
from turnkit.train import loop
from turnkit.train.config import TrainConfig
from turnkit.train.update_layout import length_sorted
from turnkit.types import Message, Step, Trajectory

from .conftest import make_policy
from .test_loop import scored_turn

ANSWERS = [
    ("ANSWER: 4", 1.0),
    ("The sum of two and two is four, so the answer is ANSWER: 4", 1.0),
    ("5", 0.0),
    ("I think that two plus two makes five, ANSWER: 5", 0.0),
] * 2
"""Short and long completions in turn: in rollout order every micro-batch pads a short row to a long one."""


def padded_tokens_seen(policy: Any) -> list[int]:
    """Record the ``[B, T]`` size of every decoder pass (forward only: the update's passes are not re-run)."""
    seen: list[int] = []

    def hook(_module: Any, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        seen.append(int(ids.numel()))

    policy.model.get_decoder().register_forward_pre_hook(hook, with_kwargs=True)
    return seen


def step(
    tokenizer: PreTrainedTokenizerFast, *, sort: bool, budget: int, plain_logits: bool = False, policy: Any = None
) -> Any:
    """One update on :data:`ANSWERS` with the loop's layout (``sort``) or the rows in rollout order.

    ``policy`` (default: a fresh tiny one on the CPU) is updated in place; the recorded log-probs are its own.
    """
    policy = policy if policy is not None else make_policy(tokenizer)
    prompt = chat_prompt_ids(tokenizer, [Message("user", "What is 2 plus 2?")])
    trajs = [
        Trajectory("demo", 0, (Step("q", scored_turn(policy, prompt, completion_ids(tokenizer, a)), r, True),), group=0)
        for a, r in ANSWERS
    ]
    seen = padded_tokens_seen(policy)
    cfg = TrainConfig(grpo={"group_size": 8}, optim={"max_grad_norm": 0.0}, update={"micro_batch_tokens": budget})
    with pytest.MonkeyPatch.context() as patch:
        if not sort:
            patch.setattr(loop, "length_sorted", lambda batch: batch)
        if not plain_logits:  # the tiny model's logits would take one pass anyway
            patch.setattr(logprobs, "PLAIN_LOGITS_BYTES", 0)
        learner = Learner(policy, cfg.optim, optimizer=torch.optim.SGD(policy.model.parameters(), lr=0.5))
        metrics = loop.update(learner, trajs, cfg)
    return policy, metrics, seen


def test_sorted_micro_batches_pad_less_and_take_the_same_step(tokenizer: PreTrainedTokenizerFast) -> None:
    budget = 160  # a few rows per micro-batch
    one, one_metrics, _ = step(tokenizer, sort=True, budget=0)
    as_is, _, as_is_seen = step(tokenizer, sort=False, budget=budget)
    ordered, metrics, seen = step(tokenizer, sort=True, budget=budget)
    assert len(seen) > 1 and sum(seen) < sum(as_is_seen)  # fewer pad tokens through the decoder
    assert len(seen) <= len(as_is_seen)
    for p, q in zip(one.model.parameters(), ordered.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=0)  # the one-pass step, up to float rounding
    for p, q in zip(as_is.model.parameters(), ordered.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=0)
    for key in ("loss", "pg_loss", "grad_norm", "ratio_mean", "ratio_max", "clip_frac"):
        assert metrics[key] == pytest.approx(one_metrics[key], abs=1e-6), key


def test_a_one_pass_minibatch_keeps_its_row_order(tokenizer: PreTrainedTokenizerFast) -> None:
    """Bit for bit the step of runs made before the layout: the tiny models never split a minibatch."""
    sorted_run, metrics, seen = step(
        tokenizer, sort=True, budget=TrainConfig().update.micro_batch_tokens, plain_logits=True
    )
    plain_run, plain_metrics, _ = step(
        tokenizer, sort=False, budget=TrainConfig().update.micro_batch_tokens, plain_logits=True
    )
    assert len(seen) == 1  # one pass
    assert all(
        torch.equal(p, q) for p, q in zip(sorted_run.model.parameters(), plain_run.model.parameters(), strict=True)
    )
    assert metrics == plain_metrics


def test_length_sorted_moves_every_row_tensor_with_its_row() -> None:
    rows = [
        TokenRow.from_prompt_completion([1], [2] * n, logprobs=[-0.1 * n] * n, reward=float(n), traj_index=i)
        for i, n in enumerate((2, 5, 1, 5))
    ]
    batch = collate(rows, pad_id=0)
    out = length_sorted(batch)
    assert out.traj_index.tolist() == [1, 3, 0, 2]  # longest first; the two of length 6 keep their order
    assert out.rewards.tolist() == [5.0, 5.0, 2.0, 1.0]
    for i, b in enumerate(out.traj_index.tolist()):
        for name in ("input_ids", "attention_mask", "loss_mask", "advantages", "old_logprobs"):
            assert torch.equal(getattr(out, name)[i], getattr(batch, name)[b]), name
    assert length_sorted(out) is out
