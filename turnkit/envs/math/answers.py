r"""Final-answer extraction and mathematical-equivalence checking (pure functions, no ``eval``).

An agent states its answer as ``ANSWER: <value>`` (the last such line counts) or ``\boxed{<value>}``.
:func:`parse_answer` reads a value with a small recursive-descent parser that builds sympy objects
directly; nothing the agent writes is ever passed to ``eval``/``sympify``. It understands integers,
decimals (read exactly: ``2.50`` is ``5/2``), ``+ - * / ^``, ``×``, ``÷``, ``·``, parentheses, implicit
multiplication (``2x``, ``3(x+1)``), ``\frac{a}{b}``, ``\sqrt{..}``, ``\sqrt[n]{..}``, ``sqrt(..)``,
``pi``/``\pi``, single-letter variables, tuples ``(1, 2)``, thousands separators ``1,000``, a leading
``x =``, and trailing units (``42 apples``, ``5\text{ cm}``, ``30%``, ``$12``).

Pathological inputs are refused quickly instead of evaluated: answers over :data:`MAX_ANSWER_CHARS`
characters, number literals over :data:`MAX_LITERAL_DIGITS` digits, nesting deeper than
:data:`MAX_DEPTH`, and powers whose result would exceed :data:`MAX_RESULT_DIGITS` digits (``9**9**9``).

Two answers are equal when both parse and their values agree (exactly for rationals, to 1e-12 relative
error otherwise, at fixed sample points for expressions with variables); when the reference does not
parse (e.g. ``\text{Monday}``), normalised texts are compared.

Example:
    >>> answers_equal("\\boxed{1/2}", "0.5"), answers_equal("x = -3", "-3"), answers_equal("2.50", "5/2")
    (True, True, True)
    >>> answers_equal("1/3", "0.333")
    False
    >>> extract_answer("I think... ANSWER: 7.")
    '7'
    >>> parse_answer("9**9**9") is None
    True
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import sympy

MAX_ANSWER_CHARS = 200
"""Longest answer text that is parsed; longer answers are refused (never equal to a numeric reference)."""
MAX_LITERAL_DIGITS = 60
"""Longest number literal accepted."""
MAX_DEPTH = 40
"""Deepest nesting of parentheses/braces accepted."""
MAX_RESULT_DIGITS = 2000
"""Largest number of decimal digits a power may produce."""

_ANSWER_LINE = re.compile(r"ANSWER\s*:\s*(.*)", re.IGNORECASE)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_VAR_PREFIX = re.compile(r"^\s*[A-Za-z](?:_\{?\w+\}?)?\s*=(?!=)\s*")
_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_TEXT_CMD = re.compile(r"\\(?:text|textbf|mbox|mathrm|textrm|operatorname)\s*\{([^{}]*)\}")
_UNIT_TAIL = re.compile(r"[A-Za-z][A-Za-z\s]*\.?$")
_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|(?P<cmd>\\[A-Za-z]+)|(?P<name>[A-Za-z]+)|(?P<op>\*\*|[-+*/^(){}\[\],×÷·−]))"
)
_CONSTANTS = {"pi": sympy.pi, "\\pi": sympy.pi}
_SQRT = {"sqrt", "\\sqrt"}
_MUL_OPS = {"*", "×", "·", "\\cdot", "\\times"}
_DIV_OPS = {"/", "÷", "\\div"}
# Deterministic sample points for comparing expressions that contain variables.
_SAMPLE_POINTS = (sympy.Rational(7, 5), sympy.Rational(-13, 3), sympy.Rational(29, 11))


class _Refused(ValueError):
    """The text is not a value this parser accepts (internal; public functions return ``None``)."""


def extract_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{...}`` (or ``\fbox{...}``) in ``text``, braces balanced.

    Args:
        text: Any text, e.g. a MATH-style solution.

    Returns:
        The content, or ``None`` when there is no complete boxed group.

    Example:
        >>> extract_boxed("so $\\boxed{\\frac{1}{2}}$.")
        '\\frac{1}{2}'
        >>> extract_boxed("no box") is None
        True
    """
    box_starts = {m.end() - 1 for m in _BOXED.finditer(text)}  # positions of the boxes' "{"
    if not box_starts:
        return None
    best: tuple[int, int] | None = None
    stack: list[int] = []
    for i, ch in enumerate(text):  # one pass: O(len(text)) even for many unclosed boxes
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            start = stack.pop()
            if start in box_starts and (best is None or start > best[0]):
                best = (start, i)
    return None if best is None else text[best[0] + 1 : best[1]].strip()


def extract_answer(message: str) -> str | None:
    r"""The final answer an agent message states, or ``None`` for a reasoning-only message.

    The text after the last ``ANSWER:`` (case-insensitive) up to the end of its line counts; without one,
    the content of the last ``\boxed{...}``. A trailing full stop is dropped.

    Args:
        message: One agent turn.

    Returns:
        The answer text (possibly empty when ``ANSWER:`` is followed by nothing), or ``None``.

    Example:
        >>> extract_answer("Let me think.\nANSWER: \\boxed{12}"), extract_answer("so $\\boxed{3}$")
        ('\\boxed{12}', '3')
        >>> extract_answer("2 + 2 is 4") is None
        True
    """
    found = None
    for m in _ANSWER_LINE.finditer(message):
        found = m
    if found is not None:
        value = found.group(1).splitlines()[0] if found.group(1) else ""
    else:
        boxed = extract_boxed(message)
        if boxed is None:
            return None
        value = boxed
    value = value.strip()
    if value.endswith(".") and not value.endswith(".."):
        value = value[:-1].rstrip()
    return value


def normalize_text(text: str) -> str:
    r"""A canonical form of an answer's text, for comparing answers that are not values.

    Example:
        >>> normalize_text("$\\text{ Monday }$.")
        'monday'
    """
    s = _strip_wrappers(text.strip().rstrip("."))
    s = _TEXT_CMD.sub(lambda m: m.group(1), s)
    s = re.sub(r"\\[,;:! ]|\\left|\\right|\\displaystyle|\s+", "", s)
    return s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").lower().rstrip(".")


def parse_answer(text: str) -> sympy.Basic | None:
    r"""Read an answer as a sympy value without evaluating any code.

    Results are memoised per text (:data:`PARSE_CACHE_SIZE` most recent; sympy values are immutable):
    episodes repeat the same reference answers and many of the same replies, and parsing builds sympy
    objects at tens of microseconds each.

    Args:
        text: An answer such as ``"1/2"``, ``"\\frac{1}{2}"``, ``"x = 0.5"`` or ``"(1, 2)"``.

    Returns:
        A sympy expression (``sympy.Tuple`` for tuples), or ``None`` when the text is not a value this
        parser accepts (see the module docstring for the limits).

    Example:
        >>> parse_answer("\\frac{3}{6}"), parse_answer("2.50"), parse_answer("1,000")
        (1/2, 5/2, 1000)
        >>> parse_answer("2\\sqrt{2}"), parse_answer("(1, -2)")
        (2*sqrt(2), (1, -2))
        >>> parse_answer("import os") is None, parse_answer("1" * 500) is None
        (True, True)
    """
    if not isinstance(text, str) or len(text) > MAX_ANSWER_CHARS:
        return None
    return _parse_text(text)


PARSE_CACHE_SIZE = 1 << 16
"""How many distinct answer texts :func:`parse_answer` remembers."""


@functools.lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parse_text(text: str) -> sympy.Basic | None:
    s = _normalize_for_parse(text)
    if s is None:
        return None
    try:
        return _parse_checked(s)
    except _Refused:
        pass
    unit = _UNIT_TAIL.search(s)  # "42 apples": retry without a trailing word-only unit
    if unit is not None and re.search(r"\d", s[: unit.start()]):
        try:
            return _parse_checked(s[: unit.start()])
        except _Refused:
            return None
    return None


def values_equal(a: sympy.Basic, b: sympy.Basic) -> bool:
    r"""Whether two parsed values are mathematically equal.

    Example:
        >>> values_equal(parse_answer("sqrt(8)"), parse_answer("2\\sqrt{2}"))
        True
        >>> values_equal(parse_answer("2(x+1)"), parse_answer("2x + 2"))
        True
        >>> values_equal(parse_answer("x"), parse_answer("y"))
        False
    """
    if isinstance(a, sympy.Tuple) or isinstance(b, sympy.Tuple):
        if not (isinstance(a, sympy.Tuple) and isinstance(b, sympy.Tuple)) or len(a) != len(b):
            return False
        return all(values_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, sympy.Rational) and isinstance(b, sympy.Rational):  # what ``a - b == 0`` decides, ~5x faster
        return bool(a == b)
    if a.free_symbols != b.free_symbols:
        return False
    try:
        diff = a - b
        if diff.is_Rational:
            return bool(diff == 0)
        symbols = sorted(diff.free_symbols, key=str)
        n = len(_SAMPLE_POINTS)
        points = [{s: _SAMPLE_POINTS[(j + k) % n] + j for j, s in enumerate(symbols)} for k in range(n)]
        return all(_close(a.subs(point), b.subs(point)) for point in (points if symbols else [{}]))
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError):
        return False  # not comparable as numbers (e.g. zoo after substitution): not equal


def _close(a: sympy.Basic, b: sympy.Basic) -> bool:
    """``|a - b| <= 1e-12 * max(1, |a|, |b|)`` at 30 digits, with sympy floats (no overflow at 1e400)."""
    x, y = a.evalf(30), b.evalf(30)
    if x.free_symbols or y.free_symbols or x.has(sympy.zoo, sympy.nan) or y.has(sympy.zoo, sympy.nan):
        return False
    scale = sympy.Max(1, abs(x), abs(y))
    return bool(abs(x - y) <= sympy.Float("1e-12", 30) * scale)


def answers_equal(candidate: str, reference: str) -> bool:
    r"""Whether an agent's answer text matches a reference answer text.

    When the reference parses as a value, the candidate must parse to an equal value (:func:`values_equal`);
    otherwise normalised texts are compared (so ``"\text{ Monday }"`` matches ``"monday"``). Never raises
    on any ``str`` input.

    Example:
        >>> answers_equal("\\frac{1}{2}", "1/2"), answers_equal("-3", "3"), answers_equal("", "0")
        (True, False, False)
    """
    ref = parse_answer(reference)
    if ref is not None:  # a value: the candidate must be a value too
        cand = parse_answer(candidate)
        return cand is not None and values_equal(cand, ref)
    if len(candidate) > MAX_ANSWER_CHARS:
        return False
    norm = normalize_text(candidate)
    return bool(norm) and norm == normalize_text(reference)


def format_value(value: sympy.Basic) -> str:
    """The canonical text of a value: ``p/q`` for rationals, sympy's ``str`` otherwise.

    The result always parses back to the same value with :func:`parse_answer`.

    Example:
        >>> format_value(sympy.Rational(-6, 4)), format_value(sympy.Integer(12)), format_value(sympy.sqrt(2) / 2)
        ('-3/2', '12', 'sqrt(2)/2')
    """
    if isinstance(value, sympy.Rational):  # sympy's printer writes these the same way, at ~10x the cost
        return str(value.p) if value.q == 1 else f"{value.p}/{value.q}"
    if isinstance(value, sympy.Tuple):
        return "(" + ", ".join(format_value(v) for v in value) + ")"
    return str(value)


# ---------------------------------------------------------------------- preprocessing
def _strip_wrappers(text: str) -> str:
    s = text.strip()
    for _ in range(4):  # peel $..$, \(..\), \[..\], \boxed{..} in any order
        before = s
        s = s.strip().strip("$").strip()
        if (s.startswith("\\(") and s.endswith("\\)")) or (s.startswith("\\[") and s.endswith("\\]")):
            s = s[2:-2].strip()
        m = _BOXED.match(s)
        if m is not None and s.endswith("}"):
            inner = extract_boxed(s)
            if inner is not None and len(inner) == len(s) - m.end() - 1:
                s = inner
        if s == before:
            break
    return s


def _normalize_for_parse(text: str) -> str | None:
    s = _strip_wrappers(text)
    s = _TEXT_CMD.sub(lambda m: "" if re.fullmatch(r"[A-Za-z\s.]*", m.group(1)) else m.group(1), s)
    s = re.sub(r"\\[,;:! ]|\\left|\\right|\\displaystyle|\{,\}", "", s)
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?|\\%|%|\\\$|\$", "", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").strip()
    s = _VAR_PREFIX.sub("", s, count=1)
    if s.endswith(".") and not s.endswith(".."):
        s = s[:-1]
    s = s.strip()
    if _THOUSANDS.match(s):
        s = s.replace(",", "")
    return s or None


# ---------------------------------------------------------------------- the parser
@dataclass
class _Tok:
    kind: str  # "num", "cmd", "name", "op"
    text: str


def _tokenize(s: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    pos = 0
    while pos < len(s):
        if s[pos:].isspace():
            break
        m = _TOKEN.match(s, pos)
        if m is None:
            raise _Refused(f"unexpected character {s[pos]!r}")
        kind = m.lastgroup or "op"
        text = m.group(kind)
        if kind == "num" and len(text) > MAX_LITERAL_DIGITS:
            raise _Refused("number literal too long")
        if kind == "op":
            text = {"**": "^", "−": "-"}.get(text, text)
        tokens.append(_Tok(kind, text))
        pos = m.end()
    return tokens


def _parse_checked(s: str) -> sympy.Basic:
    try:
        value = _Parser(_tokenize(s)).parse()
    except _Refused:
        raise
    except (ValueError, TypeError, ArithmeticError, RecursionError) as exc:  # sympy refusing a value
        raise _Refused(f"{type(exc).__name__}: {exc}") from exc
    atoms = value.atoms(sympy.Number) if isinstance(value, sympy.Basic) else set()
    if value.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo) or any(isinstance(a, sympy.Float) for a in atoms):
        raise _Refused("not a finite exact value")
    return value


class _Parser:
    """Recursive descent over tokens, building sympy values with guarded powers."""

    def __init__(self, tokens: list[_Tok]) -> None:
        self.toks = tokens
        self.i = 0
        self.depth = 0

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, text: str | None = None) -> _Tok:
        tok = self.peek()
        if tok is None or (text is not None and tok.text != text):
            raise _Refused(f"expected {text or 'more input'}")
        self.i += 1
        return tok

    def parse(self) -> sympy.Basic:
        if not self.toks:
            raise _Refused("empty")
        items = self.expr_list()
        if self.peek() is not None:
            raise _Refused(f"unexpected {self.peek()!r}")
        return items[0] if len(items) == 1 else sympy.Tuple(*items)

    def expr_list(self) -> list[sympy.Basic]:
        items = [self.expr()]
        while (tok := self.peek()) is not None and tok.text == ",":
            self.take(",")
            items.append(self.expr())
        return items

    def expr(self) -> sympy.Basic:
        value = self.term()
        while (tok := self.peek()) is not None and tok.text in ("+", "-"):
            self.take()
            rhs = self.term()
            value = value + rhs if tok.text == "+" else value - rhs
        return value

    def term(self) -> sympy.Basic:
        value = self.unary()
        while (tok := self.peek()) is not None:
            if tok.text in _MUL_OPS:
                self.take()
                value = value * self.unary()
            elif tok.text in _DIV_OPS:
                self.take()
                rhs = self.unary()
                if rhs == 0:
                    raise _Refused("division by zero")
                value = value / rhs
            elif self.starts_atom(tok) and not (tok.kind == "num" and self.toks[self.i - 1].kind == "num"):
                value = value * self.power()  # implicit multiplication: 2x, 3(x+1), 2\sqrt{2}
            else:
                break
        return value

    def unary(self) -> sympy.Basic:
        tok = self.peek()
        if tok is not None and tok.text in ("-", "+"):
            self.take()
            inner = self.unary()
            return -inner if tok.text == "-" else inner
        return self.power()

    def power(self) -> sympy.Basic:
        base = self.atom()
        tok = self.peek()
        if tok is not None and tok.text == "^":
            self.take()
            return _safe_pow(base, self.unary())
        return base

    @staticmethod
    def starts_atom(tok: _Tok) -> bool:
        return tok.kind in ("num", "name") or tok.text in ("(", "{", "\\frac", "\\sqrt", "\\pi")

    def group(self, open_text: str, close_text: str) -> list[sympy.Basic]:
        self.take(open_text)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Refused("nested too deeply")
        items = self.expr_list()
        self.take(close_text)
        self.depth -= 1
        return items

    def braced(self) -> sympy.Basic:
        r"""A ``{...}`` argument, or a single digit/letter as in ``\frac12``."""
        tok = self.peek()
        if tok is not None and tok.text == "{":
            return _single(self.group("{", "}"))
        if tok is not None and tok.kind in ("num", "name"):
            self.take()
            head, rest = tok.text[0], tok.text[1:]
            if rest:  # \frac12 -> numerator "1", denominator "2"
                self.toks.insert(self.i, _Tok(tok.kind, rest))
            return _literal(_Tok(tok.kind, head))
        raise _Refused("expected an argument")

    def atom(self) -> sympy.Basic:
        tok = self.peek()
        if tok is None:
            raise _Refused("unexpected end")
        if tok.text == "(":
            items = self.group("(", ")")
            return items[0] if len(items) == 1 else sympy.Tuple(*items)
        if tok.text == "{":
            return _single(self.group("{", "}"))
        if tok.text == "\\frac":
            self.take()
            num, den = self.braced(), self.braced()
            if den == 0:
                raise _Refused("division by zero")
            return num / den
        if tok.text in _SQRT:
            self.take()
            index = sympy.Integer(2)
            nxt = self.peek()
            if tok.text == "\\sqrt" and nxt is not None and nxt.text == "[":
                index = _single(self.group("[", "]"))
                if not (index.is_Integer and 2 <= int(index) <= 16):
                    raise _Refused("unsupported root index")
            arg = _single(self.group("(", ")")) if nxt is not None and nxt.text == "(" else self.braced()
            return _safe_pow(arg, 1 / index)
        self.take()
        return _literal(tok)


def _single(items: list[sympy.Basic]) -> sympy.Basic:
    if len(items) != 1:
        raise _Refused("unexpected tuple")
    return items[0]


def _literal(tok: _Tok) -> sympy.Basic:
    if tok.kind == "num":
        mantissa, _, exponent = tok.text.lower().partition("e")
        if exponent and abs(int(exponent)) > MAX_RESULT_DIGITS:
            raise _Refused("exponent too large")
        return sympy.Rational(mantissa) * sympy.Integer(10) ** int(exponent or 0)
    if tok.text in _CONSTANTS:
        return _CONSTANTS[tok.text]
    if tok.kind == "name" and len(tok.text) == 1:
        return sympy.Symbol(tok.text)
    raise _Refused(f"unknown name {tok.text!r}")


def _digits(value: sympy.Basic) -> float:
    """Approximate number of decimal digits of ``|value|`` (or of ``1/|value|``)."""
    if value.is_Rational:
        p, q = abs(int(value.p)), int(value.q)
        return max(p.bit_length(), q.bit_length()) * 0.30103
    approx = abs(complex(value.evalf(15)))
    if approx == 0 or not math.isfinite(approx):
        return float("inf")
    return abs(math.log10(approx)) + 1


def _safe_pow(base: sympy.Basic, exp: sympy.Basic) -> sympy.Basic:
    """``base ** exp`` when the result stays small; :class:`_Refused` otherwise (e.g. ``9^(9^9)``)."""
    if isinstance(base, sympy.Tuple) or isinstance(exp, sympy.Tuple):
        raise _Refused("power of a tuple")
    if not exp.is_Rational:
        raise _Refused("only rational exponents are supported")
    p, q = abs(int(exp.p)), int(exp.q)
    if p > 1000 or q > 16:
        raise _Refused("exponent too large")
    if base.free_symbols:
        if p > 64:
            raise _Refused("exponent too large")
        return base**exp
    if base == 0 and exp.is_negative:
        raise _Refused("division by zero")
    digits = _digits(base) if base != 0 else 0.0
    if digits * p / q > MAX_RESULT_DIGITS or (q > 1 and digits > 40):
        raise _Refused("power too large")
    return base**exp
