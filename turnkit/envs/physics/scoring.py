"""Scoring predicted positions with PhyWorld's finite-difference velocity error plus a position error.

For one answered chunk of frames ``a .. b`` and every (body, frame) pair where the body is in view:

* velocity ``v_t = (p_t - p_{t-1}) / DT``; the frame before the chunk, ``p_{a-1}``, is the true position
  (already shown to the policy), for the prediction and the truth alike;
* velocity error ``|v_t - v̂_t|`` and position error ``|p_t - p̂_t|`` (Euclidean norms);
* the chunk's ``e_v`` and ``e_p`` are the means over its scored pairs, and its reward is
  ``exp(-(e_v + e_p))`` in ``(0, 1]``.

The episode's velocity error is PhyWorld's metric: the mean velocity error over all scored pairs, except that
collision scenes count only post-collision frames (frames ``t`` with ``(t - 1) * DT >= t_c``, so that both
finite-difference frames lie after the collision); if none is in view it falls back to all scored pairs.
An episode succeeds when its velocity error is at most :data:`SUCCESS_VELOCITY_ERROR`, its position error
at most :data:`SUCCESS_POSITION_ERROR`, and no chunk was forfeited.

Example:
    >>> anchor = np.array([[0.0, 0.0]])
    >>> truth = np.array([[[1.0, 0.0]], [[2.0, 0.0]]])
    >>> guess = np.array([[[1.0, 0.0]], [[2.5, 0.0]]])
    >>> s = score_chunk(guess, truth, anchor, np.ones((2, 1), bool), np.ones((2, 1), bool))
    >>> s.velocity_error, s.position_error  # velocity errors 0 and 5; position errors 0 and 0.5
    (2.5, 0.25)
    >>> round(s.reward, 6) == round(math.exp(-2.75), 6)
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from turnkit.envs.physics.simulate import DT

SUCCESS_VELOCITY_ERROR = 0.25
"""Largest episode velocity error (world units per second) that counts as success."""
SUCCESS_POSITION_ERROR = 0.25
"""Largest episode position error (world units) that counts as success."""


def finite_difference_velocities(positions: np.ndarray, dt: float = DT) -> np.ndarray:
    """Velocities ``(p_t - p_{t-1}) / dt`` along the first axis (one fewer entry than ``positions``).

    Example:
        >>> finite_difference_velocities(np.array([[0.0, 0.0], [0.1, 0.2], [0.3, 0.2]])).round(6).tolist()
        [[1.0, 2.0], [2.0, 0.0]]
    """
    return np.diff(positions, axis=0) / dt


def chunk_reward(velocity_error: float, position_error: float) -> float:
    """The reward of one chunk, ``exp(-(velocity_error + position_error))``.

    Example:
        >>> chunk_reward(0.0, 0.0), round(chunk_reward(0.5, 0.2), 6)
        (1.0, 0.496585)
    """
    return math.exp(-(velocity_error + position_error))


@dataclass(frozen=True)
class ChunkScore:
    """Error sums of one answered chunk (sums, so that chunks aggregate exactly).

    Attributes:
        velocity_sum: Sum of velocity errors over the scored pairs.
        position_sum: Sum of position errors over the scored pairs.
        scored: Number of scored (body, frame) pairs.
        metric_velocity_sum: Sum of velocity errors over the pairs of the episode metric.
        metric_count: Number of pairs of the episode metric.
        forfeited: The answer was unreadable; missing positions were filled with the last shown ones.
    """

    velocity_sum: float
    position_sum: float
    scored: int
    metric_velocity_sum: float
    metric_count: int
    forfeited: bool = False

    @property
    def velocity_error(self) -> float:
        """Mean velocity error over the scored pairs (0 when nothing was in view)."""
        return self.velocity_sum / self.scored if self.scored else 0.0

    @property
    def position_error(self) -> float:
        """Mean position error over the scored pairs (0 when nothing was in view)."""
        return self.position_sum / self.scored if self.scored else 0.0

    @property
    def reward(self) -> float:
        """:func:`chunk_reward` of the mean errors; 0 for a forfeited chunk."""
        return 0.0 if self.forfeited else chunk_reward(self.velocity_error, self.position_error)


def score_chunk(
    predicted: np.ndarray,
    truth: np.ndarray,
    anchor: np.ndarray,
    scored: np.ndarray,
    metric: np.ndarray,
    *,
    dt: float = DT,
    forfeited: bool = False,
) -> ChunkScore:
    """Score the predicted positions of one chunk.

    Args:
        predicted: Predicted centres, shape ``(frames, bodies, 2)``.
        truth: True centres, same shape.
        anchor: True centres at the frame before the chunk, shape ``(bodies, 2)``.
        scored: Which (frame, body) pairs count (bodies in view), shape ``(frames, bodies)``.
        metric: Which pairs count for the episode metric (a subset of ``scored``).
        dt: Seconds between frames.
        forfeited: Mark the chunk forfeited (reward 0).

    Returns:
        The chunk's error sums.

    Example:
        >>> a = np.zeros((1, 2)); t = np.array([[[0.1, 0.0]]]); m = np.ones((1, 1), bool)
        >>> s = score_chunk(t, t, a, m, m)
        >>> s.velocity_error, s.position_error, s.reward
        (0.0, 0.0, 1.0)
    """
    anchored_pred = np.concatenate([anchor[None], predicted], axis=0)
    anchored_true = np.concatenate([anchor[None], truth], axis=0)
    v_err = np.linalg.norm(
        finite_difference_velocities(anchored_pred, dt) - finite_difference_velocities(anchored_true, dt), axis=-1
    )
    p_err = np.linalg.norm(predicted - truth, axis=-1)
    scored = np.asarray(scored, dtype=bool)
    metric = np.asarray(metric, dtype=bool) & scored
    return ChunkScore(
        velocity_sum=float(v_err[scored].sum()),
        position_sum=float(p_err[scored].sum()),
        scored=int(scored.sum()),
        metric_velocity_sum=float(v_err[metric].sum()),
        metric_count=int(metric.sum()),
        forfeited=forfeited,
    )


@dataclass(frozen=True)
class EpisodeScore:
    """The episode-level summary of its chunks.

    Attributes:
        velocity_error: PhyWorld's velocity error (see the module docstring).
        position_error: Mean position error over all scored pairs.
        forfeited_chunks: Number of forfeited chunks.
        success: Both errors within their thresholds and no chunk forfeited.
    """

    velocity_error: float
    position_error: float
    forfeited_chunks: int
    success: bool


def episode_score(chunks: Sequence[ChunkScore]) -> EpisodeScore:
    """Aggregate chunk scores into the episode metric and success flag.

    Example:
        >>> a = ChunkScore(1.0, 0.5, 5, 0.0, 0)   # a pre-collision chunk: no metric pairs
        >>> b = ChunkScore(0.4, 0.1, 5, 0.4, 4)   # post-collision chunk
        >>> e = episode_score([a, b])
        >>> e.velocity_error, e.position_error, e.success
        (0.1, 0.06, True)
    """
    scored = sum(c.scored for c in chunks)
    metric = sum(c.metric_count for c in chunks)
    if metric:
        velocity = sum(c.metric_velocity_sum for c in chunks) / metric
    else:
        velocity = sum(c.velocity_sum for c in chunks) / scored if scored else 0.0
    position = sum(c.position_sum for c in chunks) / scored if scored else 0.0
    forfeited = sum(c.forfeited for c in chunks)
    success = (
        bool(chunks) and forfeited == 0 and velocity <= SUCCESS_VELOCITY_ERROR and position <= SUCCESS_POSITION_ERROR
    )
    return EpisodeScore(velocity, position, forfeited, bool(success))
