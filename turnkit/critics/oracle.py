r"""The oracle credit: per-turn progress read off the env's privileged data, the ceiling of step-wise credit.

Learned critics (PRIME's PRM, SWEET's critic) and prover rollouts (MRT, PAV) *estimate* how much a turn helped.
This critic knows it, from the task's hidden data, so a run with it shows what perfect step-wise credit buys
through each estimator (``grpo.estimator``; :mod:`turnkit.learners.estimators`). It defines a value ``V_h``
after every turn (``V_0 = 0`` before the first) and credits turn ``h`` with its progress ``α (V_{h+1} − V_h)``,
as :class:`~turnkit.critics.progress.ProgressCritic` does for MRT's and PAV's values:

* **MathEpisodes** (family ``math``; retries): ``V`` is the worth of the latest answer so far: ``1`` if it
  equals the reference, ``0.5 / (1 + |a − r| / max(1, |r|))`` for a wrong numeric answer ``a`` (reference
  ``r``), ``0`` for an answer that is not a number. A turn without an answer keeps ``V``. So an attempt that
  moves closer to the reference gains, one that moves away loses, and the right one reaches ``1``.
* **CollabCode** (family ``collab_code``): ``V`` is the share of the task's hidden facts
  (``Task.privileged["facts"]``) that the human's replies have told so far; a fact counts when its sentence
  appears in a reply (exact for the rule-based human; an LLM human that rephrases is under-counted). A question
  that uncovers a hidden parameter gains ``1 / #facts`` for each one; the answer turn gains nothing (the env's
  test score is the outcome source).

Its source is ``"progress"``: read through ``pav`` each turn is credited with its own gain, through ``mrt``
with the gains from there on, through ``prime`` and ``sweet`` with its gain against the task's other episodes.
In a run: ``critic = {"oracle": {"weight": 1.0}}`` (the key ``alpha`` scales it too; ``partial = false`` makes
the math credit binary: only the right answer gains).

Example:
    >>> import gymnasium, turnkit
    >>> from turnkit.envs.math.oracle import RetryOracle
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
    >>> traj = turnkit.collect(env, RetryOracle(spread=3), seed=0)  # a wrong answer, then the reference
    >>> [s.action.text for s in traj.steps], traj.task.privileged["answer"]
    (['ANSWER: 9', 'ANSWER: 8'], '8')
    >>> OracleValue().values(traj).round(4).tolist()  # 0.5 / (1 + 1/8), then right
    [0.0, 0.4444, 1.0]
    >>> critic = oracle_critic()
    >>> [round(r, 4) for r in critic.score(traj).step_rewards]  # shaped: the returns-to-go are the gains
    [-0.1111, 0.5556]
    >>> [round(g, 4) for g in critic.source_values(critic.score(traj).step_rewards)]  # each turn's gain
    [0.4444, 0.5556]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from turnkit.configs import check_float
from turnkit.critics.base import CriticContext
from turnkit.critics.progress import ProgressCritic
from turnkit.envs.collab_code.human import task_facts
from turnkit.envs.math.answers import answers_equal, extract_answer, parse_answer
from turnkit.errors import ConfigError, CriticError
from turnkit.types import Task, Trajectory

FAMILIES = ("math", "collab_code")
"""Env families whose privileged data the oracle reads."""


@dataclass(frozen=True)
class OracleConfig:
    """Keys of ``critic.oracle`` in a run's config.

    Example:
        >>> OracleConfig().alpha
        1.0
        >>> OracleConfig(alpha=float("inf"))
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: OracleConfig.alpha must be a finite number, got inf
    """

    alpha: float = 1.0
    """Weight of the progress term inside the critic (the table's ``weight`` scales it again)."""

    partial: bool = True
    """Whether a wrong numeric math answer earns closeness credit; ``False``: only the right answer counts (binary)."""

    def __post_init__(self) -> None:
        check_float(self, "alpha")
        if not isinstance(self.partial, bool):
            raise ConfigError(f"OracleConfig.partial must be true or false, got {self.partial!r}")


Config = OracleConfig
"""The table keys of ``critic.oracle`` (see :mod:`turnkit.critics.registry`)."""


def answer_worth(answer: str | None, reference: str, *, partial: bool = True) -> float | None:
    """What one math answer is worth: ``1`` if right, ``0.5 / (1 + relative error)`` if numeric, else ``0``.

    ``None`` (a turn without an answer) stays ``None``: it changes nothing. With ``partial=False`` every wrong
    answer is worth ``0`` (binary credit).

    Example:
        >>> answer_worth("11", "11"), round(answer_worth("10", "11"), 4), round(answer_worth("-9", "11"), 4)
        (1.0, 0.4583, 0.1774)
        >>> answer_worth("banana", "11"), answer_worth(None, "11")
        (0.0, None)
        >>> answer_worth("10", "11", partial=False), answer_worth("11", "11", partial=False)
        (0.0, 1.0)
    """
    if answer is None:
        return None
    if answers_equal(answer, reference):
        return 1.0
    if not partial:
        return 0.0
    a, r = parse_answer(answer), parse_answer(reference)
    try:
        fa, fr = float(a), float(r)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    if not (np.isfinite(fa) and np.isfinite(fr)):
        return 0.0
    return 0.5 / (1.0 + abs(fa - fr) / max(1.0, abs(fr)))


def _words(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9.]+", " ", text.lower()).split())


def _replies(trajectory: Trajectory) -> list[str]:
    """The env's reply to each turn: the next step's observation, then the final one."""
    steps = trajectory.steps
    return [steps[h + 1].observation if h + 1 < len(steps) else trajectory.final_observation for h in range(len(steps))]


def _task(trajectory: Trajectory) -> Task:
    if trajectory.task is None:
        raise CriticError("the oracle critic needs Trajectory.task (its privileged data); collect the episode with it")
    return trajectory.task


def math_values(trajectory: Trajectory, *, partial: bool = True) -> np.ndarray:
    """``[len(steps) + 1]`` values of a MathEpisodes trajectory: the worth of the latest answer after each turn.

    ``partial`` is :func:`answer_worth`'s: ``False`` gives ``1`` from the right answer on and ``0`` before it.

    Example:
        >>> from turnkit.types import AgentTurn, Step
        >>> task = Task("t", "7 + 4?", {"answer": "11"}, family="math")
        >>> steps = tuple(Step("q", AgentTurn(t), 0.0) for t in ("ANSWER: 5", "hmm", "ANSWER: 10", "ANSWER: 11"))
        >>> math_values(Trajectory("d", 0, steps, task=task)).round(4).tolist()
        [0.0, 0.3235, 0.3235, 0.4583, 1.0]
        >>> math_values(Trajectory("d", 0, steps, task=task), partial=False).tolist()
        [0.0, 0.0, 0.0, 0.0, 1.0]
    """
    task = _task(trajectory)
    if "answer" not in task.privileged:
        raise CriticError(f"math task {task.task_id!r} has no privileged 'answer'")
    reference = str(task.privileged["answer"])
    values = [0.0]
    for step in trajectory.steps:
        worth = answer_worth(extract_answer(step.action.text), reference, partial=partial)
        values.append(values[-1] if worth is None else worth)
    return np.asarray(values, dtype=np.float64)


def collab_code_values(trajectory: Trajectory) -> np.ndarray:
    """``[len(steps) + 1]`` values of a CollabCode trajectory: the share of hidden facts told after each turn.

    Example:
        >>> from turnkit.types import AgentTurn, Step
        >>> facts = [{"keywords": ["cutoff"], "text": "The cutoff is 7."}, {"keywords": ["round"], "text": "Round up."}]
        >>> task = Task("t", "Write f.", {"facts": facts}, family="collab_code")
        >>> steps = (Step("Write f.", AgentTurn("Which cutoff?"), 0.0),
        ...          Step("The cutoff is 7.", AgentTurn("Anything else?"), 0.0),
        ...          Step("I don't know.", AgentTurn("I WANT TO ANSWER: ..."), 0.5, terminated=True))
        >>> collab_code_values(Trajectory("d", 0, steps, final_observation="Passed 5 of 10.", task=task)).tolist()
        [0.0, 0.5, 0.5, 0.5]
    """
    facts = [_words(f.sentence) for f in task_facts(_task(trajectory))]
    told: set[int] = set()
    values = [0.0]
    for reply in _replies(trajectory):
        said = _words(reply)
        told.update(i for i, sentence in enumerate(facts) if sentence and sentence in said)
        values.append(len(told) / len(facts) if facts else 0.0)
    return np.asarray(values, dtype=np.float64)


class OracleValue:
    """The oracle's value after each turn (a :class:`~turnkit.critics.progress.ValueFn`), by the task's family.

    Args:
        partial: Whether a wrong math answer earns closeness credit (:func:`answer_worth`).

    Example:
        >>> from turnkit.types import AgentTurn, Step
        >>> web = Trajectory("d", 0, (Step("q", AgentTurn("a"), 0.0),), task=Task("t", "p", family="web"))
        >>> OracleValue().values(web)
        Traceback (most recent call last):
        ...
        turnkit.errors.CriticError: the oracle critic reads families ('math', 'collab_code'), not 'web'
    """

    def __init__(self, *, partial: bool = True) -> None:
        self.partial = partial

    def values(self, trajectory: Trajectory) -> np.ndarray:
        """``[len(steps) + 1]`` values (module docstring)."""
        family = _task(trajectory).family
        if family == "math":
            return math_values(trajectory, partial=self.partial)
        if family == "collab_code":
            return collab_code_values(trajectory)
        raise CriticError(f"the oracle critic reads families {FAMILIES}, not {family!r}")


def oracle_critic(alpha: float = 1.0, *, partial: bool = True) -> ProgressCritic:
    """The oracle credit as a progress critic named ``"oracle"`` (its source is ``"progress"``).

    ``partial=False`` is the binary oracle: on math, only the turn that gives the right answer gains (``α``).

    Example:
        >>> oracle_critic().source, oracle_critic().estimator  # it has no paper, so no estimator of its own
        ('progress', None)
    """
    return ProgressCritic(OracleValue(partial=partial), alpha=alpha, name="oracle")


def from_context(ctx: CriticContext, config: OracleConfig) -> ProgressCritic:
    """The oracle in a training run (it needs nothing of the run: the trajectories carry their tasks)."""
    return oracle_critic(config.alpha, partial=config.partial)


__all__ = [
    "FAMILIES",
    "Config",
    "OracleConfig",
    "OracleValue",
    "answer_worth",
    "collab_code_values",
    "from_context",
    "math_values",
    "oracle_critic",
]
