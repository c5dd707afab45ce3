r"""Each dense-credit method's own advantage estimator, over rewards kept *by source*.

A run's rewards come from several sources: the env's outcome, and one per critic. Summing them first and
normalising the sum by GRPO's group ``σ`` (:func:`~turnkit.learners.advantages.turn_advantages`) lets one
source's noise be scaled up wherever another source ties: a group whose env outcome ties (all 0 or all 1)
gets ``σ`` from the process reward's noise alone, and full-size advantages from it. The papers do not do
that; each combines its sources in its own way, and none divides by a group ``σ``. The kernels here
(``[N, K]`` turn tensors, a ``[N, K]`` mask of real turns, one group id per row) do what the papers do:

========== =========================================================================================
estimator  advantage of turn ``h`` of episode ``i`` (``G`` = return-to-go, ``γ = 1`` by default)
========== =========================================================================================
``prime``  ``[G^o_{i,h} − mean_{j≠i} G^o_{j,0}] + Σ_{h'≥h} γ^{h'−h} (p_{i,h'} − mean_{j≠i} p̄_j)``: RLOO on
           each source separately (outcome ``o``; process ``p``, baseline the other episodes' mean
           per-turn reward), returns with ``γ = 1``, summed; only groups with accuracy in ``[0.2, 0.8]``
           (PRIME, arXiv 2502.01456).
``mrt``    ``[G^o_{i,h} − mean_{j≠i} G^o_{j,0}] + Σ_{h'≥h} γ^{h'−h} ΔJ_{i,h'}``: the outcome plus the
           progress bonus ``ΔJ = J_{after} − J_{before}`` of every later attempt, i.e. MRT's per-trace
           objective ``r + α Σ_j r_prg(z_j)`` credited as rewards-to-go (arXiv 2503.07572).
``pav``    ``[G^o_{i,h} − mean_{j≠i} G^o_{j,0}] + A^μ_{i,h}``: PAV's effective reward
           ``Q^π(s_h, a_h) + α A^μ(s_h, a_h)`` with ``Q^π`` the Monte Carlo outcome under an RLOO baseline
           and the prover advantage of that step alone (arXiv 2410.08146).
``sweet``  ``A^c_{i,h} − mean_{j≠i} Ā^c_j``: SWEET-RL's turn advantage from its critic, centred on the
           other episodes of the task (the paper ranks candidates of one state against each other, which
           removes the same offset); the policy learns from the critic alone (arXiv 2503.15478).
``dr_grpo`` ``G_{i,h} − mean_g G_{·,0}`` of the loop's summed per-turn rewards: GRPO without ``σ``
           (Dr. GRPO, arXiv 2503.20783), the control. It needs no sources (the estimator is linear);
           the run's ``grpo.estimator = "dr_grpo"`` is this, and its other half, no length
           normalisation, is the loss's ``loss_agg = "seq_sum_norm"``.
========== =========================================================================================

Progress ``ΔJ``/``A^μ``, process rewards ``p`` and critic advantages ``A^c`` come already weighted (the
critic table's ``weight``, the critic's ``alpha``). Every estimator is linear in the dense term, so several
dense critics add up source by source. Without ``σ`` no source is rescaled by another: a group whose
outcome ties gets exactly the (centred) dense term, at the dense term's own size. Singleton groups get ``0``,
as everywhere in :mod:`turnkit.learners.advantages`.

PRIME's paper also whitens the summed advantages over the batch. Whitening's shift would give a tied group
non-zero advantages and its scale is one constant per batch (a learning-rate factor), so it is left out.

Example:
    >>> import torch
    >>> outcome = torch.tensor([[0.0, 1.0], [0.0, 0.0]])  # the env's reward on the last turn
    >>> process = torch.tensor([[0.2, 0.0], [0.0, 0.0]])
    >>> mask = torch.ones(2, 2, dtype=torch.bool)
    >>> prime_turn_advantages(outcome, process, mask, [0, 0])  # outcome RLOO ±1; process 0.2 - 0, 0 - 0.1
    tensor([[ 1.2000,  1.0000],
            [-1.2000, -1.1000]])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import Tensor

from turnkit.errors import ConfigError, DataError
from turnkit.learners.advantages import _as_float, _group_stats, returns_to_go, turn_advantages
from turnkit.learners.config import RUN_ESTIMATORS, SOURCE_ESTIMATORS, SourceEstimator
from turnkit.types import Trajectory

SourceKind = Literal["reward", "process", "progress", "turn_advantage"]
"""What a reward source is: ``"reward"`` (the env's outcome, or any plain reward such as a judge's or a length
penalty: summed into the outcome), ``"process"`` (PRIME's implicit process reward per turn), ``"progress"``
(the per-turn progress ``ΔJ`` or ``A^μ`` of MRT and PAV), ``"turn_advantage"`` (SWEET's critic advantage)."""

SOURCE_KINDS: tuple[str, ...] = get_args(SourceKind)


def _check(rows: Tensor, mask: Tensor, what: str) -> tuple[Tensor, Tensor]:
    r, m = _as_float(rows), torch.as_tensor(mask).bool()
    if r.dim() != 2 or r.shape != m.shape:
        raise ValueError(f"{what} must be [N, K] like the mask; got {tuple(r.shape)} and mask {tuple(m.shape)}")
    return torch.where(m, r, torch.zeros_like(r)), m


def _loo_centred(values: Tensor, mask: Tensor, group_ids: Tensor | Sequence[int]) -> Tensor:
    """``v_{i,h} − mean_{j≠i} v̄_j`` with ``v̄_j`` the mean of ``v_j`` over its real turns; ``0`` for singletons."""
    lengths = mask.sum(dim=1).clamp(min=1).to(values.dtype)
    stats = _group_stats(values.sum(dim=1) / lengths, group_ids)
    centred = values - stats.loo_mean[:, None]
    keep = mask & ~stats.singleton[:, None]
    return torch.where(keep, centred, torch.zeros_like(centred))


def _outcome_rloo(outcome: Tensor, mask: Tensor, group_ids: Tensor | Sequence[int], gamma: float) -> Tensor:
    return turn_advantages(outcome, mask, group_ids, gamma=gamma, estimator="rloo")


def _singletons(mask: Tensor, group_ids: Tensor | Sequence[int], values: Tensor) -> Tensor:
    stats = _group_stats(torch.zeros(mask.shape[0], dtype=values.dtype), group_ids)
    keep = mask & ~stats.singleton[:, None]
    return torch.where(keep, values, torch.zeros_like(values))


PRIME_ACCURACY_RANGE: tuple[float, float] = (0.2, 0.8)
"""PRIME's prompt filter: only groups whose mean accuracy lies in this range are trained on (paper, §3.4)."""


def accuracy_filter_mask(
    accuracy: Tensor, mask: Tensor, group_ids: Tensor | Sequence[int], accuracy_range: tuple[float, float]
) -> Tensor:
    """``[N, K]`` mask of the turns whose group's mean ``accuracy`` lies in ``accuracy_range`` (inclusive).

    Example:
        >>> import torch
        >>> accuracy, mask = torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.ones(4, 1, dtype=torch.bool)
        >>> accuracy_filter_mask(accuracy, mask, [0, 0, 1, 1], (0.2, 0.8))[:, 0]  # group 1 ties at 0: dropped
        tensor([ True,  True, False, False])
    """
    low, high = accuracy_range
    group_accuracy = _group_stats(_as_float(accuracy), group_ids).mean
    return mask & ((group_accuracy >= low) & (group_accuracy <= high))[:, None]


def prime_turn_advantages(
    outcome: Tensor,
    process: Tensor,
    mask: Tensor,
    group_ids: Tensor | Sequence[int],
    *,
    gamma: float = 1.0,
    accuracy_range: tuple[float, float] | None = PRIME_ACCURACY_RANGE,
    accuracy: Tensor | None = None,
) -> Tensor:
    """PRIME: RLOO on each source separately, returns-to-go (``γ = 1``), summed; no ``σ``; the prompt filter.

    ``A_{i,h} = [G^o_{i,h} − mean_{j≠i} G^o_{j,0}] + Σ_{h'≥h} γ^{h'−h} (p_{i,h'} − mean_{j≠i} p̄_j)``, with
    ``G^o`` the returns-to-go of the outcome rewards and ``p̄_j`` the mean process reward of ``j`` per turn.
    With the outcome on the last turn this is
    :func:`~turnkit.learners.advantages.prime_advantages` without its whitening.

    PRIME trains only on prompts whose group accuracy lies in ``[0.2, 0.8]`` (``accuracy_range``; ``None``
    keeps every group): a group the outcome ties gets ``0``. Without the filter such a group learns from the
    implicit PRM alone, and a PRM that has mostly seen failures rates whatever it has not seen above the
    policy's usual replies, so the policy drifts to text the PRM never learned about.

    Args:
        outcome: ``[N, K]`` outcome (env) reward per turn.
        process: ``[N, K]`` process reward per turn.
        mask: ``[N, K]`` bool mask of real turns.
        group_ids: Group id per episode, ``[N]``.
        gamma: Discount of both returns.
        accuracy_range: ``(low, high)`` of the prompt filter on the group's mean accuracy, or ``None``.
        accuracy: ``[N]`` accuracy of each episode (``1``/``0``: solved or not); default its outcome return.

    Returns:
        ``[N, K]`` advantages, ``0`` at padded turns, for singleton groups and for filtered groups.

    Example:
        >>> import torch
        >>> mask = torch.ones(2, 1, dtype=torch.bool)
        >>> process = torch.tensor([[0.3], [0.1]])
        >>> prime_turn_advantages(torch.zeros(2, 1), process, mask, [0, 0])  # tied outcome: filtered out
        tensor([[0.],
                [0.]])
        >>> prime_turn_advantages(torch.zeros(2, 1), process, mask, [0, 0], accuracy_range=None)
        tensor([[ 0.2000],
                [-0.2000]])
    """
    o, m = _check(outcome, mask, "outcome")
    p, _ = _check(process, m, "process")
    adv = _outcome_rloo(o, m, group_ids, gamma) + returns_to_go(_loo_centred(p, m, group_ids), gamma, m)
    if accuracy_range is None:
        return adv
    acc = o.sum(dim=1) if accuracy is None else accuracy
    return torch.where(accuracy_filter_mask(acc, m, group_ids, accuracy_range), adv, torch.zeros_like(adv))


def mrt_turn_advantages(
    outcome: Tensor, progress: Tensor, mask: Tensor, group_ids: Tensor | Sequence[int], *, gamma: float = 1.0
) -> Tensor:
    """MRT: the outcome's RLOO advantage plus the progress bonus of this and every later attempt; no ``σ``.

    ``A_{i,h} = [G^o_{i,h} − mean_{j≠i} G^o_{j,0}] + Σ_{h'≥h} γ^{h'−h} ΔJ_{i,h'}``: MRT's objective
    ``r(x, z) + α Σ_j r_prg(z_j)`` with the bonus ``r_prg(z_j) = J_{j+1} − J_j`` as a dense reward (research
    brief, "MRT"), credited as rewards-to-go. ``progress`` holds ``α ΔJ`` per turn.

    Args:
        outcome: ``[N, K]`` outcome (env) reward per turn.
        progress: ``[N, K]`` weighted progress ``α ΔJ_h`` per turn.
        mask: ``[N, K]`` bool mask of real turns.
        group_ids: Group id per episode, ``[N]``.
        gamma: Discount of the returns.

    Returns:
        ``[N, K]`` advantages, ``0`` at padded turns and for singleton groups.

    Example:
        >>> import torch
        >>> mask = torch.ones(2, 2, dtype=torch.bool)
        >>> outcome = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
        >>> mrt_turn_advantages(outcome, torch.tensor([[0.5, 0.25], [0.0, -0.5]]), mask, [0, 0])
        tensor([[ 1.7500,  1.2500],
                [-1.5000, -1.5000]])
    """
    o, m = _check(outcome, mask, "outcome")
    d, _ = _check(progress, m, "progress")
    return _outcome_rloo(o, m, group_ids, gamma) + _singletons(m, group_ids, returns_to_go(d, gamma, m))


def pav_turn_advantages(
    outcome: Tensor, progress: Tensor, mask: Tensor, group_ids: Tensor | Sequence[int], *, gamma: float = 1.0
) -> Tensor:
    """PAV: the effective reward ``Q^π(s_h, a_h) + α A^μ(s_h, a_h)`` of each step; no ``σ``.

    ``A_{i,h} = [G^o_{i,h} − mean_{j≠i} G^o_{j,0}] + α A^μ_{i,h}``: ``Q^π`` is estimated by the episode's
    outcome return-to-go under an RLOO baseline, the prover advantage counts for its own step only (not summed
    over later steps: that sum would telescope to a state baseline, i.e. outcome-only RL). ``progress`` holds
    ``α A^μ`` per turn.

    Args:
        outcome: ``[N, K]`` outcome (env) reward per turn.
        progress: ``[N, K]`` weighted prover advantage ``α A^μ_h`` per turn.
        mask: ``[N, K]`` bool mask of real turns.
        group_ids: Group id per episode, ``[N]``.
        gamma: Discount of the outcome's returns.

    Returns:
        ``[N, K]`` advantages, ``0`` at padded turns and for singleton groups.

    Example:
        >>> import torch
        >>> mask = torch.ones(2, 2, dtype=torch.bool)
        >>> outcome = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
        >>> pav_turn_advantages(outcome, torch.tensor([[0.5, 0.25], [0.0, -0.5]]), mask, [0, 0])
        tensor([[ 1.5000,  1.2500],
                [-1.0000, -1.5000]])
    """
    o, m = _check(outcome, mask, "outcome")
    d, _ = _check(progress, m, "progress")
    return _outcome_rloo(o, m, group_ids, gamma) + _singletons(m, group_ids, d)


def sweet_turn_advantages(advantages: Tensor, mask: Tensor, group_ids: Tensor | Sequence[int]) -> Tensor:
    """SWEET-RL: each turn's critic advantage, centred on the other episodes of its task; no outcome, no ``σ``.

    ``A_{i,h} = A^c_{i,h} − mean_{j≠i} Ā^c_j`` with ``A^c`` the critic's turn advantage (mean token log-ratio
    of the critic that reads the reference) and ``Ā^c_j`` its mean over the turns of ``j``. SWEET-RL trains the
    policy on the critic's ranking of candidates at one state (top half over bottom half), so neither the
    outcome nor the critic's offset enters; the leave-one-out mean removes the offset here.

    Args:
        advantages: ``[N, K]`` weighted critic advantage per turn.
        mask: ``[N, K]`` bool mask of real turns.
        group_ids: Group id per episode, ``[N]``.

    Returns:
        ``[N, K]`` advantages, ``0`` at padded turns and for singleton groups.

    Example:
        >>> import torch
        >>> sweet_turn_advantages(torch.tensor([[0.4, 0.2], [0.1, 0.1]]), torch.ones(2, 2, dtype=torch.bool), [0, 0])
        tensor([[ 0.3000,  0.1000],
                [-0.2000, -0.2000]])
    """
    a, m = _check(advantages, mask, "advantages")
    return _loo_centred(a, m, group_ids)


def dr_grpo_turn_advantages(
    rewards: Tensor, mask: Tensor, group_ids: Tensor | Sequence[int], *, gamma: float = 1.0
) -> Tensor:
    """Dr. GRPO, the control: returns-to-go of all sources summed, minus the group mean of episode returns.

    ``A_{i,h} = G_{i,h} − mean_g G_{·,0}`` (no ``σ``; for no length normalisation use the loss's
    ``loss_agg="seq_sum_norm"``). The same as
    :func:`~turnkit.learners.advantages.turn_advantages` with ``estimator="dr_grpo"``.

    Example:
        >>> import torch
        >>> rewards, mask = torch.tensor([[0.0, 1.0], [0.5, 0.0]]), torch.ones(2, 2, dtype=torch.bool)
        >>> dr_grpo_turn_advantages(rewards, mask, [0, 0])  # returns [1, 1] and [0.5, 0]; mean return 0.75
        tensor([[ 0.2500,  0.2500],
                [-0.2500, -0.7500]])
    """
    r, m = _check(rewards, mask, "rewards")
    return turn_advantages(r, m, group_ids, gamma=gamma, estimator="dr_grpo")


# ---------------------------------------------------------------------------------------------- by source


@dataclass(frozen=True)
class Source:
    """One reward source of a batch: its kind and its per-turn values.

    Attributes:
        kind: A :data:`SourceKind`.
        values: Per trajectory, one value per turn (already weighted). Progress is the per-turn term ``α ΔJ_h``
            or ``α A^μ_h`` itself, not the shaped rewards a progress critic hands to a returns-to-go learner.
    """

    kind: str
    values: Sequence[Sequence[float]]

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise ConfigError(f"a reward source's kind must be one of {SOURCE_KINDS}, got {self.kind!r}")


def env_sources(trajectories: Sequence[Trajectory]) -> dict[str, Source]:
    """The env's rewards as the only source (a run without critics).

    Example:
        >>> from turnkit.types import AgentTurn, Step
        >>> env_sources([Trajectory("d", 0, (Step("q", AgentTurn("a"), 1.0, True),))])["env"].values
        [(1.0,)]
    """
    return {"env": Source("reward", [tuple(s.reward for s in t.steps) for t in trajectories])}


def source_advantages(
    trajectories: Sequence[Trajectory],
    sources: Mapping[str, Source],
    *,
    estimator: str,
    gamma: float = 1.0,
    group_ids: Sequence[int] | None = None,
    accuracy_range: tuple[float, float] | None = PRIME_ACCURACY_RANGE,
) -> list[tuple[float, ...] | None]:
    """Per-turn advantages of a batch from its rewards by source, combined by ``estimator`` (module docstring).

    ``"reward"`` sources add up to the outcome; the dense ones (``"process"``, ``"progress"``,
    ``"turn_advantage"``) add up to the dense term the estimator credits, whatever their kind, so any dense
    critic (an oracle, say) can be read through any estimator. Errored trajectories get ``None`` (masked).

    Args:
        trajectories: The batch (with group ids).
        sources: ``{name: Source}``; every source has one value per turn of every trajectory.
        estimator: One of :data:`SOURCE_ESTIMATORS`.
        gamma: Discount of the returns-to-go.
        group_ids: Group ids to use instead of ``Trajectory.group``.
        accuracy_range: PRIME's prompt filter (:func:`prime_turn_advantages`) on the env's return (the
            ``"env"`` source; without one, the outcome's); other estimators ignore it.

    Returns:
        Per trajectory, one advantage per step, or ``None`` for an errored trajectory.

    Raises:
        ConfigError: An unknown estimator, or ``"sweet"`` without a dense source.
        DataError: A trajectory without a group id, or a source whose values do not match the steps.

    Example:
        >>> from turnkit.types import AgentTurn, Step
        >>> def traj(reward):
        ...     return Trajectory("d", 0, (Step("q", AgentTurn("a"), reward, True),), group=0)
        >>> batch = [traj(0.0), traj(0.0)]  # a tied outcome, and a noisy process reward
        >>> sources = {**env_sources(batch), "prime": Source("process", [(0.03,), (0.01,)])}
        >>> [round(a[0], 6) for a in source_advantages(batch, sources, estimator="mrt")]  # the noise, not σ-scaled
        [0.03, 0.01]
        >>> [round(a[0], 6) for a in source_advantages(batch, sources, estimator="prime")]  # filtered: tied
        [0.0, 0.0]
    """
    if estimator not in SOURCE_ESTIMATORS:
        raise ConfigError(f"estimator must be one of {SOURCE_ESTIMATORS}, got {estimator!r}")
    dense_names = [name for name, s in sources.items() if s.kind != "reward"]
    if estimator == "sweet" and not dense_names:
        raise ConfigError(
            "estimator 'sweet' credits turns with a critic's turn advantages, but no critic gives a dense source "
            "(add critic.sweet, or another dense critic such as critic.oracle)"
        )
    for name, source in sources.items():
        if len(source.values) != len(trajectories):
            raise DataError(f"source {name!r} has {len(source.values)} rows for {len(trajectories)} trajectories")
    kept = [i for i, t in enumerate(trajectories) if t.error is None]
    out: list[tuple[float, ...] | None] = [None] * len(trajectories)
    if not kept:
        return out
    gids = []
    for i in kept:
        gid = group_ids[i] if group_ids is not None else trajectories[i].group
        if gid is None:
            raise DataError(f"trajectory {i} has no group id; collect it with collect_group or pass group_ids")
        gids.append(gid)
    width = max(1, *(len(trajectories[i].steps) for i in kept))
    mask = torch.zeros(len(kept), width, dtype=torch.bool)
    outcome = torch.zeros(len(kept), width, dtype=torch.float64)
    dense = torch.zeros_like(outcome)
    for j, i in enumerate(kept):
        n = len(trajectories[i].steps)
        mask[j, :n] = True
        for name, source in sources.items():
            row = [float(x) for x in source.values[i]]
            if len(row) != n:
                raise DataError(f"source {name!r}, trajectory {i}: {len(row)} values for {n} steps")
            if not all(math.isfinite(x) for x in row):
                raise DataError(f"source {name!r}, trajectory {i} has a non-finite value: {row}")
            target = outcome if source.kind == "reward" else dense
            target[j, :n] += torch.tensor(row, dtype=torch.float64)
    if estimator == "prime":
        env = sources.get("env")
        accuracy = None if env is None else torch.tensor([float(sum(env.values[i])) for i in kept], dtype=torch.float64)
        adv = prime_turn_advantages(
            outcome, dense, mask, gids, gamma=gamma, accuracy_range=accuracy_range, accuracy=accuracy
        )
    elif estimator == "mrt":
        adv = mrt_turn_advantages(outcome, dense, mask, gids, gamma=gamma)
    elif estimator == "pav":
        adv = pav_turn_advantages(outcome, dense, mask, gids, gamma=gamma)
    else:
        adv = sweet_turn_advantages(dense, mask, gids)
    for j, i in enumerate(kept):
        out[i] = tuple(float(a) for a in adv[j, : len(trajectories[i].steps)])
    return out


__all__ = [
    "PRIME_ACCURACY_RANGE",
    "RUN_ESTIMATORS",
    "SOURCE_ESTIMATORS",
    "SOURCE_KINDS",
    "Source",
    "SourceEstimator",
    "SourceKind",
    "accuracy_filter_mask",
    "dr_grpo_turn_advantages",
    "env_sources",
    "mrt_turn_advantages",
    "pav_turn_advantages",
    "prime_turn_advantages",
    "source_advantages",
    "sweet_turn_advantages",
]
