"""Direct preference optimisation: standard and conservative (MCTS-DPO) losses and the pair-splitting kernels.

For a pair (prompt ``x``, chosen ``y_w``, rejected ``y_l``) with policy ``π`` and reference ``π_ref``:

``h = [log π(y_w|x) − log π_ref(y_w|x)] − [log π(y_l|x) − log π_ref(y_l|x)]``

``L = −(1 − ε) · log σ(β h) − ε · log σ(−β h)``

``ε = 0`` is standard DPO (Rafailov et al.). Conservative DPO (MCTS-DPO) sets ``ε = min(1 − confidence,
max_epsilon)`` per pair, with the visit-count confidence of :func:`turnkit.search.pairs.visit_confidence`,
so pairs the search was unsure about pull less. ``β = 0.1``.

**Only tokens after the two completions diverge count.** Chosen and rejected turns of a search tree often
share a long prefix; the shared tokens have identical log-probs in both sides and cancel in ``h`` in
exact arithmetic, so they are masked explicitly: the common token prefix moves into the prompt
(:func:`split_at_divergence`) and only the two suffixes are scored.

Learners train on the stored token ids (``prompt_token_ids`` + ``chosen_token_ids`` / ``rejected_token_ids``
of each :class:`~turnkit.search.pairs.PreferencePair`), never on re-tokenised text; only pairs from agents
that record no ids (oracles, scripted agents) are tokenised with the policy's chat template.

The training loop that feeds these losses (and its ``DPOConfig``) lives in :mod:`turnkit.train.dpo`; the
reference there is the policy with its LoRA adapter disabled (``HFPolicy.reference()``), i.e. the SFT start.

Example:
    >>> import math, torch
    >>> pw, pl = torch.tensor([-1.0]), torch.tensor([-3.0])
    >>> rw, rl = torch.tensor([-2.0]), torch.tensor([-2.0])
    >>> loss, m = dpo_loss(pw, pl, rw, rl, beta=0.1)  # h = 1 - (-1) = 2
    >>> round(loss.item(), 6) == round(math.log1p(math.exp(-0.2)), 6), m["accuracy"]
    (True, 1.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from turnkit.errors import DataError

# ---------------------------------------------------------------------------------------------- kernels


def conservative_epsilon(confidence: Tensor, max_epsilon: float = 0.5) -> Tensor:
    """MCTS-DPO's label smoothing ``ε = min(1 − confidence, max_epsilon)``.

    Example:
        >>> conservative_epsilon(torch.tensor([1.0, 0.75, 0.2])).tolist()
        [0.0, 0.25, 0.5]
    """
    return (1.0 - confidence).clamp(min=0.0, max=max_epsilon)


def dpo_loss(
    policy_chosen: Tensor,
    policy_rejected: Tensor,
    ref_chosen: Tensor,
    ref_rejected: Tensor,
    *,
    beta: float = 0.1,
    epsilon: Tensor | float = 0.0,
) -> tuple[Tensor, dict[str, float]]:
    """Mean (conservative) DPO loss over a batch of sequence log-probs.

    Args:
        policy_chosen: ``[B]`` summed log-probs of the chosen completions under the policy.
        policy_rejected: ``[B]`` the same for the rejected completions.
        ref_chosen: ``[B]`` under the reference.
        ref_rejected: ``[B]`` under the reference.
        beta: ``β``.
        epsilon: ``ε`` per pair (``[B]``) or one value; ``0`` is standard DPO.

    Returns:
        ``(loss, metrics)`` with metrics ``loss``, ``accuracy`` (share of ``h > 0``), ``margin`` (mean
        ``β h``), ``chosen_reward`` and ``rejected_reward`` (means of ``β (log π − log π_ref)``), ``epsilon``.

    Example:
        >>> import math
        >>> one = torch.tensor([0.0])
        >>> loss, m = dpo_loss(one, one, one, one, epsilon=0.3)  # h = 0: log 2 whatever ε
        >>> round(loss.item(), 6) == round(math.log(2), 6), m["margin"]
        (True, 0.0)
    """
    shapes = {tuple(t.shape) for t in (policy_chosen, policy_rejected, ref_chosen, ref_rejected)}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"dpo_loss needs four [B] tensors of one shape, got shapes {sorted(shapes)}")
    chosen_logratio = policy_chosen - ref_chosen
    rejected_logratio = policy_rejected - ref_rejected
    logits = beta * (chosen_logratio - rejected_logratio)
    eps = torch.as_tensor(epsilon, dtype=logits.dtype, device=logits.device)
    losses = -(1.0 - eps) * F.logsigmoid(logits) - eps * F.logsigmoid(-logits)
    loss = losses.mean()
    with torch.no_grad():
        metrics = {
            "loss": float(loss),
            "accuracy": float((logits > 0).float().mean()),
            "margin": float(logits.mean()),
            "chosen_reward": float(beta * chosen_logratio.mean()),
            "rejected_reward": float(beta * rejected_logratio.mean()),
            "epsilon": float(eps.float().mean()),
        }
    return loss, metrics


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens two sequences share.

    Example:
        >>> common_prefix_length([1, 2, 3], [1, 2, 4, 5]), common_prefix_length([1], [1, 2])
        (2, 1)
    """
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass(frozen=True)
class DPOExample:
    """One pair in token space, split where chosen and rejected diverge.

    Attributes:
        prompt_ids: The prompt ids followed by the completions' common prefix (context, never loss).
        chosen_ids: The chosen completion after the common prefix (loss tokens).
        rejected_ids: The rejected completion after the common prefix (loss tokens).
        confidence: The pair's confidence.
        shared: How many trailing ``prompt_ids`` are the completions' common prefix (not the original prompt).
    """

    prompt_ids: tuple[int, ...]
    chosen_ids: tuple[int, ...]
    rejected_ids: tuple[int, ...]
    confidence: float = 1.0
    shared: int = 0


def split_at_divergence(
    prompt_ids: Sequence[int], chosen_ids: Sequence[int], rejected_ids: Sequence[int], confidence: float = 1.0
) -> DPOExample:
    """Move the completions' common prefix into the prompt, so the loss covers only diverging tokens.

    Raises:
        DataError: The two completions are identical (no preference to learn) or the prompt is empty.

    Example:
        >>> ex = split_at_divergence([1, 2], [7, 8, 9, 3], [7, 8, 4, 3])
        >>> ex.prompt_ids, ex.chosen_ids, ex.rejected_ids, ex.shared
        ((1, 2, 7, 8), (9, 3), (4, 3), 2)
    """
    if not prompt_ids:
        raise DataError("a DPO example needs prompt ids")
    if list(chosen_ids) == list(rejected_ids):
        raise DataError("chosen and rejected completions have identical token ids")
    k = common_prefix_length(chosen_ids, rejected_ids)
    return DPOExample(
        prompt_ids=tuple(prompt_ids) + tuple(chosen_ids[:k]),
        chosen_ids=tuple(chosen_ids[k:]),
        rejected_ids=tuple(rejected_ids[k:]),
        confidence=float(confidence),
        shared=k,
    )
