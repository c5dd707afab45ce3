"""Read a MathEpisodes problem from its public text into a plan, and write the plan as a Python program.

This is the reading half of the scripted tool-using solver (:mod:`turnkit.envs.math.tool_solver`). It sees
only the problem text the agent sees, never the task's privileged answer. It is written against the phrasings
of :mod:`turnkit.envs.math.templates` (every kind, style and split): a hand-made reader of a known family of
texts, not a general word-problem solver. Anything else (e.g. GSM8K tasks) reads as ``None``.

A :class:`Plan` is what the text says, in its order: a start value and ``(op, operand)`` steps, or for an
equation the steps applied to the unknown and the stated result. :meth:`Plan.computation` turns both into one
forward computation (an equation is solved by inverting its steps in reverse order), which
:func:`program_steps` writes as Python over :class:`fractions.Fraction` (exact) and :func:`run_plan` carries
out in-process, exactly or with every intermediate result rounded to a few significant digits.

All functions are pure and never raise on any input text: unreadable text gives ``None``.

Example:
    >>> plan = read_problem("Solve for x: 3(x + 2) = 24.")
    >>> plan
    Plan(steps=(('add', Fraction(2, 1)), ('mul', Fraction(3, 1))), start=None, result=Fraction(24, 1))
    >>> print(program(plan))
    from fractions import Fraction
    x = Fraction(24)
    x = x / 3
    x = x - 2
    print(x)
    >>> run_plan(plan)
    Fraction(6, 1)
    >>> run_plan(read_problem("Start with 597, add 574, then add 728. What is the result?"), digits=2)
    Fraction(1900, 1)
    >>> read_problem("Natalia sold clips to 48 of her friends in April.") is None
    True
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from turnkit.envs.math.generator import apply_op

OPS = ("add", "sub", "mul", "div")
INVERSE = {"add": "sub", "sub": "add", "mul": "div", "div": "mul"}
"""The operation that undoes each operation (how an equation is solved)."""
_PY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
MAX_TEXT_CHARS = 2000
"""Longer texts are not read (MathEpisodes prompts are under 300 characters)."""
MAX_DEPTH = 20
"""Deepest parenthesis nesting read in symbolic expressions."""
MAX_STEPS = 20
"""Most steps a plan may have."""

Step = tuple[str, Fraction]


@dataclass(frozen=True)
class Plan:
    """What a problem's text says, in its order.

    Attributes:
        steps: ``(op, operand)`` pairs, ``op`` in ``add, sub, mul, div``, applied left to right to the start
            value (value problems) or to the unknown (equations).
        start: The start value of a value problem; ``None`` for an equation.
        result: The stated result of an equation (its right-hand side); ``None`` for a value problem.
    """

    steps: tuple[Step, ...]
    start: Fraction | None = None
    result: Fraction | None = None

    def computation(self) -> tuple[Fraction, tuple[Step, ...]]:
        """The forward computation whose value is the answer: ``(start, steps)``.

        A value problem is its own computation. An equation ``steps(x) = result`` is solved by starting from
        the result and undoing the steps in reverse order.

        Example:
            >>> Plan((("mul", Fraction(3)), ("add", Fraction(2))), result=Fraction(14)).computation()
            (Fraction(14, 1), (('sub', Fraction(2, 1)), ('div', Fraction(3, 1))))
        """
        if self.start is not None:
            return self.start, self.steps
        result = self.result if self.result is not None else Fraction(0)
        return result, tuple((INVERSE[op], b) for op, b in reversed(self.steps))


# ---------------------------------------------------------------------------------------------- numbers
_NUM = r"-?\d+(?:\.\d+)?(?:/\d+)?"


def _number(text: str) -> Fraction | None:
    try:
        value = Fraction(text.replace(" ", ""))
    except (ValueError, ZeroDivisionError):
        return None
    return value


def round_significant(value: Fraction, digits: int) -> Fraction:
    """``value`` rounded to ``digits`` significant decimal digits (halves away from zero), exactly.

    Example:
        >>> round_significant(Fraction(1651), 2), round_significant(Fraction(5, 36), 2)
        (Fraction(1700, 1), Fraction(7, 50))
        >>> round_significant(Fraction(-25), 1), round_significant(Fraction(0), 2)
        (Fraction(-30, 1), Fraction(0, 1))
    """
    if value == 0 or digits < 1:
        return value
    size = abs(value)
    exponent = len(str(size.numerator)) - len(str(size.denominator))  # within one of floor(log10(size))
    while Fraction(10) ** exponent > size:
        exponent -= 1
    while Fraction(10) ** (exponent + 1) <= size:
        exponent += 1
    scale = Fraction(10) ** (exponent - digits + 1)
    units = math.floor(size / scale + Fraction(1, 2))
    return (units * scale) if value > 0 else -(units * scale)


def render_number(value: Fraction) -> str:
    """A number as answer text: an integer, a terminating decimal, or ``p/q``.

    Example:
        >>> render_number(Fraction(1900)), render_number(Fraction(7, 50)), render_number(Fraction(-5, 36))
        ('1900', '0.14', '-5/36')
    """
    if value.denominator == 1:
        return str(value.numerator)
    q, twos, fives = value.denominator, 0, 0
    while q % 2 == 0:
        q, twos = q // 2, twos + 1
    while q % 5 == 0:
        q, fives = q // 5, fives + 1
    if q != 1:
        return f"{value.numerator}/{value.denominator}"
    places = max(twos, fives)
    scaled = abs(value.numerator) * (10**places // value.denominator)
    sign = "-" if value < 0 else ""
    whole, frac = divmod(scaled, 10**places)
    return f"{sign}{whole}.{frac:0{places}d}"


# ---------------------------------------------------------------------------------------------- evaluation
def run_plan(plan: Plan | None, *, digits: int | None = None) -> Fraction | None:
    """The answer the plan's computation gives: exact, or with each intermediate result rounded.

    Args:
        plan: A plan from :func:`read_problem` (``None`` gives ``None``).
        digits: Round every intermediate result (each operation's value) to this many significant digits;
            ``None``: exact. The operands themselves are taken as written.

    Returns:
        The value, or ``None`` when the computation divides by zero.

    Example:
        >>> plan = read_problem("What is 5/12 times 2/3?")
        >>> run_plan(plan), run_plan(plan, digits=2)
        (Fraction(5, 18), Fraction(7, 25))
    """
    if plan is None:
        return None
    value, steps = plan.computation()
    try:
        for op, b in steps:
            value = apply_op(op, value, b)
            if digits is not None:
                value = round_significant(value, digits)
    except ZeroDivisionError:
        return None
    return value


def _literal(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"Fraction({value.numerator}, {value.denominator})"


def program_steps(plan: Plan) -> tuple[str, ...]:
    """The plan's computation as Python code, one piece per operation, for a persistent session.

    The first piece imports :class:`~fractions.Fraction` and sets ``x`` to the start value; each next one
    applies one operation to ``x``; the last prints ``x``. Run in order in one session, they print the answer
    exactly (``Fraction`` prints as ``7`` or ``5/18``).

    Example:
        >>> program_steps(read_problem("Compute 1/2 + 1/3."))
        ('from fractions import Fraction\\nx = Fraction(1, 2)', 'x = x + Fraction(1, 3)', 'print(x)')
    """
    start, steps = plan.computation()
    shown = str(start.numerator) if start.denominator == 1 else f"{start.numerator}, {start.denominator}"
    first = f"from fractions import Fraction\nx = Fraction({shown})"
    return (first, *(f"x = x {_PY[op]} {_literal(b)}" for op, b in steps), "print(x)")


def program(plan: Plan) -> str:
    """:func:`program_steps` as one program.

    Example:
        >>> print(program(read_problem("What is 7 minus 3?")))
        from fractions import Fraction
        x = Fraction(7)
        x = x - 3
        print(x)
    """
    return "\n".join(program_steps(plan))


def translate(text: str) -> str | None:
    """The Python program that computes a problem's answer, or ``None`` when the text is not readable.

    Example:
        >>> translate("A number is divided by 2, then decreased by 454. The result is 5402. What is the number?")
        'from fractions import Fraction\\nx = Fraction(5402)\\nx = x + 454\\nx = x * 2\\nprint(x)'
    """
    plan = read_problem(text)
    return None if plan is None else program(plan)


# ---------------------------------------------------------------------------------------------- reading
def read_problem(text: str) -> Plan | None:
    """The plan a MathEpisodes problem text states, or ``None`` when the text is not one this reader knows.

    Reads ``Compute <expression>.``, ``Solve for x: <equation>.``, ``What is a <op> b?``, ``Start with a,
    <steps>. What is the result?``, ``A number is <steps>. The result is r. What is the number?`` and the
    ``objects``/``money`` word-problem stories. A trailing format line (``Reply with ANSWER: ...``) and tool
    instructions after a blank line are ignored.

    Example:
        >>> read_problem("Ana has $308. Then the money grows to 2 times as much. Then Ana earns $76. "
        ...              "How many dollars does Ana have now?").steps
        (('mul', Fraction(2, 1)), ('add', Fraction(76, 1)))
        >>> read_problem("") is None, read_problem("Compute 1 +.") is None
        (True, True)
    """
    if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
        return None
    problem = text.split("\n\n")[0].split("\nReply with")[0].strip()
    plan = None
    for reader in (_read_compute, _read_equation, _read_what_is, _read_start_with, _read_a_number, _read_story):
        plan = reader(problem)
        if plan is not None:
            break
    if plan is None or len(plan.steps) > MAX_STEPS:
        return None
    return plan


def _phrase_steps(body: str, table: dict[str, str]) -> tuple[Step, ...] | None:
    """Steps from ``"add 3, multiply by 2, then divide by 4"`` with ``table`` mapping the phrase to the op."""
    steps: list[Step] = []
    for raw in body.split(", "):
        phrase = raw.strip().removeprefix("then ").strip()
        match = re.fullmatch(rf"([a-z ]+?) ({_NUM})", phrase)
        if match is None or match.group(1) not in table:
            return None
        value = _number(match.group(2))
        if value is None:
            return None
        steps.append((table[match.group(1)], value))
    return tuple(steps) or None


_INFIX = {"plus": "add", "minus": "sub", "times": "mul", "divided by": "div"}
_STEP_WORDS = {"add": "add", "subtract": "sub", "multiply by": "mul", "divide by": "div"}
_UNKNOWN_WORDS = {"increased by": "add", "decreased by": "sub", "multiplied by": "mul", "divided by": "div"}


def _read_what_is(problem: str) -> Plan | None:
    match = re.fullmatch(rf"What is ({_NUM}) (plus|minus|times|divided by) ({_NUM})\?", problem)
    if match is None:
        return None
    a, b = _number(match.group(1)), _number(match.group(3))
    if a is None or b is None:
        return None
    return Plan(((_INFIX[match.group(2)], b),), start=a)


def _read_start_with(problem: str) -> Plan | None:
    match = re.fullmatch(rf"Start with ({_NUM}), (.+)\. What is the result\?", problem)
    if match is None:
        return None
    start, steps = _number(match.group(1)), _phrase_steps(match.group(2), _STEP_WORDS)
    if start is None or steps is None:
        return None
    return Plan(steps, start=start)


def _read_a_number(problem: str) -> Plan | None:
    match = re.fullmatch(rf"A number is (.+)\. The result is ({_NUM})\. What is the number\?", problem)
    if match is None:
        return None
    steps, result = _phrase_steps(match.group(1), _UNKNOWN_WORDS), _number(match.group(2))
    if steps is None or result is None:
        return None
    return Plan(steps, result=result)


# Word problems: one sentence per step. Each pattern's operation; the first sentence may also state the start.
_STORY_OPS = (
    ("div", re.compile(r"\bequally among\b|\bequal (?:piles|parts)\b")),
    ("mul", re.compile(r"\btimes as\b|\bin each\b|\bat \$\S+ each\b")),
    ("sub", re.compile(r"\bgives away\b|\bspends\b")),
    ("add", re.compile(r"\bgets\b.*\bmore\b|\bearns\b")),
)
_STORY_NUM = re.compile(rf"(?<![\w/.]){_NUM}(?![\w/])")


def _read_story(problem: str) -> Plan | None:
    sentences = [s for s in re.split(r"(?<=[.?!])\s+", problem) if s]
    if len(sentences) < 2 or not sentences[-1].endswith("?"):
        return None
    start: Fraction | None = None
    steps: list[Step] = []
    for sentence in sentences[:-1]:
        numbers = [_number(m.group().lstrip("$")) for m in _STORY_NUM.finditer(sentence.replace("$", " "))]
        if any(n is None for n in numbers):
            return None
        op = next((name for name, pattern in _STORY_OPS if pattern.search(sentence)), None)
        if start is None:  # the first sentence: "X has 5 apples." or a one-step problem "X has 5 ... and ..."
            if len(numbers) == 1 and op is None and re.search(r"\bhas\b", sentence):
                start = numbers[0]
                continue
            if len(numbers) == 2 and op is not None:
                start = numbers[0]
                steps.append((op, numbers[1]))  # type: ignore[arg-type]
                continue
            return None
        if len(numbers) != 1 or op is None:
            return None
        steps.append((op, numbers[0]))  # type: ignore[arg-type]
    if start is None or not steps or re.search(r"\d", sentences[-1]):
        return None
    return Plan(tuple(steps), start=start)


# Symbolic text: "Compute (7 + 3) × 2." and "Solve for x: 3(x + 2) = 24." A small recursive-descent parser
# builds a tree; a value problem's tree must be a chain along its left side (what render_expression writes),
# an equation's side with x a chain of operations around x with one number at each level.
_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d+)?(?:/\d+)?)|(?P<x>x)|(?P<op>[-+×÷*/()]))")
_SYMBOL_OP = {"+": "add", "-": "sub", "×": "mul", "*": "mul", "÷": "div", "/": "div"}
Tree = Any  # Fraction | "x" | (op, left, right)


class _Unreadable(ValueError):
    """The text is not an expression this reader accepts (internal)."""


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            if text[pos:].strip() == "":
                break
            raise _Unreadable(text[pos:])
        out.append(match.group("num") or match.group("x") or match.group("op"))
        pos = match.end()
    return out


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.i, self.depth = tokens, 0, 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise _Unreadable("unexpected end")
        self.i += 1
        return token

    def expression(self) -> Tree:
        tree = self.term()
        while self.peek() in ("+", "-"):
            op = _SYMBOL_OP[self.take()]
            tree = (op, tree, self.term())
        return tree

    def term(self) -> Tree:
        tree = self.unary()
        while True:
            token = self.peek()
            if token in ("×", "*", "÷", "/"):
                op = _SYMBOL_OP[self.take()]
                tree = (op, tree, self.unary())
            elif token in ("x", "("):  # implicit multiplication: 3x, 3(x + 2), (2/3)x
                tree = ("mul", tree, self.unary())
            else:
                return tree

    def unary(self) -> Tree:
        if self.peek() == "-":
            self.take()
            inner = self.unary()
            if isinstance(inner, Fraction):
                return -inner
            return ("mul", Fraction(-1), inner)
        return self.atom()

    def atom(self) -> Tree:
        token = self.take()
        if token == "(":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _Unreadable("nested too deeply")
            tree = self.expression()
            if self.take() != ")":
                raise _Unreadable("unbalanced parentheses")
            self.depth -= 1
            return tree
        if token == "x":
            return "x"
        value = _number(token) if token[0].isdigit() else None
        if value is None:
            raise _Unreadable(token)
        return value


def _parse(text: str) -> Tree:
    parser = _Parser(_tokens(text))
    tree = parser.expression()
    if parser.peek() is not None:
        raise _Unreadable("text after the expression")
    return tree


def _has_x(tree: Tree) -> bool:
    return tree == "x" if not isinstance(tree, tuple) else _has_x(tree[1]) or _has_x(tree[2])


def _value_chain(tree: Tree) -> tuple[Fraction, list[Step]]:
    if isinstance(tree, Fraction):
        return tree, []
    if not isinstance(tree, tuple) or not isinstance(tree[2], Fraction):
        raise _Unreadable("not a left-to-right chain")
    start, steps = _value_chain(tree[1])
    return start, [*steps, (tree[0], tree[2])]


def _unknown_chain(tree: Tree) -> list[Step]:
    """The steps applied to ``x``, innermost first (``3(x + 2)`` -> add 2, then multiply by 3)."""
    if tree == "x":
        return []
    if not isinstance(tree, tuple):
        raise _Unreadable("no unknown")
    op, left, right = tree
    if isinstance(right, Fraction) and _has_x(left):
        return [*_unknown_chain(left), (op, right)]
    if isinstance(left, Fraction) and _has_x(right) and op in ("add", "mul"):
        return [*_unknown_chain(right), (op, left)]
    raise _Unreadable("not one operation at a time around x")


def _read_compute(problem: str) -> Plan | None:
    if not problem.startswith("Compute ") or not problem.endswith("."):
        return None
    try:
        start, steps = _value_chain(_parse(problem.removeprefix("Compute ").removesuffix(".")))
    except (_Unreadable, RecursionError):
        return None
    return Plan(tuple(steps), start=start) if steps else None


def _read_equation(problem: str) -> Plan | None:
    if not problem.startswith("Solve for x: ") or not problem.endswith(".") or problem.count("=") != 1:
        return None
    left, right = problem.removeprefix("Solve for x: ").removesuffix(".").split("=")
    try:
        lhs, rhs = _parse(left), _parse(right)
        if _has_x(rhs) and not _has_x(lhs):
            lhs, rhs = rhs, lhs
        if not isinstance(rhs, Fraction):
            return None
        steps = _unknown_chain(lhs)
    except (_Unreadable, RecursionError):
        return None
    return Plan(tuple(steps), result=rhs)
