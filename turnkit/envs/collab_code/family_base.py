"""The building blocks of the CollabCode task families: :class:`Param`, :class:`Family` and parsing helpers.

The families themselves live in :mod:`turnkit.envs.collab_code.families`.

Example:
    >>> grab = _grab(r"cutoff is (\\d+)")
    >>> grab("The cutoff is 60 points."), grab("no idea") is UNKNOWN
    (60, True)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

UNKNOWN: Any = object()
"""What :attr:`Param.parse` returns when a reply does not state the value (``None`` can be a real value)."""

Params = Mapping[str, Any]


@dataclass(frozen=True)
class Param:
    """One hidden parameter of a family.

    Attributes:
        name: The parameter name, e.g. ``"cutoff"``.
        keywords: Question words (lower case; plurals match too) that make the human reveal it.
        question: The generic question a clarifying agent asks about it.
        say: Value -> the one sentence the human says.
        parse: Reply text -> value, or :data:`UNKNOWN`.
        id_values: Values of the ``id`` and ``combo`` splits.
        ood_values: Values only the ``ood`` split uses (disjoint from ``id_values``).
        default: What someone who never asks would assume.
    """

    name: str
    keywords: tuple[str, ...]
    question: str
    say: Callable[[Any], str]
    parse: Callable[[str], Any]
    id_values: tuple[Any, ...]
    ood_values: tuple[Any, ...]
    default: Any


@dataclass(frozen=True)
class Family:
    """A function kind with hidden parameters.

    Attributes:
        name: Family name, e.g. ``"grade"`` (``Task.metadata["kind"]``).
        fn_names: Function names its tasks use (unique across families).
        args: The argument list of the signature, e.g. ``"first, last"``.
        requests: Vague requests (none of them states a hidden parameter).
        params: The hidden parameters.
        renderer: ``(fn_name, params) -> code``.
        tester: ``(rng, fn_name, params) -> 10 test call expressions``.
        combo: The two parameters whose combinations are partly held out.
        held_out: ``combo`` value pairs that only the ``combo`` split uses.
    """

    name: str
    fn_names: tuple[str, ...]
    args: str
    requests: tuple[str, ...]
    params: tuple[Param, ...]
    renderer: Callable[[str, Params], str]
    tester: Callable[[np.random.Generator, str, Params], list[str]]
    combo: tuple[str, str]
    held_out: tuple[tuple[Any, Any], ...]

    def param(self, name: str) -> Param:
        """The parameter called ``name`` (KeyError otherwise)."""
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"family {self.name!r} has no parameter {name!r}")

    def defaults(self) -> dict[str, Any]:
        """Every parameter at its default (what an agent that never asks assumes).

        Example:
            >>> from turnkit.envs.collab_code.families import FAMILIES
            >>> FAMILIES["late_fee"].defaults()
            {'grace': 0, 'per_day': 1.0, 'cap': None}
        """
        return {p.name: p.default for p in self.params}

    def render(self, fn_name: str, params: Params) -> str:
        """The reference code for these parameter values."""
        return self.renderer(fn_name, params)

    def make_tests(self, rng: np.random.Generator, fn_name: str, params: Params) -> list[str]:
        """Ten test call expressions that probe the parameters' edge cases."""
        return self.tester(rng, fn_name, params)


# ---------------------------------------------------------------------------------------------- helpers
_NUM = r"(-?\d+(?:\.\d+)?)"


def _grab(pattern: str, convert: Callable[[str], Any] = int) -> Callable[[str], Any]:
    regex = re.compile(pattern, re.IGNORECASE)

    def parse(text: str) -> Any:
        m = regex.search(text)
        return convert(m.group(1)) if m else UNKNOWN

    return parse


def _choose(table: Mapping[str, Any], *, case: bool = False) -> Callable[[str], Any]:
    """Parse by the first phrase of ``table`` found in the reply (order matters: specific phrases first)."""

    def norm(text: str) -> str:
        return text if case else text.lower()

    def parse(text: str) -> Any:
        low = norm(text)
        return next((v for phrase, v in table.items() if norm(phrase) in low), UNKNOWN)

    return parse


def _either(*parsers: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        return next((v for v in (p(text) for p in parsers) if v is not UNKNOWN), UNKNOWN)

    return parse


def _say_digits(v: int) -> str:
    return "Round the result to a whole number." if v == 0 else f"Round the result to {v} decimal places."


_parse_digits = _either(_grab(r"round the result to (\d+) decimal"), _choose({"to a whole number": 0}))
_ROUND_WORDS = ("round", "rounded", "rounding", "decimal", "decimal places", "digits", "precision")


def _round_expr(expr: str, digits: int) -> str:
    return f"round({expr})" if digits == 0 else f"round({expr}, {digits})"


def _distinct_ints(rng: np.random.Generator, lo: int, hi: int, n: int, exclude: set[int]) -> list[int]:
    pool = [v for v in range(lo, hi + 1) if v not in exclude]
    picked = rng.choice(len(pool), size=min(n, len(pool)), replace=False)
    return [pool[int(i)] for i in picked]


def _shuffled(rng: np.random.Generator, items: list[str]) -> list[str]:
    order = rng.permutation(len(items))
    return [items[int(i)] for i in order]
