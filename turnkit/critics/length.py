"""A length critic for training runs: each turn pays for the tokens (or words) it spends beyond a free allowance.

``critic = {"length": {"weight": 1.0, "per_unit": 0.01, "free": 16}}`` subtracts ``0.01`` per token over 16 from
each turn's reward: a dense nudge towards short turns (the rule itself is
:class:`~turnkit.critics.rules.LengthPenalty`). This module is the whole of the critic: its keys and how a run
builds it.

Example:
    >>> from turnkit.critics.registry import build_critics
    >>> from turnkit.types import AgentTurn, Step, Trajectory
    >>> ctx = CriticContext(policy=None, start_policy=lambda: None, make_env=lambda: None)
    >>> critics = build_critics({"length": {"per_unit": 0.5, "unit": "words", "free": 1}}, ctx)
    >>> win = Trajectory("d", 0, (Step("q", AgentTurn("the answer is 4"), 1.0, True),))
    >>> critics.rewards([win])[0]  # env 1.0, minus 0.5 for each of the 3 words over the free one
    [(-0.5,)]
"""

from __future__ import annotations

from dataclasses import dataclass

from turnkit.configs import check_choice, check_float, check_int
from turnkit.critics.base import CriticContext
from turnkit.critics.rules import LENGTH_UNITS, LengthPenalty


@dataclass(frozen=True)
class LengthConfig:
    """Keys of ``critic.length`` in a run's config.

    Example:
        >>> LengthConfig(unit="lines")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: LengthConfig.unit must be one of ['tokens', 'words', 'chars'], got 'lines'
    """

    per_unit: float = 0.01
    """Penalty per unit over the allowance."""
    unit: str = "tokens"
    """``"tokens"`` (the policy's own ids), ``"words"`` or ``"chars"``."""
    free: int = 0
    """Units a turn may spend without penalty."""

    def __post_init__(self) -> None:
        check_float(self, "per_unit", low=0.0)
        check_choice(self, "unit", LENGTH_UNITS)
        check_int(self, "free", low=0)


Config = LengthConfig
"""The table keys of ``critic.length`` (see :mod:`turnkit.critics.registry`)."""


def from_context(ctx: CriticContext, config: LengthConfig) -> LengthPenalty:
    """The length penalty of a run (it needs nothing of the run itself)."""
    return LengthPenalty(per_unit=config.per_unit, unit=config.unit, free=config.free)


__all__ = ["Config", "LengthConfig", "from_context"]
