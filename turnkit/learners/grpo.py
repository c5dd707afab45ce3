"""GRPO / PPO-clip policy loss over token batches, with an optional KL penalty to a reference policy.

Per loss token ``t`` (a generated token, ``loss_mask`` true) with importance ratio
``ρ_t = exp(log π(y_t) − log π_old(y_t))`` and advantage ``A_t``:

``ℓ_t = −min(ρ_t A_t, clip(ρ_t, 1 − ε_low, 1 + ε_high) A_t) + β · KL_t``

where ``KL_t`` is a per-token estimator of ``KL(π ‖ π_ref)`` (:mod:`turnkit.learners.kl`, ``k3`` by default)
and ``β = kl_coef``. Per-token losses are then reduced by :func:`aggregate_tokens`:

- ``"token_mean"`` (default; DAPO): ``Σ_{b,t} m ℓ / Σ_{b,t} m``; every loss token in the batch weighs the same;
- ``"seq_mean"`` (the GRPO paper): the mean over each row's loss tokens, then the mean over rows that have any;
- ``"seq_sum_norm"`` (Dr. GRPO): ``Σ_{b,t} m ℓ / (B · max_tokens)``, a constant normaliser that has no
  length bias.

All per-token tensors are ``[B, T]`` in the token coordinates of :class:`turnkit.rollout.batch.TurnBatch`
(entry ``t`` scores token ``input_ids[:, t]``); advantages may also be ``[B]`` (one per row).

Example:
    >>> import math, torch
    >>> cfg = GRPOConfig(clip_eps=0.2)
    >>> logp = torch.tensor([[math.log(1.5), 0.0]], requires_grad=True)
    >>> old = torch.zeros(1, 2)
    >>> loss, metrics = policy_loss(logp, old, torch.tensor([1.0]), torch.tensor([[True, False]]), cfg)
    >>> round(loss.item(), 4), metrics["clip_frac"]  # min(1.5, 1.2) * 1 -> loss -1.2, clipped
    (-1.2, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import Tensor

from turnkit.configs import check_bool, check_choice, check_float, check_int
from turnkit.errors import ConfigError
from turnkit.learners.estimators import RUN_ESTIMATORS
from turnkit.learners.kl import KL_ESTIMATORS, KLEstimator, kl_estimate

LossAggregation = Literal["token_mean", "seq_mean", "seq_sum_norm"]
"""How per-token losses become one scalar; see the module docstring."""

LOSS_AGGREGATIONS: tuple[str, ...] = get_args(LossAggregation)


@dataclass(frozen=True)
class GRPOConfig:
    """Hyper-parameters of the GRPO policy loss and its advantages. Validated on construction.

    Example:
        >>> GRPOConfig(clip_eps=0.1).clip_high
        0.1
        >>> GRPOConfig(clip_eps=0.2, clip_eps_high=0.28).clip_high  # DAPO "clip-higher"
        0.28
        >>> GRPOConfig(group_size=1)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: GRPOConfig.group_size must be an int >= 2 (a lone sample has no baseline), got 1
    """

    group_size: int = 8
    """Episodes per group (same task and seed); advantages compare members of a group."""
    estimator: str = "grpo"
    """Group baseline over the summed rewards: ``"grpo"`` (mean and std), ``"dr_grpo"`` (mean only) or ``"rloo"``
    (leave-one-out); or a method's own estimator over the rewards by source, ``"prime"``, ``"mrt"``, ``"pav"``,
    ``"sweet"``, or ``"paper"`` (the one the run's critics' papers use; :mod:`turnkit.learners.estimators`)."""
    per_turn: bool = False
    """Credit each turn with its return-to-go (dense rewards) instead of the whole episode's return."""
    gamma: float = 1.0
    """Turn discount for ``per_turn`` returns-to-go, in ``[0, 1]``."""
    adv_eps: float = 1e-6
    """Added to the group std (``"grpo"``), so that all-equal groups give advantage 0."""
    clip_eps: float = 0.2
    """PPO ratio clip ``ε_low``: ratios below ``1 − clip_eps`` stop pushing down negative advantages."""
    clip_eps_high: float | None = None
    """Upper clip ``ε_high`` (DAPO clip-higher); ``None`` uses ``clip_eps``."""
    kl_coef: float = 0.0
    """Weight ``β`` of the per-token KL to the reference policy; ``0`` needs no reference model."""
    kl_estimator: KLEstimator = "k3"
    """Per-token KL estimator: ``"k1"``, ``"k2"`` or ``"k3"``."""
    loss_agg: LossAggregation = "token_mean"
    """Reduction of per-token losses: ``"token_mean"``, ``"seq_mean"`` or ``"seq_sum_norm"``."""
    max_tokens: int | None = None
    """Constant per-row token budget for ``"seq_sum_norm"`` (e.g. the generation limit); required there."""

    def __post_init__(self) -> None:
        try:
            check_int(self, "group_size", low=2)
        except ConfigError:
            raise ConfigError(
                f"GRPOConfig.group_size must be an int >= 2 (a lone sample has no baseline), got {self.group_size!r}"
            ) from None
        check_choice(self, "estimator", RUN_ESTIMATORS)
        check_choice(self, "kl_estimator", KL_ESTIMATORS)
        check_choice(self, "loss_agg", LOSS_AGGREGATIONS)
        check_bool(self, "per_turn")
        check_float(self, "gamma", low=0.0, high=1.0)
        check_float(self, "clip_eps", low=0.0, high=1.0, open_low=True, open_high=True)
        check_float(self, "clip_eps_high", low=0.0, open_low=True, optional=True)
        check_float(self, "kl_coef", low=0.0)
        check_float(self, "adv_eps", low=0.0, high=1.0, open_low=True)
        check_int(self, "max_tokens", optional=True)
        if self.loss_agg == "seq_sum_norm" and self.max_tokens is None:
            raise ConfigError("GRPOConfig.max_tokens is required when loss_agg='seq_sum_norm'")

    @property
    def clip_high(self) -> float:
        """The upper clip ``ε_high`` in effect."""
        return self.clip_eps if self.clip_eps_high is None else self.clip_eps_high


def aggregate_tokens(
    values: Tensor, mask: Tensor, mode: LossAggregation = "token_mean", max_tokens: int | None = None
) -> Tensor:
    """Reduce per-token values ``[B, T]`` over the masked tokens to a scalar.

    Args:
        values: Per-token values, ``[B, T]``.
        mask: ``[B, T]`` bool mask of the tokens that count.
        mode: ``"token_mean"``, ``"seq_mean"`` or ``"seq_sum_norm"`` (see the module docstring).
        max_tokens: The constant per-row normaliser of ``"seq_sum_norm"``.

    Returns:
        A scalar tensor; ``0`` (still differentiable) when the mask is empty.

    Example:
        >>> import torch
        >>> v = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
        >>> m = torch.tensor([[True, True, True], [True, False, False]])
        >>> aggregate_tokens(v, m).item(), aggregate_tokens(v, m, "seq_mean").item()  # 10/4; (2+4)/2
        (2.5, 3.0)
        >>> aggregate_tokens(v, m, "seq_sum_norm", max_tokens=5).item()  # 10/(2*5)
        1.0
    """
    if values.shape != mask.shape or values.dim() != 2:
        raise ValueError(f"values and mask must both be [B, T]; got {tuple(values.shape)} and {tuple(mask.shape)}")
    m = mask.to(values.dtype)
    masked = torch.where(mask.bool(), values, torch.zeros_like(values))  # where, not *: inf/NaN stay out
    if mode == "token_mean":
        return masked.sum() / m.sum().clamp(min=1.0)
    if mode == "seq_mean":
        per_row_tokens = m.sum(dim=1)
        per_row = masked.sum(dim=1) / per_row_tokens.clamp(min=1.0)
        has_tokens = (per_row_tokens > 0).to(values.dtype)
        return (per_row * has_tokens).sum() / has_tokens.sum().clamp(min=1.0)
    if mode == "seq_sum_norm":
        if max_tokens is None or max_tokens < 1:
            raise ConfigError(f"max_tokens must be a positive int for 'seq_sum_norm', got {max_tokens!r}")
        return masked.sum() / (values.shape[0] * max_tokens)
    raise ConfigError(f"loss aggregation must be one of {LOSS_AGGREGATIONS}, got {mode!r}")


def aggregation_share(part_mask: Tensor, whole_mask: Tensor, mode: LossAggregation = "token_mean") -> float:
    """The weight of a micro-batch's loss in its minibatch's, so that the weighted micro-batch losses sum to it.

    :func:`aggregate_tokens` over the whole minibatch equals ``Σ_parts share × aggregate_tokens(part)``, for
    rows split into parts (gradient accumulation): tokens for ``"token_mean"``, rows with tokens for
    ``"seq_mean"``, rows for ``"seq_sum_norm"``.

    Example:
        >>> import torch
        >>> whole = torch.tensor([[True, True, True], [True, False, False], [False, False, False]])
        >>> aggregation_share(whole[:1], whole), aggregation_share(whole[:1], whole, "seq_mean")
        (0.75, 0.5)
        >>> aggregation_share(whole[:1], whole, "seq_sum_norm")
        0.3333333333333333
    """
    if mode == "token_mean":
        return float(part_mask.sum()) / max(float(whole_mask.sum()), 1.0)
    if mode == "seq_mean":
        return float(part_mask.any(dim=1).sum()) / max(float(whole_mask.any(dim=1).sum()), 1.0)
    if mode == "seq_sum_norm":
        return part_mask.shape[0] / whole_mask.shape[0]
    raise ConfigError(f"loss aggregation must be one of {LOSS_AGGREGATIONS}, got {mode!r}")


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    loss_mask: Tensor,
    cfg: GRPOConfig,
    *,
    ref_logprobs: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO-clip policy loss with an optional KL penalty (see the module docstring for the formula).

    Args:
        logprobs: ``log π(y_t)`` under the current policy, ``[B, T]``; gradients flow through it.
        old_logprobs: ``log π_old(y_t)`` under the sampling policy, ``[B, T]`` (treated as a constant).
        advantages: Per-token ``[B, T]`` or per-row ``[B]`` advantages (constant).
        loss_mask: ``[B, T]`` bool mask of generated tokens; everything else contributes nothing.
        cfg: Clip range, KL weight and estimator, aggregation.
        ref_logprobs: ``log π_ref(y_t)`` under the reference policy, ``[B, T]``; required if ``cfg.kl_coef > 0``.

    Returns:
        ``(loss, metrics)``. Metrics are token means over the mask: ``loss``, ``pg_loss``, ``clip_frac``
        (share of tokens whose gradient the clip removed), ``approx_kl`` (``k3`` estimate of
        ``KL(π_old ‖ π)``), ``ratio_mean``, ``ratio_max``, ``num_tokens`` and, with a reference, ``kl_ref``.

    Raises:
        ConfigError: If ``cfg.kl_coef > 0`` and no ``ref_logprobs`` are given.
        ValueError: If shapes disagree.

    Example:
        >>> import torch
        >>> logp = torch.zeros(1, 3, requires_grad=True)  # ratio 1 everywhere
        >>> mask = torch.tensor([[False, True, True]])
        >>> loss, m = policy_loss(logp, torch.zeros(1, 3), torch.tensor([[0.0, 2.0, -1.0]]), mask, GRPOConfig())
        >>> loss.item(), m["num_tokens"]  # -(2 + -1) / 2
        (-0.5, 2.0)
    """
    if logprobs.dim() != 2 or old_logprobs.shape != logprobs.shape or loss_mask.shape != logprobs.shape:
        raise ValueError(
            f"logprobs, old_logprobs and loss_mask must share one [B, T] shape; got {tuple(logprobs.shape)}, "
            f"{tuple(old_logprobs.shape)}, {tuple(loss_mask.shape)}"
        )
    adv = advantages.detach().to(logprobs.dtype)
    if adv.dim() == 1:
        adv = adv[:, None]
    adv = adv.expand_as(logprobs)
    mask = loss_mask.bool()
    # Zero the log-ratio outside the mask so that padding (or a stale old logprob there) cannot overflow exp().
    log_ratio = torch.where(mask, logprobs - old_logprobs.detach().to(logprobs.dtype), torch.zeros_like(logprobs))
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1.0 - cfg.clip_eps, 1.0 + cfg.clip_high)
    per_token_pg = -torch.minimum(ratio * adv, clipped * adv)
    per_token = per_token_pg
    kl_ref = None
    if cfg.kl_coef > 0:
        if ref_logprobs is None:
            raise ConfigError("GRPOConfig.kl_coef > 0 needs ref_logprobs (log-probs under the reference policy)")
        if ref_logprobs.shape != logprobs.shape:
            raise ValueError(f"ref_logprobs {tuple(ref_logprobs.shape)} differs from logprobs {tuple(logprobs.shape)}")
        ref = torch.where(mask, ref_logprobs.to(logprobs.dtype), logprobs.detach())
        kl_ref = kl_estimate(logprobs, ref, cfg.kl_estimator)
        per_token = per_token + cfg.kl_coef * kl_ref
    loss = aggregate_tokens(per_token, mask, cfg.loss_agg, cfg.max_tokens)

    with torch.no_grad():
        n = mask.sum().clamp(min=1).to(logprobs.dtype)
        clip_active = ((ratio < 1.0 - cfg.clip_eps) & (adv < 0)) | ((ratio > 1.0 + cfg.clip_high) & (adv > 0))
        metrics = {
            "loss": float(loss.detach()),
            "pg_loss": float((per_token_pg * mask).sum() / n),
            "clip_frac": float((clip_active & mask).sum() / n),
            "approx_kl": float(((ratio - 1.0 - log_ratio) * mask).sum() / n),
            "ratio_mean": float((ratio * mask).sum() / n),
            "ratio_max": float(ratio[mask].max()) if bool(mask.any()) else 1.0,
            "num_tokens": float(mask.sum()),
        }
        if kl_ref is not None:
            metrics["kl_ref"] = float((kl_ref * mask).sum() / n)
    return loss, metrics
