"""The procedural task families: small functions whose behaviour hinges on hidden parameters.

Each :class:`Family` is a function kind (pass/fail grading, discounts, unit conversion, name formatting,
leaderboards, late fees, averages). Its :class:`Param` list holds the hidden parameters a vague request
leaves out (a cutoff and whether it is inclusive, a rounding rule, an order and a tie-break, an output
format, a default for empty input, ...). For every parameter the family knows:

* how the simulated human *says* a value (one sentence) and which question keywords make it say it;
* the generic *question* a clarifying agent asks, and how to *parse* the value back from the sentence
  (``param.parse(param.say(v)) == v`` for every value, tested);
* its in-distribution values, its out-of-distribution values and the value a person who never asks would
  guess (``default``);

and the family renders the reference code for any parameter values (:meth:`Family.render`) and draws
edge-case test calls (:meth:`Family.make_tests`). Each family also names a pair of parameters whose
combinations are partly held out of the ``id`` split for the ``combo`` split.

Enum-like values are code words with underscores (``"to_cents"``, ``"by_name"``) so that a privileged value
never coincides with ordinary words of the conversation (see the leak section of ``docs/envs/collab_code.md``).

Example:
    >>> fam = FAMILIES["grade"]
    >>> print(fam.render("exam_result", {"cutoff": 60, "inclusive": False, "labels": "true_false"}))
    def exam_result(score):
        if score > 60:
            return True
        return False
    >>> p = fam.param("cutoff")
    >>> p.say(60), p.parse(p.say(60))
    ('The passing cutoff is 60 points.', 60)
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from turnkit.envs.collab_code.family_base import (
    _ROUND_WORDS,
    UNKNOWN,
    Family,
    Param,
    Params,
    _choose,
    _distinct_ints,
    _either,
    _grab,
    _parse_digits,
    _round_expr,
    _say_digits,
    _shuffled,
)

# ---------------------------------------------------------------------------------------------- grade
_LABELS = {"pass_fail": ("pass", "fail"), "PASS_FAIL": ("PASS", "FAIL"), "true_false": (True, False), "P_F": ("P", "F")}
_SAY_LABELS = {
    "pass_fail": "Return the string 'pass' or 'fail'.",
    "PASS_FAIL": "Return the string 'PASS' or 'FAIL', in capital letters.",
    "true_false": "Return True for a pass and False for a fail.",
    "P_F": "Return the single letter 'P' for a pass and 'F' for a fail.",
}


def _render_grade(fn: str, p: Params) -> str:
    op = ">=" if p["inclusive"] else ">"
    yes, no = _LABELS[p["labels"]]
    return f"def {fn}(score):\n    if score {op} {p['cutoff']}:\n        return {yes!r}\n    return {no!r}"


def _tests_grade(rng: np.random.Generator, fn: str, p: Params) -> list[str]:
    c = p["cutoff"]
    scores = [c - 1, c, c + 1, 0, 100]
    scores += _distinct_ints(rng, 0, 100, 5, set(scores))
    return _shuffled(rng, [f"{fn}({s})" for s in scores])


GRADE = Family(
    name="grade",
    fn_names=("exam_result", "passed_exam", "grade_outcome"),
    args="score",
    requests=(
        "I need a function that tells me whether a student passed an exam, given their score.",
        "Can you write a function that turns an exam score into a pass or fail result?",
        "Please write a function to decide if an exam score is a pass.",
    ),
    params=(
        Param(
            "cutoff",
            ("cutoff", "threshold", "pass mark", "passing score", "minimum score"),
            "What is the cutoff score for passing, and does a score exactly at the cutoff pass?",
            lambda v: f"The passing cutoff is {v} points.",
            _grab(r"cutoff is (\d+) points"),
            (50, 55, 60, 65, 70),
            (35, 40, 80, 85, 90),
            50,
        ),
        Param(
            "inclusive",
            ("exactly", "equal to", "inclusive", "exclusive", "boundary"),
            "Does a score exactly equal to the cutoff count as a pass?",
            lambda v: (
                "A score exactly at the cutoff counts as a pass."
                if v
                else "A score exactly at the cutoff does not pass; it has to be higher."
            ),
            _choose({"exactly at the cutoff does not pass": False, "exactly at the cutoff counts": True}),
            (True, False),
            (),
            True,
        ),
        Param(
            "labels",
            ("return", "output", "label", "result look"),
            "What exactly should the function return for a pass and for a fail?",
            lambda v: _SAY_LABELS[v],
            _choose(
                {"True for a pass": "true_false", "'PASS'": "PASS_FAIL", "'P' for": "P_F", "'pass'": "pass_fail"},
                case=True,
            ),
            ("pass_fail", "PASS_FAIL", "true_false"),
            ("P_F",),
            "pass_fail",
        ),
    ),
    renderer=_render_grade,
    tester=_tests_grade,
    combo=("inclusive", "labels"),
    held_out=((False, "true_false"),),
)


# ---------------------------------------------------------------------------------------------- price
def _render_price(fn: str, p: Params) -> str:
    op = ">=" if p["inclusive"] else ">"
    digits = 2 if p["rounding"] == "to_cents" else 0
    return (
        f"def {fn}(amount):\n    if amount {op} {p['minimum']}:\n"
        f"        amount = amount * (1 - {p['percent']} / 100)\n    return {_round_expr('amount', digits)}"
    )


def _tests_price(rng: np.random.Generator, fn: str, p: Params) -> list[str]:
    m = p["minimum"]
    amounts: list[float] = [m - 1, m, m + 1, 0]
    while len(amounts) < 10:
        a = round(float(rng.uniform(1, 3 * m)), 2)
        if a not in amounts:
            amounts.append(a)
    return _shuffled(rng, [f"{fn}({a!r})" for a in amounts])


PRICE = Family(
    name="price",
    fn_names=("final_price", "checkout_total", "price_after_discount"),
    args="amount",
    requests=(
        "I need a function that works out what a customer pays for an order after our discount.",
        "Write a function that applies our store discount to an order amount.",
        "Can you make a function that returns the price to pay once the discount is taken off?",
    ),
    params=(
        Param(
            "percent",
            ("percent", "percentage", "rate", "how big", "how much off"),
            "How big is the discount, in percent?",
            lambda v: f"The discount is {v} percent.",
            _grab(r"discount is (\d+) percent"),
            (5, 10, 15, 20),
            (30, 40, 50),
            10,
        ),
        Param(
            "minimum",
            ("minimum", "threshold", "start", "qualify", "at least", "order size"),
            "From what order amount does the discount start, and does an order of exactly that amount get it?",
            lambda v: f"The discount starts at orders of {v} dollars.",
            _grab(r"starts at orders of (\d+) dollars"),
            (50, 100, 150),
            (250, 500),
            100,
        ),
        Param(
            "inclusive",
            ("exactly", "equal to", "inclusive", "exclusive", "boundary"),
            "Does an order of exactly the minimum amount get the discount?",
            lambda v: (
                "An order of exactly that amount gets the discount."
                if v
                else "An order of exactly that amount does not get the discount; it has to be more."
            ),
            _choose({"does not get the discount": False, "exactly that amount gets the discount": True}),
            (True, False),
            (),
            True,
        ),
        Param(
            "rounding",
            (*_ROUND_WORDS, "cents"),
            "How should the final price be rounded?",
            lambda v: (
                "Round the price to cents (2 decimal places)."
                if v == "to_cents"
                else "Round the price to whole dollars."
            ),
            _choose({"to cents": "to_cents", "whole dollars": "to_dollars"}),
            ("to_cents", "to_dollars"),
            (),
            "to_cents",
        ),
    ),
    renderer=_render_price,
    tester=_tests_price,
    combo=("inclusive", "rounding"),
    held_out=((False, "to_dollars"),),
)


# ---------------------------------------------------------------------------------------------- length
UNIT_NAMES = {
    "in": "inches",
    "cm": "centimeters",
    "ft": "feet",
    "m": "meters",
    "mi": "miles",
    "km": "kilometers",
    "yd": "yards",
    "mm": "millimeters",
}
"""Unit codes and the words the human uses for them."""
CONVERSIONS = {
    "in_cm": ("*", 2.54),
    "cm_in": ("/", 2.54),
    "ft_m": ("*", 0.3048),
    "m_ft": ("/", 0.3048),
    "mi_km": ("*", 1.609344),
    "km_mi": ("/", 1.609344),
    "yd_m": ("*", 0.9144),
    "m_yd": ("/", 0.9144),
    "in_mm": ("*", 25.4),
    "mm_in": ("/", 25.4),
}
"""Unit pair -> (operator, factor) of the conversion (public knowledge a coder has)."""
_UNIT_CODE = {name: code for code, name in UNIT_NAMES.items()}


def _say_units(v: str) -> str:
    a, b = v.split("_")
    return f"The input is in {UNIT_NAMES[a]} and the result should be in {UNIT_NAMES[b]}."


def _parse_units(text: str) -> Any:
    m = re.search(r"input is in (\w+) and the result should be in (\w+)", text, re.IGNORECASE)
    if not m or m.group(1).lower() not in _UNIT_CODE or m.group(2).lower() not in _UNIT_CODE:
        return UNKNOWN
    code = f"{_UNIT_CODE[m.group(1).lower()]}_{_UNIT_CODE[m.group(2).lower()]}"
    return code if code in CONVERSIONS else UNKNOWN


def _render_length(fn: str, p: Params) -> str:
    op, factor = CONVERSIONS[p["units"]]
    guard = ""
    if p["negative"] == "raise_error":
        guard = "    if value < 0:\n        raise ValueError('negative length')\n"
    return f"def {fn}(value):\n{guard}    return {_round_expr(f'value {op} {factor}', p['digits'])}"


def _tests_length(rng: np.random.Generator, fn: str, p: Params) -> list[str]:
    values: list[float] = [0, 1, -round(float(rng.uniform(0.5, 50)), 1)]
    while len(values) < 10:
        v = round(float(rng.uniform(0.5, 200)), int(rng.integers(0, 3)))
        if v not in values:
            values.append(v)
    return _shuffled(rng, [f"{fn}({v!r})" for v in values])


LENGTH = Family(
    name="length",
    fn_names=("convert_length", "convert_distance", "length_converter"),
    args="value",
    requests=(
        "I need a function that converts lengths from one unit to another for my app.",
        "Write a function that converts a distance measurement to the units I need.",
        "Can you write a length conversion function for me?",
    ),
    params=(
        Param(
            "units",
            ("unit", "which unit", "measured", "inches", "centimeters", "feet", "meters", "miles", "kilometers"),
            "Which unit is the input in, and which unit should the result be in?",
            _say_units,
            _parse_units,
            ("in_cm", "cm_in", "ft_m", "m_ft", "mi_km", "km_mi"),
            ("yd_m", "m_yd", "in_mm", "mm_in"),
            "in_cm",
        ),
        Param(
            "digits",
            _ROUND_WORDS,
            "How many decimal places should the result be rounded to?",
            _say_digits,
            _parse_digits,
            (1, 2),
            (0, 3),
            2,
        ),
        Param(
            "negative",
            ("negative", "below zero", "less than zero", "invalid", "error"),
            "What should happen with negative lengths?",
            lambda v: (
                "Negative lengths are invalid and should raise a ValueError."
                if v == "raise_error"
                else "Negative lengths are fine; convert them like any other value."
            ),
            _choose({"should raise a ValueError": "raise_error", "negative lengths are fine": "convert_negative"}),
            ("convert_negative", "raise_error"),
            (),
            "convert_negative",
        ),
    ),
    renderer=_render_length,
    tester=_tests_length,
    combo=("units", "negative"),
    held_out=(("ft_m", "raise_error"), ("km_mi", "raise_error")),
)


# ---------------------------------------------------------------------------------------------- name
_CASE_CALL = {"case_capitalize": ".capitalize()", "case_upper": ".upper()", "case_lower": ".lower()", "case_keep": ""}
_SAY_CASE = {
    "case_capitalize": "Each name should be capitalized: first letter upper case, the rest lower case.",
    "case_upper": "The whole name should be in capital letters.",
    "case_lower": "The whole name should be in lower case letters.",
    "case_keep": "Keep the letters exactly as they were typed.",
}
_FIRSTS = ("ada", "Grace", "ALAN", "linus", "Margaret", "tim", "Barbara", "KEN", "edsger", "Frances", "john")
_LASTS = ("lovelace", "Hopper", "TURING", "torvalds", "Hamilton", "mcCarthy", "Liskov", "THOMPSON", "dijkstra", "Allen")


def _render_name(fn: str, p: Params) -> str:
    lines = [f"def {fn}(first, last):"]
    if p["strip"]:
        lines += ["    first = first.strip()", "    last = last.strip()"]
    call = _CASE_CALL[p["case"]]
    if call:
        lines += [f"    first = first{call}", f"    last = last{call}"]
    expr = "first + ' ' + last" if p["order"] == "first_last" else "last + ', ' + first"
    return "\n".join([*lines, f"    return {expr}"])


def _tests_name(rng: np.random.Generator, fn: str, p: Params) -> list[str]:
    out = []
    for i in range(10):
        first = _FIRSTS[int(rng.integers(len(_FIRSTS)))]
        last = _LASTS[int(rng.integers(len(_LASTS)))]
        if i % 2 == 0:  # half the calls have stray spaces
            first, last = " " * int(rng.integers(1, 3)) + first, last + " " * int(rng.integers(1, 3))
        out.append(f"{fn}({first!r}, {last!r})")
    return _shuffled(rng, out)


NAME = Family(
    name="name",
    fn_names=("format_name", "badge_name", "display_name"),
    args="first, last",
    requests=(
        "Write a function that formats a person's name for our name badges.",
        "I need a function that builds the display name from a first and a last name.",
        "Can you write something that puts a first and last name together nicely?",
    ),
    params=(
        Param(
            "order",
            ("order", "comes first", "which name", "separated", "separator"),
            "In what order should the names appear, and how are they separated?",
            lambda v: (
                "The first name comes first, then the last name, separated by a space."
                if v == "first_last"
                else "The last name comes first, then a comma and a space, then the first name."
            ),
            _choose({"first name comes first": "first_last", "last name comes first": "last_first"}),
            ("first_last", "last_first"),
            (),
            "first_last",
        ),
        Param(
            "case",
            ("case", "capital", "capitalized", "uppercase", "lowercase", "letters"),
            "Should the letters be changed to upper case, lower case or capitalized, or kept as typed?",
            lambda v: _SAY_CASE[v],
            _choose({v: k for k, v in _SAY_CASE.items()}),
            ("case_capitalize", "case_upper", "case_keep"),
            ("case_lower",),
            "case_keep",
        ),
        Param(
            "strip",
            ("space", "spaces", "whitespace", "trim", "strip", "blank"),
            "What should happen to extra spaces around the names?",
            lambda v: (
                "Extra spaces around each name should be removed."
                if v
                else "Keep any spaces around the names exactly as given."
            ),
            _choose({"should be removed": True, "keep any spaces": False}),
            (True, False),
            (),
            False,
        ),
    ),
    renderer=_render_name,
    tester=_tests_name,
    combo=("order", "case"),
    held_out=(("last_first", "case_upper"),),
)


# ---------------------------------------------------------------------------------------------- leaderboard
_SAY_TIES = {
    "by_name": "Players with the same score are ordered alphabetically by name.",
    "by_input": "Players with the same score keep their order from the input list.",
    "by_name_reverse": "Players with the same score are ordered in reverse alphabetical order.",
}
_PLAYERS = ("ana", "ben", "cai", "dee", "eli", "fay", "gus", "hal", "ivy", "jon", "kim", "lou", "max")


def _render_board(fn: str, p: Params) -> str:
    lines = [f"def {fn}(scores):", "    ranked = list(scores)"]
    if p["ties"] != "by_input":
        rev = ", reverse=True" if p["ties"] == "by_name_reverse" else ""
        lines.append(f"    ranked = sorted(ranked, key=lambda pair: pair[0]{rev})")
    key = "-pair[1]" if p["direction"] == "high_first" else "pair[1]"
    lines.append(f"    ranked = sorted(ranked, key=lambda pair: {key})")
    if p["top"] is not None:
        lines.append(f"    ranked = ranked[:{p['top']}]")
    if p["output"] == "names_only":
        lines.append("    return [pair[0] for pair in ranked]")
    else:
        lines.append("    return [(pair[0], pair[1]) for pair in ranked]")
    return "\n".join(lines)


def _tests_board(rng: np.random.Generator, fn: str, p: Params) -> list[str]:
    out = [f"{fn}([])", f"{fn}([('zed', 3)])"]
    while len(out) < 10:
        n = int(rng.integers(4, 13))
        names = [_PLAYERS[int(i)] for i in rng.choice(len(_PLAYERS), size=n, replace=False)]
        scores = [int(s) for s in rng.integers(0, 6, size=n)]
        pairs = list(zip(names, scores, strict=True))
        out.append(f"{fn}({pairs!r})")
    return _shuffled(rng, out)


def _say_top(v: int | None) -> str:
    return "Return every player." if v is None else f"Return only the top {v} players."


BOARD = Family(
    name="leaderboard",
    fn_names=("leaderboard", "rank_players", "ranking_table"),
    args="scores",
    requests=(
        "I need a function that builds a leaderboard from a list of (name, score) pairs.",
        "Write a function that ranks players given their (name, score) results.",
        "Can you write a function to rank a list of (name, score) tuples?",
    ),
    params=(
        Param(
            "direction",
            ("higher", "lower", "highest", "lowest", "ascending", "descending", "sort"),
            "Should higher or lower scores come first?",
            lambda v: "Higher scores rank first." if v == "high_first" else "Lower scores rank first, like in golf.",
            _choose({"higher scores rank first": "high_first", "lower scores rank first": "low_first"}),
            ("high_first", "low_first"),
            (),
            "high_first",
        ),
        Param(
            "ties",
            ("tie", "ties", "tied", "same score", "equal scores"),
            "How should players with the same score be ordered?",
            lambda v: _SAY_TIES[v],
            _choose({v: k for k, v in _SAY_TIES.items()}),
            ("by_name", "by_input"),
            ("by_name_reverse",),
            "by_input",
        ),
        Param(
            "top",
            ("how many", "top", "every player", "limit", "include"),
            "How many players should the leaderboard include?",
            _say_top,
            _either(_grab(r"only the top (\d+) players"), _choose({"every player": None})),
            (3, 5, None),
            (1, 10),
            None,
        ),
        Param(
            "output",
            ("only the names", "pairs", "output", "hold"),
            "Should the result hold only the names, or the (name, score) pairs?",
            lambda v: (
                "Return just the names, as a list of strings."
                if v == "names_only"
                else "Return the (name, score) pairs, as a list of tuples."
            ),
            _choose({"just the names": "names_only", "(name, score) pairs": "name_score_pairs"}),
            ("names_only", "name_score_pairs"),
            (),
            "names_only",
        ),
    ),
    renderer=_render_board,
    tester=_tests_board,
    combo=("direction", "ties"),
    held_out=(("low_first", "by_name"),),
)


# ---------------------------------------------------------------------------------------------- late fee
def _say_grace(v: int) -> str:
    if v == 0:
        return "There is no grace period; every late day is charged."
    return "The first late day is free." if v == 1 else f"The first {v} late days are free."


def _render_fee(fn: str, p: Params) -> str:
    lines = [
        f"def {fn}(days_late):",
        f"    charged = max(0, days_late - {p['grace']})",
        f"    fee = charged * {p['per_day']!r}",
    ]
    if p["cap"] is not None:
        lines.append(f"    fee = min(fee, {p['cap']!r})")
    return "\n".join([*lines, "    return round(fee, 2)"])


def _tests_fee(rng: np.random.Generator, fn: str, p: Params) -> list[str]:
    g, cap, rate = p["grace"], p["cap"], p["per_day"]
    top = g + (math.ceil(cap / rate) + 10 if cap is not None else 30)
    days = [0, g, g + 1, top]
    days += _distinct_ints(rng, 1, top + 10, 6, set(days))
    return _shuffled(rng, [f"{fn}({d})" for d in days])


LATE_FEE = Family(
    name="late_fee",
    fn_names=("late_fee", "overdue_fine", "library_fine"),
    args="days_late",
    requests=(
        "Can you write a function that computes the fine for a library book returned late?",
        "I need a function that tells borrowers how much they owe for a late return.",
        "Write a function for our library's late fees.",
    ),
    params=(
        Param(
            "grace",
            ("grace", "free", "grace period", "before charging"),
            "Are the first few late days free (a grace period)?",
            _say_grace,
            _either(
                _grab(r"first (\d+) late days are free"),
                _choose({"first late day is free": 1, "no grace period": 0}),
            ),
            (0, 1, 2, 3),
            (5, 7),
            0,
        ),
        Param(
            "per_day",
            ("per day", "each day", "each late day", "daily", "cost", "charge"),
            "How much does each late day cost?",
            lambda v: f"Each charged day costs {v:.2f} dollars.",
            _grab(r"costs (\d+\.\d+) dollars", float),
            (0.25, 0.5, 1.0),
            (0.1, 2.0),
            1.0,
        ),
        Param(
            "cap",
            ("maximum", "max", "cap", "capped", "limit", "ceiling", "most"),
            "Is there a maximum fine?",
            lambda v: "There is no maximum fine." if v is None else f"The fine is capped at {v:.2f} dollars.",
            _either(_grab(r"capped at (\d+\.\d+) dollars", float), _choose({"no maximum fine": None})),
            (None, 5.0, 10.0),
            (2.0, 25.0),
            None,
        ),
    ),
    renderer=_render_fee,
    tester=_tests_fee,
    combo=("grace", "cap"),
    held_out=((3, None), (0, 5.0)),
)


# ---------------------------------------------------------------------------------------------- average
_SAY_EMPTY = {
    "return_zero": "For an empty list, return 0.",
    "return_none": "For an empty list, return None.",
    "raise_error": "An empty list is invalid and should raise a ValueError.",
}
_EMPTY_BODY = {"return_zero": "return 0", "return_none": "return None", "raise_error": "raise ValueError('no values')"}


def _render_average(fn: str, p: Params) -> str:
    lines = [f"def {fn}(values):", "    if not values:", f"        {_EMPTY_BODY[p['empty']]}"]
    if p["drop_lowest"]:
        lines += ["    if len(values) >= 2:", "        values = sorted(values)[1:]"]
    return "\n".join([*lines, f"    return {_round_expr('sum(values) / len(values)', p['digits'])}"])


def _tests_average(rng: np.random.Generator, fn: str, p: Params) -> list[str]:
    out = [f"{fn}([])", f"{fn}([{int(rng.integers(1, 11))}])"]
    while len(out) < 10:
        n = int(rng.integers(2, 8))
        out.append(f"{fn}({[int(v) for v in rng.integers(1, 11, size=n)]!r})")
    return _shuffled(rng, out)


AVERAGE = Family(
    name="average",
    fn_names=("average_rating", "mean_score", "average_of"),
    args="values",
    requests=(
        "I need a function that averages a list of ratings.",
        "Write a function that returns the average of a list of scores.",
        "Can you write a function to compute the mean rating of a product?",
    ),
    params=(
        Param(
            "empty",
            ("empty", "no ratings", "no values", "nothing", "missing"),
            "What should the function return for an empty list?",
            lambda v: _SAY_EMPTY[v],
            _choose({v: k for k, v in _SAY_EMPTY.items()}),
            ("return_zero", "return_none"),
            ("raise_error",),
            "return_zero",
        ),
        Param(
            "drop_lowest",
            ("drop", "dropped", "lowest", "ignore", "ignored", "exclude", "outlier"),
            "Should any ratings be dropped or ignored before averaging?",
            lambda v: (
                "Drop the single lowest value before averaging, when there are at least two."
                if v
                else "Every value counts; nothing is dropped."
            ),
            _choose({"drop the single lowest": True, "nothing is dropped": False}),
            (False, True),
            (),
            False,
        ),
        Param(
            "digits",
            _ROUND_WORDS,
            "How many decimal places should the average be rounded to?",
            _say_digits,
            _parse_digits,
            (1, 2),
            (0, 3),
            2,
        ),
    ),
    renderer=_render_average,
    tester=_tests_average,
    combo=("empty", "drop_lowest"),
    held_out=(("return_none", True),),
)

FAMILIES: dict[str, Family] = {f.name: f for f in (GRADE, PRICE, LENGTH, NAME, BOARD, LATE_FEE, AVERAGE)}
"""Every family by name."""

FAMILY_OF_FUNCTION: dict[str, Family] = {fn: f for f in FAMILIES.values() for fn in f.fn_names}
"""Function name -> family (function names are unique across families)."""
