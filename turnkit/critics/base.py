"""The :class:`Critic` protocol: per-step rewards (and metrics) for a finished trajectory.

A critic turns a :class:`~turnkit.types.Trajectory` into one reward per step. Those rewards feed the
learners as dense per-turn rewards, e.g.
``trajectory_advantages(trajs, per_turn=True, turn_rewards=[r.step_rewards for r in results])``, which
credits each turn with its return-to-go. Critics that need hidden training-time data (reference answers,
hidden tests) read it from ``Trajectory.task`` only, never from observations or ``info``.

* :class:`Critic`: ``score(trajectory) -> CriticResult``; a critic may also offer
  ``score_batch(trajectories)`` for batched model calls (:func:`score_all` uses it when present).
* :class:`StatefulCritic`: a critic that learns as training goes: ``update(trajectories) -> metrics`` on each
  rollout batch, and ``save(folder)`` / ``load(folder)`` of its state for checkpoints.
* :class:`CriticContext`: the narrow view of a run a critic is built from (``from_context`` of a critic module;
  see :mod:`turnkit.critics.registry`).
* :class:`WeightedSum`: ``Σ_i w_i · critic_i`` step by step, with each part's metrics kept under its name.

Example:
    >>> from turnkit.types import AgentTurn, Step, Trajectory
    >>> class StepCount:
    ...     name = "count"
    ...     def score(self, trajectory):
    ...         n = len(trajectory.steps)
    ...         return CriticResult(tuple(1.0 for _ in range(n)), {"steps": float(n)})
    >>> traj = Trajectory("demo", seed=0, steps=(Step("q", AgentTurn("a"), reward=0.0),) * 2)
    >>> isinstance(StepCount(), Critic)
    True
    >>> result = WeightedSum([(0.5, StepCount())]).score(traj)
    >>> result.step_rewards, result.metrics["count/steps"]
    ((0.5, 0.5), 2.0)
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from turnkit.errors import ConfigError, CriticError
from turnkit.types import Trajectory

if TYPE_CHECKING:
    import gymnasium

    from turnkit.agents.hf import HFPolicy


@dataclass(frozen=True)
class CriticResult:
    """A critic's verdict on one trajectory.

    Attributes:
        step_rewards: One finite reward per step of the trajectory, in step order.
        metrics: Named scalar diagnostics (e.g. ``{"J0": 0.2, "regret": 0.41}``) for logging.

    Example:
        >>> CriticResult((0.0, 1.0)).total
        1.0
    """

    step_rewards: tuple[float, ...]
    metrics: Mapping[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        """Sum of the step rewards."""
        return float(sum(self.step_rewards))


@runtime_checkable
class Critic(Protocol):
    """Anything with ``score(trajectory) -> CriticResult`` (one reward per step)."""

    def score(self, trajectory: Trajectory) -> CriticResult:
        """Score one finished trajectory."""
        ...


@runtime_checkable
class StatefulCritic(Critic, Protocol):
    """A critic that learns during training: an update per rollout batch, and its state in every checkpoint.

    The training loop scores a batch with the critic as it is, then calls :meth:`update` on the same batch
    (PRIME's "single forward"), and keeps :meth:`save`'s files in each checkpoint so a resumed run continues
    the critic where it stopped.
    """

    def update(self, trajectories: Sequence[Trajectory]) -> Mapping[str, float]:
        """Learn from a batch of clean trajectories; return metrics (e.g. the critic's loss)."""
        ...

    def save(self, folder: Path) -> None:
        """Write the critic's state (weights, optimiser, counters) into an existing ``folder``."""
        ...

    def load(self, folder: Path) -> None:
        """Restore what :meth:`save` wrote."""
        ...


@dataclass(frozen=True)
class CriticContext:
    """What a critic module's ``from_context(ctx, config)`` may build its critic from: nothing else of the run.

    Attributes:
        policy: The live policy (trained in place by the loop: read it, never update it).
        start_policy: Returns a frozen copy of the start policy (built on first call; PAV's prover, the base
            of PRIME's and SWEET's LoRA critics).
        make_env: Makes a spare env of the run's kind, owned by the critic (for replay and branching).
        seed: The run's seed (a critic config's ``seed`` defaults to it).
        max_new_tokens: The policy's generation limit per turn.
        max_turns: The run's turn limit (``None``: the env's own).
        sampling_seed: Returns the sampling seed of the rollout batch being scored (the training step's,
            whatever source played it), for critics that sample like the policy; ``None``: the live policy's
            own ``sampling.seed``.

    Example:
        >>> ctx = CriticContext(policy=None, start_policy=lambda: None, make_env=lambda: None, seed=3)
        >>> ctx.seed, ctx.token_budget
        (3, 24)
    """

    policy: HFPolicy
    start_policy: Callable[[], HFPolicy]
    make_env: Callable[[], gymnasium.Env]
    seed: int = 0
    max_new_tokens: int = 24
    max_turns: int | None = None
    sampling_seed: Callable[[], int] | None = None

    @classmethod
    def from_policy(
        cls,
        policy: HFPolicy,
        make_env: Callable[[], gymnasium.Env],
        *,
        seed: int = 0,
        max_new_tokens: int = 24,
        max_turns: int | None = None,
        sampling_seed: Callable[[], int] | None = None,
    ) -> CriticContext:
        """The context of a run training ``policy``; the start policy is a frozen copy taken on first use.

        Build the critics before the policy gets its training adapter: the copy is of the policy as it is then.
        An adapter the policy already has (a warm start the run goes on training) is merged into the copy.
        """
        frozen: list[HFPolicy] = []

        def start_policy() -> HFPolicy:
            if not frozen:
                frozen.append(_frozen_copy(policy))
            return frozen[0]

        return cls(policy, start_policy, make_env, seed, max_new_tokens, max_turns, sampling_seed)

    def live_seed(self) -> int:
        """The sampling seed of the batch being scored (:attr:`sampling_seed`, else the live policy's).

        Example:
            >>> CriticContext(None, lambda: None, lambda: None, sampling_seed=lambda: 7).live_seed()
            7
        """
        return self.sampling_seed() if self.sampling_seed is not None else self.policy.sampling.seed

    @property
    def token_budget(self) -> int:
        """Tokens an episode may generate: ``max_new_tokens x (max_turns or 1)`` (MRT's default ``C0``)."""
        return self.max_new_tokens * (self.max_turns or 1)


def _frozen_copy(policy: HFPolicy) -> HFPolicy:
    """A copy of ``policy`` with frozen weights that samples as ``policy`` does now.

    A LoRA adapter on ``policy`` (a warm start) is merged into the copy's weights, so the copy is a plain model
    that critics can give adapters of their own; ``policy`` keeps its adapter.
    """
    import copy

    from turnkit.agents.hf import HFPolicy

    model = copy.deepcopy(policy.model)
    if policy.has_adapter:
        model = model.merge_and_unload()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    copied = HFPolicy(model, policy.tokenizer, max_batch_size=policy.max_batch_size)
    copied.sampling = policy.sampling
    return copied


def critic_name(critic: object) -> str:
    """A critic's name: its ``name`` attribute, else its class name.

    Example:
        >>> class Judge: pass
        >>> critic_name(Judge())
        'Judge'
    """
    return str(getattr(critic, "name", type(critic).__name__))


def critic_source(critic: object) -> str:
    """The kind of reward source a critic produces: its ``source`` attribute, else ``"reward"``.

    A critic declares ``source`` so that a run can keep its rewards apart from the env's outcome and combine them
    with the method's own estimator (:mod:`turnkit.learners.estimators`): ``"process"`` (PRIME), ``"progress"``
    (MRT, PAV, the oracle), ``"turn_advantage"`` (SWEET); a plain ``"reward"`` (a judge, a length penalty) joins
    the outcome. ``estimator``, if set, names the estimator of the critic's paper (``grpo.estimator = "paper"``).

    Example:
        >>> class Judge: pass
        >>> class Prm:
        ...     source = "process"
        >>> critic_source(Judge()), critic_source(Prm())
        ('reward', 'process')
    """
    return str(getattr(critic, "source", "reward"))


def source_values(critic: object, rewards: Sequence[float]) -> tuple[float, ...]:
    """A critic's (weighted) step rewards as the per-turn values of its source.

    A critic that shapes its source for a returns-to-go learner (a progress critic's ``credit="advantage"``
    rewards, whose return-to-go is the progress of each turn) converts them back with ``source_values``;
    otherwise the rewards are the values.

    Example:
        >>> source_values(object(), [0.5, 1.0])
        (0.5, 1.0)
    """
    convert = getattr(critic, "source_values", None)
    return tuple(float(v) for v in (convert(rewards) if callable(convert) else rewards))


def checked(result: CriticResult, trajectory: Trajectory, who: str = "critic") -> CriticResult:
    """Return ``result`` after checking that it has one finite reward per step.

    Raises:
        CriticError: Naming the critic, the expected and actual lengths, or the non-finite reward.

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> traj = Trajectory("demo", seed=0, steps=(Step("q", AgentTurn("a"), reward=0.0),))
        >>> checked(CriticResult((1.0, 2.0)), traj, "judge")
        Traceback (most recent call last):
        ...
        turnkit.errors.CriticError: judge returned 2 step rewards for a trajectory with 1 steps
    """
    if len(result.step_rewards) != len(trajectory.steps):
        raise CriticError(
            f"{who} returned {len(result.step_rewards)} step rewards for a trajectory with "
            f"{len(trajectory.steps)} steps"
        )
    bad = [r for r in result.step_rewards if not math.isfinite(r)]
    if bad:
        raise CriticError(f"{who} returned a non-finite step reward {bad[0]!r}")
    return result


def score_all(critic: Critic, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
    """Score many trajectories, through ``critic.score_batch`` when the critic has one; results are checked.

    Example:
        >>> from turnkit.critics.rules import OutcomeReward
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> win = Trajectory("demo", 0, (Step("q", AgentTurn("a"), 1.0, terminated=True, info={"success": True}),))
        >>> [r.step_rewards for r in score_all(OutcomeReward(), [win, win])]
        [(1.0,), (1.0,)]
    """
    batch = getattr(critic, "score_batch", None)
    results = list(batch(trajectories)) if callable(batch) else [critic.score(t) for t in trajectories]
    if len(results) != len(trajectories):
        raise CriticError(f"{critic_name(critic)} returned {len(results)} results for {len(trajectories)} trajectories")
    return [checked(r, t, critic_name(critic)) for r, t in zip(results, trajectories, strict=True)]


class WeightedSum:
    """A weighted sum of critics, step by step: ``r_h = Σ_i w_i · r_h^{(i)}``.

    Each part's metrics are kept as ``"<name>/<metric>"``; each part's weighted total as ``"<name>/total"``.
    Parts with the same name get a ``#<index>`` suffix.

    Args:
        parts: ``(weight, critic)`` pairs.
        name: This critic's name (for nesting).

    Raises:
        ConfigError: If there are no parts or a weight is not finite.

    Example:
        >>> from turnkit.critics.rules import LengthPenalty, OutcomeReward
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> steps = (Step("q", AgentTurn("let me think"), 0.0),
        ...          Step("q", AgentTurn("ANSWER: 4"), 1.0, terminated=True, info={"success": True}))
        >>> critic = WeightedSum([(1.0, OutcomeReward()), (0.1, LengthPenalty(per_unit=1.0, unit="words"))])
        >>> critic.score(Trajectory("demo", 0, steps)).step_rewards  # 1.0 - 0.1 * 2 on the answer turn
        (-0.30000000000000004, 0.8)
    """

    def __init__(self, parts: Sequence[tuple[float, Critic]], *, name: str = "weighted_sum") -> None:
        if not parts:
            raise ConfigError("WeightedSum needs at least one (weight, critic) part")
        for w, _ in parts:
            if not math.isfinite(float(w)):
                raise ConfigError(f"WeightedSum weight must be finite, got {w!r}")
        self.parts = [(float(w), c) for w, c in parts]
        self.name = name
        names = [critic_name(c) for _, c in self.parts]
        self._names = [n if names.count(n) == 1 else f"{n}#{i}" for i, n in enumerate(names)]

    def score(self, trajectory: Trajectory) -> CriticResult:
        """The weighted sum of the parts' step rewards, with every part's metrics."""
        return self._combine(trajectory, [c.score(trajectory) for _, c in self.parts])

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
        """Score a batch, letting each part batch its own calls."""
        return [result for result, _ in self.score_parts(trajectories)]

    def score_parts(
        self, trajectories: Sequence[Trajectory]
    ) -> list[tuple[CriticResult, dict[str, tuple[float, ...]]]]:
        """Score a batch and keep each part's weighted step rewards: the credit every critic gave every turn.

        Returns:
            Per trajectory, ``(the sum's result, {part name: w_i · r^{(i)} per step})``; the parts add up to the
            sum's step rewards.

        Example:
            >>> from turnkit.critics.rules import LengthPenalty, OutcomeReward
            >>> from turnkit.types import AgentTurn, Step, Trajectory
            >>> steps = (Step("q", AgentTurn("ANSWER: 4"), 1.0, terminated=True, info={"success": True}),)
            >>> critic = WeightedSum([(1.0, OutcomeReward()), (0.5, LengthPenalty(per_unit=1.0, unit="words"))])
            >>> result, parts = critic.score_parts([Trajectory("demo", 0, steps)])[0]
            >>> result.step_rewards, parts
            ((0.0,), {'outcome': (1.0,), 'length': (-1.0,)})
        """
        per_part = [score_all(c, trajectories) for _, c in self.parts]
        out = []
        for i, t in enumerate(trajectories):
            results = [p[i] for p in per_part]
            parts = {
                name: tuple(w * r for r in result.step_rewards)
                for (w, _), name, result in zip(self.parts, self._names, results, strict=True)
            }
            out.append((self._combine(t, results), parts))
        return out

    def _combine(self, trajectory: Trajectory, results: Sequence[CriticResult]) -> CriticResult:
        rewards = [0.0] * len(trajectory.steps)
        metrics: dict[str, float] = {}
        for (w, critic), name, result in zip(self.parts, self._names, results, strict=True):
            checked(result, trajectory, critic_name(critic))
            for h, r in enumerate(result.step_rewards):
                rewards[h] += w * r
            metrics.update({f"{name}/{k}": float(v) for k, v in result.metrics.items()})
            metrics[f"{name}/total"] = w * result.total
        return CriticResult(tuple(rewards), metrics)


def lazy_exports(package: str, names: Sequence[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A critic package's ``__getattr__`` and ``__dir__`` for the ``names`` of its torch module ``<package>.model``.

    The package (its ``Config`` and ``from_context``) stays light to import; the first use of one of ``names``
    imports the model module.

    Example:
        >>> getattr_, dir_ = lazy_exports("turnkit.critics.prime", ["ImplicitPRM"])
        >>> getattr_("ImplicitPRM").__name__, "ImplicitPRM" in dir_()
        ('ImplicitPRM', True)
        >>> getattr_("nope")
        Traceback (most recent call last):
        ...
        AttributeError: module 'turnkit.critics.prime' has no attribute 'nope'
    """
    exported = frozenset(names)

    def __getattr__(attr: str) -> Any:
        if attr in exported:
            return getattr(importlib.import_module(f"{package}.model"), attr)
        raise AttributeError(f"module {package!r} has no attribute {attr!r}")

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exported})

    return __getattr__, __dir__
