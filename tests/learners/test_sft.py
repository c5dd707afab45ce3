"""Hand-computed checks of the SFT loss and the RFT filter (python -m pytest tests/learners/test_sft.py)."""

from __future__ import annotations

import math

import pytest
import torch

from turnkit.errors import ConfigError
from turnkit.learners.sft import select_successful, sft_loss
from turnkit.rollout.batch import gather_token_logprobs
from turnkit.types import AgentTurn, ErrorCause, Step, Trajectory, TrajectoryError


def test_sft_loss_is_masked_token_mean_nll() -> None:
    # probabilities 1/2, 1/4 on the two loss tokens; the 1e-9 at position 0 is masked out
    logp = torch.log(torch.tensor([[1e-9, 0.5, 0.25]]))
    loss, m = sft_loss(logp, torch.tensor([[False, True, True]]))
    expected = (math.log(2) + math.log(4)) / 2  # (0.6931 + 1.3863) / 2 = 1.0397
    assert loss.item() == pytest.approx(expected)
    assert m["nll"] == pytest.approx(expected)
    assert m["ppl"] == pytest.approx(math.exp(expected))  # sqrt(8) = 2.8284
    assert m["num_tokens"] == 2.0


def test_sft_seq_mean() -> None:
    logp = torch.tensor([[-1.0, -3.0], [-2.0, -100.0]])
    mask = torch.tensor([[True, True], [True, False]])
    loss, m = sft_loss(logp, mask, agg="seq_mean")
    assert loss.item() == pytest.approx(((1 + 3) / 2 + 2) / 2)  # row means 2 and 2 -> 2
    assert m["nll"] == pytest.approx((1 + 3 + 2) / 3)  # nll metric is always the token mean


def test_sft_gradient_only_through_loss_tokens() -> None:
    logits = torch.zeros(1, 4, 3, requires_grad=True)  # uniform: every token has log-prob -ln 3
    mask = torch.tensor([[False, False, True, False]])
    logp = gather_token_logprobs(logits, torch.tensor([[0, 1, 2, 0]]), mask)
    loss, _ = sft_loss(logp, mask)
    assert loss.item() == pytest.approx(math.log(3))
    loss.backward()
    assert logits.grad is not None
    # d(-log softmax(z)[2])/dz = softmax(z) - onehot(2) = [1/3, 1/3, -2/3] at position 1 (it predicts token 2)
    assert logits.grad[0, 1].tolist() == pytest.approx([1 / 3, 1 / 3, -2 / 3])
    others = logits.grad[0, [0, 2, 3]]
    assert torch.count_nonzero(others).item() == 0


def _traj(reward: float, success: bool | None = None, error: bool = False) -> Trajectory:
    info = {} if success is None else {"success": success}
    step = Step("q", AgentTurn("a"), reward, terminated=True, info=info)
    err = TrajectoryError(ErrorCause.AGENT, "server 503", 0) if error else None
    return Trajectory("demo", seed=0, steps=(step,), error=err)


def test_select_successful_uses_success_flag() -> None:
    trajs = [_traj(0.0, success=True), _traj(1.0, success=False), _traj(0.5)]
    # info["success"] wins over reward; the third has no flag and falls back to reward > 0
    assert select_successful(trajs) == [trajs[0], trajs[2]]


def test_select_successful_min_reward() -> None:
    trajs = [_traj(0.2), _traj(0.5), _traj(0.9)]
    assert select_successful(trajs, min_reward=0.5) == trajs[1:]


def test_select_successful_never_keeps_errored() -> None:
    trajs = [_traj(1.0, success=True, error=True)]
    assert select_successful(trajs) == []
    assert select_successful(trajs, min_reward=0.0) == []


def test_select_successful_rejects_nan_threshold() -> None:
    with pytest.raises(ConfigError, match="min_reward"):
        select_successful([_traj(1.0)], min_reward=float("nan"))
