"""Supervised fine-tuning and rejection fine-tuning (RFT) losses.

SFT minimises the masked negative log-likelihood of the target tokens:

``L = −Σ_{b,t} m_{b,t} log π(y_{b,t}) / Σ_{b,t} m_{b,t}``   (``"token_mean"``; other reductions as in
:func:`turnkit.learners.grpo.aggregate_tokens`)

where ``m`` is the batch's ``loss_mask`` (the generated / demonstrated tokens only, never prompts or env
messages). RFT is SFT on the policy's own successful trajectories: filter with :func:`select_successful`,
build a batch with :func:`turnkit.rollout.batch.build_turn_batch`, and minimise :func:`sft_loss`.

Example:
    >>> import math, torch
    >>> logp = torch.log(torch.tensor([[0.9, 0.5, 0.25]]))
    >>> loss, metrics = sft_loss(logp, torch.tensor([[False, True, True]]))
    >>> round(loss.item(), 4) == round((math.log(2) + math.log(4)) / 2, 4)
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from turnkit.errors import ConfigError
from turnkit.learners.grpo import LossAggregation, aggregate_tokens
from turnkit.types import Trajectory


def sft_loss(
    logprobs: Tensor, loss_mask: Tensor, *, agg: LossAggregation = "token_mean", max_tokens: int | None = None
) -> tuple[Tensor, dict[str, float]]:
    """Masked token negative log-likelihood.

    Args:
        logprobs: ``log π(y_t)`` of the target tokens, ``[B, T]`` (e.g. from
            :func:`turnkit.rollout.batch.gather_token_logprobs`).
        loss_mask: ``[B, T]`` bool mask of the tokens to learn.
        agg: Reduction over tokens (``"token_mean"``, ``"seq_mean"`` or ``"seq_sum_norm"``).
        max_tokens: Normaliser for ``"seq_sum_norm"``.

    Returns:
        ``(loss, metrics)`` with metrics ``nll`` (token mean over the mask, whatever ``agg`` is), ``ppl``
        (``exp(nll)``) and ``num_tokens``.

    Example:
        >>> import torch
        >>> logp = torch.tensor([[-1.0, -3.0], [-2.0, 0.0]])
        >>> mask = torch.tensor([[True, True], [True, False]])
        >>> loss, m = sft_loss(logp, mask)  # (1 + 3 + 2) / 3
        >>> loss.item(), m["num_tokens"]
        (2.0, 3.0)
        >>> sft_loss(logp, mask, agg="seq_mean")[0].item()  # ((1 + 3)/2 + 2/1) / 2
        2.0
    """
    if logprobs.shape != loss_mask.shape:
        raise ValueError(f"logprobs {tuple(logprobs.shape)} and loss_mask {tuple(loss_mask.shape)} differ")
    mask = loss_mask.bool()
    loss = aggregate_tokens(-logprobs, mask, agg, max_tokens)
    with torch.no_grad():
        n = int(mask.sum())
        nll = float(torch.where(mask, -logprobs, torch.zeros_like(logprobs)).sum()) / max(n, 1)
        metrics = {"nll": nll, "ppl": math.exp(min(nll, 50.0)), "num_tokens": float(n)}
    return loss, metrics


def select_successful(trajectories: Sequence[Trajectory], *, min_reward: float | None = None) -> list[Trajectory]:
    """Trajectories to keep for rejection fine-tuning: clean (no error) and successful.

    Args:
        trajectories: Candidate episodes.
        min_reward: If given, keep trajectories whose ``total_reward >= min_reward``; otherwise keep those
            whose :attr:`~turnkit.types.Trajectory.success` is true (``info["success"]`` of the last step,
            falling back to a positive total reward).

    Returns:
        The kept trajectories, in their original order. Errored trajectories are never kept.

    Raises:
        ConfigError: If ``min_reward`` is NaN or infinite.

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> def traj(reward):
        ...     return Trajectory("demo", seed=0, steps=(Step("q", AgentTurn("a"), reward, terminated=True),))
        >>> kept = select_successful([traj(1.0), traj(0.0), traj(0.5)], min_reward=0.5)
        >>> [t.total_reward for t in kept]
        [1.0, 0.5]
    """
    if min_reward is not None and not math.isfinite(min_reward):
        raise ConfigError(f"min_reward must be a finite number or None, got {min_reward!r}")
    kept = []
    for traj in trajectories:
        if traj.error is not None:
            continue
        ok = traj.success if min_reward is None else traj.total_reward >= min_reward
        if ok:
            kept.append(traj)
    return kept
