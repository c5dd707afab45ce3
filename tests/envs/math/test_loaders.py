"""GSM8K/MATH JSONL loaders: python -m pytest tests/envs/math/test_loaders.py -q"""

from pathlib import Path

import pytest

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.envs.math.env import MathEpisodesEnv
from turnkit.envs.math.loaders import load_gsm8k, load_math
from turnkit.errors import DataError

FIXTURES = Path(__file__).parents[2] / "fixtures" / "math"


def test_gsm8k_good_file_loads_every_non_blank_line():
    tasks = load_gsm8k(FIXTURES / "gsm8k_good.jsonl")
    assert [t.privileged["answer"] for t in tasks] == ["19", "14", "1500"]
    assert [t.metadata["line"] for t in tasks] == [1, 2, 4]
    assert tasks[0].prompt.startswith("Mia has 12 shells")
    assert all(t.family == "math" and t.split == "gsm8k" for t in tasks)


def test_gsm8k_difficulty_counts_solution_steps():
    assert [t.difficulty for t in load_gsm8k(FIXTURES / "gsm8k_good.jsonl")] == [1.0, 3.0, 1.0]


def test_gsm8k_solution_is_privileged_not_public():
    task = load_gsm8k(FIXTURES / "gsm8k_good.jsonl")[1]
    assert "<<3*4=12>>" in task.privileged["solution"]
    assert "#### " not in task.prompt and "solution" not in task.metadata


def test_task_ids_are_stable_and_distinct():
    a = load_gsm8k(FIXTURES / "gsm8k_good.jsonl")
    b = load_gsm8k(FIXTURES / "gsm8k_good.jsonl")
    assert [t.task_id for t in a] == [t.task_id for t in b]
    assert len({t.task_id for t in a}) == 3


def test_split_name_is_configurable():
    assert {t.split for t in load_gsm8k(FIXTURES / "gsm8k_good.jsonl", split="test")} == {"test"}


def test_math_good_file_extracts_last_boxed_answer():
    tasks = load_math(FIXTURES / "math_good.jsonl")
    assert [t.privileged["answer"] for t in tasks] == ["\\frac{3}{4}", "2\\sqrt{2}", "\\text{Monday}", "3"]


def test_math_level_and_type_become_difficulty_and_kind():
    tasks = load_math(FIXTURES / "math_good.jsonl")
    assert [t.difficulty for t in tasks] == [1.0, 3.0, 0.0, 0.0]
    assert [t.metadata["kind"] for t in tasks] == ["Prealgebra", "Algebra", "math", "math"]


@pytest.mark.parametrize(
    ("name", "loader", "line", "message"),
    [
        ("gsm8k_bad_json.jsonl", load_gsm8k, 2, "invalid JSON"),
        ("gsm8k_missing_field.jsonl", load_gsm8k, 3, "missing field 'answer'"),
        ("gsm8k_no_final.jsonl", load_gsm8k, 1, "no final '#### <number>' line"),
        ("gsm8k_not_number.jsonl", load_gsm8k, 2, "'four' is not a number"),
        ("gsm8k_not_object.jsonl", load_gsm8k, 2, "expected a JSON object"),
        ("math_no_boxed.jsonl", load_math, 2, "no final \\\\boxed"),
        ("math_unclosed_box.jsonl", load_math, 1, "no final \\\\boxed"),
        ("math_bad_field.jsonl", load_math, 3, "field 'problem' must be a non-empty string"),
    ],
)
def test_malformed_line_names_file_and_line(name, loader, line, message):
    path = FIXTURES / name
    with pytest.raises(DataError, match=message) as err:
        loader(path)
    assert err.value.path == str(path) and err.value.line == line
    assert str(err.value).startswith(f"{path}:{line}: ")


def test_empty_file_is_an_error():
    with pytest.raises(DataError, match="no tasks") as err:
        load_gsm8k(FIXTURES / "empty.jsonl")
    assert err.value.path == str(FIXTURES / "empty.jsonl")


def test_missing_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="cannot read"):
        load_math(tmp_path / "nope.jsonl")


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"question": "ok?", "answer": "#### 1"}\n{"question": "\xff"}\n')
    with pytest.raises(DataError, match="UTF-8") as err:
        load_gsm8k(path)
    assert err.value.line == 2


@pytest.mark.parametrize(("name", "loader"), [("gsm8k_good.jsonl", load_gsm8k), ("math_good.jsonl", load_math)])
def test_oracle_solves_loaded_tasks(name, loader):
    tasks = loader(FIXTURES / name)
    env = MathEpisodesEnv(tasks=tasks)
    for i in range(len(tasks)):
        env.reset(seed=i, options={"task_index": i})
        _, reward, terminated, _, info = env.step(f"ANSWER: {tasks[i].privileged['answer']}")
        assert reward == 1.0 and terminated and info["success"], tasks[i].prompt
    assert all(turnkit.collect(env, OracleAgent(), seed=s).success for s in range(10))


def test_loaded_answers_accept_equivalent_forms():
    env = MathEpisodesEnv(tasks=load_math(FIXTURES / "math_good.jsonl"))
    env.reset(seed=0, options={"task_index": 0})
    assert env.step("ANSWER: 0.75")[1] == 1.0
    env.reset(seed=0, options={"task_index": 1})
    assert env.step("ANSWER: sqrt(8)")[1] == 1.0
    env.reset(seed=0, options={"task_index": 2})
    assert env.step("So it is \\boxed{\\text{monday}}")[1] == 1.0
