"""Advantage estimators over groups of trajectories that share a group id (same task, same seed).

Conventions used by every function here:

- ``group_ids[i]`` names the group of trajectory ``i``; ids need not be contiguous or sorted.
- Group standard deviations are *sample* standard deviations (Bessel-corrected, ``n − 1``), as in TRL
  and verl's GRPO.
- **Group size 1**: a trajectory alone in its group has no baseline, so its advantage is ``0`` under every
  estimator (it contributes no policy gradient). Collect groups of at least 2 to learn from them.
- **All-equal rewards** in a group give advantage ``0`` (never NaN): there is nothing to prefer.

Estimators, for reward ``r_i`` in a group ``g`` with ``n`` members, mean ``μ_g`` and std ``σ_g``:

- GRPO: ``A_i = (r_i − μ_g) / (σ_g + eps)``;
- Dr. GRPO (``scale_by_std=False``): ``A_i = r_i − μ_g`` (removes the std's difficulty bias);
- RLOO: ``A_i = r_i − (1/(n−1)) Σ_{j≠i} r_j = n/(n−1) · (r_i − μ_g)``.

Per-turn (dense) rewards: :func:`turn_advantages` credits turn ``k`` with its discounted return-to-go
``G_{i,k} = Σ_{k'≥k} γ^{k'−k} r_{i,k'}`` and normalises it with the group statistics of the *episode
returns* ``G_{·,0}``. With an outcome-only (last-turn) reward and ``γ = 1`` every turn then gets exactly the
episode-level GRPO/RLOO advantage, and with dense rewards a turn is not credited with rewards that came
before it. :func:`prime_advantages` is the alternative of PRIME (RLOO per reward source, then returns, then
whitening).

Example:
    >>> import torch
    >>> rewards = torch.tensor([1.0, 2.0, 3.0, 0.0, 0.0, 3.0])
    >>> groups = torch.tensor([0, 0, 0, 1, 1, 1])
    >>> group_advantages(rewards, groups, scale_by_std=False)
    tensor([-1.,  0.,  1., -1., -1.,  2.])
    >>> rloo_advantages(rewards, groups)
    tensor([-1.5000,  0.0000,  1.5000, -1.5000, -1.5000,  3.0000])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from turnkit.errors import ConfigError, DataError
from turnkit.learners.config import ESTIMATORS, Estimator
from turnkit.types import Trajectory


@dataclass(frozen=True)
class _GroupStats:
    """Per-member view of its group's statistics (all tensors have one entry per member)."""

    mean: Tensor
    std: Tensor  # sample std; 0 for singleton groups
    size: Tensor  # float group sizes
    loo_mean: Tensor  # mean of the other members; 0 for singleton groups

    @property
    def singleton(self) -> Tensor:
        return self.size < 2


def _as_float(values: Tensor | Sequence[float]) -> Tensor:
    t = torch.as_tensor(values)
    return t if t.is_floating_point() else t.float()


def _group_stats(values: Tensor, group_ids: Tensor | Sequence[int]) -> _GroupStats:
    gids = torch.as_tensor(group_ids)
    if values.dim() != 1 or gids.shape != values.shape:
        raise ValueError(
            f"rewards must be 1-D and group_ids the same shape; got {tuple(values.shape)} and {tuple(gids.shape)}"
        )
    _, inverse = torch.unique(gids, return_inverse=True)
    n_groups = int(inverse.max().item()) + 1 if inverse.numel() else 0
    zeros = torch.zeros(n_groups, dtype=values.dtype, device=values.device)
    size = zeros.index_add(0, inverse, torch.ones_like(values))
    total = zeros.index_add(0, inverse, values)
    mean = total / size
    sq_dev = zeros.index_add(0, inverse, (values - mean[inverse]).square())
    std = torch.where(size > 1, (sq_dev / (size - 1).clamp(min=1)).sqrt(), torch.zeros_like(size))
    member_size = size[inverse]
    loo_mean = torch.where(
        member_size > 1, (total[inverse] - values) / (member_size - 1).clamp(min=1), torch.zeros_like(values)
    )
    return _GroupStats(mean=mean[inverse], std=std[inverse], size=member_size, loo_mean=loo_mean)


def group_advantages(
    rewards: Tensor | Sequence[float],
    group_ids: Tensor | Sequence[int],
    *,
    scale_by_std: bool = True,
    eps: float = 1e-6,
) -> Tensor:
    """GRPO group-relative advantages: ``(r_i − μ_g) / (σ_g + eps)``, or ``r_i − μ_g`` (Dr. GRPO).

    Args:
        rewards: One scalar reward per trajectory, shape ``[N]``.
        group_ids: Group id per trajectory, shape ``[N]``.
        scale_by_std: Divide by the group's sample std (GRPO); ``False`` gives Dr. GRPO.
        eps: Added to the std so that all-equal groups give ``0 / eps = 0``.

    Returns:
        Advantages, shape ``[N]``; ``0`` for members of singleton groups.

    Example:
        >>> group_advantages([1.0, 2.0, 3.0], [7, 7, 7], eps=0.0)  # μ = 2, σ = 1
        tensor([-1.,  0.,  1.])
        >>> group_advantages([5.0, 5.0, 1.0], [0, 0, 1])  # a tie, and a singleton group
        tensor([0., 0., 0.])
    """
    r = _as_float(rewards)
    stats = _group_stats(r, group_ids)
    adv = r - stats.mean
    if scale_by_std:
        adv = adv / (stats.std + eps)
    return torch.where(stats.singleton, torch.zeros_like(adv), adv)


def rloo_advantages(rewards: Tensor | Sequence[float], group_ids: Tensor | Sequence[int]) -> Tensor:
    """REINFORCE leave-one-out advantages: ``r_i − (1/(n−1)) Σ_{j≠i} r_j`` within each group.

    Args:
        rewards: One scalar reward per trajectory, shape ``[N]``.
        group_ids: Group id per trajectory, shape ``[N]``.

    Returns:
        Advantages, shape ``[N]``; ``0`` for members of singleton groups (no other member to compare with).

    Example:
        >>> rloo_advantages([0.0, 1.0, 1.0, 4.0], [0, 0, 0, 1])
        tensor([-1.0000,  0.5000,  0.5000,  0.0000])
    """
    r = _as_float(rewards)
    stats = _group_stats(r, group_ids)
    return torch.where(stats.singleton, torch.zeros_like(r), r - stats.loo_mean)


def returns_to_go(rewards: Tensor, gamma: float = 1.0, mask: Tensor | None = None) -> Tensor:
    """Discounted returns-to-go along the last axis: ``G_k = r_k + γ G_{k+1}``.

    Args:
        rewards: Rewards, shape ``[N, K]`` (turns or tokens), right-padded.
        gamma: Discount in ``[0, 1]``.
        mask: Optional ``[N, K]`` mask of valid positions; rewards outside it are ignored and the returns
            there are ``0``.

    Returns:
        Returns-to-go, shape ``[N, K]``.

    Raises:
        ConfigError: If ``gamma`` is outside ``[0, 1]``.

    Example:
        >>> import torch
        >>> returns_to_go(torch.tensor([[1.0, 0.0, 2.0]]), gamma=0.5)  # 2; 0 + .5*2; 1 + .5*1
        tensor([[1.5000, 1.0000, 2.0000]])
    """
    if not 0.0 <= gamma <= 1.0:
        raise ConfigError(f"gamma must be in [0, 1], got {gamma}")
    r = _as_float(rewards)
    if r.dim() != 2:
        raise ValueError(f"rewards must be [N, K], got shape {tuple(r.shape)}")
    if mask is not None:
        if mask.shape != r.shape:
            raise ValueError(f"mask shape {tuple(mask.shape)} differs from rewards {tuple(r.shape)}")
        r = r * mask.to(r.dtype)
    out = torch.zeros_like(r)
    running = torch.zeros_like(r[:, 0])
    for k in range(r.shape[1] - 1, -1, -1):
        running = r[:, k] + gamma * running
        out[:, k] = running
    return out if mask is None else out * mask.to(r.dtype)


def turn_advantages(
    turn_rewards: Tensor,
    turn_mask: Tensor,
    group_ids: Tensor | Sequence[int],
    *,
    gamma: float = 1.0,
    estimator: Estimator = "grpo",
    eps: float = 1e-6,
) -> Tensor:
    """Per-turn advantages from per-turn rewards: returns-to-go normalised by the group's episode returns.

    ``A_{i,k} = (G_{i,k} − b_i) / s_i`` where ``G`` are the discounted returns-to-go
    (:func:`returns_to_go`) and ``b_i, s_i`` come from the episode returns ``G_{j,0}`` of the group:

    - ``"grpo"``: ``b_i = μ_g``, ``s_i = σ_g + eps``; when the episode returns tie (``σ_g ≤ eps``), ``s_i = 1``
      so that dense rewards inside a tied group give finite advantages instead of ``(G − b) / eps``;
    - ``"dr_grpo"``: ``b_i = μ_g``, ``s_i = 1``;
    - ``"rloo"``: ``b_i = mean_{j≠i} G_{j,0}``, ``s_i = 1``.

    The baseline depends only on other trajectories and on rewards before turn ``k``, so the policy
    gradient stays unbiased. Singleton groups get ``0`` everywhere.

    Args:
        turn_rewards: Reward of each turn, shape ``[N, K]``, right-padded.
        turn_mask: ``[N, K]`` bool mask of real turns.
        group_ids: Group id per trajectory, shape ``[N]``.
        gamma: Discount in ``[0, 1]``.
        estimator: ``"grpo"``, ``"dr_grpo"`` or ``"rloo"``.
        eps: Std epsilon (``"grpo"`` only).

    Returns:
        Advantages, shape ``[N, K]``, ``0`` at padded turns.

    Example:
        >>> import torch
        >>> rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0]])  # outcome reward on the last turn
        >>> mask = torch.ones(2, 2, dtype=torch.bool)
        >>> turn_advantages(rewards, mask, [0, 0], estimator="dr_grpo")  # μ = 0.5
        tensor([[ 0.5000,  0.5000],
                [-0.5000, -0.5000]])
    """
    if estimator not in ESTIMATORS:
        raise ConfigError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    mask = torch.as_tensor(turn_mask).bool()
    returns = returns_to_go(turn_rewards, gamma, mask)
    stats = _group_stats(returns[:, 0], group_ids)
    if estimator == "rloo":
        baseline, scale = stats.loo_mean, torch.ones_like(stats.std)
    elif estimator == "dr_grpo":
        baseline, scale = stats.mean, torch.ones_like(stats.std)
    else:
        baseline = stats.mean
        scale = torch.where(stats.std > eps, stats.std + eps, torch.ones_like(stats.std))
    adv = (returns - baseline[:, None]) / scale[:, None]
    keep = mask & ~stats.singleton[:, None]
    return torch.where(keep, adv, torch.zeros_like(adv))


def whiten(values: Tensor, mask: Tensor | None = None, *, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Whiten over the masked entries: ``(x − mean) / sqrt(var + eps)`` (population variance).

    Args:
        values: Any shape.
        mask: Optional bool mask of the entries that count; entries outside it are returned as ``0``.
        shift_mean: If ``False``, add the mean back (rescale only), as PPO implementations do for advantages
            that should keep their sign balance.
        eps: Variance epsilon.

    Returns:
        Whitened values, same shape.

    Example:
        >>> import torch
        >>> whiten(torch.tensor([1.0, 2.0, 3.0, 4.0]), eps=0.0)  # mean 2.5, var 1.25
        tensor([-1.3416, -0.4472,  0.4472,  1.3416])
    """
    x = _as_float(values)
    m = torch.ones_like(x, dtype=torch.bool) if mask is None else torch.as_tensor(mask).bool()
    if m.shape != x.shape:
        raise ValueError(f"mask shape {tuple(m.shape)} differs from values {tuple(x.shape)}")
    count = m.sum().clamp(min=1).to(x.dtype)
    mean = (x * m).sum() / count
    var = ((x - mean).square() * m).sum() / count
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return torch.where(m, out, torch.zeros_like(out))


def prime_advantages(
    outcome_rewards: Tensor | Sequence[float],
    process_rewards: Tensor,
    mask: Tensor,
    group_ids: Tensor | Sequence[int],
    *,
    gamma: float = 1.0,
    whiten_result: bool = True,
) -> Tensor:
    """PRIME-style advantages: RLOO per reward source, discounted returns-to-go, summed, whitened.

    For response ``i`` with positions ``t`` (tokens or turns) in mask ``m_i``:

    - outcome source: ``o_i − mean_{j≠i} o_j``, placed on the last valid position of ``i``;
    - process source: ``p_{i,t} − mean_{j≠i} p̄_j`` at every valid position, with ``p̄_j`` the mean of
      ``p_j`` over its valid positions;
    - ``A = returns_to_go(outcome part, γ) + returns_to_go(process part, γ)``, then :func:`whiten` over the
      mask (if ``whiten_result``).

    Singleton groups contribute ``0`` from both sources before whitening.

    Args:
        outcome_rewards: One verifier reward per response, shape ``[N]``.
        process_rewards: Process reward per position, shape ``[N, T]`` (e.g. implicit PRM token rewards).
        mask: ``[N, T]`` bool mask of valid positions; every response needs at least one.
        group_ids: Group id per response, shape ``[N]``.
        gamma: Discount in ``[0, 1]`` (PRIME uses 1).
        whiten_result: Whiten the summed advantages over the batch.

    Returns:
        Advantages, shape ``[N, T]``, ``0`` outside the mask.

    Example:
        >>> import torch
        >>> process = torch.tensor([[0.0, 1.0], [1.0, 1.0]])
        >>> mask = torch.ones(2, 2, dtype=torch.bool)
        >>> prime_advantages([1.0, 0.0], process, mask, [0, 0], whiten_result=False)
        tensor([[ 0.0000,  1.0000],
                [ 0.0000, -0.5000]])
    """
    m = torch.as_tensor(mask).bool()
    p = _as_float(process_rewards)
    o = _as_float(outcome_rewards)
    if p.shape != m.shape or p.dim() != 2 or o.shape != p.shape[:1]:
        raise ValueError(
            f"need outcome [N], process [N, T] and mask [N, T]; got {tuple(o.shape)}, {tuple(p.shape)}, "
            f"{tuple(m.shape)}"
        )
    lengths = m.sum(dim=1)
    if bool((lengths == 0).any()):
        raise ValueError("every response needs at least one valid position in mask")
    outcome_adv = rloo_advantages(o, group_ids)
    outcome = torch.zeros_like(p)
    outcome[torch.arange(p.shape[0]), lengths - 1] = outcome_adv
    per_response_mean = (p * m).sum(dim=1) / lengths.to(p.dtype)
    stats = _group_stats(per_response_mean, group_ids)
    process = torch.where(stats.singleton[:, None], torch.zeros_like(p), p - stats.loo_mean[:, None])
    total = returns_to_go(outcome, gamma, m) + returns_to_go(process, gamma, m)
    return whiten(total, m) if whiten_result else total * m


def trajectory_advantages(
    trajectories: Sequence[Trajectory],
    *,
    estimator: Estimator = "grpo",
    per_turn: bool = False,
    gamma: float = 1.0,
    turn_rewards: Sequence[Sequence[float]] | None = None,
    group_ids: Sequence[int] | None = None,
    eps: float = 1e-6,
) -> list[tuple[float, ...] | None]:
    """Advantages for every turn of every trajectory, grouped by ``Trajectory.group``.

    Errored trajectories (``error is not None``) are left out of the group statistics and get ``None``:
    they are masked, never scored as reward 0. Feed the result to
    :func:`turnkit.rollout.batch.build_turn_batch` as ``advantages``.

    Args:
        trajectories: Finished episodes, typically several :func:`turnkit.collect_group` groups.
        estimator: ``"grpo"``, ``"dr_grpo"`` or ``"rloo"``.
        per_turn: ``False``: one advantage per trajectory from its total (undiscounted) reward, broadcast to
            all turns. ``True``: :func:`turn_advantages` on the per-turn rewards with discount ``gamma``.
        gamma: Discount for ``per_turn=True``.
        turn_rewards: Per-turn rewards to use instead of the env's step rewards (e.g. a critic's scores),
            one sequence per trajectory with one value per step.
        group_ids: Group ids to use instead of ``Trajectory.group``.
        eps: Std epsilon for ``"grpo"``.

    Returns:
        Per trajectory, a tuple with one advantage per step, or ``None`` for an errored trajectory.

    Raises:
        DataError: If a trajectory has no group id, or ``turn_rewards`` does not match the steps.
        ConfigError: If ``estimator`` is unknown.

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> def traj(reward):
        ...     step = Step("q", AgentTurn("a"), reward=reward, terminated=True)
        ...     return Trajectory("demo", seed=0, steps=(step, step), group=0)
        >>> trajectory_advantages([traj(1.0), traj(0.0)], estimator="dr_grpo")  # totals 2 and 0
        [(1.0, 1.0), (-1.0, -1.0)]
    """
    if estimator not in ESTIMATORS:
        raise ConfigError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    if turn_rewards is not None and len(turn_rewards) != len(trajectories):
        raise DataError(f"turn_rewards has {len(turn_rewards)} entries for {len(trajectories)} trajectories")
    if group_ids is not None and len(group_ids) != len(trajectories):
        raise DataError(f"group_ids has {len(group_ids)} entries for {len(trajectories)} trajectories")
    kept: list[int] = []
    rows: list[list[float]] = []
    gids: list[int] = []
    for i, traj in enumerate(trajectories):
        if traj.error is not None:
            continue
        gid = group_ids[i] if group_ids is not None else traj.group
        if gid is None:
            raise DataError(f"trajectory {i} has no group id; collect it with collect_group or pass group_ids")
        row = [s.reward for s in traj.steps] if turn_rewards is None else [float(x) for x in turn_rewards[i]]
        if len(row) != len(traj.steps):
            raise DataError(f"trajectory {i}: {len(row)} turn rewards for {len(traj.steps)} steps")
        if not all(math.isfinite(x) for x in row):
            raise DataError(f"trajectory {i} has a non-finite reward: {row}")
        kept.append(i)
        rows.append(row)
        gids.append(gid)
    out: list[tuple[float, ...] | None] = [None] * len(trajectories)
    if not kept:
        return out
    width = max(1, *(len(r) for r in rows))
    rewards = torch.zeros(len(rows), width, dtype=torch.float64)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for j, row in enumerate(rows):
        rewards[j, : len(row)] = torch.tensor(row, dtype=torch.float64)
        mask[j, : len(row)] = True
    if per_turn:
        adv = turn_advantages(rewards, mask, gids, gamma=gamma, estimator=estimator, eps=eps)
    else:
        totals = rewards.sum(dim=1)
        if estimator == "rloo":
            scalar = rloo_advantages(totals, gids)
        else:
            scalar = group_advantages(totals, gids, scale_by_std=estimator == "grpo", eps=eps)
        adv = scalar[:, None].expand_as(rewards)
    for j, i in enumerate(kept):
        out[i] = tuple(float(a) for a in adv[j, : len(rows[j])])
    return out
