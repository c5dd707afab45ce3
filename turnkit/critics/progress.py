"""Progress-based dense rewards: MRT (arXiv 2503.07572) and PAV (arXiv 2410.08146).

Both methods reward a step by how much it changes the probability that a *prover* policy ``μ`` finishes
the task from there: MRT's prover is the policy itself forced to answer now (``J`` after each thinking
episode), PAV's is any policy, e.g. a Best-of-K of the base policy.

Pure math (numpy, last axis = steps):

* :func:`progress_bonus`: MRT ``r_prg(z_j) = J(after j) − J(before j)``; :func:`mrt_objective` adds
  ``α Σ_j r_prg`` to the outcome.
* :func:`prover_advantages`: PAV ``A^μ(s_h, a_h) = Q^μ(s_h, a_h) − Q^μ(s_{h−1}, a_{h−1})`` with
  ``Q^μ(s_{−1}, a_{−1}) := V^μ(s_0)``; :func:`effective_rewards`: ``Q^π + α A^μ``; :func:`best_of_k`:
  ``Q^{BoK} = 1 − (1 − Q)^K``.
* :func:`normalized_regret`: MRT's regret of one trace at a token budget ``C0``.
* :func:`progress_step_rewards`: how to hand a per-step progress term to a learner that credits
  returns-to-go (see "Credit" below).

Credit: PAV and MRT use progress as a per-step *advantage coefficient*: the policy gradient is
``Σ_h ∇log π(a_h|s_h) · (Q̂^π(s_h, a_h) + α A^μ(s_h, a_h))`` with ``Q̂^π`` the outcome. turnkit's per-turn
learners instead credit step ``h`` with its return-to-go ``Σ_{h' ≥ h} r_{h'}``. Feeding ``α A^μ`` as raw
rewards (``credit="sum"``) makes the return-to-go telescope to ``α (R − V^μ(s_h))``: a state baseline,
so the expected gradient is exactly outcome-only RL for *any* prover (potential-based shaping).
``credit="advantage"`` (the default) emits ``α (A_h − A_{h+1})`` instead, whose return-to-go is exactly
``α A_h``, so outcome reward + these rewards reproduce the papers' coefficient ``R + α A^μ_h``.

Example:
    >>> progress_bonus([0.25, 0.5, 0.375]).tolist()       # J before, after episode 0, after episode 1
    [0.25, -0.125]
    >>> best_of_k(0.5, 3)                                 # 1 - 0.5**3
    0.875
    >>> prover_advantages([0.5, 1.0], v0=0.25).tolist()   # [0.5 - 0.25, 1.0 - 0.5]
    [0.25, 0.5]
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import gymnasium
import numpy as np

from turnkit.agents.base import Agent
from turnkit.critics.base import CriticResult
from turnkit.envs.core import EnvSnapshot, snapshot_env
from turnkit.errors import ConfigError, CriticError
from turnkit.rollout.collect import Start, clone_env, collect_batch
from turnkit.types import Message, Step, Trajectory, TrajectoryError, observation_role

if TYPE_CHECKING:
    import torch

Credit = Literal["advantage", "sum"]
"""How per-step progress becomes per-step rewards (module docstring, "Credit")."""


def _alpha(alpha: float) -> float:
    if not np.isfinite(alpha):
        raise ConfigError(f"alpha must be finite, got {alpha!r}")
    return float(alpha)


# ---------------------------------------------------------------------------------------------- pure math
def progress_bonus(j_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """MRT progress of each episode: ``r_prg(z_j) = J_{j+1} − J_j`` along the last axis.

    Args:
        j_values: ``[..., k + 1]`` success probabilities of the forced-answer prover: ``J_0`` before any
            episode, then after each of the ``k`` episodes.

    Returns:
        ``[..., k]`` per-episode progress.

    Example:
        >>> progress_bonus([[0.0, 0.25, 1.0]]).tolist()
        [[0.25, 0.75]]
    """
    j = np.asarray(j_values, dtype=np.float64)
    if j.shape[-1] < 1:
        raise ConfigError("progress_bonus needs at least J_0")
    return np.diff(j, axis=-1)


def mrt_objective(outcome: float, j_values: Sequence[float], alpha: float) -> float:
    """MRT's per-trace objective: ``r(x, z) + α Σ_j r_prg(z_j) = r + α (J_k − J_0)``.

    Example:
        >>> mrt_objective(1.0, [0.2, 0.6, 1.0], alpha=0.5)  # 1 + 0.5 * (0.4 + 0.4)
        1.4
    """
    return float(outcome) + _alpha(alpha) * float(progress_bonus(j_values).sum())


def prover_advantages(q_values: Sequence[float] | np.ndarray, v0: float | np.ndarray) -> np.ndarray:
    """PAV progress ``A^μ(s_h, a_h) = Q^μ(s_h, a_h) − Q^μ(s_{h−1}, a_{h−1})``, ``Q^μ(s_{−1}, a_{−1}) = V^μ(s_0)``.

    With deterministic transitions (appending a step), ``Q^μ(s_{h−1}, a_{h−1}) = V^μ(s_h)``, so this is the
    prover's advantage ``Q^μ(s_h, a_h) − V^μ(s_h)``.

    Args:
        q_values: ``[..., H]`` prover Q of each step.
        v0: ``[...]`` prover value of the initial state.

    Example:
        >>> prover_advantages([[0.2, 0.0], [0.5, 0.9]], v0=[0.1, 0.5]).round(2).tolist()
        [[0.1, -0.2], [0.0, 0.4]]
    """
    q = np.asarray(q_values, dtype=np.float64)
    v = np.asarray(v0, dtype=np.float64)[..., None]
    before = np.concatenate([np.broadcast_to(v, (*q.shape[:-1], 1)), q[..., :-1]], axis=-1)
    return q - before


def effective_rewards(q_pi: np.ndarray | float, a_mu: np.ndarray | float, alpha: float) -> np.ndarray:
    """PAV's effective per-step reward ``Q^π(s_h, a_h) + α A^μ(s_h, a_h)`` (``Q^π`` may be the outcome).

    Example:
        >>> effective_rewards(np.array([1.0, 1.0]), np.array([0.25, -0.5]), alpha=2.0).tolist()
        [1.5, 0.0]
    """
    return np.asarray(q_pi, dtype=np.float64) + _alpha(alpha) * np.asarray(a_mu, dtype=np.float64)


def best_of_k(q: np.ndarray | float, k: int) -> np.ndarray | float:
    """Q of the Best-of-K prover: at least one of ``K`` independent completions succeeds.

    Example:
        >>> best_of_k(np.array([0.0, 0.1, 1.0]), 2).round(2).tolist()
        [0.0, 0.19, 1.0]
    """
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ConfigError(f"Best-of-K needs an int K >= 1, got {k!r}")
    return 1.0 - (1.0 - q) ** int(k)


def progress_step_rewards(
    progress: Sequence[float] | np.ndarray, alpha: float = 1.0, credit: Credit = "advantage"
) -> np.ndarray:
    """Per-step rewards carrying ``α · progress`` to a learner that credits returns-to-go (module docstring).

    Args:
        progress: ``[..., H]`` per-step progress (``A^μ`` or ``ΔJ``).
        alpha: Weight of the progress term.
        credit: ``"advantage"``: rewards ``α (p_h − p_{h+1})`` (``p_H = 0``) whose return-to-go is ``α p_h``,
            the papers' per-step coefficient; ``"sum"``: rewards ``α p_h`` (return-to-go ``α Σ_{h' ≥ h} p``).

    Example:
        >>> p = [0.5, 0.25, -0.5]
        >>> progress_step_rewards(p, credit="advantage").tolist()      # returns-to-go: 0.5, 0.25, -0.5
        [0.25, 0.75, -0.5]
        >>> progress_step_rewards(p, alpha=2.0, credit="sum").tolist()
        [1.0, 0.5, -1.0]
    """
    p = _alpha(alpha) * np.asarray(progress, dtype=np.float64)
    if credit == "sum":
        return p
    if credit != "advantage":
        raise ConfigError(f"credit must be 'advantage' or 'sum', got {credit!r}")
    after = np.concatenate([p[..., 1:], np.zeros_like(p[..., :1])], axis=-1)
    return p - after


def normalized_regret(
    tokens: Sequence[float] | np.ndarray, j_values: Sequence[float] | np.ndarray, budget: float
) -> float:
    """MRT's normalised regret of one trace: ``1 − ∫_0^{C0} J(c) dc / C0``.

    The curve is the points ``(tokens_j, J_j)`` (tokens used at the end of episode ``j`` and the success
    probability of answering there), with ``(0, 0)`` prepended, linear in between (``trapz``), cut at
    ``C0`` and held flat at its last value up to ``C0``. Points past ``C0`` are dropped.

    Args:
        tokens: Non-decreasing cumulative tokens at each episode end.
        j_values: ``J`` at each episode end (same length).
        budget: ``C0 > 0``.

    Example:
        >>> normalized_regret([10], [1.0], budget=20)  # area: ramp 0->1 over 10 (5) + flat 1 for 10
        0.25
        >>> normalized_regret([], [], budget=8)        # never answered: J = 0 throughout
        1.0
    """
    if not budget > 0:
        raise ConfigError(f"budget C0 must be > 0, got {budget!r}")
    t = np.asarray(tokens, dtype=np.float64)
    j = np.asarray(j_values, dtype=np.float64)
    if t.shape != j.shape or t.ndim != 1:
        raise ConfigError(f"tokens and J must be 1-D of the same length, got {t.shape} and {j.shape}")
    if np.any(np.diff(t) < 0) or np.any(t < 0):
        raise ConfigError(f"tokens must be non-negative and non-decreasing, got {t.tolist()}")
    keep = t <= budget
    xs = np.concatenate([[0.0], t[keep], [budget]])
    ys = np.concatenate([[0.0], j[keep]])
    ys = np.concatenate([ys, ys[-1:]])
    return float(1.0 - np.trapezoid(ys, xs) / budget)


def mean_normalized_regret(traces: Sequence[tuple[Sequence[float], Sequence[float]]], budget: float) -> float:
    """Mean of :func:`normalized_regret` over ``(tokens, J)`` traces.

    Example:
        >>> mean_normalized_regret([([10], [1.0]), ([], [])], budget=20)  # (0.25 + 1) / 2
        0.625
    """
    if not traces:
        raise ConfigError("mean_normalized_regret needs at least one trace")
    return float(np.mean([normalized_regret(t, j, budget) for t, j in traces]))


def regret_curve(
    tokens: Sequence[float] | np.ndarray, j_values: Sequence[float] | np.ndarray, budget: float, grid: np.ndarray
) -> np.ndarray:
    """``J(c)`` on ``grid`` (token counts in ``[0, C0]``): the curve :func:`normalized_regret` integrates.

    Example:
        >>> regret_curve([4, 8], [0.5, 1.0], 10, np.array([0.0, 2.0, 6.0, 10.0])).tolist()
        [0.0, 0.25, 0.75, 1.0]
    """
    normalized_regret(tokens, j_values, budget)  # validates
    t, j = np.asarray(tokens, dtype=np.float64), np.asarray(j_values, dtype=np.float64)
    keep = t <= budget
    xs = np.concatenate([[0.0], t[keep], [budget]])
    ys = np.concatenate([[0.0], j[keep]])
    return np.interp(grid, xs, np.concatenate([ys, ys[-1:]]))


def plot_regret(
    traces: Mapping[str, Sequence[tuple[Sequence[float], Sequence[float]]]],
    budget: float,
    path: str,
    title: str = "",
) -> dict[str, float]:
    """Plot the mean ``J``-vs-tokens curve of each labelled set of traces; returns each set's mean regret.

    The area above a curve (up to ``J = 1``) is the normalised regret: a policy that makes progress early
    has a curve that rises early.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "regret.png")
        >>> plot_regret({"base": [([4, 8], [0.5, 1.0])]}, budget=10, path=path)
        {'base': 0.4}
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.linspace(0.0, budget, 200)
    fig, ax = plt.subplots(figsize=(6, 4))
    regrets = {}
    for label, group in traces.items():
        regrets[label] = mean_normalized_regret(group, budget)
        mean = np.mean([regret_curve(t, j, budget, grid) for t, j in group], axis=0)
        ax.plot(grid, mean, label=f"{label} (regret {regrets[label]:.3f}, {len(group)} traces)")
    ax.set(xlabel="tokens used", ylabel="J: success if forced to answer", ylim=(-0.02, 1.02), title=title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return regrets


# ---------------------------------------------------------------------------------------------- branching values
FORCE_ANSWER = "Time is up. Stop thinking and reply now with your final answer as ANSWER: <value>."
"""MRT's forced-termination instruction for :class:`~turnkit.envs.math.env.MathEpisodesEnv` answers."""

Force = Callable[[tuple[Message, ...]], tuple[Message, ...]]
"""Turns the conversation before a turn into the prompt of a prover turn (e.g. "answer now")."""


def force_answer(instruction: str = FORCE_ANSWER) -> Force:
    """A :data:`Force` that appends ``instruction`` to the last user message (the policy's "answer now" prompt).

    Example:
        >>> msgs = (Message("user", "What is 2+2?"),)
        >>> force_answer("Answer now.")(msgs)[-1].content
        'What is 2+2?\\nAnswer now.'
    """

    def force(messages: tuple[Message, ...]) -> tuple[Message, ...]:
        if not messages or messages[-1].role != "user":
            return (*messages, Message("user", instruction))
        return (*messages[:-1], Message("user", f"{messages[-1].content}\n{instruction}"))

    return force


def conversation_before(trajectory: Trajectory, step: int) -> tuple[Message, ...]:
    """The conversation the policy saw before step ``step`` (``step = len(steps)``: after the last step).

    Example:
        >>> from turnkit.types import AgentTurn, Step
        >>> t = Trajectory("d", 0, (Step("q", AgentTurn("a"), 0.0),), initial_observation="q",
        ...                final_observation="done")
        >>> [m.content for m in conversation_before(t, 1)]
        ['q', 'a', 'done']
    """
    steps = trajectory.steps
    out = [Message("user", trajectory.initial_observation)]
    for h in range(step):
        out.append(Message("assistant", steps[h].action.text))
        reply = steps[h + 1].observation if h + 1 < len(steps) else trajectory.final_observation
        out.append(Message(observation_role(steps[h].info), reply))
    return tuple(out)


def replay_snapshots(env: gymnasium.Env, trajectory: Trajectory) -> list[EnvSnapshot]:
    """Replay a trajectory's actions in ``env`` and snapshot before every step and after the last one.

    Resets with the trajectory's seed (the contract: same seed, same task); without a seed, with its task.

    Raises:
        CriticError: If the trajectory errored, or the replay gives another task or other observations
            (the env is not deterministic, or the trajectory came from another env).
    """
    if trajectory.error is not None:
        raise CriticError(f"cannot replay an errored trajectory ({trajectory.error.message})")
    options = {"task": trajectory.task} if trajectory.seed is None and trajectory.task is not None else None
    obs, _ = env.reset(seed=trajectory.seed, options=options)
    snaps = [snapshot_env(env)]
    task = snaps[0].task
    if trajectory.task is not None and task.task_id != trajectory.task.task_id:
        raise CriticError(f"replay drew task {task.task_id!r}, the trajectory has {trajectory.task.task_id!r}")
    for h, step in enumerate(trajectory.steps):
        if obs != step.observation:
            raise CriticError(f"replay diverged before step {h}: observation {obs[:60]!r} vs {step.observation[:60]!r}")
        obs = env.step(step.action.text)[0]
        snaps.append(snapshot_env(env))
    return snaps


class RolloutValue:
    """Success probability of a prover agent continuing from every point of a trajectory (by branching).

    ``values(trajectory)[i]`` is estimated from ``samples`` continuations that start from the env snapshot
    before step ``i`` (``i = len(steps)``: after the last step) and run for at most ``max_turns`` turns;
    ``force`` rewrites the prover's first prompt. After a terminal last step the value is the outcome itself.

    * MRT: the policy forced to answer now, ``RolloutValue(env, policy, samples=8, max_turns=1,
      force=force_answer())``: ``J`` before and after each episode (a turn is an episode).
    * PAV: any prover run to the end, ``RolloutValue(env, prover, samples=20)``: ``V^μ(s_0)`` and
      ``Q^μ(s_h, a_h) = V^μ(s_{h+1})``.

    The branches are episodes of :func:`~turnkit.rollout.collect.collect_batch` started from the restored
    snapshots (:class:`~turnkit.rollout.collect.Start`). A branch that ends on an infrastructure failure (its
    env, sandbox or the prover raised) is an errored trajectory: it is left out of its point's mean (never
    scored 0) and counted in :attr:`failed_branches`; a point without any clean branch raises.

    Args:
        env: An env like the trajectory's (same id and arguments), for the critic's own use: it is reset
            and stepped to replay trajectories, and cloned for the parallel branches.
        agent: The prover; called once per round with every live branch (batched).
        samples: Continuations per point (``K``).
        max_turns: Most prover turns per continuation; ``None`` runs to the end of the episode.
        force: Rewrites the conversation before the prover's first turn.

    Attributes:
        failed_branches: The errored branches of the latest :meth:`values` / :meth:`values_batch` call.
        branch_errors: Their errors (typed :class:`~turnkit.types.ErrorCause`), in branch order.
    """

    def __init__(
        self,
        env: gymnasium.Env,
        agent: Agent,
        *,
        samples: int = 8,
        max_turns: int | None = None,
        force: Force | None = None,
    ) -> None:
        if samples < 1:
            raise ConfigError(f"samples must be >= 1, got {samples}")
        if max_turns is not None and max_turns < 1:
            raise ConfigError(f"max_turns must be >= 1 or None, got {max_turns}")
        self.env, self.agent, self.samples, self.max_turns, self.force = env, agent, samples, max_turns, force
        self._pool: list[gymnasium.Env] = []
        self.branch_errors: list[TrajectoryError] = []

    @property
    def failed_branches(self) -> int:
        """How many branches of the latest call errored (left out of the values)."""
        return len(self.branch_errors)

    def values(self, trajectory: Trajectory) -> np.ndarray:
        """``[len(steps) + 1]`` estimated success probabilities (see the class docstring)."""
        return self.values_batch([trajectory])[0]

    def values_batch(self, trajectories: Sequence[Trajectory]) -> list[np.ndarray]:
        """:meth:`values` of many trajectories, every branch of every trajectory in one lockstep batch."""
        out: list[np.ndarray] = []
        points: list[tuple[Trajectory, EnvSnapshot, tuple[Message, ...], int]] = []
        slots: list[tuple[int, int]] = []  # (trajectory, point) of each entry of ``points``
        for t, trajectory in enumerate(trajectories):
            snaps = replay_snapshots(self.env, trajectory)
            n = len(trajectory.steps)
            row = np.zeros(n + 1)
            ended = n > 0 and (trajectory.steps[-1].terminated or trajectory.steps[-1].truncated)
            if ended:
                row[n] = float(trajectory.success)
            for i in range(n if ended else n + 1):
                points.append((trajectory, snaps[i], conversation_before(trajectory, i), i))
                slots.append((t, i))
            out.append(row)
        for (t, i), win in zip(slots, self._branch(points), strict=True):
            out[t][i] = win
        return out

    def _branch(self, points: list[tuple[Trajectory, EnvSnapshot, tuple[Message, ...], int]]) -> np.ndarray:
        total = len(points) * self.samples
        while len(self._pool) < total:
            self._pool.append(clone_env(self.env))
        starts, seeds = [], []
        for traj, snap, before, _ in points:
            prompt = self.force(before) if self.force is not None else None
            starts += [Start(snap, before, prompt)] * self.samples
            seeds += [traj.seed] * self.samples
        branches = collect_batch(self._pool[:total], self.agent, seeds, max_turns=self.max_turns, starts=starts)
        self.branch_errors = [b.error for b in branches if b.error is not None]
        wins = np.array([_branch_win(b) for b in branches]).reshape(len(points), self.samples)
        clean = ~np.isnan(wins)
        for p in np.flatnonzero(~clean.any(axis=1)):
            first = self.branch_errors[int((~clean[:p]).sum())]
            raise CriticError(
                f"every branch from step {points[p][3]} of seed {points[p][0].seed} failed; the first: "
                f"{first.cause.value}: {first.message}"
            )
        return np.where(clean, wins, 0.0).sum(axis=1) / clean.sum(axis=1)

    def close(self) -> None:
        """Close the branch envs (idempotent; the env passed in stays the caller's)."""
        for env in self._pool:
            env.close()
        self._pool.clear()


def _branch_win(branch: Trajectory) -> float:
    """1.0 or 0.0: whether the branch's env ended it in success (``nan``: the branch errored).

    A branch cut by ``max_turns`` (truncated with no ``info["success"]``) counts as a failure.
    """
    if branch.error is not None:
        return float("nan")
    last = branch.steps[-1] if branch.steps else None
    if last is None or not (last.terminated or last.truncated):
        return 0.0
    return float(last.info.get("success", last.reward > 0 and not last.truncated))


# ---------------------------------------------------------------------------------------------- the critics
class ValueFn(Protocol):
    """Anything with ``values(trajectory) -> [len(steps) + 1]`` success probabilities of a prover."""

    def values(self, trajectory: Trajectory) -> np.ndarray:
        """Prover success probability before each step and after the last."""
        ...


def step_tokens(step: Step) -> int:
    """Tokens a step spent: its generated ids, or its whitespace words for text-only agents.

    Example:
        >>> from turnkit.types import AgentTurn
        >>> step_tokens(Step("q", AgentTurn("a b c"), 0.0)), step_tokens(Step("q", AgentTurn("x", (1, 2)), 0.0))
        (3, 2)
    """
    return len(step.action.token_ids) or len(step.action.text.split())


class ProgressCritic:
    """Dense progress rewards ``α · ΔV`` from a prover's values (MRT and PAV; see the module docstring).

    Step ``h`` gets progress ``V_{h+1} − V_h`` (MRT's ``r_prg``; PAV's ``A^μ``), after the Best-of-K transform
    ``V → 1 − (1 − V)^K`` if ``best_of > 1``, turned into rewards by :func:`progress_step_rewards`. Add the
    outcome with :class:`~turnkit.critics.base.WeightedSum` and ``OutcomeReward``: with ``credit="advantage"``
    the return-to-go of step ``h`` is then PAV's effective reward ``R + α A^μ_h``.

    Metrics: ``V0``, ``V_end``, ``progress`` (``Σ ΔV``), and ``regret`` (MRT's normalised regret of the points
    ``(tokens after step h, V_{h+1})``) when ``budget`` is set.

    Args:
        value_fn: A :class:`ValueFn` (:class:`RolloutValue`, :class:`ProgressVerifier`, ...).
        alpha: Weight of the progress term.
        credit: ``"advantage"`` or ``"sum"`` (see :func:`progress_step_rewards`).
        best_of: ``K`` of the Best-of-K prover transform.
        budget: Token budget ``C0`` of the regret metric (``None``: no regret).
        name: Metric prefix inside a :class:`~turnkit.critics.base.WeightedSum`.

    Example:
        >>> from turnkit.types import AgentTurn
        >>> class Table:
        ...     def values(self, trajectory):
        ...         return np.array([0.25, 0.5, 1.0])
        >>> steps = (Step("q", AgentTurn("a b"), 0.0), Step("q", AgentTurn("c"), 1.0, True, info={"success": True}))
        >>> result = ProgressCritic(Table(), budget=4).score(Trajectory("d", 0, steps))
        >>> result.step_rewards, result.metrics["progress"], result.metrics["regret"]
        ((-0.25, 0.5), 0.75, 0.4375)
    """

    source = "progress"
    """Its rewards carry per-turn progress (:mod:`turnkit.learners.estimators`)."""

    def __init__(
        self,
        value_fn: ValueFn,
        *,
        alpha: float = 1.0,
        credit: Credit = "advantage",
        best_of: int = 1,
        budget: float | None = None,
        name: str = "progress",
    ) -> None:
        best_of_k(0.0, best_of)  # validates K
        progress_step_rewards([0.0], alpha, credit)  # validates alpha and credit
        if budget is not None and not budget > 0:
            raise ConfigError(f"budget must be > 0 or None, got {budget!r}")
        self.value_fn, self.alpha, self.credit, self.best_of, self.budget = value_fn, alpha, credit, best_of, budget
        self.name = name

    @property
    def estimator(self) -> str | None:
        """The estimator of the critic's paper: ``"mrt"`` or ``"pav"`` by its name, else ``None``."""
        return self.name if self.name in ("mrt", "pav") else None

    def source_values(self, rewards: Sequence[float]) -> tuple[float, ...]:
        """The per-turn progress ``α ΔV_h`` behind step rewards of this critic (any weight applied to both).

        With ``credit="advantage"`` the return-to-go of the rewards is the progress; with ``"sum"`` the
        rewards are the progress.

        Example:
            >>> critic = ProgressCritic(None)
            >>> critic.source_values(progress_step_rewards([0.5, 0.25, -0.5]))
            (0.5, 0.25, -0.5)
        """
        r = np.asarray(rewards, dtype=np.float64)
        values = r if self.credit == "sum" else np.cumsum(r[::-1])[::-1]
        return tuple(float(v) for v in values)

    def score(self, trajectory: Trajectory) -> CriticResult:
        """Progress rewards for every step, with metrics."""
        return self._result(trajectory, self.value_fn.values(trajectory))

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
        """:meth:`score` of many trajectories, through ``value_fn.values_batch`` when it has one (one batch)."""
        batch = getattr(self.value_fn, "values_batch", None)
        values = batch(trajectories) if callable(batch) else [self.value_fn.values(t) for t in trajectories]
        return [self._result(t, v) for t, v in zip(trajectories, values, strict=True)]

    def _result(self, trajectory: Trajectory, values: np.ndarray) -> CriticResult:
        n = len(trajectory.steps)
        v = np.asarray(best_of_k(np.asarray(values, dtype=np.float64), self.best_of))
        if v.shape != (n + 1,):
            raise CriticError(f"{type(self.value_fn).__name__} gave {v.shape} values for {n} steps (need {n + 1})")
        rewards = progress_step_rewards(progress_bonus(v), self.alpha, self.credit)
        metrics = {"V0": float(v[0]), "V_end": float(v[-1]), "progress": float(v[-1] - v[0])}
        if self.budget is not None:
            tokens = np.cumsum([step_tokens(s) for s in trajectory.steps])
            metrics["regret"] = normalized_regret(tokens, v[1:], self.budget)
        return CriticResult(tuple(float(r) for r in rewards), metrics)

    def close(self) -> None:
        """Close what the value function holds (a :class:`RolloutValue`'s branch envs)."""
        close = getattr(self.value_fn, "close", None)
        if callable(close):
            close()

    def fit(self, trajectories: Sequence[Trajectory], **kwargs: Any) -> Mapping[str, float]:
        """Train the value function if it is learned (``value_fn.fit``)."""
        fit = getattr(self.value_fn, "fit", None)
        if fit is None:
            raise CriticError(f"{type(self.value_fn).__name__} is not learned (it has no fit)")
        return fit(trajectories, **kwargs)


# ---------------------------------------------------------------------------------------------- learned verifier
def balanced_soft_bce(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Class-balanced binary cross-entropy on soft labels (PAV's verifier loss).

    ``L = −(1/N) Σ_i [w₊ q_i log σ(z_i) + w₋ (1 − q_i) log(1 − σ(z_i))]`` with ``w₊ = N / (2 Σ q)`` and
    ``w₋ = N / (2 Σ (1 − q))``: the positive and the negative label mass weigh half each, so a verifier of
    a rarely successful prover does not learn "always 0".

    Example:
        >>> import torch
        >>> round(float(balanced_soft_bce(torch.zeros(2), torch.tensor([1.0, 0.0]))), 4)  # log 2
        0.6931
    """
    import torch.nn.functional as F

    q = targets.to(logits.dtype)
    n = q.numel()
    w_pos = n / (2 * q.sum().clamp(min=1e-8))
    w_neg = n / (2 * (1 - q).sum().clamp(min=1e-8))
    return (w_pos * q * -F.logsigmoid(logits) + w_neg * (1 - q) * -F.logsigmoid(-logits)).mean()


def hash_words(messages: Sequence[Message], buckets: int, max_words: int) -> list[int]:
    """The last ``max_words`` words of a conversation as ids in ``[1, buckets)`` (stable crc32 hashes).

    Example:
        >>> hash_words([Message("user", "3 7"), Message("assistant", "1")], buckets=1000, max_words=3)
        [61, 730, 93]
    """
    words = [w for m in messages for w in (f"<{m.role}>", *m.content.split())]
    return [1 + zlib.crc32(w.encode("utf-8", "surrogatepass")) % (buckets - 1) for w in words[-max_words:]]


class ProgressVerifier:
    """A learned ``V^μ`` of conversation prefixes: hashed words → GRU → sigmoid (PAV's verifier, tiny).

    ``fit`` regresses Monte Carlo labels (e.g. :class:`RolloutValue` of the prover, ``mc = 20`` rollouts per
    prefix) with :func:`balanced_soft_bce`; ``values`` predicts them for new trajectories, so a
    :class:`ProgressCritic` over it needs no rollouts at scoring time. The value after a terminal last step
    is the outcome itself (never predicted).

    Args:
        buckets: Hashed vocabulary size. dim: Embedding and GRU width. max_words: Prefix words kept (last ones).
        seed: Seeds the parameter initialisation and the minibatch order.
    """

    def __init__(self, *, buckets: int = 4096, dim: int = 64, max_words: int = 256, seed: int = 0) -> None:
        import torch
        from torch import nn

        self.buckets, self.max_words, self.seed = buckets, max_words, seed
        self.embed = nn.Embedding(buckets, dim, padding_idx=0)
        self.gru = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, 1)
        self.modules = nn.ModuleList([self.embed, self.gru, self.head])
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.modules.named_parameters():
                if "weight" in name:
                    p.uniform_(-1 / dim**0.5, 1 / dim**0.5, generator=gen)
                else:
                    p.zero_()
            self.embed.weight[0].zero_()

    def _points(self, trajectory: Trajectory) -> list[int]:
        n = len(trajectory.steps)
        ended = n > 0 and (trajectory.steps[-1].terminated or trajectory.steps[-1].truncated)
        return list(range(n if ended else n + 1))

    def _logits(self, prefixes: Sequence[tuple[Message, ...]]) -> torch.Tensor:
        import torch

        ids = [hash_words(p, self.buckets, self.max_words) or [0] for p in prefixes]
        lengths = torch.tensor([len(x) for x in ids])
        batch = torch.zeros(len(ids), int(lengths.max()), dtype=torch.long)
        for i, x in enumerate(ids):
            batch[i, : len(x)] = torch.tensor(x)
        out, _ = self.gru(self.embed(batch))
        return self.head(out[torch.arange(len(ids)), lengths - 1]).squeeze(-1)

    def values(self, trajectory: Trajectory) -> np.ndarray:
        """Predicted prover success probability before each step and after the last."""
        import torch

        points = self._points(trajectory)
        out = np.zeros(len(trajectory.steps) + 1)
        if len(points) < len(out):
            out[-1] = float(trajectory.success)
        with torch.no_grad():
            probs = torch.sigmoid(self._logits([conversation_before(trajectory, i) for i in points]))
        out[points] = probs.double().numpy()
        return out

    def fit(
        self,
        trajectories: Sequence[Trajectory],
        *,
        labels: Sequence[Sequence[float]] | None = None,
        labeler: ValueFn | None = None,
        epochs: int = 20,
        lr: float = 3e-3,
        batch_size: int = 64,
    ) -> dict[str, float]:
        """Fit on per-prefix labels (``labels[i]`` has ``len(steps) + 1`` values) or on ``labeler``'s values.

        Returns:
            ``{"loss": final epoch's mean loss, "examples": number of prefixes}``.
        """
        import torch

        if (labels is None) == (labeler is None):
            raise ConfigError("ProgressVerifier.fit needs exactly one of labels= or labeler=")
        prefixes, targets = [], []
        for i, traj in enumerate(trajectories):
            row = np.asarray(labels[i] if labels is not None else labeler.values(traj), dtype=np.float64)  # type: ignore[union-attr]
            if row.shape != (len(traj.steps) + 1,) or not np.all((row >= 0) & (row <= 1)):
                raise CriticError(f"labels of trajectory {i} must be {len(traj.steps) + 1} values in [0, 1]")
            for h in self._points(traj):
                prefixes.append(conversation_before(traj, h))
                targets.append(row[h])
        if not prefixes:
            raise CriticError("ProgressVerifier.fit got no prefixes to learn from")
        y = torch.tensor(targets, dtype=torch.float32)
        opt = torch.optim.Adam(self.modules.parameters(), lr=lr)  # Adam, no clipping: the verifier's own recipe
        from turnkit.learners.learner import Learner, OptimConfig

        learner = Learner(self.modules, OptimConfig(lr=lr, max_grad_norm=0.0), optimizer=opt)
        rng = np.random.default_rng(self.seed)
        loss_sum = 0.0
        for _ in range(epochs):
            order, loss_sum = rng.permutation(len(prefixes)), 0.0
            for s in range(0, len(order), batch_size):
                idx = order[s : s + batch_size]
                loss = balanced_soft_bce(self._logits([prefixes[j] for j in idx]), y[idx])
                learner.minimize(loss)
                loss_sum += float(loss.detach()) * len(idx)
        return {"loss": loss_sum / len(prefixes), "examples": float(len(prefixes))}
