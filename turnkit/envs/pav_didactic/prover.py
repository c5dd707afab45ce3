"""The analytic side of the PAV didactic task: match automaton, prover policy, exact and Monte Carlo Q.

The task (PAV, arXiv 2410.08146, App. B): write at most ``L`` tokens from a vocabulary of ``V`` (the last
id is EOS); the reward is 1 iff a planted run ``y*`` of ``m`` tokens appears contiguously.

Whether ``y*`` will appear depends on a prefix only through its *match state* ``k``: the length of the
longest suffix of the prefix that is a prefix of ``y*`` (a Knuth-Morris-Pratt automaton; ``k = m`` means
found, absorbing). :func:`transition_table` gives ``δ(k, a)``.

The prover ``μ_γ`` (:func:`prover_probs`) gives every token weight 1, except the next token of ``y*``
(``y*[k]``, in match state ``k``) which gets weight ``γ``: ``γ = 1`` is the uniform policy and a larger ``γ``
is a stronger prover. The rule also applies in state ``k = 0`` (it favours ``y*[0]``).

Because ``μ_γ`` depends on the prefix only through ``k``, its success probability from a prefix with
``r`` positions left is a table ``V[k, r]``, computed exactly by dynamic programming in
:func:`prover_values` (``O(m · V · L)``, no sampling). ``Q^μ(s_h, a_h) = V^μ(s_{h+1})``, read off the table
by :func:`q_after_steps`. :func:`mc_prover_values` estimates the same table by Monte Carlo rollouts, as
the paper does (the exact table is its limit).

Example:
    >>> target = (1, 0)                  # y* = "1 0" over V = 3 (tokens 0, 1 and EOS = 2)
    >>> transition_table(target, vocab_size=3).tolist()   # rows: k = 0, 1, 2; columns: tokens 0, 1, EOS
    [[0, 1, 0], [2, 1, 0], [2, 2, 2]]
    >>> v = prover_values(target, gamma=1.0, length=2, vocab_size=3)
    >>> float(v[0, 2])                   # uniform μ: "1 0" is the only success of 9 pairs
    0.1111111111111111
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from turnkit.errors import ConfigError

VOCAB_SIZE = 15
"""Tokens ``0 .. 14``; the last one is EOS."""
EOS = VOCAB_SIZE - 1
SEQ_LEN = 10
"""Most tokens in a sequence."""


def check_target(target: Sequence[int], vocab_size: int) -> tuple[int, ...]:
    """Validate a planted run: non-empty, ints in ``[0, vocab_size − 2]`` (EOS cannot be part of it).

    Example:
        >>> check_target([3, 1], 15)
        (3, 1)
        >>> check_target([14], 15)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: target token 14 is outside [0, 13] (14 is EOS)
    """
    if vocab_size < 2:
        raise ConfigError(f"vocab_size must be >= 2, got {vocab_size}")
    out = tuple(int(t) for t in target)
    if not out:
        raise ConfigError("target must have at least one token")
    for t in out:
        if not 0 <= t <= vocab_size - 2:
            raise ConfigError(f"target token {t} is outside [0, {vocab_size - 2}] ({vocab_size - 1} is EOS)")
    return out


def transition_table(target: Sequence[int], vocab_size: int = VOCAB_SIZE) -> np.ndarray:
    """The match automaton ``δ[k, a]``: the match state after appending token ``a`` in state ``k``.

    States ``0 .. m``; ``m`` (found) is absorbing. EOS always leads to ``0`` from ``k < m`` (it ends the
    sequence; callers treat it as terminal).

    Example:
        >>> transition_table((0, 0), vocab_size=3).tolist()  # y* = "0 0": after "0 1" we are back at 0
        [[1, 0, 0], [2, 0, 0], [2, 2, 2]]
    """
    y = check_target(target, vocab_size)
    m = len(y)
    table = np.zeros((m + 1, vocab_size), dtype=np.int64)
    for k in range(m):
        for a in range(vocab_size - 1):
            seq = (*y[:k], a)
            # longest suffix of y[:k] + a that is a prefix of y
            table[k, a] = next(j for j in range(min(m, k + 1), -1, -1) if seq[len(seq) - j :] == y[:j])
    table[m, :] = m
    return table


def prover_probs(target: Sequence[int], gamma: float, vocab_size: int = VOCAB_SIZE) -> np.ndarray:
    """``μ_γ(a | k)`` for match states ``k < m``: weight ``γ`` on ``y*[k]``, 1 on every other token.

    Example:
        >>> prover_probs((1,), gamma=2.0, vocab_size=3).round(3).tolist()  # weights 1, 2, 1
        [[0.25, 0.5, 0.25]]
    """
    y = check_target(target, vocab_size)
    if not np.isfinite(gamma) or gamma < 0:
        raise ConfigError(f"prover strength gamma must be a finite number >= 0, got {gamma!r}")
    w = np.ones((len(y), vocab_size))
    w[np.arange(len(y)), y] = gamma
    return w / w.sum(axis=1, keepdims=True)


def values_from_policy(table: np.ndarray, probs: np.ndarray, length: int) -> np.ndarray:
    """Exact success probability ``V[k, r]`` of a match-state policy ``probs[k, a]`` with ``r`` tokens left.

    ``V[m, ·] = 1``; ``V[k<m, 0] = 0``; ``V[k, r] = Σ_{a ≠ EOS} probs[k, a] · V[δ(k, a), r − 1]``.

    Example:
        >>> t = transition_table((1,), vocab_size=3)
        >>> values_from_policy(t, np.full((1, 3), 1 / 3), length=2)[0].tolist()  # 1/3 + 1/3 * 1/3
        [0.0, 0.3333333333333333, 0.4444444444444444]
    """
    m = table.shape[0] - 1
    v = np.zeros((m + 1, length + 1))
    v[m, :] = 1.0
    for r in range(1, length + 1):
        nxt = v[table[:m, :-1], r - 1]  # [m, V - 1]: value after each non-EOS token
        v[:m, r] = (probs[:, :-1] * nxt).sum(axis=1)
    return v


def prover_values(
    target: Sequence[int], gamma: float, length: int = SEQ_LEN, vocab_size: int = VOCAB_SIZE
) -> np.ndarray:
    """Exact ``V^{μ_γ}[k, r]`` by dynamic programming (see :func:`values_from_policy`).

    Example:
        >>> v = prover_values((1,), gamma=1.0, length=1, vocab_size=3)
        >>> v[:, 1].tolist()  # from k = 0 one token left: P(token 1) = 1/3; found stays found
        [0.3333333333333333, 1.0]
    """
    if length < 0:
        raise ConfigError(f"length must be >= 0, got {length}")
    table = transition_table(target, vocab_size)
    return values_from_policy(table, prover_probs(target, gamma, vocab_size), length)


def match_states(table: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Match state before every position and after the last: ``[N, T] -> [N, T + 1]``.

    After EOS the state reads ``0`` and after the run was found it stays ``m``; positions after the end
    are not steps (see :func:`step_mask`).

    Example:
        >>> t = transition_table((1, 0), vocab_size=3)
        >>> match_states(t, np.array([[0, 1, 0], [1, 1, 2]])).tolist()
        [[0, 0, 1, 2], [0, 1, 1, 0]]
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    states = np.zeros((tokens.shape[0], tokens.shape[1] + 1), dtype=np.int64)
    for h in range(tokens.shape[1]):
        states[:, h + 1] = table[states[:, h], tokens[:, h]]
    return states


def step_mask(table: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Which positions are real steps: those up to and including the first EOS or the completing token.

    Example:
        >>> t = transition_table((1,), vocab_size=3)
        >>> step_mask(t, np.array([[0, 1, 0], [2, 0, 0], [0, 0, 0]])).astype(int).tolist()
        [[1, 1, 0], [1, 0, 0], [1, 1, 1]]
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    m, eos = table.shape[0] - 1, table.shape[1] - 1
    states = match_states(table, tokens)
    ended = (tokens == eos) | (states[:, 1:] == m)
    ended_before = np.concatenate([np.zeros_like(ended[:, :1]), np.cumsum(ended, axis=1)[:, :-1] > 0], axis=1)
    return ~ended_before


def q_after_steps(table: np.ndarray, values: np.ndarray, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``Q(s_h, a_h) = V(s_{h+1})`` for every step of every sequence, and ``V(s_0)``, from a value table.

    ``Q = 1`` for the token that completes ``y*``, ``0`` for EOS before that, else ``V[k_{h+1}, L − h − 1]``
    with ``L = values.shape[1] − 1``. Positions after the end are ``0`` (see :func:`step_mask`).

    Returns:
        ``(q [N, T], v0 [N])``.

    Example:
        >>> t = transition_table((1,), vocab_size=3)
        >>> v = values_from_policy(t, np.full((1, 3), 1 / 3), length=2)
        >>> q, v0 = q_after_steps(t, v, np.array([[0, 1], [2, 0]]))
        >>> q.round(4).tolist(), v0.round(4).tolist()
        ([[0.3333, 1.0], [0.0, 0.0]], [0.4444, 0.4444])
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    n, steps = tokens.shape
    m, eos, length = table.shape[0] - 1, table.shape[1] - 1, values.shape[1] - 1
    if steps > length:
        raise ConfigError(f"sequences have {steps} tokens but the value table covers {length}")
    states = match_states(table, tokens)
    left = np.maximum(length - np.arange(1, steps + 1), 0)
    q = values[states[:, 1:], left[None, :]]
    q = np.where(tokens == eos, 0.0, q)
    q = np.where(states[:, 1:] == m, 1.0, q)
    return q * step_mask(table, tokens), np.full(n, values[0, length])


def mc_prover_values(
    target: Sequence[int],
    gamma: float,
    length: int,
    rollouts: int,
    rng: np.random.Generator,
    vocab_size: int = VOCAB_SIZE,
) -> np.ndarray:
    """Monte Carlo estimate of :func:`prover_values`: ``rollouts`` prover rollouts from every ``(k, r)``.

    Example:
        >>> est = mc_prover_values((1,), 1.0, length=2, rollouts=20000, rng=np.random.default_rng(0),
        ...                        vocab_size=3)
        >>> bool(abs(est[0, 2] - 4 / 9) < 0.02)
        True
    """
    m = len(check_target(target, vocab_size))
    k, r = np.meshgrid(np.arange(m + 1), np.arange(length + 1), indexing="ij")
    est = mc_values_at(target, gamma, k.ravel(), r.ravel(), rollouts, rng, vocab_size)
    return est.reshape(m + 1, length + 1)


def mc_values_at(
    target: Sequence[int],
    gamma: float,
    states: np.ndarray,
    remaining: np.ndarray,
    rollouts: int,
    rng: np.random.Generator,
    vocab_size: int = VOCAB_SIZE,
) -> np.ndarray:
    """Monte Carlo ``V^{μ_γ}`` at given match states with ``remaining`` tokens left: fresh rollouts per query.

    This is the paper's estimator (``Q̂`` from rollouts of the prover from each prefix), with independent
    noise per query; :func:`prover_values` is its exact limit.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> est = mc_values_at((1,), 1.0, np.array([1, 0, 0]), np.array([3, 0, 2]), 4000, rng, vocab_size=3)
        >>> est[:2].tolist(), bool(abs(est[2] - 4 / 9) < 0.03)  # found; no token left; exact 4/9
        ([1.0, 0.0], True)
    """
    if rollouts < 1:
        raise ConfigError(f"rollouts must be >= 1, got {rollouts}")
    y = np.array(check_target(target, vocab_size))
    table = transition_table(target, vocab_size)
    p_next = float(prover_probs(target, gamma, vocab_size)[0, y[0]])  # same in every state
    m, eos = len(y), vocab_size - 1
    k = np.repeat(np.asarray(states, dtype=np.int64), rollouts)
    left = np.repeat(np.asarray(remaining, dtype=np.int64), rollouts)
    live = np.flatnonzero((k != m) & (left > 0))
    while live.size:
        nxt = y[k[live]]
        other = rng.integers(0, vocab_size - 1, size=live.size)  # uniform over the other V - 1 tokens
        a = np.where(rng.random(live.size) < p_next, nxt, other + (other >= nxt))
        k[live] = np.where(a == eos, k[live], table[k[live], a])
        left[live] -= 1
        live = live[(a != eos) & (k[live] != m) & (left[live] > 0)]
    return (k == m).reshape(-1, rollouts).mean(axis=1)
