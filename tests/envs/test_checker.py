"""check_env on a correct toy env and on deliberately broken variants, one per failure kind."""

from __future__ import annotations

import os
import random
import time
from typing import Any

import gymnasium
import pytest
from gymnasium.spaces import Text

import turnkit
from turnkit.agents.base import Context
from turnkit.envs.checker import CHECKS, GARBAGE_ACTIONS, CheckReport, Status
from turnkit.envs.core import TextEnv, Transition
from turnkit.errors import ConfigError, ContractError
from turnkit.types import Task

ENV_ID = "tk-test/Guess-v0"
FAST = {"cross_process": False}


class GuessEnv(TextEnv):
    """Guess a hidden 4-digit number from higher/lower hints. ``bugs`` switches on one defect each."""

    shared_messages = 0  # only used by the "class_state" bug: state kept on the class, not the instance

    def __init__(self, *, bugs: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bugs = frozenset(bugs)
        self.messages = 0
        self.steps_taken = 0

    def generate_task(self, rng):
        if "global_random" in self.bugs:
            n = random.randint(1000, 9999)  # the classic bug: the global RNG ignores reset(seed=...)
        elif "constant_task" in self.bugs:
            n = 4821
        else:
            n = int(rng.integers(1000, 10_000))
        prompt = "Guess my 4-digit number. Reply 'ANSWER: <number>'."
        if "pid" in self.bugs:
            prompt += f" Worker {os.getpid()}."  # same in one process, different in the next
        return Task(task_id=f"guess-{int(rng.integers(1 << 30))}", prompt=prompt, privileged={"answer": n})

    def begin(self, task):
        if "broken_reset" in self.bugs:
            raise RuntimeError("the task file is missing")
        self.messages = 0
        self.steps_taken = 0
        return task.prompt

    def respond(self, action):
        self.messages += 1
        if "class_state" in self.bugs:
            GuessEnv.shared_messages = 0 if self.messages == 1 else GuessEnv.shared_messages + 1
            self.messages = GuessEnv.shared_messages + 1
        n = self.privileged()["answer"]
        text = action.strip().removeprefix("ANSWER:").strip()
        if "slow" in self.bugs and len(text) > 1000:
            time.sleep(1.0)
        if "raises_on_garbage" in self.bugs and text.isdecimal():
            guess = int(text)  # int() refuses more than 4300 digits: ValueError
        elif text.isdecimal() and len(text) == 4:
            guess = int(text)
        else:
            return Transition(f"Message {self.messages}: reply with 'ANSWER:' and four digits.")
        if guess == n:
            return Transition("Correct!", 1.0, True, {"success": True})
        hint = "Higher." if guess < n else "Lower."
        if "leak_obs" in self.bugs:
            hint += f" (it was {n})"
        info = {"messages": self.messages}
        if "leak_info" in self.bugs:
            info["debug"] = {"target": n}
        return Transition(f"Message {self.messages}: {hint}", info=info)

    def get_state(self):
        return {"messages": self.messages, "steps_taken": self.steps_taken}

    def set_state(self, state):
        if "bad_snapshot" not in self.bugs:
            self.messages = state["messages"]
            self.steps_taken = state["steps_taken"]

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps_taken += 1
        if "truncates" in self.bugs and self.steps_taken >= 3:
            truncated = True
        if "leak_info" in self.bugs and "debug" not in info:
            info["debug"] = {"target": self.privileged()["answer"]}
        return obs, reward, terminated, truncated, info


gymnasium.register(id=ENV_ID, entry_point=f"{__name__}:GuessEnv", max_episode_steps=12)


def guess_oracle(ctx: Context) -> str:
    return f"ANSWER: {ctx.task.privileged['answer']}"


def make(*bugs: str, **kwargs: Any) -> gymnasium.Env:
    return gymnasium.make(ENV_ID, bugs=bugs, **kwargs)


class NotATextEnv(gymnasium.Env):
    observation_space = Text(64)
    action_space = Text(64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "hello", {}

    def step(self, action):
        return "ok", 0.0, False, False, {}


# ------------------------------------------------------------------------------------------ a correct env
@pytest.fixture(scope="module")
def good_report() -> CheckReport:
    return turnkit.check_env(make(), policy=guess_oracle)


def test_correct_env_passes_every_check(good_report: CheckReport) -> None:
    assert [r.name for r in good_report.results] == list(CHECKS)
    assert {r.status for r in good_report.results} == {Status.PASSED}, str(good_report)


def test_report_table_lists_each_check_with_its_time(good_report: CheckReport) -> None:
    lines = str(good_report).splitlines()
    assert lines[0].startswith(f"check_env({ENV_ID}): OK: 9 passed in ")
    for name, line in zip(CHECKS, lines[1:], strict=True):
        assert line.split()[:2] == ["passed", name]
        assert " s  " in line


def test_cross_process_runs_in_a_fresh_process(good_report: CheckReport) -> None:
    assert "3 episodes identical in a fresh process" in good_report.result("cross_process").detail


def test_policy_drives_episodes_to_success() -> None:
    calls: list[Context] = []

    def policy(ctx: Context) -> str:
        calls.append(ctx)
        return guess_oracle(ctx)

    turnkit.check_env(make(), policy=policy, checks=["determinism"], seeds=(5,))
    assert [c.turn for c in calls] == [3]  # turns 0-2 are random, empty and random text
    assert calls[0].task is not None and calls[0].episode_seed == 5


def test_check_env_accepts_a_registered_id() -> None:
    report = turnkit.check_env(ENV_ID, checks=["text_env"])
    assert report.env_id == ENV_ID and report.ok


def test_unregistered_env_skips_cross_process_with_a_reason() -> None:
    report = turnkit.check_env(GuessEnv(), checks=["determinism", "cross_process"])
    result = report.result("cross_process")
    assert result.status == Status.SKIPPED
    assert "no spec" in result.detail


def test_same_task_for_every_seed_is_a_warning_not_a_failure() -> None:
    report = turnkit.check_env(make("constant_task"), checks=["determinism"])
    assert report.ok
    assert report.result("determinism").status == Status.WARNING
    assert "same task" in report.result("determinism").detail


@pytest.mark.parametrize("allowance", [0, 5])
def test_invalid_allowance_follows_max_invalid_actions(allowance: int) -> None:
    report = turnkit.check_env(make(max_invalid_actions=allowance), checks=["invalid_allowance"])
    assert f"ended after {allowance + 1} invalid actions" in report.result("invalid_allowance").detail


def test_garbage_check_flags_exactly_the_invalid_actions() -> None:
    report = turnkit.check_env(make(), checks=["garbage_actions"])
    detail = report.result("garbage_actions").detail
    assert detail == f"{len(GARBAGE_ACTIONS)} garbage actions answered (9 flagged invalid)"


# ------------------------------------------------------------------------------------------ broken envs
def test_global_random_fails_as_non_deterministic() -> None:
    with pytest.raises(ContractError, match=r"fails check '(gymnasium|determinism)'.*non-deterministic"):
        turnkit.check_env(make("global_random"), **FAST)


def test_global_random_fails_the_determinism_check_naming_seed_and_difference() -> None:
    pattern = r"fails check 'determinism' \(seed=\d\): non-deterministic: .* at reset: "
    pattern += r"task\['privileged'\]\['answer'\] differs: \d{4} vs \d{4}$"
    with pytest.raises(ContractError, match=pattern):
        turnkit.check_env(make("global_random"), checks=["determinism"])


def test_process_dependent_env_fails_only_across_processes() -> None:
    report = turnkit.check_env(make("pid"), checks=["determinism", "cross_process"], raise_on_failure=False)
    assert report.result("determinism").ok
    failure = report.result("cross_process")
    assert failure.status == Status.FAILED
    assert "a fresh process replaying the same episode differs at reset: observation differs" in failure.detail


def test_state_shared_between_instances_fails_in_lockstep() -> None:
    pattern = r"'determinism' \(seed=\d\): non-deterministic: replayed in lockstep with another instance"
    with pytest.raises(ContractError, match=pattern):
        turnkit.check_env(make("class_state"), checks=["determinism"])


def test_answer_in_an_observation_is_a_leak() -> None:
    pattern = r"'privileged_leak' \(seed=\d\): the observation after step \d+ contains privileged value \['answer'\]"
    with pytest.raises(ContractError, match=pattern):
        turnkit.check_env(make("leak_obs"), policy=lambda ctx: "ANSWER: 1000", **FAST)


def test_answer_in_info_is_a_leak() -> None:
    with pytest.raises(ContractError, match=r"'privileged_leak' .*info at step 1 contains privileged value"):
        turnkit.check_env(make("leak_info"), **FAST)


# A one- or two-digit answer: shorter than leak_min_chars, so searched as a whole token. Its episodes are full of
# small numbers by chance (info["turn"], info["attempts_left"], "2 attempts left", "2 more invalid message(s)").
SUM_ID = "tk-test/Sum-v0"
TOLD = {"": "", "answer": "{}", "ten_more": "1{}", "decimal": "{}.5", "tenth": "0.{}", "negative": "-{}"}
"""What SumEnv says after a wrong attempt (``tell=``): only ``"answer"`` reveals it; the others merely contain it."""


class SumEnv(TextEnv):
    """Add two digits in 3 attempts. ``tell`` picks a TOLD text; ``in_prompt`` puts the answer in the prompt."""

    def __init__(self, *, tell: str = "", in_prompt: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tell, self.in_prompt = tell, in_prompt
        self.attempts = 3

    def generate_task(self, rng):
        a, b = (int(x) for x in rng.integers(1, 10, size=2))
        prompt = f"What is {a} plus {b}?" + (f" (It is {a + b}.)" if self.in_prompt else "")
        return Task(task_id=f"sum-{a}-{b}", prompt=prompt, privileged={"answer": a + b})

    def begin(self, task):
        self.attempts = 3
        return task.prompt

    def respond(self, action):
        answer = self.privileged()["answer"]
        text = action.strip().removeprefix("ANSWER:").strip()
        if not (text.isdecimal() and len(text) < 4):
            return Transition(f"Reply 'ANSWER: <number>'. {self.attempts} attempts left.")
        if int(text) == answer:
            return Transition("Correct.", 1.0, True, {"success": True})
        self.attempts -= 1
        told = f" It is {TOLD[self.tell].format(answer)}." if self.tell else ""
        info = {"attempts_left": self.attempts}
        return Transition(f"Wrong.{told} {self.attempts} attempts left.", 0.0, self.attempts == 0, info)

    def get_state(self):
        return {"attempts": self.attempts}

    def set_state(self, state):
        self.attempts = state["attempts"]


gymnasium.register(id=SUM_ID, entry_point=f"{__name__}:SumEnv", max_episode_steps=12)


def wrong_sum(ctx: Context) -> str:
    return "ANSWER: 1"  # never right: the answers are 2..18


def seed_with_answer(env: gymnasium.Env, answer: int) -> int:
    return next(s for s in range(500) if env.reset(seed=s) and env.unwrapped.privileged()["answer"] == answer)


def test_short_answer_in_an_observation_is_a_leak() -> None:
    pattern = r"'privileged_leak' \(seed=\d\): the observation after step \d+ contains privileged value "
    pattern += r"\['answer'\] = '(\d+)': .*It is \1\. .*\(a short value, matched as a whole token"
    with pytest.raises(ContractError, match=pattern):
        turnkit.check_env(gymnasium.make(SUM_ID, tell="answer"), policy=wrong_sum, **FAST)


@pytest.mark.parametrize("tell", ["ten_more", "decimal", "tenth", "negative"])
def test_a_seventeen_is_not_a_seven(tell: str) -> None:
    env = gymnasium.make(SUM_ID, tell=tell)
    seeds = (seed_with_answer(env, 7), seed_with_answer(env, 2))  # "It is 17.", "It is 7.5.", "It is -7."...
    report = turnkit.check_env(env, policy=wrong_sum, seeds=seeds, checks=["privileged_leak"])
    assert report.result("privileged_leak").status == Status.PASSED, str(report)
    leaky = gymnasium.make(SUM_ID, tell="answer")
    with pytest.raises(ContractError, match=r"= '7': .*It is 7\."):
        turnkit.check_env(leaky, policy=wrong_sum, seeds=seeds, checks=["privileged_leak"])


@pytest.mark.parametrize("seeds", [(0, 1, 2), (0,), (1,), (2,), (3,)])
def test_counters_that_may_equal_a_short_answer_are_no_leak(seeds: tuple[int, ...]) -> None:
    report = turnkit.check_env(gymnasium.make(SUM_ID), policy=wrong_sum, seeds=seeds, **FAST)
    assert {r.status for r in report.results} == {Status.PASSED, Status.SKIPPED}, str(report)  # cross_process off
    detail = report.result("privileged_leak").detail
    assert detail.startswith(f"{len(seeds)} privileged values searched for ({len(seeds)} short ones as whole tokens)")


@pytest.mark.parametrize("answer", [2, 3])
def test_a_counter_equal_to_the_answer_is_taken_for_a_coincidence(answer: int) -> None:
    env = gymnasium.make(SUM_ID)  # the answer is 2 or 3: "Wrong. 2 attempts left." and attempts_left == 2 match it
    report = turnkit.check_env(
        env, policy=wrong_sum, seeds=(seed_with_answer(env, answer),), checks=["privileged_leak"]
    )
    assert report.ok, str(report)
    assert "short-value matches taken for coincidences" in report.result("privileged_leak").detail


def test_math_episodes_at_default_difficulty_searches_its_answers() -> None:
    report = turnkit.check_env(gymnasium.make("turnkit/MathEpisodes-v0"), checks=["privileged_leak"])
    result = report.result("privileged_leak")
    assert result.status == Status.PASSED, str(report)
    assert int(result.detail.split()[0]) > 0 and "short ones as whole tokens" in result.detail


def test_nothing_to_search_is_said_plainly_and_is_a_warning() -> None:
    everything = [str(n) for n in range(2, 19)]
    report = turnkit.check_env(gymnasium.make(SUM_ID), checks=["privileged_leak"], leak_ignore=everything)
    result = report.result("privileged_leak")
    assert result.status == Status.WARNING and report.ok
    assert result.detail == "nothing searched (no privileged value renders to a searchable string)"


def test_answers_that_are_all_in_the_prompt_are_nothing_searched() -> None:
    report = turnkit.check_env(gymnasium.make(SUM_ID, in_prompt=True, tell="answer"), checks=["privileged_leak"])
    result = report.result("privileged_leak")
    assert result.status == Status.WARNING
    assert result.detail == "nothing searched (all 3 privileged values occur in the public prompt, so are exempt)"


def test_env_that_raises_on_garbage_fails_naming_the_action() -> None:
    with pytest.raises(ContractError, match=r"'garbage_actions'.*10k-digit number .* raised ValueError"):
        turnkit.check_env(make("raises_on_garbage"), **FAST)


def test_snapshot_that_does_not_restore_fails() -> None:
    pattern = r"'snapshot' \(seed=\d\): snapshot taken after step \d+, restored once: the continuation differs"
    with pytest.raises(ContractError, match=pattern):
        turnkit.check_env(make("bad_snapshot"), **FAST)


def test_env_that_truncates_itself_fails() -> None:
    with pytest.raises(ContractError, match=r"'truncation'.*unwrapped env returned truncated=True at step 3"):
        turnkit.check_env(make("truncates"), **FAST)


def test_plain_gymnasium_env_is_not_a_text_env() -> None:
    with pytest.raises(ContractError, match=r"'text_env': env.unwrapped is a NotATextEnv, not a turnkit.TextEnv"):
        turnkit.check_env(NotATextEnv(), **FAST)


def test_message_names_env_id_check_and_seed() -> None:
    with pytest.raises(ContractError, match=rf"^{ENV_ID} fails check 'privileged_leak' \(seed=0\): "):
        turnkit.check_env(make("leak_info"), **FAST)


def test_non_raising_mode_reports_every_failure() -> None:
    report = turnkit.check_env(make("leak_info", "truncates"), raise_on_failure=False, **FAST)
    assert not report.ok
    assert [r.name for r in report.failures] == ["privileged_leak", "truncation"]
    assert "FAILED" in str(report).splitlines()[0]


def test_raised_error_carries_the_report() -> None:
    with pytest.raises(ContractError) as caught:
        turnkit.check_env(make("truncates"), **FAST)
    report = caught.value.report
    assert report.failures[-1].name == "truncation" and report.results[0].ok


def test_slow_garbage_action_fails_naming_the_time() -> None:
    # the slow action sleeps 1 s against a 0.5 s limit; the quick ones take ~0.03 ms, far below it even on a busy box
    pattern = r"'garbage_actions' \(seed=0\): garbage action very long line took \d+\.\d s \(limit 0\.5 s\)"
    with pytest.raises(ContractError, match=pattern):
        turnkit.check_env(make("slow"), checks=["garbage_actions"], garbage_time_limit_s=0.5)


def test_env_that_cannot_reset_fails_naming_the_error() -> None:
    pattern = r"'determinism' \(seed=0\): reset raised RuntimeError: the task file is missing"
    with pytest.raises(ContractError, match=pattern):
        turnkit.check_env(make("broken_reset"), checks=["determinism"])


def test_a_failing_policy_is_noted_and_replaced_by_random_text() -> None:
    report = turnkit.check_env(make(), checks=["determinism"], policy=lambda ctx: str(1 / 0))
    assert report.ok
    assert "policy raised ZeroDivisionError: division by zero; using random text" in report.results[0].detail


# ------------------------------------------------------------------------------------------ arguments
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"checks": ["determinism", "telepathy"]}, "unknown check"),
        ({"seeds": ()}, "seeds must be"),
        ({"seeds": (0, None)}, "seeds must be"),
        ({"steps": 0}, "steps must be"),
        ({"leak_min_chars": 0}, "leak_min_chars"),
    ],
)
def test_bad_arguments_raise_config_error(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        turnkit.check_env(GuessEnv(), **kwargs)
