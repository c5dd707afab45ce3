"""The exact evaluator behind the generator's answer check."""

from fractions import Fraction

import pytest

from turnkit.envs.math.exact import evaluate, is_affine_root
from turnkit.errors import EnvError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7", Fraction(7)),
        ("((3) + (1/2)) / (3)", Fraction(7, 6)),
        ("((9) - (12)) * (-2)", Fraction(6)),
        ("+(5) - -(5)", Fraction(10)),
        ("(1/3) + (1/6)", Fraction(1, 2)),
    ],
)
def test_evaluates_exactly(text, expected):
    value = evaluate(text)
    assert value == expected and isinstance(value, Fraction)


def test_binds_x():
    assert evaluate("((x) * (3)) + (-2/5)", x=Fraction(1, 5)) == Fraction(1, 5)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("2 ** 3", "unsupported syntax Pow"),
        ("2.5 + 1", "unsupported syntax Constant"),
        ("__import__('os')", "unsupported syntax Call"),
        ("x + 1", "unsupported syntax Name"),  # no x bound
        ("(1) / ((2) - (2))", "divides by zero"),
        ("(1 +", "not valid syntax"),
    ],
)
def test_refuses_anything_else_with_the_reason(text, problem):
    with pytest.raises(EnvError, match=problem.replace("(", r"\(")):
        evaluate(text)


def test_affine_root():
    assert is_affine_root("((x) - (4)) / (2)", root=Fraction(10), value=Fraction(3))
    assert not is_affine_root("((x) - (4)) / (2)", root=Fraction(11), value=Fraction(3))  # wrong root
    assert not is_affine_root("(x) * (x)", root=Fraction(2), value=Fraction(4))  # not affine
    assert not is_affine_root("((x) * (0)) + (4)", root=Fraction(2), value=Fraction(4))  # constant
