"""ColBench JSONL loader: python -m pytest tests/envs/collab_code/test_loaders.py -q"""

from pathlib import Path

import pytest

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.envs.collab_code.agents import AnswerAtOnceAgent
from turnkit.envs.collab_code.env import CollabCodeEnv
from turnkit.envs.collab_code.loaders import load_colbench
from turnkit.errors import DataError, EnvError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "collab_code"


def test_good_file_loads_every_row_in_order_skipping_blank_lines():
    tasks = load_colbench(FIXTURES / "colbench_good.jsonl")
    assert [t.prompt.splitlines()[-1] for t in tasks] == [
        "The signature of the function is: def word_points(word)",
        "The signature of the function is: def shipping_cost(weight_kg)",
        "The signature of the function is: def tidy_tags(tags)",
    ]
    assert [t.metadata["line"] for t in tasks] == [1, 3, 4]
    assert all(t.family == "collab_code" and t.split == "colbench" and len(t.privileged["tests"]) == 10 for t in tasks)


def test_test_cases_are_ordered_by_their_number():
    tests = load_colbench(FIXTURES / "colbench_good.jsonl")[1].privileged["tests"]
    assert tests[0] == "shipping_cost(0.5)" and tests[-1] == "shipping_cost(10)"


def test_hidden_information_defaults_to_the_ground_truth():
    tasks = load_colbench(FIXTURES / "colbench_good.jsonl")
    assert tasks[2].privileged["hidden_information"] == tasks[2].privileged["reference"]
    assert tasks[1].privileged["hidden_information"].startswith("Parcels cost 5 dollars")


def test_task_ids_are_stable_and_distinct():
    a = load_colbench(FIXTURES / "colbench_good.jsonl")
    b = load_colbench(FIXTURES / "colbench_good.jsonl", split="test")
    assert [t.task_id for t in a] == [t.task_id for t in b] and len({t.task_id for t in a}) == 3
    assert {t.split for t in b} == {"test"}


def test_limit_reads_only_the_first_tasks():
    assert len(load_colbench(FIXTURES / "colbench_good.jsonl", limit=2)) == 2


@pytest.mark.parametrize(
    ("name", "line", "message"),
    [
        ("colbench_bad_json.jsonl", 2, "invalid JSON"),
        ("colbench_missing_field.jsonl", 3, "'ground_truth' must be a non-empty string"),
        ("colbench_tests_not_object.jsonl", 1, "'test_cases' must be a non-empty object"),
        ("colbench_bad_test_expression.jsonl", 2, "test case 'test1' is not a Python expression"),
        ("colbench_bad_reference.jsonl", 1, "ground_truth is not valid Python"),
        ("colbench_not_object.jsonl", 2, "expected a JSON object"),
        ("colbench_bad_facts.jsonl", 1, "fact 0 must be"),
    ],
)
def test_malformed_lines_name_file_and_line(name, line, message):
    with pytest.raises(DataError, match=message) as info:
        load_colbench(FIXTURES / name)
    assert info.value.path.endswith(name) and info.value.line == line
    assert str(info.value).startswith(f"{FIXTURES / name}:{line}: ")


def test_empty_and_missing_files_are_data_errors():
    with pytest.raises(DataError, match="no tasks"):
        load_colbench(FIXTURES / "empty.jsonl")
    with pytest.raises(DataError, match="cannot read"):
        load_colbench(FIXTURES / "does_not_exist.jsonl")


def test_oracle_solves_loaded_tasks_in_the_sandbox():
    env = CollabCodeEnv(tasks=load_colbench(FIXTURES / "colbench_good.jsonl"))
    for i in range(3):
        env.reset(seed=0, options={"task_index": i})
        out = env.step(OracleAgent().act([_ctx(env)])[0].text)
        assert out[1] == 1.0 and out[4]["success"], out


def _ctx(env):
    from turnkit.agents.base import Context
    from turnkit.types import Message

    return Context(messages=(Message("user", env.dialogue[0].content),), task=env.task)


def test_answer_at_once_stub_fails_loaded_tasks():
    tasks = load_colbench(FIXTURES / "colbench_good.jsonl")
    traj = turnkit.collect(CollabCodeEnv(tasks=tasks[:1]), AnswerAtOnceAgent(), seed=0)
    assert traj.total_reward == 0.0 and len(traj.steps) == 1


def test_optional_facts_let_the_rule_based_human_answer():
    env = CollabCodeEnv(tasks=load_colbench(FIXTURES / "colbench_good.jsonl"))
    env.reset(seed=0, options={"task_index": 1})
    assert env.step("How much does shipping cost?")[0].startswith("Parcels cost 5 dollars")
    assert env.step("And for negative weights?")[0] == "A weight of zero or less is an error: raise a ValueError."


def test_a_reference_that_fails_in_the_sandbox_is_an_env_error():
    env = CollabCodeEnv(tasks=load_colbench(FIXTURES / "colbench_broken_reference.jsonl"))
    env.reset(seed=0)
    with pytest.raises(EnvError, match="reference solution fails"):
        env.step("I WANT TO ANSWER: def word_points(word): return 1")
