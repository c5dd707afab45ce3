"""Scoring formulas on hand-computed values."""

import math

import numpy as np
import pytest

from turnkit.envs.physics.scoring import (
    SUCCESS_POSITION_ERROR,
    SUCCESS_VELOCITY_ERROR,
    ChunkScore,
    chunk_reward,
    episode_score,
    finite_difference_velocities,
    score_chunk,
)


def test_finite_difference_divides_by_dt():
    v = finite_difference_velocities(np.array([[1.0, 1.0], [1.3, 0.9]]))
    np.testing.assert_allclose(v, [[3.0, -1.0]])


def test_chunk_reward_formula():
    assert chunk_reward(0.3, 0.2) == pytest.approx(math.exp(-0.5))


def test_score_chunk_hand_computed():
    # One body. Anchor (0,0); truth (0.1,0), (0.2,0); prediction (0.1,0.03), (0.24,0.03).
    # Velocities: truth (1,0), (1,0); prediction (1,0.3), (1.4,0). Errors |(0,0.3)| = 0.3, |(0.4,0)| = 0.4.
    # Position errors: 0.03 and |(0.04,0.03)| = 0.05.
    truth = np.array([[[0.1, 0.0]], [[0.2, 0.0]]])
    pred = np.array([[[0.1, 0.03]], [[0.24, 0.03]]])
    s = score_chunk(pred, truth, np.zeros((1, 2)), np.ones((2, 1), bool), np.ones((2, 1), bool))
    assert s.velocity_error == pytest.approx(0.35)
    assert s.position_error == pytest.approx(0.04)
    assert s.reward == pytest.approx(math.exp(-0.39))


def test_score_chunk_ignores_pairs_out_of_view():
    truth = np.array([[[0.1, 0.0]], [[0.2, 0.0]]])
    pred = np.array([[[0.1, 0.0]], [[9.0, 9.0]]])
    scored = np.array([[True], [False]])
    s = score_chunk(pred, truth, np.zeros((1, 2)), scored, scored)
    assert (s.scored, s.velocity_error, s.position_error) == (1, 0.0, 0.0)


def test_metric_pairs_are_a_subset_of_scored_pairs():
    truth = np.zeros((2, 1, 2))
    pred = np.ones((2, 1, 2))
    s = score_chunk(pred, truth, np.zeros((1, 2)), np.array([[True], [False]]), np.array([[True], [True]]))
    assert s.metric_count == 1


def test_forfeited_chunk_scores_zero_but_keeps_errors():
    s = ChunkScore(0.0, 0.0, 3, 0.0, 3, forfeited=True)
    assert s.reward == 0.0 and s.velocity_error == 0.0


def test_episode_metric_uses_metric_pairs_only():
    pre = ChunkScore(velocity_sum=10.0, position_sum=1.0, scored=5, metric_velocity_sum=0.0, metric_count=0)
    post = ChunkScore(velocity_sum=0.6, position_sum=0.2, scored=4, metric_velocity_sum=0.6, metric_count=3)
    e = episode_score([pre, post])
    assert e.velocity_error == pytest.approx(0.2)  # 0.6 / 3, the pre-collision chunk does not count
    assert e.position_error == pytest.approx(1.2 / 9)


def test_episode_metric_falls_back_to_all_pairs():
    e = episode_score([ChunkScore(0.9, 0.3, 3, 0.0, 0), ChunkScore(0.3, 0.3, 3, 0.0, 0)])
    assert e.velocity_error == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("v", "p", "forfeited", "success"),
    [
        (SUCCESS_VELOCITY_ERROR, SUCCESS_POSITION_ERROR, False, True),
        (SUCCESS_VELOCITY_ERROR + 1e-6, 0.0, False, False),
        (0.0, SUCCESS_POSITION_ERROR + 1e-6, False, False),
        (0.0, 0.0, True, False),
    ],
)
def test_success_thresholds(v, p, forfeited, success):
    chunk = ChunkScore(v * 4, p * 4, 4, v * 4, 4, forfeited=forfeited)
    assert episode_score([chunk]).success is success


def test_no_chunks_is_no_success():
    assert episode_score([]).success is False
