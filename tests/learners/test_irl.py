"""IQLearn and AfD kernels against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from turnkit.errors import ConfigError, DataError
from turnkit.learners.irl import (
    closed_form_reward,
    discriminator_loss,
    discriminator_reward,
    extracted_rewards,
    iqlearn_loss,
    next_state_values,
    td_residuals,
    token_q_values,
)
from turnkit.learners.sft import sft_loss
from turnkit.rollout.batch import gather_token_logprobs


def _lse(*xs: float) -> float:
    return math.log(sum(math.exp(x) for x in xs))


# One row, vocabulary of 2: logits at positions 0..3, ids 0..4; the agent's tokens are 1, 2 (one turn) and 4.
LOGITS = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [3.0, 1.0], [0.5, 0.5], [0.0, 0.0]]])
IDS = torch.tensor([[0, 0, 1, 1, 0]])
MASK = torch.tensor([[False, True, True, False, True]])


def test_q_and_v_by_hand():
    q, v = token_q_values(LOGITS, IDS, MASK)
    # token 1 (id 0) from logits[0] = (1, 0); token 2 (id 1) from logits[1] = (0, 2); token 4 (id 0) from logits[3]
    assert q[0].tolist() == pytest.approx([0.0, 1.0, 2.0, 0.0, 0.5])
    assert v[0].tolist() == pytest.approx([0.0, _lse(1, 0), _lse(0, 2), 0.0, _lse(0.5, 0.5)])


def test_q_minus_v_is_the_log_softmax_of_the_taken_token():
    torch.manual_seed(0)
    logits = torch.randn(3, 7, 11, dtype=torch.float64)
    ids = torch.randint(0, 11, (3, 7))
    mask = torch.rand(3, 7) > 0.4
    mask[:, 0] = False
    q, v = token_q_values(logits, ids, mask, temperature=0.5)
    reference = torch.log_softmax(logits[:, :-1] / 0.5, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    expected = torch.where(mask[:, 1:], reference, torch.zeros_like(reference))
    assert torch.allclose((q - v)[:, 1:].double(), expected, atol=1e-5)
    assert torch.equal(q - v, gather_token_logprobs(logits, ids, mask, temperature=0.5))


def test_lambda_zero_is_exactly_the_sft_loss():
    torch.manual_seed(1)
    logits = torch.randn(2, 6, 9, requires_grad=True)
    ids = torch.randint(0, 9, (2, 6))
    mask = torch.tensor([[False, True, True, True, False, False], [False, False, True, True, True, True]])
    q, v = token_q_values(logits, ids, mask)
    iq, metrics = iqlearn_loss(q, v, mask, lam=0.0, gamma=0.9)
    sft, sft_metrics = sft_loss(gather_token_logprobs(logits, ids, mask), mask)
    assert torch.equal(iq, sft)
    assert metrics["nll"] == sft_metrics["nll"]
    (g_iq,) = torch.autograd.grad(iq, logits, retain_graph=True)
    (g_sft,) = torch.autograd.grad(sft, logits)
    assert torch.equal(g_iq, g_sft)


def test_next_state_value_is_zero_at_the_end_of_each_agent_span():
    v = torch.tensor([[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]])
    mask = torch.tensor([[False, True, True, False, True, True]])
    assert next_state_values(v, mask).tolist() == [[0.0, 2.0, 0.0, 0.0, 5.0, 0.0]]
    eos = torch.tensor([[False, True, False, False, False, False]])
    assert next_state_values(v, mask, terminal=eos).tolist() == [[0.0, 0.0, 0.0, 0.0, 5.0, 0.0]]


def test_iqlearn_loss_by_hand():
    q, v = token_q_values(LOGITS, IDS, MASK)
    gamma, lam = 0.5, 0.3
    lp = [1.0 - _lse(1, 0), 2.0 - _lse(0, 2), 0.5 - _lse(0.5, 0.5)]
    td = [1.0 - gamma * _lse(0, 2), 2.0 - 0.0, 0.5 - 0.0]  # V after token 2 and token 4 is 0 (end of the span)
    expected = sum(-a + lam * b * b for a, b in zip(lp, td, strict=True)) / 3
    loss, metrics = iqlearn_loss(q, v, MASK, lam=lam, gamma=gamma)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert metrics["td_sq"] == pytest.approx(sum(b * b for b in td) / 3, rel=1e-6)
    assert metrics["reward_mean"] == pytest.approx(sum(td) / 3, rel=1e-6)
    assert extracted_rewards(q, v, MASK, gamma=gamma)[0].tolist() == pytest.approx([0.0, td[0], td[1], 0.0, td[2]])


def test_seq_mean_aggregation_by_hand():
    q = torch.tensor([[0.0, 1.0, 1.0], [0.0, 2.0, 0.0]])
    v = torch.tensor([[0.0, 2.0, 3.0], [0.0, 2.5, 0.0]])
    mask = torch.tensor([[False, True, True], [False, True, False]])
    # row 0: lp (-1, -2), td (1 - 3, 1 - 0) = (-2, 1); row 1: lp -0.5, td 2
    row0 = ((1 + 4 * 1.0) + (2 + 1 * 1.0)) / 2
    row1 = 0.5 + 4 * 1.0
    loss, _ = iqlearn_loss(q, v, mask, lam=1.0, gamma=1.0, agg="seq_mean")
    assert loss.item() == pytest.approx((row0 + row1) / 2)


def test_gamma_one_rewards_telescope_to_loglik_plus_v0():
    torch.manual_seed(2)
    logits = torch.randn(1, 8, 5)
    ids = torch.randint(0, 5, (1, 8))
    mask = torch.tensor([[False, False, False, True, True, True, True, True]])
    q, v = token_q_values(logits, ids, mask)
    total = float(extracted_rewards(q, v, mask, gamma=1.0).sum())
    loglik = float(gather_token_logprobs(logits, ids, mask).sum())
    assert total == pytest.approx(loglik + float(v[0, 3]), abs=1e-5)


def test_stop_gradient_cuts_the_bootstrap_path():
    q = torch.tensor([[0.0, 1.0, 2.0]])
    v = torch.tensor([[0.0, 3.0, 4.0]], requires_grad=True)
    mask = torch.tensor([[False, True, True]])
    td = td_residuals(q, v, mask, gamma=1.0)
    (g,) = torch.autograd.grad(td[0, 1], v)
    assert g.tolist() == [[0.0, 0.0, -1.0]]
    td = td_residuals(q, v, mask, gamma=1.0, stop_grad_next=True)
    assert not td[0, 1].requires_grad or torch.autograd.grad(td[0, 1], v, allow_unused=True)[0] is None


def test_online_mix_weights_the_policy_rows_by_alpha():
    q = torch.tensor([[0.0, 1.0], [0.0, 0.5]])
    v = torch.tensor([[0.0, 2.0], [0.0, 3.0]])
    mask = torch.tensor([[False, True], [False, True]])
    expert = torch.tensor([True, False])
    # expert: lp -1, td 1; policy: td 0.5 (the policy row's NLL does not count)
    loss, metrics = iqlearn_loss(q, v, mask, lam=2.0, expert=expert, alpha=0.1)
    assert loss.item() == pytest.approx(1.0 + 2.0 * (0.9 * 1.0 + 0.1 * 0.25))
    assert metrics["td_sq_policy"] == pytest.approx(0.25)
    assert metrics["num_tokens"] == 1.0


def test_empty_batches_raise_instead_of_nan():
    q = v = torch.zeros(2, 3)
    with pytest.raises(DataError, match="no loss tokens"):
        iqlearn_loss(q, v, torch.zeros(2, 3, dtype=torch.bool), lam=0.1)
    policy_only = torch.tensor([[False, True, True], [False, True, False]])
    with pytest.raises(DataError, match="no loss tokens"):
        iqlearn_loss(q, v, policy_only, lam=0.1, expert=torch.tensor([False, False]), alpha=0.5)
    with pytest.raises(ConfigError, match="no policy rows"):
        iqlearn_loss(q, v, policy_only, lam=0.1, alpha=0.1)
    with pytest.raises(ConfigError, match="lam"):
        iqlearn_loss(q, v, policy_only, lam=-1.0)
    with pytest.raises(ConfigError, match="gamma"):
        iqlearn_loss(q, v, policy_only, lam=1.0, gamma=1.5)


def test_discriminator_loss_by_hand():
    loss, metrics = discriminator_loss(torch.tensor([1.0, 3.0]), torch.tensor([-2.0]))
    expected = (math.log1p(math.exp(-1.0)) + math.log1p(math.exp(-3.0))) / 2 + math.log1p(math.exp(-2.0))
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert metrics["accuracy"] == 1.0
    assert metrics["margin"] == pytest.approx(4.0)
    with pytest.raises(DataError):
        discriminator_loss(torch.tensor([1.0]), torch.tensor([]))


def test_discriminator_reward_is_log_odds_and_finite_when_saturated():
    for d in (0.1, 0.5, 0.97):
        f = torch.tensor([math.log(d) - math.log(1 - d)])
        assert discriminator_reward(f).item() == pytest.approx(math.log(d) - math.log(1 - d), abs=1e-5)
    assert discriminator_reward(torch.tensor([200.0, -200.0])).tolist() == pytest.approx([200.0, -200.0])


def test_closed_form_reward():
    assert closed_form_reward(torch.tensor([-1.5]), torch.tensor([-4.0])).tolist() == [2.5]
    with pytest.raises(ValueError):
        closed_form_reward(torch.tensor([1.0, 2.0]), torch.tensor([1.0]))
