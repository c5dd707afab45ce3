"""Families and the task generator: python -m pytest tests/envs/collab_code/test_generator.py -q"""

import numpy as np
import pytest

from turnkit.envs.collab_code.families import FAMILIES, FAMILY_OF_FUNCTION, UNKNOWN
from turnkit.envs.collab_code.generator import NUM_TESTS, SPLITS, generate, sample_params, verify
from turnkit.envs.collab_code.grading import outcomes_equal, run_tests, run_tests_in_process, shared_sandbox
from turnkit.envs.collab_code.human import task_facts
from turnkit.errors import ConfigError

PARAMS = [(f, p) for f in FAMILIES.values() for p in f.params]
SEEDS = range(150)


def _values(task):
    return {fact["slot"].split(".", 1)[1]: fact["value"] for fact in task.privileged["facts"]}


@pytest.mark.parametrize(("family", "param"), PARAMS, ids=[f"{f.name}.{p.name}" for f, p in PARAMS])
def test_every_value_parses_back_from_what_the_human_says(family, param):
    for value in (*param.id_values, *param.ood_values):
        got = param.parse(param.say(value))
        assert got is not UNKNOWN and type(got) is type(value) and got == value, param.say(value)


@pytest.mark.parametrize(("family", "param"), PARAMS, ids=[f"{f.name}.{p.name}" for f, p in PARAMS])
def test_ood_values_are_disjoint_from_id_values_and_default_is_an_id_value(family, param):
    assert not set(map(repr, param.id_values)) & set(map(repr, param.ood_values))
    assert repr(param.default) in set(map(repr, param.id_values))


def test_function_names_are_unique_across_families():
    assert len(FAMILY_OF_FUNCTION) == sum(len(f.fn_names) for f in FAMILIES.values())


@pytest.mark.parametrize("family", FAMILIES.values(), ids=list(FAMILIES))
def test_held_out_pairs_use_id_values_only(family):
    a, b = (family.param(n) for n in family.combo)
    for x, y in family.held_out:
        assert x in a.id_values and y in b.id_values


@pytest.mark.parametrize("split", SPLITS)
def test_every_task_has_ten_tests_and_one_fact_per_hidden_parameter(split):
    for seed in SEEDS:
        task = generate(np.random.default_rng(seed), split=split)
        family = FAMILIES[task.metadata["kind"]]
        assert len(task.privileged["tests"]) == NUM_TESTS
        assert set(_values(task)) == {p.name for p in family.params} == set(task.metadata["hidden_params"])


def test_id_never_holds_a_held_out_pair_and_combo_always_does():
    for seed in SEEDS:
        for split in ("id", "combo"):
            task = generate(np.random.default_rng(seed), split=split)
            family, values = FAMILIES[task.metadata["kind"]], _values(task)
            pair = tuple(values[n] for n in family.combo)
            assert (pair in family.held_out) == (split == "combo"), (split, pair)


def test_combo_values_are_each_in_distribution():
    for seed in SEEDS:
        task = generate(np.random.default_rng(seed), split="combo")
        family = FAMILIES[task.metadata["kind"]]
        assert all(v in family.param(n).id_values for n, v in _values(task).items())


def test_ood_tasks_hold_at_least_one_out_of_distribution_value_and_say_which():
    for seed in SEEDS:
        task = generate(np.random.default_rng(seed), split="ood")
        family, values = FAMILIES[task.metadata["kind"]], _values(task)
        ood = task.metadata["ood_params"]
        assert ood
        assert all(values[n] in family.param(n).ood_values for n in ood)
        assert all(values[n] in family.param(n).id_values for n in values if n not in ood)


def test_every_non_default_parameter_changes_some_test_outcome():
    for seed in range(60):
        task = generate(np.random.default_rng(seed), split=("id", "ood", "combo")[seed % 3])
        family, values, fn = FAMILIES[task.metadata["kind"]], _values(task), task.metadata["function"]
        tests = list(task.privileged["tests"])
        ref = run_tests_in_process(task.privileged["reference"], tests)
        for p in family.params:
            if repr(values[p.name]) == repr(p.default):
                continue
            alt = run_tests_in_process(family.render(fn, {**values, p.name: p.default}), tests)
            assert not all(outcomes_equal(r, a) for r, a in zip(ref, alt, strict=True)), (task.task_id, p.name)


def test_verify_rejects_tests_that_cannot_tell_a_parameter_from_its_default():
    fam = FAMILIES["late_fee"]
    params = {"grace": 2, "per_day": 1.0, "cap": None}
    assert verify(fam, "late_fee", params, ["late_fee(0)"]) == "the tests do not tell grace=2 from the default 0"
    assert verify(fam, "late_fee", params, ["late_fee(2)"]) is None


def test_generated_references_pass_their_tests_in_the_sandbox_too():
    sb = shared_sandbox()
    for seed in range(7):
        task = generate(np.random.default_rng(seed), split="ood")
        code, tests = task.privileged["reference"], list(task.privileged["tests"])
        run = run_tests(sb, code, tests)
        assert run.error is None and run.outcomes == run_tests_in_process(code, tests)


def test_the_request_states_no_hidden_value():
    for seed in SEEDS:
        task = generate(np.random.default_rng(seed), split="ood")
        request = task.prompt.lower()
        for fact in task_facts(task):
            assert fact.sentence.lower() not in request
        numbers = [v for v in _values(task).values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        assert not any(f" {v} " in f" {request} " for v in numbers)


def test_generation_is_deterministic_and_varied():
    a = [generate(np.random.default_rng(s), split="id") for s in range(40)]
    b = [generate(np.random.default_rng(s), split="id") for s in range(40)]
    assert a == b
    assert len({t.task_id for t in a}) == 40
    assert {t.metadata["kind"] for t in a} == set(FAMILIES)


def test_kinds_restrict_the_families():
    kinds = {generate(np.random.default_rng(s), kinds=["price", "name"]).metadata["kind"] for s in range(30)}
    assert kinds == {"price", "name"}


@pytest.mark.parametrize("bad", [[], ["nope"], ["grade", "nope"]])
def test_unknown_kinds_are_a_config_error(bad):
    with pytest.raises(ConfigError, match="kinds must be"):
        generate(np.random.default_rng(0), kinds=bad)


def test_unknown_split_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown split"):
        sample_params(np.random.default_rng(0), FAMILIES["grade"], "train")
