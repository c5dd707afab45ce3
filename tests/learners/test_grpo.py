"""Hand-computed checks of the PPO-clip / GRPO policy loss (python -m pytest tests/learners/test_grpo.py)."""

from __future__ import annotations

import math

import pytest
import torch

from turnkit.errors import ConfigError
from turnkit.learners.grpo import GRPOConfig, aggregate_tokens, policy_loss
from turnkit.rollout.batch import gather_token_logprobs

# One row, five positions; position 0 is prompt (masked). old logprobs are 0 on loss tokens, so ratio = exp(logp).
#   pos 1: rho 1.5, A = +1: min(1.5, clip 1.2) = 1.2  -> loss -1.2, clipped (gradient 0)
#   pos 2: rho 0.5, A = +1: min(0.5, clip 0.8) = 0.5  -> loss -0.5, not clipped (gradient -rho*A = -0.5)
#   pos 3: rho 0.5, A = -1: min(-0.5, -0.8) = -0.8    -> loss +0.8, clipped (gradient 0)
#   pos 4: rho 1.0, A = +2: -2                         -> loss -2.0, not clipped (gradient -2)
# token mean: (-1.2 - 0.5 + 0.8 - 2.0) / 4 = -0.725
LOGP = [7.0, math.log(1.5), math.log(0.5), math.log(0.5), 0.0]  # position 0 holds junk: it is masked
OLD = [-50.0, 0.0, 0.0, 0.0, 0.0]
ADV = [0.0, 1.0, 1.0, -1.0, 2.0]
MASK = [False, True, True, True, True]


def _loss(cfg: GRPOConfig, **kw):
    logp = torch.tensor([LOGP], requires_grad=True)
    loss, metrics = policy_loss(logp, torch.tensor([OLD]), torch.tensor([ADV]), torch.tensor([MASK]), cfg, **kw)
    return logp, loss, metrics


def test_ppo_clip_loss_hand_computed() -> None:
    _, loss, metrics = _loss(GRPOConfig(clip_eps=0.2))
    assert loss.item() == pytest.approx(-0.725)
    assert metrics["pg_loss"] == pytest.approx(-0.725)


def test_gradient_is_zero_on_clipped_and_masked_tokens() -> None:
    logp, loss, _ = _loss(GRPOConfig(clip_eps=0.2))
    loss.backward()
    assert logp.grad is not None
    # d/dlogp of -rho*A / 4 = -rho*A/4 where unclipped: pos 2 -> -0.5/4, pos 4 -> -2/4; others 0
    assert logp.grad[0].tolist() == pytest.approx([0.0, 0.0, -0.125, 0.0, -0.5])


def test_metrics_hand_computed() -> None:
    _, _, m = _loss(GRPOConfig(clip_eps=0.2))
    assert m["clip_frac"] == pytest.approx(0.5)  # positions 1 and 3 of 4
    assert m["ratio_mean"] == pytest.approx((1.5 + 0.5 + 0.5 + 1.0) / 4)
    assert m["ratio_max"] == pytest.approx(1.5)
    # k3 of log rho: (rho - 1) - log rho = [0.5 - ln 1.5, -0.5 - ln 0.5, -0.5 - ln 0.5, 0]
    k3 = [0.5 - math.log(1.5), -0.5 - math.log(0.5), -0.5 - math.log(0.5), 0.0]
    assert m["approx_kl"] == pytest.approx(sum(k3) / 4)
    assert m["num_tokens"] == 4.0


def test_clip_higher_widens_only_the_upper_bound() -> None:
    _, loss, m = _loss(GRPOConfig(clip_eps=0.2, clip_eps_high=0.6))
    # pos 1: min(1.5, clip(1.5, 0.8, 1.6) = 1.5) -> -1.5, no longer clipped; the rest as before
    assert loss.item() == pytest.approx((-1.5 - 0.5 + 0.8 - 2.0) / 4)
    assert m["clip_frac"] == pytest.approx(0.25)


def test_kl_penalty_added_per_token() -> None:
    ref = torch.tensor([[0.0] + [x - 1.0 for x in LOGP[1:]]])  # log r = ref - logp = -1 -> k1 = 1 per token
    _, loss, m = _loss(GRPOConfig(kl_coef=0.1, kl_estimator="k1"), ref_logprobs=ref)
    assert loss.item() == pytest.approx(-0.725 + 0.1 * 1.0)
    assert m["kl_ref"] == pytest.approx(1.0)


def test_kl_coef_without_reference_raises() -> None:
    with pytest.raises(ConfigError, match="ref_logprobs"):
        _loss(GRPOConfig(kl_coef=0.1))


def test_per_row_advantages_broadcast() -> None:
    logp = torch.zeros(2, 3, requires_grad=True)
    mask = torch.tensor([[False, True, True], [False, True, False]])
    loss, _ = policy_loss(logp, torch.zeros(2, 3), torch.tensor([1.0, -3.0]), mask, GRPOConfig())
    assert loss.item() == pytest.approx(-(1.0 + 1.0 - 3.0) / 3)  # rho = 1: -(A) per token, 3 tokens


def test_seq_mean_weighs_rows_equally() -> None:
    logp = torch.zeros(2, 4, requires_grad=True)
    mask = torch.tensor([[False, True, True, True], [False, True, False, False]])
    adv = torch.tensor([1.0, 4.0])
    loss, _ = policy_loss(logp, torch.zeros(2, 4), adv, mask, GRPOConfig(loss_agg="seq_mean"))
    assert loss.item() == pytest.approx(-(1.0 + 4.0) / 2)  # row means -1 and -4, then their mean


def test_seq_sum_norm_uses_constant_normaliser() -> None:
    logp = torch.zeros(2, 4, requires_grad=True)
    mask = torch.tensor([[False, True, True, True], [False, True, False, False]])
    adv = torch.tensor([1.0, 4.0])
    cfg = GRPOConfig(loss_agg="seq_sum_norm", max_tokens=10)
    loss, _ = policy_loss(logp, torch.zeros(2, 4), adv, mask, cfg)
    assert loss.item() == pytest.approx(-(3 * 1.0 + 4.0) / (2 * 10))  # token sum / (B * max_tokens)


def test_aggregate_empty_mask_is_zero_not_nan() -> None:
    out = aggregate_tokens(torch.ones(2, 3), torch.zeros(2, 3, dtype=torch.bool))
    assert out.item() == 0.0


def test_aggregate_ignores_non_finite_values_outside_mask() -> None:
    values = torch.tensor([[float("inf"), 2.0]])
    assert aggregate_tokens(values, torch.tensor([[False, True]])).item() == 2.0


def test_gradient_reaches_logits_only_at_loss_positions() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 6, generator=gen, requires_grad=True)
    input_ids = torch.tensor([[1, 2, 3, 4, 5], [5, 4, 3, 0, 0]])
    mask = torch.tensor([[False, False, True, True, False], [False, True, True, False, False]])
    logp = gather_token_logprobs(logits, input_ids, mask)
    loss, _ = policy_loss(logp, logp.detach(), torch.tensor([1.0, -1.0]), mask, GRPOConfig())
    loss.backward()
    assert logits.grad is not None
    touched = logits.grad.abs().sum(dim=-1) > 0  # [B, T]: which positions' logits got gradient
    expected = torch.zeros(2, 5, dtype=torch.bool)
    expected[:, :-1] = mask[:, 1:]  # logits at t - 1 score token t
    assert torch.equal(touched, expected)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("group_size", 1),
        ("group_size", 2.0),
        ("estimator", "ppo"),
        ("gamma", 1.5),
        ("clip_eps", 0.0),
        ("clip_eps", 1.0),
        ("clip_eps_high", -0.1),
        ("kl_coef", -1.0),
        ("kl_coef", float("nan")),
        ("kl_estimator", "k4"),
        ("loss_agg", "sum"),
        ("max_tokens", 0),
        ("adv_eps", 0.0),
        ("per_turn", "yes"),
    ],
)
def test_config_rejects_bad_values_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"GRPOConfig.{field}"):
        GRPOConfig(**{field: value})  # type: ignore[arg-type]


def test_config_seq_sum_norm_requires_max_tokens() -> None:
    with pytest.raises(ConfigError, match="max_tokens"):
        GRPOConfig(loss_agg="seq_sum_norm")


def test_config_is_frozen() -> None:
    cfg = GRPOConfig()
    with pytest.raises(AttributeError):
        cfg.clip_eps = 0.5  # type: ignore[misc]
