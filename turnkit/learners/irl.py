r"""Inverse-RL kernels: IQLearn as TD-regularised MLE, and the Alignment-from-Demonstrations discriminator.

**IQLearn for language** (Wulfmeier et al. 2024, arXiv 2409.01369). The policy's logits are
soft Q-values: for the transition that emits token ``a_t`` from state ``s_t`` (the ids before it),

``Q(s_t, a) = logits_{t−1}[a] / T``,  ``V(s_t) = logsumexp_a Q(s_t, a)``,  so ``log π(a_t|s_t) = Q − V``.

The loss over expert transitions is the MLE term plus a squared TD residual,

``J = mean_t [ −log π(a_t|s_t) + λ · (V(s_t) + log π(a_t|s_t) − γ·V(s_{t+1}))² ]``

with ``V(s_{t+1}) = 0`` when ``a_t`` ends the agent's turn (EOS, or the next token is not the agent's): only the
agent's tokens are transitions, env/user tokens are context. ``λ = 0`` is exactly :func:`~turnkit.learners.sft.
sft_loss`. The TD residual is the implied reward, ``r_t = Q(s_t, a_t) − γ·V(s_{t+1})`` (:func:`extracted_rewards`).

Online IQLearn mixes policy samples into the regulariser with weight ``α`` (0.1 in the paper's figures):
``mean_expert(−log π) + λ·[(1 − α)·mean_expert(td²) + α·mean_policy(td²)]`` (the split of the terms is our
reading of IQ-Learn's χ² objective, marked [inferred] in the brief).

**Alignment from Demonstrations** (Sun & van der Schaar 2024, §2). A discriminator ``D = σ(f(x, y))`` separates
positives (demonstrations or SFT samples) from negatives (initial-policy samples):
``L = −mean_pos log D − mean_neg log(1 − D)``; the policy's reward is ``log D − log(1 − D) = f``. The
closed-form baseline needs no training: ``d(x, y) = log π_SFT(y|x) − log π_init(y|x)``.

All functions work in token coordinates (:mod:`turnkit.rollout.batch`): entry ``[b, t]`` is about token
``input_ids[b, t]``; position 0 is never a transition.

Example:
    >>> import torch
    >>> logits = torch.tensor([[[0.0, 0.0], [2.0, 0.0], [0.0, 0.0]]])  # [B=1, T=3, V=2]
    >>> ids, mask = torch.tensor([[0, 0, 0]]), torch.tensor([[False, True, True]])
    >>> q, v = token_q_values(logits, ids, mask)
    >>> [round(x, 4) for x in q[0].tolist()], [round(x, 4) for x in v[0].tolist()]
    ([0.0, 0.0, 2.0], [0.0, 0.6931, 2.1269])
    >>> [round(x, 4) for x in extracted_rewards(q, v, mask, gamma=1.0)[0].tolist()]  # r_1 = 0 - V(s_2)
    [0.0, -2.1269, 2.0]
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from turnkit.errors import ConfigError, DataError
from turnkit.learners.grpo import LossAggregation, aggregate_tokens
from turnkit.learners.logprobs import token_q_values as token_q_values  # IQLearn reads the logits as Q

# ---------------------------------------------------------------------------------------------- IQLearn


def next_state_values(v: Tensor, loss_mask: Tensor, *, terminal: Tensor | None = None) -> Tensor:
    """``V(s_{t+1})`` for every transition: ``v[b, t + 1]`` if token ``t + 1`` is also the agent's, else ``0``.

    The value after the agent's last token of a turn is ``0`` (the turn is the episode of the token MDP), as is
    the value after any position flagged ``terminal`` (e.g. ``input_ids == eos_id``).

    Example:
        >>> import torch
        >>> v = torch.tensor([[0.0, 1.0, 2.0, 3.0, 4.0]])
        >>> mask = torch.tensor([[False, True, True, False, True]])
        >>> next_state_values(v, mask).tolist()
        [[0.0, 2.0, 0.0, 0.0, 0.0]]
        >>> next_state_values(v, mask, terminal=torch.tensor([[False, True, False, False, False]])).tolist()
        [[0.0, 0.0, 0.0, 0.0, 0.0]]
    """
    if v.shape != loss_mask.shape or v.dim() != 2:
        raise ValueError(f"v and loss_mask must both be [B, T]; got {tuple(v.shape)} and {tuple(loss_mask.shape)}")
    mask = loss_mask.bool()
    follows = torch.zeros_like(mask)
    follows[:, :-1] = mask[:, :-1] & mask[:, 1:]
    if terminal is not None:
        if terminal.shape != mask.shape:
            raise ValueError(f"terminal must be [B, T] like loss_mask, got {tuple(terminal.shape)}")
        follows &= ~terminal.bool()
    shifted = torch.zeros_like(v)
    shifted[:, :-1] = v[:, 1:]
    return torch.where(follows, shifted, torch.zeros_like(v))


def td_residuals(
    q: Tensor,
    v: Tensor,
    loss_mask: Tensor,
    *,
    gamma: float = 1.0,
    terminal: Tensor | None = None,
    stop_grad_next: bool = False,
) -> Tensor:
    """The TD residual ``Q(s_t, a_t) − γ·V(s_{t+1})`` of every transition (``0`` outside the mask).

    Args:
        q: ``[B, T]`` taken-token Q-values (:func:`token_q_values`).
        v: ``[B, T]`` state values.
        loss_mask: ``[B, T]`` bool transitions.
        gamma: Discount ``γ`` in ``[0, 1]``.
        terminal: Optional ``[B, T]`` bool: no bootstrap after these tokens.
        stop_grad_next: Treat ``V(s_{t+1})`` as a constant (a target value).

    Example:
        >>> import torch
        >>> q, v = torch.tensor([[0.0, 1.0, 2.0]]), torch.tensor([[0.0, 3.0, 5.0]])
        >>> td_residuals(q, v, torch.tensor([[False, True, True]]), gamma=0.5).tolist()  # 1 - 0.5*5; 2 - 0
        [[0.0, -1.5, 2.0]]
    """
    if not 0.0 <= gamma <= 1.0:
        raise ConfigError(f"gamma must be in [0, 1], got {gamma!r}")
    v_next = next_state_values(v.detach() if stop_grad_next else v, loss_mask, terminal=terminal)
    td = q - gamma * v_next
    return torch.where(loss_mask.bool(), td, torch.zeros_like(td))


def extracted_rewards(
    q: Tensor, v: Tensor, loss_mask: Tensor, *, gamma: float = 1.0, terminal: Tensor | None = None
) -> Tensor:
    """IQLearn's reward of each agent token, ``r_t = Q(s_t, a_t) − γ·V(s_{t+1})``, without gradients.

    Summed over a turn, this is the learned reward a critic hands to RL (with ``γ = 1`` it telescopes to
    ``log π(y|x) + V(s_0)``).

    Example:
        >>> import torch
        >>> q, v = torch.tensor([[0.0, -1.0, -2.0]]), torch.tensor([[0.0, 0.5, 0.25]])
        >>> extracted_rewards(q, v, torch.tensor([[False, True, True]]), gamma=1.0).tolist()
        [[0.0, -1.25, -2.0]]
    """
    with torch.no_grad():
        return td_residuals(q.detach(), v.detach(), loss_mask, gamma=gamma, terminal=terminal)


def _require_tokens(mask: Tensor, what: str) -> int:
    n = int(mask.sum())
    if n == 0:
        raise DataError(f"{what}: the batch has no loss tokens (empty or all-masked rows); there is nothing to learn")
    return n


def iqlearn_loss(
    q: Tensor,
    v: Tensor,
    loss_mask: Tensor,
    *,
    lam: float,
    gamma: float = 1.0,
    terminal: Tensor | None = None,
    stop_grad_next: bool = False,
    expert: Tensor | None = None,
    alpha: float = 0.0,
    agg: LossAggregation = "token_mean",
) -> tuple[Tensor, dict[str, float]]:
    """IQLearn's TD-regularised MLE loss (offline, or online with policy rows weighted by ``alpha``).

    ``L = agg_expert(−log π) + λ·[(1 − α)·agg_expert(td²) + α·agg_policy(td²)]`` where ``td`` is
    :func:`td_residuals`. With ``expert=None`` every row is a demonstration and ``L = agg(−log π + λ·td²)``.
    ``lam = 0`` gives exactly :func:`~turnkit.learners.sft.sft_loss` (the TD term is not even computed).

    Args:
        q: ``[B, T]`` taken-token Q-values with gradients (:func:`token_q_values`).
        v: ``[B, T]`` state values with gradients.
        loss_mask: ``[B, T]`` bool transitions.
        lam: TD weight ``λ >= 0``.
        gamma: Discount ``γ`` in ``[0, 1]``.
        terminal: Optional ``[B, T]`` bool: no bootstrap after these tokens.
        stop_grad_next: Treat ``V(s_{t+1})`` as a constant.
        expert: Optional ``[B]`` bool, ``True`` on demonstration rows, ``False`` on policy-sample rows.
        alpha: Weight ``α`` in ``[0, 1]`` of the policy rows in the TD term.
        agg: Token reduction of each term (:func:`~turnkit.learners.grpo.aggregate_tokens`).

    Returns:
        ``(loss, metrics)``: ``nll`` (expert token mean), ``td_sq`` (expert token mean of ``td²``),
        ``td_sq_policy`` (policy rows, when present), ``reward_mean`` (mean expert ``td``), ``v_mean``,
        ``num_tokens`` (expert).

    Raises:
        DataError: No expert loss token in the batch (never a NaN loss).
        ConfigError: ``lam < 0``, ``gamma`` or ``alpha`` outside ``[0, 1]``, or ``alpha > 0`` without policy rows.

    Example:
        >>> import math, torch
        >>> q = torch.tensor([[0.0, 1.0, 0.5]]); v = torch.tensor([[0.0, 2.0, 1.5]])
        >>> mask = torch.tensor([[False, True, True]])
        >>> loss, m = iqlearn_loss(q, v, mask, lam=0.5, gamma=1.0)
        >>> # nll: (1 + 1) / 2; td = (1 - 1.5, 0.5 - 0) -> td² mean (0.25 + 0.25) / 2
        >>> round(loss.item(), 6), m["nll"], m["td_sq"]
        (1.125, 1.0, 0.25)
    """
    if not (math.isfinite(lam) and lam >= 0):
        raise ConfigError(f"lam (the TD weight) must be finite and >= 0, got {lam!r}")
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"alpha (the policy-sample weight) must be in [0, 1], got {alpha!r}")
    mask = loss_mask.bool()
    if expert is None:
        expert_mask, policy_mask = mask, torch.zeros_like(mask)
    else:
        if expert.shape != mask.shape[:1]:
            raise ValueError(f"expert must be [B] = {tuple(mask.shape[:1])}, got {tuple(expert.shape)}")
        rows = expert.bool()[:, None].to(mask.device)
        expert_mask, policy_mask = mask & rows, mask & ~rows
    n_expert = _require_tokens(expert_mask, "iqlearn_loss")
    has_policy = bool(policy_mask.any())
    if alpha > 0 and not has_policy:
        raise ConfigError(f"alpha={alpha} weights policy samples, but the batch has no policy rows (expert all True)")
    logp = q - v
    loss = aggregate_tokens(-logp, expert_mask, agg)
    metrics: dict[str, float] = {}
    if lam > 0:
        td = td_residuals(q, v, mask, gamma=gamma, terminal=terminal, stop_grad_next=stop_grad_next)
        td_sq = td.square()
        td_term = (1.0 - alpha) * aggregate_tokens(td_sq, expert_mask, agg)
        if alpha > 0:
            td_term = td_term + alpha * aggregate_tokens(td_sq, policy_mask, agg)
        loss = loss + lam * td_term
    with torch.no_grad():
        td = td_residuals(q.detach(), v.detach(), mask, gamma=gamma, terminal=terminal)
        zero = torch.zeros_like(td)
        metrics["nll"] = float(torch.where(expert_mask, -logp.detach(), zero).sum()) / n_expert
        metrics["td_sq"] = float(torch.where(expert_mask, td.square(), zero).sum()) / n_expert
        metrics["reward_mean"] = float(torch.where(expert_mask, td, zero).sum()) / n_expert
        metrics["v_mean"] = float(torch.where(expert_mask, v.detach(), zero).sum()) / n_expert
        metrics["num_tokens"] = float(n_expert)
        if has_policy:
            metrics["td_sq_policy"] = float(torch.where(policy_mask, td.square(), zero).sum()) / int(policy_mask.sum())
    return loss, metrics


# ---------------------------------------------------------------------------------------------- AfD


def discriminator_loss(pos_logits: Tensor, neg_logits: Tensor) -> tuple[Tensor, dict[str, float]]:
    """AfD's discriminator loss ``−mean_pos log σ(f) − mean_neg log(1 − σ(f))`` on the scalar logits ``f``.

    Args:
        pos_logits: ``[P]`` logits of positives (demonstrations, or SFT samples).
        neg_logits: ``[N]`` logits of negatives (initial-policy samples).

    Returns:
        ``(loss, metrics)``: ``accuracy`` (mean of the two classes' accuracies at threshold 0), ``d_pos`` and
        ``d_neg`` (mean ``σ(f)`` per class), ``margin`` (mean positive minus mean negative logit).

    Raises:
        DataError: Either side is empty.

    Example:
        >>> import math, torch
        >>> loss, m = discriminator_loss(torch.tensor([0.0]), torch.tensor([0.0]))  # D = 1/2 on both: 2·log 2
        >>> round(loss.item(), 4) == round(2 * math.log(2), 4)
        True
        >>> discriminator_loss(torch.tensor([2.0, -1.0]), torch.tensor([-3.0]))[1]["accuracy"]  # (1/2 + 1) / 2
        0.75
    """
    if pos_logits.numel() == 0 or neg_logits.numel() == 0:
        raise DataError(
            f"discriminator_loss needs positives and negatives, got {pos_logits.numel()} and {neg_logits.numel()}"
        )
    loss = F.softplus(-pos_logits.float()).mean() + F.softplus(neg_logits.float()).mean()
    with torch.no_grad():
        pos, neg = pos_logits.detach().float(), neg_logits.detach().float()
        accuracy = 0.5 * (float((pos > 0).float().mean()) + float((neg < 0).float().mean()))
        metrics = {
            "accuracy": accuracy,
            "d_pos": float(torch.sigmoid(pos).mean()),
            "d_neg": float(torch.sigmoid(neg).mean()),
            "margin": float(pos.mean() - neg.mean()),
        }
    return loss, metrics


def discriminator_reward(logits: Tensor) -> Tensor:
    """The IRL reward model's reward ``log D − log(1 − D)`` for ``D = σ(f)``: the logit ``f`` itself.

    Computed as ``log σ(f) − log σ(−f)``, which is ``f`` up to rounding and stays finite for large ``|f|``.

    Example:
        >>> import math, torch
        >>> d = 0.8
        >>> round(discriminator_reward(torch.tensor([math.log(d / (1 - d))])).item(), 6)  # log .8 - log .2
        1.386294
    """
    f = logits.float()
    return F.logsigmoid(f) - F.logsigmoid(-f)


def closed_form_reward(sft_logprob: Tensor, init_logprob: Tensor) -> Tensor:
    """AfD's training-free baseline ``d(x, y) = log π_SFT(y|x) − log π_init(y|x)`` (sequence log-probs).

    Example:
        >>> import torch
        >>> closed_form_reward(torch.tensor([-2.0, -5.0]), torch.tensor([-4.0, -4.0])).tolist()
        [2.0, -1.0]
    """
    if sft_logprob.shape != init_logprob.shape:
        raise ValueError(f"shapes differ: {tuple(sft_logprob.shape)} vs {tuple(init_logprob.shape)}")
    return sft_logprob.float() - init_logprob.float()
