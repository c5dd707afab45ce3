"""Match automaton, prover and exact Q tables checked against brute-force enumeration."""

from __future__ import annotations

import numpy as np
import pytest

from turnkit.envs.pav_didactic.prover import (
    check_target,
    match_states,
    mc_prover_values,
    prover_probs,
    prover_values,
    q_after_steps,
    step_mask,
    transition_table,
)
from turnkit.errors import ConfigError


def _longest_overlap(seq: tuple[int, ...], target: tuple[int, ...]) -> int:
    """Brute force: the longest suffix of seq that is a prefix of target (m once target occurred)."""
    m = len(target)
    for i in range(len(seq) - m + 1):
        if seq[i : i + m] == target:
            return m
    return max(j for j in range(min(m, len(seq)) + 1) if seq[len(seq) - j :] == target[:j])


def _success_probability(target, probs_of_k, length, vocab, prefix=()) -> float:
    """Brute force: recurse over every continuation of `prefix` (EOS or `length` tokens end a sequence)."""
    seq = tuple(prefix)
    k = _longest_overlap(seq, target)
    if k == len(target):
        return 1.0
    if (seq and seq[-1] == vocab - 1) or len(seq) == length:
        return 0.0
    return sum(
        probs_of_k[k][t] * _success_probability(target, probs_of_k, length, vocab, (*seq, t)) for t in range(vocab)
    )


@pytest.mark.parametrize("target", [(1, 0), (0, 0), (0, 1, 0), (2, 0, 2, 1)])
def test_transition_table_is_the_longest_overlap(target) -> None:
    table = transition_table(target, vocab_size=4)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 3, size=(200, 8))  # no EOS
    states = match_states(table, tokens)
    for row, srow in zip(tokens, states, strict=True):
        for h in range(1, 9):
            assert srow[h] == _longest_overlap(tuple(row[:h]), target)


def test_prover_probs_put_gamma_on_next_target_token() -> None:
    probs = prover_probs((2, 0), gamma=5.0, vocab_size=4)
    assert probs[0].tolist() == pytest.approx([1 / 8, 1 / 8, 5 / 8, 1 / 8])
    assert probs[1].tolist() == pytest.approx([5 / 8, 1 / 8, 1 / 8, 1 / 8])


@pytest.mark.parametrize(("target", "gamma"), [((1, 0), 1.0), ((0, 0), 3.0), ((2, 1, 2), 7.0)])
def test_exact_values_match_enumeration(target, gamma) -> None:
    vocab, length = 4, 5
    v = prover_values(target, gamma, length=length, vocab_size=vocab)
    probs = prover_probs(target, gamma, vocab)
    brute = _success_probability(target, probs, length, vocab)
    assert v[0, length] == pytest.approx(brute, abs=1e-12)


def test_q_after_steps_matches_enumeration_from_prefixes() -> None:
    target, gamma, vocab, length = (1, 0), 2.0, 3, 4
    table = transition_table(target, vocab)
    v = prover_values(target, gamma, length=length, vocab_size=vocab)
    probs = prover_probs(target, gamma, vocab)
    seqs = np.array([[1, 1, 0, 0], [0, 2, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1]])
    q, v0 = q_after_steps(table, v, seqs)
    mask = step_mask(table, seqs)
    for i, row in enumerate(seqs):
        for h in range(length):
            if not mask[i, h]:
                assert q[i, h] == 0.0
                continue
            prefix = tuple(int(t) for t in row[: h + 1])
            if prefix[-1] == vocab - 1:
                expected = 0.0
            elif _longest_overlap(prefix, target) == len(target):
                expected = 1.0
            else:
                expected = _success_probability(target, probs, length, vocab, prefix)
            assert q[i, h] == pytest.approx(expected, abs=1e-12), (i, h)
    assert v0.tolist() == pytest.approx([_success_probability(target, probs, length, vocab)] * 4)


def test_step_mask_stops_after_eos_and_after_success() -> None:
    table = transition_table((1, 0), vocab_size=3)
    mask = step_mask(table, np.array([[1, 0, 1, 1], [0, 2, 1, 0], [0, 0, 0, 0]]))
    assert mask.astype(int).tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]]


def test_stronger_prover_succeeds_more_often() -> None:
    target = (3, 1, 4, 1, 5)
    values = [prover_values(target, g)[0, -1] for g in (1.0, 5.0, 10.0, 50.0)]
    assert values == sorted(values) and values[0] < 1e-3 < values[-1] < 1.0


def test_monte_carlo_values_converge_to_exact() -> None:
    target, gamma = (2, 0, 1), 4.0
    exact = prover_values(target, gamma, length=6, vocab_size=5)
    est = mc_prover_values(target, gamma, 6, rollouts=4000, rng=np.random.default_rng(1), vocab_size=5)
    assert np.abs(est - exact).max() < 0.03


def test_bad_targets_and_gammas_raise() -> None:
    with pytest.raises(ConfigError, match="at least one"):
        check_target([], 15)
    with pytest.raises(ConfigError, match="gamma"):
        prover_probs((1,), gamma=-1.0)
    with pytest.raises(ConfigError, match="covers"):
        q_after_steps(transition_table((1,), 3), np.zeros((2, 3)), np.zeros((1, 4), dtype=int))
