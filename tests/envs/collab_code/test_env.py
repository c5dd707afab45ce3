"""CollabCodeEnv: python -m pytest tests/envs/collab_code/test_env.py -q (the 200-task study is marked slow)"""

import gymnasium
import numpy as np
import pytest

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.agents.scripted import ScriptedAgent
from turnkit.envs.collab_code.agents import AnswerAtOnceAgent, ClarifyingAgent
from turnkit.envs.collab_code.env import CollabCodeEnv
from turnkit.envs.collab_code.human import revealable_values
from turnkit.envs.collab_code.llm_human import LLMHuman
from turnkit.envs.core import restore_env, snapshot_env
from turnkit.errors import ConfigError, EnvError, SandboxError
from turnkit.rollout.collect import collect_batch
from turnkit.sandbox import LocalSandbox
from turnkit.stats import wilson_interval
from turnkit.types import AgentTurn, ErrorCause, Task

ENV_ID = "turnkit/CollabCode-v0"
if ENV_ID not in gymnasium.registry:  # until turnkit/envs/registration.py registers it
    gymnasium.register(id=ENV_ID, entry_point="turnkit.envs.collab_code.env:CollabCodeEnv", max_episode_steps=10)

SPLITS = ("id", "ood", "combo")
ANSWER = "I WANT TO ANSWER:\n```python\n{}\n```"


def _rates(split, agent, n):
    trajs = collect_batch([CollabCodeEnv(split=split) for _ in range(n)], agent, list(range(n)))
    assert all(t.error is None for t in trajs), [t.error for t in trajs if t.error][:1]
    return sum(t.success for t in trajs), float(np.mean([t.total_reward for t in trajs])), trajs


@pytest.mark.parametrize("split", SPLITS)
def test_env_passes_check_env(split):
    report = turnkit.check_env(gymnasium.make(ENV_ID, split=split), seeds=(0, 1, 2, 3), raise_on_failure=False)
    assert report.ok, str(report)


def test_leak_check_with_an_asking_policy_flags_only_revealed_fact_values():
    agent = ClarifyingAgent()
    env = gymnasium.make(ENV_ID, split="ood")
    seeds = tuple(range(8))
    ignore = set()
    for s in seeds:
        env.reset(seed=s)
        ignore |= revealable_values(env.unwrapped.task)
    kwargs = {"seeds": seeds, "steps": 10, "checks": ["privileged_leak"], "raise_on_failure": False}
    policy = lambda ctx: agent.next_message(ctx.messages)  # noqa: E731
    flagged = turnkit.check_env(env, policy=policy, **kwargs).result("privileged_leak")
    assert flagged.status.value == "failed" and "['facts']" in flagged.detail  # the human revealed a value
    assert turnkit.check_env(env, policy=policy, leak_ignore=ignore, **kwargs).ok  # reference and tests never


@pytest.mark.parametrize("split", SPLITS)
def test_oracle_solves_every_task_in_one_turn(split):
    successes, mean, trajs = _rates(split, OracleAgent(), 30)
    assert successes == 30 and mean == 1.0 and all(len(t.steps) == 1 for t in trajs)


@pytest.mark.parametrize("split", SPLITS)
def test_asking_beats_answering_at_once_on_30_tasks(split):
    ask_s, ask_mean, _ = _rates(split, ClarifyingAgent(), 30)
    once_s, once_mean, _ = _rates(split, AnswerAtOnceAgent(), 30)
    assert wilson_interval(ask_s, 30)[0] > wilson_interval(once_s, 30)[1]
    assert ask_mean - once_mean > 0.4


@pytest.mark.slow
@pytest.mark.parametrize("split", SPLITS)
def test_asking_beats_answering_at_once_on_200_tasks(split):
    ask_s, ask_mean, ask = _rates(split, ClarifyingAgent(), 200)
    once_s, once_mean, _ = _rates(split, AnswerAtOnceAgent(), 200)
    assert wilson_interval(ask_s, 200)[0] > wilson_interval(once_s, 200)[1]
    assert ask_mean > once_mean + 0.5
    assert all(2 <= len(t.steps) <= 5 for t in ask)


def test_first_observation_has_instructions_request_and_signature():
    env = CollabCodeEnv()
    obs, info = env.reset(seed=4)
    assert obs.startswith("You are helping a person write a Python function.")
    assert obs.endswith(env.task.prompt) and "I WANT TO ANSWER:" in obs and "at most 10 messages" in obs
    assert info["turns_left"] == 10


def test_questions_get_replies_and_zero_reward():
    env = CollabCodeEnv(kinds=("grade",))
    env.reset(seed=12)
    obs, reward, terminated, truncated, info = env.step("Is there a cutoff score?")
    assert obs == "The passing cutoff is 65 points." and reward == 0.0 and not terminated and not truncated
    assert info["turns_left"] == 9 and "success" not in info


def test_the_answer_is_graded_with_info_and_no_privileged_data():
    env = CollabCodeEnv(kinds=("grade",))
    env.reset(seed=12)
    obs, reward, terminated, _, info = env.step(ANSWER.format("def grade_outcome(score):\n    return score > 65"))
    assert terminated and obs.startswith("Your function passed 9 of 10 hidden tests.") and reward == 0.9
    assert info["tests_passed"] == 9 and info["tests_total"] == 10 and info["success"] is False
    assert info["grading_error"] is None and info["answered"] is True
    text = repr(info)
    assert env.privileged()["reference"] not in text and not any(t in text for t in env.privileged()["tests"])


def test_the_tenth_message_is_the_answer_even_without_the_marker():
    env = gymnasium.make(ENV_ID, kinds=("grade",))
    env.reset(seed=12)
    for _ in range(9):
        assert not env.step("Hmm?")[2]
    _, reward, terminated, truncated, info = env.step(
        "```python\ndef grade_outcome(score):\n    return score >= 65\n```"
    )
    assert terminated and truncated and reward == 1.0 and info["answered"] is False and info["success"]


def test_unwrapped_env_forces_the_answer_at_max_turns_without_truncating():
    env = CollabCodeEnv(max_turns=3)
    env.reset(seed=0)
    env.step("a?")
    env.step("b?")
    _, _, terminated, truncated, info = env.step("not code at all")
    assert terminated and not truncated and info["grading_error"] == "syntax_error"


def test_hostile_answer_is_contained_and_scored_zero_with_the_cause():
    env = CollabCodeEnv(per_test_timeout_s=0.2)
    env.reset(seed=1)
    _, reward, terminated, _, info = env.step(ANSWER.format("while True:\n    pass"))
    assert terminated and reward == 0.0 and info["grading_error"] == "timeout"
    env.reset(seed=1)
    _, reward, _, _, info = env.step(ANSWER.format("import os\nos.system('rm -rf /')"))
    assert reward == 0.0 and info["grading_error"] == "forbidden"


def test_forbidden_list_can_be_turned_off():
    env = CollabCodeEnv(forbidden=(), kinds=("grade",))
    env.reset(seed=12)
    code = "import os\n\ndef grade_outcome(score):\n    return score >= 65 and bool(os.sep)"
    assert env.step(ANSWER.format(code))[4]["success"]


def test_invalid_actions_are_observations():
    env = CollabCodeEnv()
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step("")
    assert info["invalid_action"] == "empty" and not terminated and "not accepted" in obs


def test_snapshot_restores_the_dialogue():
    env = gymnasium.make(ENV_ID, kinds=("grade",), human=LLMHuman(ScriptedAgent(lambda c: f"{len(c.messages)}")))
    env.reset(seed=12)
    env.step("q1?")
    snap = snapshot_env(env)
    first = [env.step("q2?")[0], env.step("q3?")[0]]
    restore_env(env, snap)
    assert [env.step("q2?")[0], env.step("q3?")[0]] == first == ["4", "6"]
    assert len(env.unwrapped.dialogue) == 7


def test_llm_human_drives_the_env():
    def reply(ctx):
        return "The passing cutoff is 65 points." if "cutoff" in ctx.messages[-1].content else "No idea."

    env = CollabCodeEnv(kinds=("grade",), human=LLMHuman(ScriptedAgent(reply)))
    env.reset(seed=12)
    assert env.step("What is the cutoff?")[0] == "The passing cutoff is 65 points."
    assert env.step("Colour?")[0] == "No idea."


def test_sandbox_failure_raises_from_step_and_collect_records_it():
    box = LocalSandbox(persistent=True)
    env = CollabCodeEnv(sandbox=box)
    env.reset(seed=0)
    box.close()
    with pytest.raises(SandboxError):
        env.step(ANSWER.format("def f():\n    return 1"))
    traj = turnkit.collect(CollabCodeEnv(sandbox=box), OracleAgent(), seed=0)
    assert (
        traj.error is not None
        and traj.error.cause in (ErrorCause.ENV, ErrorCause.SANDBOX)
        and "SandboxError" in traj.error.message
    )


def test_given_sandbox_is_used_and_not_closed_by_the_env():
    with LocalSandbox(persistent=True) as box:
        env = CollabCodeEnv(sandbox=box)
        assert turnkit.collect(env, OracleAgent(), seed=3).success
        env.close()
        assert not box.closed


def test_fixed_tasks_are_validated_and_played():
    task = Task(
        "t",
        "Write f.\nThe signature of the function is: def f(x)",
        {"reference": "def f(x):\n    return x * 2", "tests": ["f(1)", "f(-3)"]},
        family="collab_code",
    )
    env = CollabCodeEnv(tasks=[task])
    assert turnkit.collect(env, OracleAgent(), seed=0).success
    env.reset(seed=0)
    assert env.step("Anything else?")[0] == "I don't know."
    with pytest.raises(EnvError, match="reference"):
        CollabCodeEnv(tasks=[Task("u", "p", {"tests": ["f()"]})])
    with pytest.raises(EnvError, match="tests"):
        CollabCodeEnv(tasks=[Task("u", "p", {"reference": "x = 1", "tests": []})])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_turns": 0},
        {"per_test_timeout_s": 0},
        {"per_test_timeout_s": "1"},
        {"forbidden": "import os"},
        {"human": object()},
        {"kinds": ["nope"]},
        {"split": "train"},
    ],
)
def test_bad_arguments_are_config_errors(kwargs):
    with pytest.raises((ConfigError, EnvError)):
        CollabCodeEnv(**kwargs)


def test_play_cli_runs_an_episode(monkeypatch, capsys):
    from turnkit import cli

    lines = iter(["What is the cutoff score for passing?", "I WANT TO ANSWER: def exam_result(score): return 1"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    assert cli.main(["play", ENV_ID, "--split", "ood", "--seed", "3", "--env-kwarg", 'kinds=["grade"]']) == 0
    out = capsys.readouterr().out
    assert "The passing cutoff is" in out and "episode over (terminated): failure" in out


def test_same_seed_group_gets_identical_episodes():
    group = turnkit.collect_group(gymnasium.make(ENV_ID, split="combo"), ClarifyingAgent(), seed=9, group_size=3)
    assert len({tuple(s.observation for s in t.steps) for t in group}) == 1 and all(t.success for t in group)


class _Stubborn:
    """Never answers: checks the forced answer through collect."""

    def act(self, contexts):
        return [AgentTurn("Hmm, let me think about the edge cases.") for _ in contexts]


def test_agent_that_never_answers_gets_graded_at_the_limit():
    traj = turnkit.collect(gymnasium.make(ENV_ID), _Stubborn(), seed=2)
    assert len(traj.steps) == 10 and traj.steps[-1].terminated and traj.steps[-1].info["answered"] is False
    assert traj.total_reward == 0.0 and not traj.success


def test_deepcopy_shares_sandbox_and_human_but_not_the_dialogue():
    import copy

    human = LLMHuman(ScriptedAgent(["I don't know."]))
    with LocalSandbox(persistent=True) as box:
        env = CollabCodeEnv(sandbox=box, human=human)
        env.reset(seed=1)
        env.step("q?")
        clone = copy.deepcopy(env)
        assert clone.sandbox is box and clone.human is human
        clone.step("another?")
        assert len(clone.dialogue) == len(env.dialogue) + 2
        assert turnkit.collect(clone, OracleAgent(), seed=2).success
