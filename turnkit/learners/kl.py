"""Per-token KL estimators between the policy and a reference policy.

With tokens sampled from the policy ``π`` and ``log r = log π_ref(y_t) − log π(y_t)``, Schulman's three
estimators of ``KL(π ‖ π_ref)`` are (see http://joschu.net/blog/kl-approx.html):

- ``k1 = −log r``: unbiased, high variance, can be negative per token;
- ``k2 = ½ (log r)²``: biased, low variance, always ``≥ 0``;
- ``k3 = (r − 1) − log r``: unbiased, low variance, always ``≥ 0`` (the GRPO paper's choice).

Every function returns per-token values; masking and aggregation happen in the loss
(:func:`turnkit.learners.grpo.policy_loss`).

Example:
    >>> import torch
    >>> logp, ref = torch.tensor([-1.0]), torch.tensor([-2.0])  # log r = -1
    >>> [round(kl_estimate(logp, ref, kind).item(), 4) for kind in ("k1", "k2", "k3")]
    [1.0, 0.5, 0.3679]
"""

from __future__ import annotations

import torch
from torch import Tensor

from turnkit.errors import ConfigError
from turnkit.learners.config import KL_ESTIMATORS, KLEstimator


def kl_estimate(logprobs: Tensor, ref_logprobs: Tensor, kind: KLEstimator = "k3") -> Tensor:
    """Per-token estimate of ``KL(π ‖ π_ref)`` from log-probabilities of tokens sampled from ``π``.

    Args:
        logprobs: ``log π(y_t)`` of the sampled tokens, any shape (gradients flow through it).
        ref_logprobs: ``log π_ref(y_t)`` of the same tokens, same shape (treated as a constant).
        kind: ``"k1"`` (``−log r``), ``"k2"`` (``½ (log r)²``) or ``"k3"`` (``r − 1 − log r``), with
            ``log r = ref_logprobs − logprobs``.

    Returns:
        A tensor of the same shape with one estimate per token.

    Raises:
        ConfigError: If ``kind`` is not a known estimator.
        ValueError: If the shapes differ.

    Example:
        >>> import torch
        >>> logp = torch.tensor([-1.0, -0.5])
        >>> ref = torch.tensor([-1.0, -1.5])  # log r = [0, -1]
        >>> kl_estimate(logp, ref, "k2")
        tensor([0.0000, 0.5000])
    """
    if logprobs.shape != ref_logprobs.shape:
        raise ValueError(f"logprobs {tuple(logprobs.shape)} and ref_logprobs {tuple(ref_logprobs.shape)} differ")
    log_r = ref_logprobs.detach() - logprobs
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r.square()
    if kind == "k3":
        return torch.expm1(log_r) - log_r
    raise ConfigError(f"kl estimator must be one of {KL_ESTIMATORS}, got {kind!r}")
