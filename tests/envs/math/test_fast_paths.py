"""The cheaper code paths of the math env give what the general ones give (issue #20, per-episode env cost).

Run: python -m pytest tests/envs/math/test_fast_paths.py -q
"""

from __future__ import annotations

import random
import re
from fractions import Fraction

import gymnasium
import numpy as np
import pytest
import sympy

import turnkit  # noqa: F401  (registers envs)
from turnkit.envs.math import generator, templates
from turnkit.envs.math.answers import answers_equal, format_value, parse_answer, values_equal
from turnkit.envs.math.generator import KINDS, SPLITS, generate
from turnkit.errors import EnvError


@pytest.mark.parametrize("items", [("add", "sub"), ("add", "sub", "mul"), ("add", "sub", "mul", "div"), [2, 3, 5, 7]])
def test_pick_draws_what_rng_choice_draws(items):
    for seed in range(200):
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        picked = [generator._pick(a, items) for _ in range(10)]
        chosen = [b.choice(items).item() for _ in range(10)]
        assert picked == chosen
        assert a.bit_generator.state == b.bit_generator.state


def test_format_value_of_rationals_matches_sympy_printing():
    rnd = random.Random(0)
    values = [sympy.S.Half, sympy.S.Zero, sympy.S.One, sympy.S.NegativeOne, sympy.Integer(10**50)]
    values += [sympy.Rational(rnd.randint(-(10**9), 10**9), rnd.randint(1, 10**5)) for _ in range(3000)]
    for v in values:
        assert format_value(v) == str(v)
        assert parse_answer(format_value(v)) == v
    assert format_value(parse_answer("(1/2, -3)")) == "(1/2, -3)"
    assert format_value(sympy.sqrt(2) / 2) == "sqrt(2)/2"


def test_values_equal_on_rationals_matches_the_general_comparison():
    rnd = random.Random(1)
    pairs = [(sympy.Rational(n, d), sympy.Rational(2 * n, 2 * d)) for n in range(-5, 6) for d in range(1, 5)]
    for _ in range(2000):
        pairs.append((sympy.Rational(rnd.randint(-20, 20), rnd.randint(1, 8)), sympy.Rational(rnd.randint(-20, 20), 4)))
    for a, b in pairs:
        assert values_equal(a, b) == ((a - b) == 0)


@pytest.mark.parametrize(
    ("candidate", "reference", "equal"),
    [
        ("0.5", "1/2", True),
        ("\\frac{1}{2}", "1/2", True),
        ("x = 1/2", "1/2", True),
        ("2.50", "5/2", True),
        ("10/20", "1/2", True),
        ("0.333", "1/3", False),
        ("-3", "3", False),
        ("sqrt(8)", "2\\sqrt{2}", True),
        ("1,000", "1000", True),
        ("11", "11", True),
        ("11.0", "11", True),
        ("12", "11", False),
        ("", "0", False),
    ],
)
def test_answer_check_is_as_strict_and_as_lenient_as_before(candidate, reference, equal):
    assert answers_equal(candidate, reference) is equal


def _mentions_by_regex(prompt: str, answer: Fraction) -> bool:
    token = re.escape(templates.fmt(abs(answer)))
    return re.search(rf"(?<![\w/.]){token}(?![\w/]|\.\d)", prompt) is not None


def test_mentions_agrees_with_its_regex_definition():
    rnd = random.Random(2)
    alphabet = "0123456789/. _xa-×÷$()?,١٢"
    for _ in range(20000):
        answer = Fraction(rnd.randint(-30, 30), rnd.choice([1, 1, 2, 3, 7]))
        token = templates.fmt(abs(answer))
        pieces = [
            rnd.choice([token, "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 3)))])
            for _ in range(rnd.randint(0, 5))
        ]
        prompt = "".join(pieces)
        assert generator._mentions(prompt, answer) == _mentions_by_regex(prompt, answer), (prompt, answer)
    for kind in KINDS:
        for split in SPLITS:
            rng = np.random.default_rng(0)
            for _ in range(30):
                task = generate(rng, split=split, difficulty=3, kinds=(kind,))
                for text in (task.privileged["answer"], *task.metadata["operands"]):
                    value = Fraction(text)
                    assert generator._mentions(task.prompt, value) == _mentions_by_regex(task.prompt, value)


def test_a_remembered_check_still_catches_a_wrong_answer():
    start, steps, prompt = Fraction(6), [("add", Fraction(5))], "What is 6 plus 5?"
    generator._verify("arithmetic", "words", start, steps, Fraction(11), Fraction(11), prompt)
    generator._verify("arithmetic", "words", start, steps, Fraction(11), Fraction(11), prompt)  # remembered
    for _ in range(2):  # a failed check is remembered as failed, and raises every time
        with pytest.raises(EnvError, match="generator bug"):
            generator._verify("arithmetic", "words", start, steps, Fraction(12), Fraction(12), prompt)


def test_the_reset_rng_state_is_a_private_copy():
    env = gymnasium.make("turnkit/MathEpisodes-v0")
    env.reset(seed=3)
    core = env.unwrapped
    saved = repr(core._reset_rng_state)
    core.np_random.random(100)  # advancing the generator must not reach the saved state
    assert repr(core._reset_rng_state) == saved
    assert core._reset_rng_state is not core.np_random.bit_generator.state
