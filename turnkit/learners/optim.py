"""One optimiser step, the same everywhere: zero the gradients, back-propagate, clip, step.

Every loop that trains weights (GRPO, DPO, SFT, IQLearn, the learned critics) takes its steps through
:func:`optimizer_step`, so gradient clipping means the same thing in each and the reported norm is always the
norm *before* clipping.

Example:
    >>> import torch
    >>> w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    >>> opt = torch.optim.SGD([w], lr=0.1)
    >>> optimizer_step(opt, [w], (w * w).sum() / 2, max_grad_norm=1.0)  # gradient (3, 4): norm 5, clipped to 1
    5.0
    >>> w.data.tolist()  # moved by 0.1 x (0.6, 0.8)
    [2.940000057220459, 3.9200000762939453]
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch


def optimizer_step(
    optimizer: torch.optim.Optimizer,
    parameters: Iterable[torch.nn.Parameter],
    loss: torch.Tensor,
    *,
    max_grad_norm: float = 0.0,
) -> float:
    """Zero the gradients, back-propagate ``loss``, clip their global norm, and take one step.

    Args:
        optimizer: The optimiser over ``parameters``.
        parameters: The trained parameters (their gradients are clipped together).
        loss: A scalar loss with a graph to back-propagate.
        max_grad_norm: Clip the global gradient norm to this (``0`` or less: no clipping).

    Returns:
        The global gradient norm before clipping (``inf``/``nan`` when the gradients were not finite).
    """
    params = list(parameters)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    return step_accumulated(optimizer, params, max_grad_norm=max_grad_norm)


def step_accumulated(
    optimizer: torch.optim.Optimizer, parameters: Iterable[torch.nn.Parameter], *, max_grad_norm: float = 0.0
) -> float:
    """Clip the gradients already accumulated in ``parameters`` and take one step (gradient accumulation).

    Call ``optimizer.zero_grad()`` first, then ``backward()`` on each micro-batch's share of the loss.

    Returns:
        The global gradient norm before clipping.

    Example:
        >>> import torch
        >>> w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
        >>> opt = torch.optim.SGD([w], lr=0.1)
        >>> opt.zero_grad()
        >>> for half in (w[:1], w[1:]):  # two micro-batches of the loss (w * w).sum() / 2
        ...     ((half * half).sum() / 2).backward()
        >>> step_accumulated(opt, [w], max_grad_norm=1.0)  # the same step as optimizer_step above
        5.0
    """
    params = list(parameters)
    limit = max_grad_norm if max_grad_norm > 0 else math.inf
    norm = float(torch.nn.utils.clip_grad_norm_(params, limit))
    optimizer.step()
    return norm


__all__ = ["optimizer_step", "step_accumulated"]
