"""MathEpisodesEnv: python -m pytest tests/envs/math/test_env.py -q"""

import re

import gymnasium
import numpy as np
import pytest

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.agents.scripted import RandomAgent, ScriptedAgent
from turnkit.envs.core import restore_env, snapshot_env
from turnkit.envs.math.answers import extract_answer
from turnkit.envs.math.env import FORMAT_LINE, MathEpisodesEnv
from turnkit.envs.math.oracle import oracle_reply_for
from turnkit.errors import ConfigError, EnvError
from turnkit.types import Task

SEEDS = range(200)
ENV_ID = "turnkit/MathEpisodes-v0"


def _env(**kwargs):
    return gymnasium.make(ENV_ID, **kwargs)


def _answer(env):
    return env.unwrapped.privileged()["answer"]


def _fixed(answer="7", prompt="What is 3 plus 4?", **kwargs):
    task = Task(task_id="t", prompt=prompt, privileged={"answer": answer}, family="math", metadata={"kind": "x"})
    return MathEpisodesEnv(tasks=[task], **kwargs)


@pytest.mark.parametrize("split", ["id", "ood", "combo"])
def test_oracle_solves_every_split(split):
    env = _env(split=split, difficulty=3)
    trajs = [turnkit.collect(env, OracleAgent(), seed=s) for s in SEEDS]
    assert all(t.success for t in trajs)
    assert all(len(t.steps) == 1 and t.total_reward == 1.0 for t in trajs)


@pytest.mark.parametrize("difficulty", [1, 2, 4, 5])
def test_oracle_solves_every_difficulty(difficulty):
    env = _env(split="ood", difficulty=difficulty)
    assert all(turnkit.collect(env, OracleAgent(), seed=s).success for s in range(50))


@pytest.mark.parametrize("split", ["id", "ood", "combo"])
def test_random_agent_is_far_below_the_oracle(split):
    env = _env(split=split, difficulty=1)
    rate = np.mean([turnkit.collect(env, RandomAgent(), seed=s).success for s in SEEDS])
    assert rate < 0.05


def test_first_observation_is_prompt_plus_format_line():
    env = _env()
    obs, info = env.reset(seed=5)
    assert obs == f"{env.unwrapped.task.prompt}\n{FORMAT_LINE}"
    assert info["attempts_left"] == 3 and info["budget_used"] == 0 and info["episode_boundaries"] == []


def test_wrong_answer_gives_feedback_and_a_retry():
    env = _fixed(max_attempts=3)
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("ANSWER: 8")
    assert (obs, reward, terminated) == ("Incorrect. 2 attempts left.", 0.0, False)
    assert info["attempts_left"] == 2 and info["answered"]
    obs, reward, terminated, _, info = env.step("ANSWER: 7")
    assert (obs, reward, terminated, info["success"]) == ("Correct.", 1.0, True, True)


def test_max_attempts_wrong_answers_end_the_episode():
    env = _fixed(max_attempts=2)
    env.reset(seed=0)
    assert not env.step("ANSWER: 1")[2]
    obs, reward, terminated, _, info = env.step("ANSWER: 2")
    assert terminated and reward == 0.0 and info["success"] is False and info["attempts_left"] == 0
    assert "No attempts left" in obs


def test_unreadable_answer_costs_an_attempt_and_says_why():
    env = _fixed()
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step("ANSWER: seven-ish")
    assert not terminated and info["attempts_left"] == 2 and "not a number" in obs


def test_reasoning_turn_costs_budget_but_no_attempt():
    env = _fixed(token_budget=100)
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("three plus four is seven")
    assert not terminated and reward == 0.0 and not info["answered"]
    assert info["attempts_left"] == 3 and info["budget_used"] == 5 and info["budget_left"] == 95
    assert obs.startswith("No answer yet.")


def test_episode_boundaries_are_cumulative_budget_per_turn():
    env = _fixed(token_budget=100)
    env.reset(seed=0)
    env.step("a b c")
    env.step("ANSWER: 1")
    info = env.step("d e f g ANSWER: 7")[4]
    assert info["episode_boundaries"] == [3, 5, 11] and info["budget_used"] == 11


def test_going_over_the_budget_ends_the_episode_without_reading_the_answer():
    env = _fixed(token_budget=5)
    env.reset(seed=0)
    env.step("one two three")
    obs, reward, terminated, _, info = env.step("so ANSWER: 7")
    assert terminated and reward == 0.0 and info["success"] is False
    assert info["budget_used"] == 6 and info["budget_left"] == 0 and obs.startswith("Budget exhausted")


def test_a_turn_that_uses_the_last_of_the_budget_is_still_read():
    env = _fixed(token_budget=5)
    env.reset(seed=0)
    env.step("one two three")
    _, reward, terminated, _, info = env.step("ANSWER: 7")
    assert terminated and reward == 1.0 and info["success"]


def test_reasoning_that_exhausts_the_budget_ends_the_episode():
    env = _fixed(token_budget=3)
    env.reset(seed=0)
    _, _, terminated, _, info = env.step("one two three")
    assert terminated and info["success"] is False and info["budget_left"] == 0


def test_char_budget_counts_characters():
    env = _fixed(token_budget=20, budget_unit="chars")
    env.reset(seed=0)
    info = env.step("ANSWER: 1")[4]
    assert info["budget_used"] == 9 and info["budget_left"] == 11


def test_invalid_actions_spend_no_budget_and_keep_info_keys():
    env = _fixed()
    env.reset(seed=0)
    _, _, terminated, _, info = env.step("")
    assert info["invalid_action"] == "empty" and not terminated
    assert info["budget_used"] == 0 and info["attempts_left"] == 3 and info["episode_boundaries"] == []


def test_snapshot_restore_gives_identical_continuations():
    env = _env(difficulty=4, split="combo")
    env.reset(seed=11)
    env.step("thinking about it")
    env.step("ANSWER: 0.123")
    snap = snapshot_env(env)
    first = [env.step(a) for a in ("hmm", "ANSWER: 99", f"ANSWER: {_answer(env)}")]
    restore_env(env, snap)
    second = [env.step(a) for a in ("hmm", "ANSWER: 99", f"ANSWER: {_answer(env)}")]
    assert first == second
    assert first[-1][4]["success"] and first[-1][4]["episode_boundaries"] == [3, 5, 6, 8, 10]


def test_snapshot_state_is_not_a_replay():
    env = _env()
    env.reset(seed=0)
    env.step("a b")
    snap = snapshot_env(env)
    kind, state = snap.state
    assert kind == "state" and state == {"attempts_left": 3, "budget_used": 2, "boundaries": [2]}


def test_restore_into_a_fresh_env_continues_the_same_way():
    env = _env(difficulty=2)
    env.reset(seed=3)
    env.step("ANSWER: -1")
    snap = snapshot_env(env)
    other = _env(difficulty=2)
    other.reset(seed=99)
    restore_env(other, snap)
    assert other.step("ANSWER: -2") == env.step("ANSWER: -2")


GARBAGE = [
    "",
    " \n\t ",
    "\x00",
    "x" * 20_000,
    "ANSWER: " + "9" * 10_000,
    "ANSWER: 9**9**9**9",
    "ANSWER: (" * 1000,
    "\\boxed{" * 3000,
    "ANSWER: \\frac{1}{0}",
    "ANSWER: \ud800",
    b"\xff\xfe",
    b"ANSWER: 3",
    None,
    12,
    "<script>alert(1)</script>",
    "ANSWER: __import__('os').system('echo hi')",
    "‮ANSWER: 7",
]


@pytest.mark.parametrize("action", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_actions_never_raise(action):
    env = _env(difficulty=2)
    env.reset(seed=1)
    obs, reward, _, truncated, info = env.step(action)
    assert isinstance(obs, str) and reward == 0.0 and not truncated
    assert "attempts_left" in info


def _string_leaves(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _string_leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _string_leaves(v)
    elif isinstance(value, str):
        yield value


def test_reference_answer_never_appears_in_info_strings():
    for s in range(100):
        env = _env(difficulty=3)
        _, info = env.reset(seed=s)
        token = re.compile(rf"(?<![\w/.]){re.escape(_answer(env))}(?![\w/])")
        infos = [info] + [env.step(a)[4] for a in ("hmm", "ANSWER: 0.5", "ANSWER: -0.5")]
        for leaf in _string_leaves(infos):
            assert not token.search(leaf), (leaf, _answer(env))


def test_feedback_never_states_the_reference_answer():
    for s in range(100):
        env = _env(difficulty=5, split="ood")
        obs0, _ = env.reset(seed=s)
        answer = _answer(env)
        for action in ("thinking", "ANSWER: 1/7", "ANSWER: 2/7", "ANSWER: 3/7"):
            obs = env.step(action)[0]
            assert answer not in obs and answer not in obs0


def test_same_seed_gives_identical_episodes():
    a, b = _env(difficulty=3), _env(difficulty=3)
    assert a.reset(seed=42) == b.reset(seed=42)
    assert a.step("ANSWER: 1") == b.step("ANSWER: 1")


def test_collect_group_gives_identical_tasks():
    group = turnkit.collect_group(_env(split="ood"), OracleAgent(), seed=7, group_size=4)
    assert len({t.task.task_id for t in group}) == 1 and all(t.success for t in group)


def test_time_limit_truncates_endless_reasoning():
    traj = turnkit.collect(_env(), ScriptedAgent(["hmm"]), seed=0)
    assert len(traj.steps) == 10 and traj.steps[-1].truncated and not traj.success


def test_fixed_task_list_plays_those_tasks():
    env = _fixed(answer="\\text{Monday}", prompt="Which day follows Sunday?")
    obs, _ = env.reset(seed=0)
    assert obs.startswith("Which day follows Sunday?")
    assert env.step("ANSWER: monday")[1] == 1.0


def test_oracle_reply_is_short():
    env = _env()
    env.reset(seed=0)
    assert oracle_reply_for(env.unwrapped.task) == f"ANSWER: {_answer(env)}"


@pytest.mark.parametrize("kind", ["arithmetic", "fractions", "linear", "word"])
def test_kinds_select_the_generator(kind):
    env = _env(kinds=(kind,), difficulty=2)
    assert {env.reset(seed=s)[1]["kind"] for s in range(20)} == {kind}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"token_budget": 0}, "token_budget"),
        ({"token_budget": 2.5}, "token_budget"),
        ({"budget_unit": "tokens"}, "budget_unit"),
        ({"difficulty": 9}, "difficulty"),
        ({"kinds": ["calculus"]}, "kinds"),
    ],
)
def test_bad_arguments_raise_config_error(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        MathEpisodesEnv(**kwargs)


def test_unknown_split_raises():
    with pytest.raises(EnvError, match="split"):
        MathEpisodesEnv(split="test")


def test_check_env_passes():
    report = turnkit.check_env(_env(split="combo", difficulty=2), cross_process=False)
    assert report.ok, str(report)


def test_the_final_answer_marker_is_what_ends_a_turn_for_the_answer_reader():
    (marker,) = MathEpisodesEnv.final_answer_markers
    for line, answer in (("Six plus five.", None), ("ANSWER: 11", "11"), ("so ANSWER: 3/4", "3/4")):
        assert (marker in line) == (answer is not None)
        assert extract_answer(line) == answer
