"""Value functions for search: any callable ``Trajectory -> float`` scores a (partial) episode.

Search code never needs more than this signature: a learned critic, a rule, a judge or a Monte Carlo
estimate all plug in the same way (wrap a critic's ``score`` to return one number). The trajectory is the
episode prefix from ``reset`` to the node being scored, with ``Trajectory.task`` set, so critics that use
training-time (privileged) information can read it; policies never see it.

Example:
    >>> from turnkit.types import AgentTurn, Step, Trajectory
    >>> won = Trajectory("demo", 0, (Step("q", AgentTurn("a"), 1.0, terminated=True, info={"success": True}),))
    >>> lost = Trajectory("demo", 0, (Step("q", AgentTurn("b"), 0.0, terminated=True, info={"success": False}),))
    >>> going = Trajectory("demo", 0, (Step("q", AgentTurn("c"), 0.3),))
    >>> outcome_value(won), outcome_value(lost), outcome_value(going)
    (1.0, -1.0, 0.0)
    >>> return_value(going)
    0.3
"""

from __future__ import annotations

from collections.abc import Callable

from turnkit.types import Trajectory

ValueFn = Callable[[Trajectory], float]
"""Scores an episode prefix; higher is better."""


def is_finished(traj: Trajectory) -> bool:
    """Whether the last step ended the episode (terminated or truncated).

    Example:
        >>> from turnkit.types import Trajectory
        >>> is_finished(Trajectory("demo", 0))
        False
    """
    return bool(traj.steps) and (traj.steps[-1].terminated or traj.steps[-1].truncated)


def outcome_value(traj: Trajectory) -> float:
    """``+1`` for a finished successful episode, ``-1`` for a finished failed one, ``0`` while it runs."""
    if not is_finished(traj):
        return 0.0
    return 1.0 if traj.success else -1.0


def return_value(traj: Trajectory) -> float:
    """The sum of env rewards so far (for dense-reward envs such as physics prediction)."""
    return traj.total_reward
