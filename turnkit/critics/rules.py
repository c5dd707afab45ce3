"""Rule critics: outcome, env reward, length, format and invalid-action terms, with no model.

Combine them with :class:`~turnkit.critics.base.WeightedSum`, e.g. an outcome reward plus a small
length penalty. Every critic here returns one reward per step.

Example:
    >>> from turnkit.critics.base import WeightedSum
    >>> from turnkit.types import AgentTurn, Step, Trajectory
    >>> steps = (Step("q", AgentTurn("hmm"), 0.0, info={"invalid_action": "empty"}),
    ...          Step("q", AgentTurn("ANSWER: 4"), 1.0, terminated=True, info={"success": True}))
    >>> critic = WeightedSum([(1.0, OutcomeReward()), (1.0, InvalidActionPenalty(0.5))])
    >>> critic.score(Trajectory("demo", 0, steps)).step_rewards
    (-0.5, 1.0)
"""

from __future__ import annotations

import math
import re

from turnkit.critics.base import CriticResult
from turnkit.errors import ConfigError
from turnkit.types import Trajectory

LENGTH_UNITS = ("tokens", "words", "chars")


def _finite(name: str, value: float) -> float:
    if not math.isfinite(float(value)):
        raise ConfigError(f"{name} must be finite, got {value!r}")
    return float(value)


class OutcomeReward:
    """The episode outcome on the last step (``Trajectory.success``), ``0`` on every other step.

    Args:
        success: Reward for a successful episode.
        failure: Reward for a failed (or errored) episode.

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> lose = Step("q", AgentTurn("ANSWER: 5"), 0.0, terminated=True, info={"success": False})
        >>> OutcomeReward(failure=-1.0).score(Trajectory("demo", 0, (lose, lose))).step_rewards
        (0.0, -1.0)
    """

    name = "outcome"

    def __init__(self, success: float = 1.0, failure: float = 0.0) -> None:
        self.success = _finite("success", success)
        self.failure = _finite("failure", failure)

    def score(self, trajectory: Trajectory) -> CriticResult:
        """Outcome on the last step."""
        n = len(trajectory.steps)
        value = self.success if trajectory.success else self.failure
        rewards = tuple(value if h == n - 1 else 0.0 for h in range(n))
        return CriticResult(rewards, {"success": float(trajectory.success)})


class EnvReward:
    """The env's own step rewards, unchanged (to mix them with other critics).

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> steps = (Step("q", AgentTurn("a"), 0.25), Step("q", AgentTurn("b"), 1.0))
        >>> EnvReward().score(Trajectory("demo", 0, steps)).step_rewards
        (0.25, 1.0)
    """

    name = "env"

    def score(self, trajectory: Trajectory) -> CriticResult:
        """The recorded ``Step.reward`` values."""
        return CriticResult(tuple(float(s.reward) for s in trajectory.steps))


class LengthPenalty:
    """``−per_unit · max(0, length − free)`` per step, length in tokens, words or characters.

    ``"tokens"`` counts ``AgentTurn.token_ids`` (the policy's own tokens); a turn without ids counts as 0,
    so use ``"words"`` or ``"chars"`` for text-only agents.

    Args:
        per_unit: Penalty per unit of length over ``free`` (``>= 0``).
        unit: ``"tokens"``, ``"words"`` (whitespace-separated) or ``"chars"``.
        free: Length allowed per step without penalty.

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> steps = (Step("q", AgentTurn("a b c d e"), 0.0), Step("q", AgentTurn("ok"), 0.0))
        >>> LengthPenalty(per_unit=0.1, unit="words", free=2).score(Trajectory("demo", 0, steps)).step_rewards
        (-0.30000000000000004, -0.0)
    """

    name = "length"

    def __init__(self, per_unit: float, unit: str = "tokens", free: int = 0) -> None:
        if unit not in LENGTH_UNITS:
            raise ConfigError(f"LengthPenalty.unit must be one of {list(LENGTH_UNITS)}, got {unit!r}")
        if _finite("LengthPenalty.per_unit", per_unit) < 0:
            raise ConfigError(f"LengthPenalty.per_unit must be >= 0, got {per_unit!r}")
        if free < 0:
            raise ConfigError(f"LengthPenalty.free must be >= 0, got {free!r}")
        self.per_unit = float(per_unit)
        self.unit = unit
        self.free = int(free)

    def length(self, text: str, token_ids: tuple[int, ...]) -> int:
        """The length of one turn in ``self.unit``.

        Example:
            >>> LengthPenalty(1.0, unit="chars").length("abc", ()), LengthPenalty(1.0).length("abc", (1, 2))
            (3, 2)
        """
        if self.unit == "tokens":
            return len(token_ids)
        return len(text.split()) if self.unit == "words" else len(text)

    def score(self, trajectory: Trajectory) -> CriticResult:
        """The penalty of every step; ``metrics["length"]`` is the total length."""
        lengths = [self.length(s.action.text, s.action.token_ids) for s in trajectory.steps]
        rewards = tuple(-self.per_unit * max(0, n - self.free) for n in lengths)
        return CriticResult(rewards, {"length": float(sum(lengths))})


class FormatPenalty:
    """``−penalty`` on every step whose action text does not match ``pattern`` (``re.search``).

    Args:
        pattern: A regular expression the action should contain, e.g. ``r"ANSWER:\\s*\\S"``.
        penalty: Size of the penalty (``>= 0``).
        steps: ``"all"`` checks every step, ``"last"`` only the final one (e.g. the answer turn).

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> steps = (Step("q", AgentTurn("thinking"), 0.0), Step("q", AgentTurn("the answer is 4"), 0.0))
        >>> FormatPenalty(r"ANSWER:", penalty=1.0, steps="last").score(Trajectory("d", 0, steps)).step_rewards
        (0.0, -1.0)
    """

    name = "format"

    def __init__(self, pattern: str, penalty: float = 1.0, steps: str = "all") -> None:
        try:
            self.pattern = re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"FormatPenalty.pattern {pattern!r} is not a valid regex: {exc}") from exc
        if _finite("FormatPenalty.penalty", penalty) < 0:
            raise ConfigError(f"FormatPenalty.penalty must be >= 0, got {penalty!r}")
        if steps not in ("all", "last"):
            raise ConfigError(f"FormatPenalty.steps must be 'all' or 'last', got {steps!r}")
        self.penalty = float(penalty)
        self.steps = steps

    def score(self, trajectory: Trajectory) -> CriticResult:
        """The penalty per step; ``metrics["violations"]`` counts the penalised steps."""
        n = len(trajectory.steps)
        checked = range(n) if self.steps == "all" else range(n - 1, n)
        bad = {h for h in checked if not self.pattern.search(trajectory.steps[h].action.text)}
        rewards = tuple(-self.penalty if h in bad else 0.0 for h in range(n))
        return CriticResult(rewards, {"violations": float(len(bad))})


class InvalidActionPenalty:
    """``−penalty`` on every step the env flagged with ``info["invalid_action"]``.

    Args:
        penalty: Size of the penalty (``>= 0``).

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> bad = Step("q", AgentTurn(""), 0.0, info={"invalid_action": "empty"})
        >>> InvalidActionPenalty(0.2).score(Trajectory("d", 0, (bad, Step("q", AgentTurn("x"), 0.0)))).metrics
        {'invalid': 1.0}
    """

    name = "invalid"

    def __init__(self, penalty: float = 1.0) -> None:
        if _finite("InvalidActionPenalty.penalty", penalty) < 0:
            raise ConfigError(f"InvalidActionPenalty.penalty must be >= 0, got {penalty!r}")
        self.penalty = float(penalty)

    def score(self, trajectory: Trajectory) -> CriticResult:
        """The penalty per flagged step."""
        flags = [bool(s.info.get("invalid_action")) for s in trajectory.steps]
        rewards = tuple(-self.penalty if f else 0.0 for f in flags)
        return CriticResult(rewards, {"invalid": float(sum(flags))})
