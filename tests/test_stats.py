"""Reporting statistics: python -m pytest tests/test_stats.py -q"""

import math

import numpy as np
import pytest

from turnkit.stats import mean_ci, student_t_cdf_two_sided, student_t_quantile, wilson_interval


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (9, 2.262), (30, 2.042)],  # printed t tables, 97.5%
)
def test_student_t_quantile_matches_the_printed_table(df, expected):
    assert student_t_quantile(0.95, df) == pytest.approx(expected, abs=5e-4)


def test_student_t_quantile_approaches_the_normal_one():
    assert student_t_quantile(0.95, 10_000) == pytest.approx(1.95996, abs=1e-3)


def test_student_t_cdf_closed_forms():
    assert student_t_cdf_two_sided(1.0, 1) == pytest.approx(0.5)  # Cauchy: 2 atan(1) / pi
    assert student_t_cdf_two_sided(1.0, 2) == pytest.approx(1 / math.sqrt(3))  # df 2: t / sqrt(2 + t^2)
    assert student_t_cdf_two_sided(0.0, 5) == 0.0


def test_mean_ci_uses_the_t_factor_for_few_values():
    mean, lo, hi = mean_ci([1.0, 2.0, 3.0])  # s = 1, n = 3
    assert mean == 2.0
    assert hi - mean == pytest.approx(4.3027 / math.sqrt(3), abs=1e-4)
    assert mean - lo == pytest.approx(hi - mean)
    assert mean_ci([5.0]) == (5.0, 5.0, 5.0)


def test_mean_ci_covers_the_true_mean_at_the_nominal_rate_with_three_seeds():
    rng = np.random.default_rng(0)
    samples = rng.normal(0.3, 0.1, size=(4000, 3))
    covered = np.mean([lo <= 0.3 <= hi for _, lo, hi in (mean_ci(row.tolist()) for row in samples)])
    assert 0.935 <= covered <= 0.965  # a normal 1.96 factor covers ~0.81 here: P(|T_2| < 1.96)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="at least one"):
        mean_ci([])
    with pytest.raises(ValueError, match="confidence"):
        mean_ci([1.0, 2.0], confidence=1.0)
    with pytest.raises(ValueError, match="df"):
        student_t_cdf_two_sided(1.0, 0)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(3, 2)
