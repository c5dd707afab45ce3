"""Problem text for the math generator: how a plan (start value + operation steps) is written down.

A *plan* is a start value and a list of ``(op, operand)`` steps applied left to right, with ``op`` one of
``"add"``, ``"sub"``, ``"mul"``, ``"div"``. The generator (``generator.py``) chooses the numbers; this module
only turns them into short English or symbolic text. Symbolic renderings use ``×`` and ``÷`` and enough
parentheses that standard precedence gives the left-to-right value.

Example:
    >>> from fractions import Fraction as F
    >>> render_expression(F(7), [("add", F(3)), ("mul", F(2))])
    '(7 + 3) × 2'
    >>> render_equation([("mul", F(3)), ("add", F(2))], F(14))
    '3x + 2 = 14'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

Steps = Sequence[tuple[str, Fraction]]

SYMBOL = {"add": "+", "sub": "-", "mul": "×", "div": "÷"}
_PY_OP = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_INFIX_WORD = {"add": "plus", "sub": "minus", "mul": "times", "div": "divided by"}
_STEP_WORD = {"add": "add {b}", "sub": "subtract {b}", "mul": "multiply by {b}", "div": "divide by {b}"}
_UNKNOWN_WORD = {
    "add": "increased by {b}",
    "sub": "decreased by {b}",
    "mul": "multiplied by {b}",
    "div": "divided by {b}",
}
NAMES = ("Ana", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Ivy", "Jon", "Kim")
ITEMS = ("apples", "marbles", "stickers", "pencils", "cards", "shells", "books", "coins")


@dataclass(frozen=True)
class _Theme:
    """Word-problem sentences of one theme: the one-step form, a later step, and the question."""

    start: str
    single: Mapping[str, str]
    then: Mapping[str, str]
    ask: str
    ask_after: Mapping[str, str]  # a one-step problem with this op asks this instead


_THEMES = {
    "objects": _Theme(
        start="{name} has {a} {items}.",
        single={
            "add": "{name} has {a} {items} and gets {b} more.",
            "sub": "{name} has {a} {items} and gives away {b}.",
            "mul": "{name} has {a} bags with {b} {items} in each bag.",
            "div": "{name} shares {a} {items} equally among {b} friends.",
        },
        then={
            "add": "Then {name} gets {b} more.",
            "sub": "Then {name} gives away {b}.",
            "mul": "Then the number of {items} becomes {b} times as large.",
            "div": "Then {name} splits them into {b} equal piles and keeps one pile.",
        },
        ask="How many {items} does {name} have now?",
        ask_after={"div": "How many {items} does each friend get?"},
    ),
    "money": _Theme(
        start="{name} has ${a}.",
        single={
            "add": "{name} has ${a} and earns ${b}.",
            "sub": "{name} has ${a} and spends ${b}.",
            "mul": "{name} buys {a} {items} at ${b} each.",
            "div": "{name} splits ${a} equally among {b} friends.",
        },
        then={
            "add": "Then {name} earns ${b}.",
            "sub": "Then {name} spends ${b}.",
            "mul": "Then the money grows to {b} times as much.",
            "div": "Then {name} splits it into {b} equal parts and keeps one part.",
        },
        ask="How many dollars does {name} have now?",
        ask_after={"div": "How many dollars does each friend get?", "mul": "How many dollars does {name} spend?"},
    ),
}


def fmt(value: Fraction) -> str:
    """A number as text: ``7``, ``-3``, ``3/4``.

    Example:
        >>> fmt(Fraction(6, 8)), fmt(Fraction(-4))
        ('3/4', '-4')
    """
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _operand(value: Fraction, op: str) -> str:
    """An operand on the right of ``op``: negatives, and fractions next to ``×``/``÷``, get parentheses."""
    text = fmt(value)
    if value < 0 or (value.denominator != 1 and op in ("mul", "div")):
        return f"({text})"
    return text


def render_expression(start: Fraction, steps: Steps) -> str:
    """The plan as one infix expression whose standard-precedence value is the left-to-right value.

    Example:
        >>> render_expression(Fraction(1, 2), [("div", Fraction(3, 4))])
        '(1/2) ÷ (3/4)'
        >>> render_expression(Fraction(9), [("sub", Fraction(-2))])
        '9 - (-2)'
    """
    first_op = steps[0][0] if steps else "add"
    text = fmt(start)
    if start.denominator != 1 and first_op in ("mul", "div"):
        text = f"({text})"
    is_sum = False
    for op, b in steps:
        if op in ("mul", "div") and is_sum:
            text = f"({text})"
        text = f"{text} {SYMBOL[op]} {_operand(b, op)}"
        is_sum = op in ("add", "sub")
    return text


def render_equation(steps: Steps, rhs: Fraction, unknown: str = "x") -> str:
    """A linear equation: the unknown put through ``steps`` equals ``rhs``.

    Example:
        >>> render_equation([("add", Fraction(2)), ("mul", Fraction(3))], Fraction(24))
        '3(x + 2) = 24'
        >>> render_equation([("div", Fraction(4)), ("sub", Fraction(1))], Fraction(5))
        'x ÷ 4 - 1 = 5'
    """
    text, level = unknown, "atom"
    for op, b in steps:
        if op == "mul":
            coef = fmt(b) if b.denominator == 1 else f"({fmt(b)})"
            text = f"{coef}{unknown}" if level == "atom" else f"{coef}({text})"
            level = "product"
        elif op == "div":
            text = f"({text}) ÷ {_operand(b, op)}" if level == "sum" else f"{text} ÷ {_operand(b, op)}"
            level = "product"
        else:
            text = f"{text} {SYMBOL[op]} {_operand(b, op)}"
            level = "sum"
    return f"{text} = {fmt(rhs)}"


def check_expression(start: str, steps: Steps) -> str:
    """A fully parenthesised Python-syntax expression of the plan, for independent checking with sympy.

    Example:
        >>> check_expression("x", [("mul", Fraction(3)), ("add", Fraction(-2, 5))])
        '((x) * (3)) + (-2/5)'
    """
    text = start
    for op, b in steps:
        text = f"({text}) {_PY_OP[op]} ({fmt(b)})"
    return text


def _join_steps(phrases: list[str]) -> str:
    if len(phrases) == 1:
        return phrases[0]
    return ", ".join(phrases[:-1]) + ", then " + phrases[-1]


def words_expression(start: Fraction, steps: Steps) -> str:
    """The plan as an English question.

    Example:
        >>> words_expression(Fraction(7), [("sub", Fraction(3))])
        'What is 7 minus 3?'
        >>> words_expression(Fraction(7), [("add", Fraction(3)), ("mul", Fraction(2))])
        'Start with 7, add 3, then multiply by 2. What is the result?'
    """
    if len(steps) == 1:
        op, b = steps[0]
        return f"What is {fmt(start)} {_INFIX_WORD[op]} {fmt(b)}?"
    phrases = [_STEP_WORD[op].format(b=fmt(b)) for op, b in steps]
    return f"Start with {fmt(start)}, {_join_steps(phrases)}. What is the result?"


def words_equation(steps: Steps, rhs: Fraction) -> str:
    """A linear equation told in words.

    Example:
        >>> words_equation([("mul", Fraction(3)), ("add", Fraction(2))], Fraction(14))
        'A number is multiplied by 3, then increased by 2. The result is 14. What is the number?'
    """
    phrases = [_UNKNOWN_WORD[op].format(b=fmt(b)) for op, b in steps]
    return f"A number is {_join_steps(phrases)}. The result is {fmt(rhs)}. What is the number?"


def story(theme: str, start: Fraction, steps: Steps, rng: np.random.Generator) -> str:
    """A word problem in ``theme`` (``"objects"`` or ``"money"``); the name and items come from ``rng``.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> story("objects", Fraction(5), [("add", Fraction(3))], rng)
        'Jon has 5 shells and gets 3 more. How many shells does Jon have now?'
    """
    theme_ = _THEMES[theme]
    name = str(NAMES[int(rng.integers(len(NAMES)))])
    items = str(ITEMS[int(rng.integers(len(ITEMS)))])
    slots = {"name": name, "items": items, "a": fmt(start)}
    if len(steps) == 1:
        op, b = steps[0]
        text = theme_.single[op].format(b=fmt(b), **slots)
        return f"{text} {theme_.ask_after.get(op, theme_.ask).format(**slots)}"
    sentences = [theme_.start.format(**slots)]
    sentences += [theme_.then[op].format(b=fmt(b), **slots) for op, b in steps]
    return " ".join([*sentences, theme_.ask.format(**slots)])
