"""Small statistics helpers for reporting results with uncertainty.

Example:
    >>> lo, hi = wilson_interval(8, 10)
    >>> round(lo, 3), round(hi, 3)
    (0.49, 0.943)
    >>> m, lo, hi = mean_ci([1.0, 2.0, 3.0])  # s = 1, n = 3: 2 ± t(0.975, 2) · 1/√3
    >>> m, round(hi - m, 3)
    (2.0, 2.484)
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% for ``z=1.96``); ``(0, 1)`` when ``n == 0``.

    The bound at an observed rate of 0 or 1 is that rate exactly (not a float a hair inside it).

    Example:
        >>> [round(x, 4) for x in wilson_interval(3, 10)], wilson_interval(300, 300)[1], wilson_interval(0, 7)[0]
        ([0.1078, 0.6032], 1.0, 0.0)
    """
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def student_t_cdf_two_sided(t: float, df: int) -> float:
    """``P(|T| < t)`` for Student's t with ``df`` (integer) degrees of freedom, in closed form.

    With ``θ = atan(t / √df)``: odd ``df`` gives ``(2/π)(θ + sin θ cos θ Σ)``, even ``df`` gives ``sin θ Σ``,
    where ``Σ`` is the finite cosine series of Abramowitz & Stegun 26.7.3-4.

    Example:
        >>> round(student_t_cdf_two_sided(1.0, 1), 4)  # Cauchy: 2·atan(1)/π
        0.5
        >>> round(student_t_cdf_two_sided(4.303, 2), 4)
        0.95
    """
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if t <= 0:
        return 0.0
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 1:
        total, term = 0.0, 1.0
        for k in range(1, (df - 1) // 2 + 1):  # 1 + 2/3 c² + 2·4/(3·5) c⁴ + ... (df - 3 power)
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    total, term = 0.0, 1.0
    for k in range(1, df // 2 + 1):  # 1 + 1/2 c² + 1·3/(2·4) c⁴ + ... (df - 2 power)
        total += term
        term *= c2 * (2 * k - 1) / (2 * k)
    return math.sin(theta) * total


def student_t_quantile(confidence: float, df: int) -> float:
    """The ``t`` with ``P(|T| < t) = confidence`` for ``df`` degrees of freedom (bisection on the exact CDF).

    Example:
        >>> [round(student_t_quantile(0.95, df), 3) for df in (1, 2, 4, 30)]
        [12.706, 4.303, 2.776, 2.042]
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    lo, hi = 0.0, 1.0
    while student_t_cdf_two_sided(hi, df) < confidence:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if student_t_cdf_two_sided(mid, df) < confidence else (lo, mid)
    return (lo + hi) / 2


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t interval ``mean ± t(confidence, n−1)·s/√n`` (sample std; zero width for n < 2).

    The t quantile matters for the few-seed means this is used for: with 3 seeds the 95% factor is 4.30, not
    the normal 1.96 (an interval over 3 seeds with 1.96 would cover the true mean only ~80% of the time).

    Example:
        >>> [round(x, 3) for x in mean_ci([0.1, 0.2, 0.3, 0.4, 0.5])]  # s = 0.158, t(0.975, 4) = 2.776
        [0.3, 0.104, 0.496]
    """
    n = len(values)
    if n == 0:
        raise ValueError("mean_ci needs at least one value")
    mean = sum(values) / n
    if n < 2:
        return mean, mean, mean
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = student_t_quantile(confidence, n - 1) * math.sqrt(var / n)
    return mean, mean - half, mean + half
