"""MathEpisodes' answer re-derivation: the exact ``ast`` + ``Fraction`` evaluator vs ``sympy.parse_expr``.

Every generated task's answer is re-derived from the text of its plan. The first version parsed that text with
``sympy.parse_expr`` (the baseline here); :mod:`turnkit.envs.math.exact` evaluates the same text with Python's
``ast`` and exact fractions. Both check the same expressions, interleaved trial by trial; medians of µs per check.

Run:  python benchmarks/bench_math_check.py --trials 7 --tasks 300
"""

from __future__ import annotations

import argparse
import statistics
import time
from fractions import Fraction

import numpy as np
import sympy
from sympy.parsing.sympy_parser import parse_expr

from turnkit.envs.math import exact, templates


def plans(n: int, steps: int, seed: int = 0) -> list[tuple[str, Fraction]]:
    """``(check expression, value)`` of ``n`` random plans of ``steps`` operations, written as the generator does."""
    rng = np.random.default_rng(seed)
    apply = {"add": Fraction.__add__, "sub": Fraction.__sub__, "mul": Fraction.__mul__, "div": Fraction.__truediv__}
    out = []
    for _ in range(n):
        value = start = Fraction(int(rng.integers(1, 1000)))
        plan = []
        for _ in range(steps):
            op = str(rng.choice(list(apply)))
            b = Fraction(int(rng.integers(1, 100)), int(rng.integers(1, 4)))
            plan.append((op, b))
            value = apply[op](value, b)
        out.append((templates.check_expression(f"({templates.fmt(start)})", plan), value))
    return out


def time_per_check(check, items: list[tuple[str, Fraction]]) -> float:
    start = time.perf_counter()
    for text, value in items:
        if not check(text, value):
            raise AssertionError(f"check failed on {text!r}")
    return (time.perf_counter() - start) / len(items) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--tasks", type=int, default=300)
    args = parser.parse_args(argv)

    def with_sympy(text: str, value: Fraction) -> bool:
        return parse_expr(text) == sympy.Rational(value.numerator, value.denominator)

    def with_exact(text: str, value: Fraction) -> bool:
        return exact.evaluate(text) == value

    print(f"µs per check, median of {args.trials} interleaved trials x {args.tasks} plans")
    print(f"{'steps':>10} {'sympy.parse_expr':>17} {'ast + Fraction':>15} {'speed-up':>9}")
    for steps in (1, 2, 3):  # difficulty 1-2, 3-4, 5
        items = plans(args.tasks, steps)
        base, new = [], []
        for _ in range(args.trials):
            base.append(time_per_check(with_sympy, items))
            new.append(time_per_check(with_exact, items))
        b, n = statistics.median(base), statistics.median(new)
        print(f"{steps:>10} {b:>17.1f} {n:>15.1f} {b / n:>8.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
