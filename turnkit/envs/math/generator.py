"""Procedural math tasks with ``id`` / ``ood`` / ``combo`` splits and independently verified answers.

Every task is a *plan*: a start value and ``(op, operand)`` steps with ``op`` in ``add, sub, mul, div``,
written down in one of two *styles* per kind (see :data:`STYLES`). The four kinds:

* ``arithmetic``: integers, e.g. ``Compute 7 - 3.`` / ``What is 7 minus 3?``
* ``fractions``: fractions, e.g. ``Compute 1/2 + 1/3.`` / ``What is 1/2 plus 1/3?``
* ``linear``: the start value is the unknown, e.g. ``Solve for x: 3x + 2 = 14.`` / ``A number is ...``
* ``word``: short stories (``objects`` or ``money`` themes), e.g. ``Ana has 5 apples and gets 3 more...``

Splits (the PhyWorld protocol, see docs/envs/math.md, "Splits"):

* ``id``: numbers from the difficulty's ranges (:data:`LEVELS`); no held-out ``(op, style)`` pair.
* ``ood``: the same ``(op, style)`` pairs as ``id``, with one more step and every step operand from a
  range disjoint from the ``id`` range (larger: ``(hi, 10 hi]``, factors ``(f, 3f]``, denominators
  ``(d, 3d]``).
* ``combo``: ``id`` number ranges, but every task uses at least one held-out ``(op, style)`` pair
  (:data:`HELD_OUT`); each op and each style alone does appear in ``id``.

Each reference answer is computed with exact fractions and then verified independently: the plan's fully
parenthesised text is parsed and evaluated exactly (:mod:`turnkit.envs.math.exact`; linear: the equation is
checked to be affine in ``x`` with the answer as its root), and symbolic prompts are re-read with the env's
sympy-based :func:`~turnkit.envs.math.answers.parse_answer`. Prompts never contain the answer as a number token.

Example:
    >>> import numpy as np
    >>> task = generate(np.random.default_rng(0), split="id", difficulty=1, kinds=("arithmetic",))
    >>> task.prompt, task.privileged["answer"], task.metadata["ops"]
    ('What is 6 plus 5?', '11', ('add',))
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

import numpy as np
import sympy

from turnkit.envs.math import exact, templates
from turnkit.envs.math.answers import format_value, parse_answer
from turnkit.errors import ConfigError, EnvError
from turnkit.types import Task

KINDS = ("arithmetic", "fractions", "linear", "word")
OPS = ("add", "sub", "mul", "div")
SPLITS = ("id", "ood", "combo")
STYLES = {
    "arithmetic": ("symbols", "words"),
    "fractions": ("symbols", "words"),
    "linear": ("symbols", "words"),
    "word": ("objects", "money"),
}
_HELD_OUT_SYMBOLIC = frozenset({("sub", "words"), ("mul", "symbols"), ("div", "words")})
HELD_OUT = {
    "arithmetic": _HELD_OUT_SYMBOLIC,
    "fractions": _HELD_OUT_SYMBOLIC,
    "linear": _HELD_OUT_SYMBOLIC,
    "word": frozenset({("sub", "money"), ("mul", "objects"), ("div", "money")}),
}
"""``(op, style)`` pairs that only the ``combo`` split uses, per kind."""
_MAX_TRIES = 2000
_T = TypeVar("_T")


@dataclass(frozen=True)
class Level:
    """Number ranges and shape of one difficulty level (the ``id`` split; ``ood`` derives from it).

    Attributes:
        ops: Operations available.
        steps: Operations per task (``ood`` adds one).
        hi: Added/subtracted operands and start values lie in ``[1, hi]``.
        factor_hi: Multipliers and divisors lie in ``[2, factor_hi]``.
        den_hi: Fraction denominators lie in ``[2, den_hi]``.
        negatives: Operands may be negative (word problems never are).
        exact_division: Integer division always comes out even (always true for word problems).
    """

    ops: tuple[str, ...]
    steps: int
    hi: int
    factor_hi: int
    den_hi: int
    negatives: bool = False
    exact_division: bool = True


LEVELS = {
    1: Level(("add", "sub"), 1, hi=9, factor_hi=9, den_hi=9),
    2: Level(("add", "sub", "mul"), 1, hi=99, factor_hi=12, den_hi=9),
    3: Level(OPS, 2, hi=999, factor_hi=12, den_hi=12),
    4: Level(OPS, 2, hi=9999, factor_hi=20, den_hi=12, negatives=True, exact_division=False),
    5: Level(OPS, 3, hi=99999, factor_hi=20, den_hi=20, negatives=True, exact_division=False),
}
"""Difficulty levels. Level 1 is one-digit addition/subtraction (or the same shape in the other kinds)."""


@dataclass(frozen=True)
class Ranges:
    """Inclusive ``(lo, hi)`` ranges for one (difficulty, split)."""

    additive: tuple[int, int]
    factor: tuple[int, int]
    denominator: tuple[int, int]
    steps: int


def ranges_for(difficulty: int, split: str) -> Ranges:
    """The number ranges a split uses at a difficulty (``id``/``combo`` share them; ``ood`` is disjoint).

    Example:
        >>> ranges_for(1, "id").additive, ranges_for(1, "ood").additive, ranges_for(1, "ood").steps
        ((1, 9), (10, 90), 2)
    """
    lv = LEVELS[difficulty]
    if split == "ood":
        return Ranges(
            (lv.hi + 1, 10 * lv.hi), (lv.factor_hi + 1, 3 * lv.factor_hi), (lv.den_hi + 1, 3 * lv.den_hi), lv.steps + 1
        )
    return Ranges((1, lv.hi), (2, lv.factor_hi), (2, lv.den_hi), lv.steps)


_ranges = functools.lru_cache(maxsize=None)(ranges_for)  # a few (difficulty, split) pairs; Ranges is frozen


def check_config(split: str, difficulty: int, kinds: Sequence[str]) -> tuple[str, ...]:
    """Validate generator settings; return ``kinds`` as a tuple.

    Raises:
        ConfigError: naming the bad field and value.

    Example:
        >>> check_config("id", 2, ["word"])
        ('word',)
    """
    if split not in SPLITS:
        raise ConfigError(f"split must be one of {list(SPLITS)}, got {split!r}")
    if isinstance(difficulty, bool) or not isinstance(difficulty, (int, np.integer)) or difficulty not in LEVELS:
        raise ConfigError(f"difficulty must be an int in 1..{max(LEVELS)}, got {difficulty!r}")
    if isinstance(kinds, str):
        raise ConfigError(f"kinds must be a sequence of kind names, got the string {kinds!r}")
    kinds = tuple(kinds)
    bad = [k for k in kinds if k not in KINDS]
    if not kinds or bad:
        raise ConfigError(f"kinds must be a non-empty subset of {list(KINDS)}, got {list(kinds)!r}")
    return kinds


def generate(rng: np.random.Generator, *, split: str = "id", difficulty: int = 1, kinds: Sequence[str] = KINDS) -> Task:
    """Draw one task using only ``rng``.

    Args:
        rng: The episode generator (``env.np_random``).
        split: ``"id"``, ``"ood"`` or ``"combo"``.
        difficulty: 1 (easiest) to 5.
        kinds: Kinds to draw from, uniformly.

    Returns:
        A task with ``privileged={"answer": canonical answer}`` and public metadata ``kind``, ``style``,
        ``ops`` (the operations in order) and ``operands`` (the step operands, as text).

    Example:
        >>> t = generate(np.random.default_rng(1), split="combo", difficulty=1, kinds=("word",))
        >>> t.metadata["style"], t.metadata["ops"], t.split
        ('money', ('sub',), 'combo')
    """
    kinds = check_config(split, difficulty, kinds)
    kind = kinds[int(rng.integers(len(kinds)))]
    for _ in range(_MAX_TRIES):
        task = _attempt(rng, kind, split, int(difficulty))
        if task is not None:
            return task
    raise EnvError(f"math generator found no valid {kind} task (split={split}, difficulty={difficulty})")


def _pick(rng: np.random.Generator, items: Sequence[_T]) -> _T:
    """``items[i]`` for a uniform ``i``: the draw ``rng.choice(items)`` makes, without its array conversion.

    ``Generator.choice`` with replacement and no weights draws its index with ``integers(0, len(items))``, so
    the value and the RNG stream are the same; it costs a few µs instead of about 20.
    """
    return items[int(rng.integers(len(items)))]


def _choose_ops(rng: np.random.Generator, kind: str, split: str, level: Level, n: int) -> tuple[str, list[str]]:
    held = HELD_OUT[kind]
    if split == "combo":
        pairs = sorted(p for p in held if p[0] in level.ops)
        op, style = pairs[int(rng.integers(len(pairs)))]
        ops = [_pick(rng, level.ops) for _ in range(n)]
        ops[int(rng.integers(n))] = op
        return style, ops
    style = STYLES[kind][int(rng.integers(2))]
    allowed = [op for op in level.ops if (op, style) not in held]
    return style, [_pick(rng, allowed) for _ in range(n)]


def _draw(rng: np.random.Generator, bounds: tuple[int, int], negatives: bool) -> int:
    value = int(rng.integers(bounds[0], bounds[1] + 1))
    return -value if negatives and rng.random() < 0.3 else value


def _fraction(rng: np.random.Generator, r: Ranges, level: Level, den: int | None = None) -> Fraction:
    q = den if den is not None else int(rng.integers(r.denominator[0], r.denominator[1] + 1))
    top = q - 1 if level.exact_division else 2 * q  # proper fractions up to level 3
    p = int(rng.integers(1, top + 1))
    while math.gcd(p, q) != 1:  # keep q as the shown denominator (p = 1 always qualifies)
        p = int(rng.integers(1, top + 1))
    sign = -1 if level.negatives and rng.random() < 0.3 else 1
    return Fraction(sign * p, q)


def _step_operand(
    rng: np.random.Generator, op: str, value: Fraction, kind: str, r: Ranges, level: Level, den: int | None
) -> Fraction | None:
    """An operand for ``value <op> operand`` obeying the level's rules, or ``None`` if none fits."""
    negatives = level.negatives and kind != "word"
    if kind == "fractions":
        b = _fraction(rng, r, level, den if op in ("add", "sub") else None)
        if not negatives and op == "sub" and b > value:
            return None
        return b
    if op in ("add", "sub"):
        lo, hi = r.additive
        if op == "sub" and not negatives:
            hi = min(hi, int(value))
            if hi < lo:
                return None
        return Fraction(_draw(rng, (lo, hi), negatives))
    if op == "mul" or not (level.exact_division or kind == "word"):
        return Fraction(_draw(rng, r.factor, negatives))
    divisors = [d for d in range(r.factor[0], r.factor[1] + 1) if value.denominator == 1 and value % d == 0]
    if not divisors:
        return None
    return Fraction(_pick(rng, divisors))


def apply_op(op: str, a: Fraction, b: Fraction) -> Fraction:
    """``a <op> b`` exactly for the generator's ops (``ZeroDivisionError`` for a division by zero).

    Example:
        >>> apply_op("div", Fraction(3), Fraction(4)), apply_op("sub", Fraction(1), Fraction(3))
        (Fraction(3, 4), Fraction(-2, 1))
    """
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    return a / b


def _attempt(rng: np.random.Generator, kind: str, split: str, difficulty: int) -> Task | None:
    level, r = LEVELS[difficulty], _ranges(difficulty, split)
    style, ops = _choose_ops(rng, kind, split, level, r.steps)
    negatives = level.negatives and kind != "word"
    den = None
    if kind == "fractions":
        start = _fraction(rng, r, level)
        den = start.denominator if difficulty == 1 else None  # level 1: like denominators
    else:
        start = Fraction(_draw(rng, r.additive, negatives))
        if ops[0] == "div" and (level.exact_division or kind == "word"):
            start *= int(rng.integers(r.factor[0], r.factor[1] + 1))  # a dividend with a divisor in range
    value, steps = start, []
    for op in ops:
        b = _step_operand(rng, op, value, kind, r, level, den)
        if b is None or b == 0:
            return None
        steps.append((op, b))
        value = apply_op(op, value, b)
        if value < 0 and not negatives:
            return None
    if kind == "linear":
        prompt, answer = _linear_prompt(style, steps, value), start
    elif kind == "word":
        prompt, answer = templates.story(style, start, steps, rng), value
    elif style == "symbols":
        prompt, answer = f"Compute {templates.render_expression(start, steps)}.", value
    else:
        prompt, answer = templates.words_expression(start, steps), value
    if _mentions(prompt, answer) or (kind == "fractions" and answer == 0):  # x/q - x/q is degenerate
        return None
    _verify(kind, style, start, steps, value, answer, prompt)
    return _task(kind, style, split, difficulty, prompt, answer, steps)


def _linear_prompt(style: str, steps: list[tuple[str, Fraction]], rhs: Fraction) -> str:
    if style == "symbols":
        return f"Solve for x: {templates.render_equation(steps, rhs)}."
    return templates.words_equation(steps, rhs)


def _mentions(prompt: str, answer: Fraction) -> bool:
    r"""Whether the prompt states the answer (its absolute value) as a number token.

    A token counts where the regex ``(?<![\w/.])TOKEN(?![\w/]|\.\d)`` would match it: not inside a longer
    number, word or fraction. Scanning with ``str.find`` avoids compiling one regex per answer (tens of µs for
    each answer not seen before).
    """
    token = templates.fmt(abs(answer))
    end = len(prompt)
    i = prompt.find(token)
    while i != -1:
        j = i + len(token)
        before_ok = i == 0 or not _is_word_or(prompt[i - 1], "/.")
        after_ok = j == end or not (
            _is_word_or(prompt[j], "/") or (prompt[j] == "." and j + 1 < end and prompt[j + 1].isdecimal())
        )
        if before_ok and after_ok:
            return True
        i = prompt.find(token, i + 1)
    return False


def _is_word_or(ch: str, extra: str) -> bool:
    r"""Whether ``ch`` matches the regex class ``[\w<extra>]`` (``\w``: alphanumeric or ``_``, Unicode-aware)."""
    return ch.isalnum() or ch == "_" or ch in extra


def _verify(
    kind: str,
    style: str,
    start: Fraction,
    steps: list[tuple[str, Fraction]],
    value: Fraction,
    answer: Fraction,
    prompt: str,
) -> None:
    """Re-derive the answer from the plan's text and re-read symbolic prompts; a mismatch is a generator bug.

    The plan's fully parenthesised text is evaluated exactly (:mod:`turnkit.envs.math.exact`; linear: the
    equation must be affine in ``x`` with the answer as its root). A symbolic prompt is read back with the
    env's own answer parser (:func:`~turnkit.envs.math.answers.parse_answer`), so what the agent sees is
    checked too. The check is a pure function of its arguments, so a plan and prompt that already checked out
    are not checked again (:data:`VERIFY_CACHE_SIZE` most recent): low difficulties repeat the same few hundred
    tasks, and the check costs tens of µs.
    """
    start_text = "x" if kind == "linear" else f"({templates.fmt(start)})"  # linear: the start is the unknown
    check = templates.check_expression(start_text, steps)
    # the key holds ints and text only: hashing a Fraction costs a modular inverse
    key = (value.numerator, value.denominator, answer.numerator, answer.denominator)
    if not _checks_out(kind, style, check, key, prompt):
        raise EnvError(f"math generator bug: answer {answer} does not check out for {prompt!r}")


VERIFY_CACHE_SIZE = 1 << 14
"""How many distinct verified tasks :func:`_verify` remembers."""


@functools.lru_cache(maxsize=VERIFY_CACHE_SIZE)
def _checks_out(kind: str, style: str, check: str, numbers: tuple[int, int, int, int], prompt: str) -> bool:
    """Whether the plan's text ``check`` gives the answer (``numbers``: value and answer as ``p, q`` pairs)."""
    value, answer = Fraction(numbers[0], numbers[1]), Fraction(numbers[2], numbers[3])
    ref = sympy.Rational(answer.numerator, answer.denominator)
    if kind == "linear":
        ok = exact.is_affine_root(check, root=answer, value=value)
        if ok and style == "symbols":
            left, right = prompt.removeprefix("Solve for x: ").removesuffix(".").split(" = ")
            shown_l, shown_r = parse_answer(left), parse_answer(right)
            if shown_l is None or shown_r is None:
                ok = False
            else:
                ok = sympy.expand(shown_l - shown_r).subs(sympy.Symbol("x"), ref) == 0
    else:
        ok = exact.evaluate(check) == answer
        if ok and style == "symbols" and kind != "word":
            ok = parse_answer(prompt.removeprefix("Compute ").removesuffix(".")) == ref
    return bool(ok) and parse_answer(format_value(ref)) == ref


def _task(kind: str, style: str, split: str, difficulty: int, prompt: str, answer: Fraction, steps: list) -> Task:
    digest = hashlib.sha1(f"{kind}|{style}|{prompt}".encode()).hexdigest()[:12]
    return Task(
        task_id=f"math-{kind}-{split}-d{difficulty}-{digest}",
        prompt=prompt,
        privileged={"answer": templates.fmt(answer)},
        family="math",
        split=split,
        difficulty=float(difficulty),
        metadata={
            "kind": kind,
            "style": style,
            "ops": tuple(op for op, _ in steps),
            "operands": tuple(templates.fmt(b) for _, b in steps),
        },
    )
