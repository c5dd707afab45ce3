"""Diversity and rank statistics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from studies.common.text_metrics import bleu, distinct_n, self_bleu, spearman


def test_bleu_by_hand():
    # hyp "a b c x" vs ref "a b c d": p1 = 3/4, p2 = 2/3, p3 = 1/2, p4 = 0 -> 0.1/1; equal length, no penalty
    expected = math.exp((math.log(3 / 4) + math.log(2 / 3) + math.log(1 / 2) + math.log(0.1)) / 4)
    assert bleu("a b c x", ["a b c d"]) == pytest.approx(expected)
    # clipping: "a a a a" against "a b" matches one "a" of four
    assert bleu("a a a a", ["a b"], max_n=1) == pytest.approx(1 / 4)


def test_self_bleu_orders_diversity():
    same = ["ANSWER: 4"] * 4
    varied = ["ANSWER: 4", "ANSWER: 7", "the answer is 4", "I think 9"]
    assert self_bleu(same) == pytest.approx(1.0)
    assert self_bleu(varied) < 0.5
    with pytest.raises(ValueError):
        self_bleu(["one"])


def test_distinct_n():
    assert distinct_n(["a b c", "a b c"], 3) == 0.5
    assert distinct_n([], 1) == 0.0
    with pytest.raises(ValueError):
        distinct_n(["a"], 0)


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [
        # ranks y = (1, 2, 3.5, 5, 3.5) (the tie shares 3 and 4); cov of the centred ranks 8, norms √10 and √9.5
        ([1, 2, 3, 4, 5], [5, 6, 7, 8, 7], 8 / math.sqrt(95)),
        # ranks x = (1, 2.5, 2.5, 4), y = (3, 1, 3, 3): centred products −0.75 + 0 + 0 + 0.75 = 0
        ([0.1, 0.4, 0.4, 2.0], [1, 0, 1, 1], 0.0),
        # ranks (3, 1, 2) vs (1, 2, 3): cov −1, both norms √2
        ([3, 1, 2], [1, 2, 3], -0.5),
    ],
)
def test_spearman_by_hand(x, y, expected):
    assert spearman(x, y) == pytest.approx(expected, abs=1e-12)


def test_spearman_of_a_constant_is_nan():
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
