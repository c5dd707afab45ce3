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

import torch
from torch import Tensor

from turnkit.errors import ConfigError
from turnkit.learners.config import LOSS_AGGREGATIONS, GRPOConfig, LossAggregation
from turnkit.learners.kl import kl_estimate


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
