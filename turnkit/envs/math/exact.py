"""Exact evaluation of the generator's check expressions with :class:`fractions.Fraction`.

The generator re-derives every reference answer from a fully parenthesised text of its plan
(:func:`~turnkit.envs.math.templates.check_expression`). Parsing that text with Python's :mod:`ast` and
folding it with exact fractions is an independent check (it reads the text, not the plan) and costs
microseconds, where ``sympy.parse_expr`` costs about a millisecond per task. Only integer literals, the
four operations, unary signs and the one unknown ``x`` are accepted; anything else is a
:class:`~turnkit.errors.EnvError` (a generator bug, never user input).

Example:
    >>> evaluate("((3) + (1/2)) / (3)")
    Fraction(7, 6)
    >>> evaluate("((x) * (-2)) - (5/3)", x=Fraction(1, 3))
    Fraction(-7, 3)
    >>> is_affine_root("((x) * (3)) + (2)", root=Fraction(4), value=Fraction(14))
    True
"""

from __future__ import annotations

import ast
from fractions import Fraction

from turnkit.errors import EnvError

_BINARY = {
    ast.Add: Fraction.__add__,
    ast.Sub: Fraction.__sub__,
    ast.Mult: Fraction.__mul__,
    ast.Div: Fraction.__truediv__,
}


def evaluate(expression: str, x: Fraction | None = None) -> Fraction:
    """The exact value of ``expression`` (with ``x`` bound to ``x`` if given).

    Raises:
        EnvError: on syntax other than integers, ``+ - * /``, unary signs and ``x``, or division by zero.

    Example:
        >>> evaluate("-(4) / (6)")
        Fraction(-2, 3)
        >>> evaluate("2 ** 3")
        Traceback (most recent call last):
        ...
        turnkit.errors.EnvError: check expression '2 ** 3': unsupported syntax Pow
    """
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise EnvError(f"check expression {expression!r} is not valid syntax: {exc.msg}") from exc
    try:
        return _fold(tree.body, x)
    except ZeroDivisionError as exc:
        raise EnvError(f"check expression {expression!r} divides by zero") from exc
    except _Unsupported as exc:
        raise EnvError(f"check expression {expression!r}: unsupported syntax {exc}") from None


def is_affine_root(expression: str, *, root: Fraction, value: Fraction) -> bool:
    """Whether ``expression`` is a non-constant affine function of ``x`` that equals ``value`` at ``root``.

    An expression built from ``+ - * /`` with one occurrence of ``x`` is affine when its values at three
    equally spaced points are collinear; then ``root`` is its only solution of ``f(x) = value``.

    Example:
        >>> is_affine_root("(x) * (0)", root=Fraction(1), value=Fraction(0))
        False
    """
    f0, f1, f2 = (evaluate(expression, root + k) for k in range(3))
    return f0 == value and f1 - f0 == f2 - f1 != 0


class _Unsupported(Exception):
    pass


def _fold(node: ast.expr, x: Fraction | None) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Fraction(node.value)
    if isinstance(node, ast.Name) and node.id == "x" and x is not None:
        return x
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _fold(node.operand, x)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_fold(node.left, x), _fold(node.right, x))
    raise _Unsupported(type(node).__name__ if not isinstance(node, ast.BinOp) else type(node.op).__name__)
