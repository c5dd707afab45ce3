"""Procedural math tasks: python -m pytest tests/envs/math/test_generator.py -q"""

import functools
import itertools
import re
from fractions import Fraction

import numpy as np
import pytest

from turnkit.envs.math import generator
from turnkit.envs.math.answers import answers_equal, parse_answer
from turnkit.envs.math.generator import HELD_OUT, KINDS, LEVELS, STYLES, generate, ranges_for
from turnkit.errors import ConfigError, EnvError

DIFFICULTIES = sorted(LEVELS)
N = 60  # tasks per (split, difficulty, kind) cell


@functools.cache
def _tasks(split, difficulty, kind, n=N):
    return tuple(
        generate(np.random.default_rng(s), split=split, difficulty=difficulty, kinds=(kind,)) for s in range(n)
    )


def _pairs(task):
    return {(op, task.metadata["style"]) for op in task.metadata["ops"]}


@pytest.mark.parametrize("split", ["id", "ood", "combo"])
def test_same_seed_gives_the_same_task(split):
    a = generate(np.random.default_rng(123), split=split, difficulty=3)
    b = generate(np.random.default_rng(123), split=split, difficulty=3)
    assert a == b


def test_different_seeds_give_different_tasks():
    prompts = {generate(np.random.default_rng(s), difficulty=2).prompt for s in range(50)}
    assert len(prompts) > 40


def test_task_ids_are_pinned_across_versions():
    # A changed id or prompt for a fixed seed silently changes every dataset built from the generator.
    task = generate(np.random.default_rng(0), split="id", difficulty=1, kinds=("arithmetic",))
    assert task.prompt == "What is 6 plus 5?"
    assert task.task_id == "math-arithmetic-id-d1-5cae125b0e9b"


def test_task_ids_identify_tasks():
    tasks = [generate(np.random.default_rng(s), difficulty=3) for s in range(80)]
    by_id = {}
    for t in tasks:
        assert by_id.setdefault(t.task_id, t.prompt) == t.prompt


@pytest.mark.parametrize(("difficulty", "kind"), itertools.product(DIFFICULTIES, KINDS))
def test_id_tasks_never_use_held_out_pairs(difficulty, kind):
    for task in _tasks("id", difficulty, kind):
        assert not _pairs(task) & HELD_OUT[kind], task.prompt


@pytest.mark.parametrize(("difficulty", "kind"), itertools.product(DIFFICULTIES, KINDS))
def test_ood_tasks_never_use_held_out_pairs(difficulty, kind):
    for task in _tasks("ood", difficulty, kind):
        assert not _pairs(task) & HELD_OUT[kind], task.prompt


@pytest.mark.parametrize(("difficulty", "kind"), itertools.product(DIFFICULTIES, KINDS))
def test_combo_tasks_always_use_a_held_out_pair(difficulty, kind):
    for task in _tasks("combo", difficulty, kind):
        assert _pairs(task) & HELD_OUT[kind], task.prompt


@pytest.mark.parametrize("kind", KINDS)
def test_held_out_pairs_are_made_of_attributes_seen_in_id(kind):
    seen = set().union(*(_pairs(t) for d in DIFFICULTIES for t in _tasks("id", d, kind, 40)))
    for op, style in HELD_OUT[kind]:
        assert any(o == op for o, _ in seen), f"{op} never appears in id"
        assert any(s == style for _, s in seen), f"{style} never appears in id"
    assert {s for _, s in seen} == set(STYLES[kind])


@pytest.mark.parametrize(("difficulty", "kind"), itertools.product(DIFFICULTIES, KINDS))
def test_ood_operands_lie_outside_the_id_ranges(difficulty, kind):
    r = ranges_for(difficulty, "id")
    for task in _tasks("ood", difficulty, kind):
        for op, text in zip(task.metadata["ops"], task.metadata["operands"], strict=True):
            value = abs(Fraction(text))
            if kind == "fractions":
                assert value.denominator > r.denominator[1], task.prompt
            elif op in ("add", "sub"):
                assert value > r.additive[1], task.prompt
            else:
                assert value > r.factor[1], task.prompt


@pytest.mark.parametrize(("difficulty", "kind"), itertools.product(DIFFICULTIES, KINDS))
def test_id_operands_lie_inside_the_id_ranges(difficulty, kind):
    r = ranges_for(difficulty, "id")
    for task in _tasks("id", difficulty, kind):
        for op, text in zip(task.metadata["ops"], task.metadata["operands"], strict=True):
            value = abs(Fraction(text))
            if kind == "fractions":
                assert value.denominator <= r.denominator[1], task.prompt
            elif op in ("add", "sub"):
                assert r.additive[0] <= value <= r.additive[1], task.prompt
            else:
                assert r.factor[0] <= value <= r.factor[1], task.prompt


@pytest.mark.parametrize("split", ["id", "ood", "combo"])
def test_ood_has_one_more_step(split):
    expected = LEVELS[3].steps + (1 if split == "ood" else 0)
    assert {len(t.metadata["ops"]) for t in _tasks(split, 3, "arithmetic")} == {expected}


def test_level_one_is_one_digit_addition_and_subtraction():
    for task in _tasks("id", 1, "arithmetic", 100):
        assert set(task.metadata["ops"]) <= {"add", "sub"}
        assert all(int(n) < 10 for n in re.findall(r"\d+", task.prompt)), task.prompt
        assert int(task.privileged["answer"]) >= 0


@pytest.mark.parametrize("split", ["id", "combo"])
def test_level_one_observations_are_compact(split):
    longest = max(len(t.prompt) for kind in KINDS for t in _tasks(split, 1, kind))
    assert longest + len("\nReply with ANSWER: <value>.") < 120


@pytest.mark.parametrize(("difficulty", "kind"), itertools.product(DIFFICULTIES, KINDS))
def test_prompts_never_state_the_answer(difficulty, kind):
    for task in _tasks("id", difficulty, kind):
        answer = task.privileged["answer"].lstrip("-")
        assert not re.search(rf"(?<![\w/.]){re.escape(answer)}(?![\w/]|\.\d)", task.prompt), task.prompt


@pytest.mark.parametrize("split", ["id", "ood", "combo"])
def test_symbolic_prompts_evaluate_to_the_answer(split):
    # Independent re-reading of the shown expression: catches a rendering with the wrong parentheses.
    for d in DIFFICULTIES:
        for task in _tasks(split, d, "arithmetic") + _tasks(split, d, "fractions"):
            if task.metadata["style"] == "symbols":
                shown = task.prompt.removeprefix("Compute ").removesuffix(".")
                assert answers_equal(shown, task.privileged["answer"]), task.prompt


def test_word_problem_answers_are_whole_and_non_negative():
    for d in DIFFICULTIES:
        for task in _tasks("ood", d, "word"):
            value = parse_answer(task.privileged["answer"])
            assert value.is_Integer and value >= 0, task.prompt


@pytest.mark.parametrize(
    ("skewed_op", "difficulty", "kind"),
    [("mul", 3, "arithmetic"), ("add", 2, "linear")],  # a wrong value; a wrong root of an equation
)
def test_a_wrong_reference_is_caught_by_the_exact_check(monkeypatch, skewed_op, difficulty, kind):
    real = generator.apply_op
    monkeypatch.setattr(generator, "apply_op", lambda op, a, b: real(op, a, b) + (1 if op == skewed_op else 0))
    with pytest.raises(EnvError, match="generator bug"):
        for s in range(50):
            generate(np.random.default_rng(s), split="id", difficulty=difficulty, kinds=(kind,))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"split": "test"}, "split"),
        ({"difficulty": 0}, "difficulty"),
        ({"difficulty": 6}, "difficulty"),
        ({"difficulty": 1.5}, "difficulty"),
        ({"kinds": ("algebra",)}, "kinds"),
        ({"kinds": ()}, "kinds"),
        ({"kinds": "word"}, "kinds"),
    ],
)
def test_bad_settings_raise_config_error(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        generate(np.random.default_rng(0), **kwargs)
