"""Diversity and rank statistics of sampled text: distinct-n, Self-BLEU, Spearman's ρ (pure Python).

Used by the IRL studies (the IQLearn paper reports Self-BLEU of samples and the Spearman correlation of
extracted rewards with task success). Texts are split on whitespace.

Example:
    >>> distinct_n(["a b c", "a b d"], 2)  # bigrams: ab, bc, ab, bd -> 3 distinct of 4
    0.75
    >>> self_bleu(["the cat sat", "the cat sat"]) == 1.0  # identical samples: no diversity
    True
    >>> round(spearman([1, 2, 3, 4], [10, 20, 30, 25]), 6)
    0.8
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence


def _ngrams(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def distinct_n(texts: Sequence[str], n: int) -> float:
    """Distinct n-grams over all n-grams of ``texts`` (``0`` when there is none).

    Example:
        >>> distinct_n(["x y", "x y", "x z"], 1)  # unigrams x y x y x z: 3 distinct of 6
        0.5
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    counts: Counter[tuple[str, ...]] = Counter()
    for text in texts:
        counts.update(_ngrams(text.split(), n))
    total = sum(counts.values())
    return len(counts) / total if total else 0.0


def bleu(hypothesis: str, references: Sequence[str], max_n: int = 4) -> float:
    """Sentence BLEU of ``hypothesis`` against ``references``.

    Clipped n-gram precisions, geometric mean, brevity penalty against the closest reference length. Orders run
    ``n = 1..min(max_n, words in hypothesis)`` (a two-word answer is scored on unigrams and bigrams, so identical
    short texts score 1) and a zero match count is smoothed to ``0.1 / total`` (Chen & Cherry's "epsilon"
    smoothing).

    Example:
        >>> bleu("a b c d", ["a b c d"])
        1.0
        >>> round(bleu("a b", ["a b c d"], max_n=2), 4)  # precisions 1, 1; brevity exp(1 - 4/2)
        0.3679
    """
    hyp = hypothesis.split()
    refs = [r.split() for r in references]
    if not hyp or not refs:
        return 0.0
    orders = min(max_n, len(hyp))
    log_p = 0.0
    for n in range(1, orders + 1):
        counts = _ngrams(hyp, n)
        total = sum(counts.values())
        most: Counter[tuple[str, ...]] = Counter()
        for ref in refs:
            most |= _ngrams(ref, n)
        matched = sum(min(c, most[g]) for g, c in counts.items())
        log_p += math.log(matched / total if matched else 0.1 / total)
    closest = min((len(r) for r in refs), key=lambda length: (abs(length - len(hyp)), length))
    brevity = 1.0 if len(hyp) > closest else math.exp(1 - closest / len(hyp))
    return brevity * math.exp(log_p / orders)


def self_bleu(texts: Sequence[str], max_n: int = 4) -> float:
    """Mean BLEU of each text against all the others (higher = less diverse); needs two texts or more.

    Example:
        >>> round(self_bleu(["a b", "c d"], max_n=1), 3)  # nothing shared: smoothed precision 0.1/2
        0.05
    """
    if len(texts) < 2:
        raise ValueError(f"self_bleu needs at least two texts, got {len(texts)}")
    scores = [bleu(t, [*texts[:i], *texts[i + 1 :]], max_n) for i, t in enumerate(texts)]
    return sum(scores) / len(scores)


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1  # ties share their mean rank
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (Pearson's r of the ranks, ties at their mean rank); NaN if a side is constant.

    Example:
        >>> round(spearman([1, 2, 3], [3, 2, 1]), 6)
        -1.0
        >>> round(spearman([1, 2, 3, 4], [0, 1, 1, 0]), 4)  # binary outcomes: ties share ranks
        0.0
    """
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"spearman needs two equal-length sequences of >= 2 values, got {len(x)} and {len(y)}")
    rx, ry = _ranks(x), _ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (sx * sy) if sx and sy else math.nan
