"""Recording, canonicalising and comparing transcripts for check_env."""

from __future__ import annotations

import json

import gymnasium
import numpy as np
import pytest

from turnkit.envs.checker_episodes import (
    EpisodeFault,
    canonical,
    first_difference,
    play,
    record_episode,
    replay,
    short_repr,
)
from turnkit.envs.core import TextEnv, Transition
from turnkit.types import Task


class Counter(TextEnv):
    """Counts messages; ``boom`` makes it raise on a message."""

    def generate_task(self, rng):
        return Task(task_id=f"c-{int(rng.integers(100))}", prompt="Talk to me.", privileged={"k": 7})

    def begin(self, task):
        self.n = 0
        return task.prompt

    def respond(self, action):
        if action == "boom":
            raise RuntimeError("exploded")
        self.n += 1
        return Transition(f"message {self.n}", reward=0.5, terminated=action == "bye", info={"n": self.n})


def test_canonical_is_json_and_exact_for_floats() -> None:
    value = {"b": np.float64(0.1) + np.float64(0.2), "a": {3, 1}, "n": np.arange(2)}
    out = canonical(value)
    assert json.loads(json.dumps(out)) == out
    assert out == {"a": ["1", "3"], "b": "float:0.30000000000000004", "n": [0, 1]}


def test_canonical_masks_memory_addresses() -> None:
    assert canonical(object()) == canonical(object())


def test_record_episode_keeps_actions_records_and_task() -> None:
    ep = record_episode(Counter(), 3, replay(["hi", "", "bye", "never sent"]))
    assert ep.actions == ["hi", "", "bye"]
    assert [r["observation"] for r in ep.records][1:] == ["message 1", ep.raw[2][0], "message 2"]
    assert ep.records[0]["task"]["privileged"] == {"k": 7}
    assert ep.records[-1]["terminated"] is True and ep.records[-1]["reward"] == "float:0.5"


def test_record_episode_names_the_step_that_raised() -> None:
    with pytest.raises(EpisodeFault, match=r"step 2 \(action 'boom'\) raised RuntimeError: exploded") as caught:
        record_episode(Counter(), 5, replay(["hi", "boom"]))
    assert caught.value.seed == 5


def test_play_stops_at_termination() -> None:
    env = Counter()
    env.reset(seed=0)
    assert len(play(env, ["a", "bye", "c"])) == 2


def test_identical_transcripts_have_no_difference() -> None:
    a = record_episode(Counter(), 1, replay(["x", "y"]))
    b = record_episode(Counter(), 1, replay(["x", "y"]))
    assert first_difference(a.records, b.records) is None


def test_length_difference_is_reported() -> None:
    a = record_episode(Counter(), 1, replay(["x", "y"]))
    b = record_episode(Counter(), 1, replay(["x"]))
    assert first_difference(a.records, b.records) == "the episodes have different lengths (2 vs 1 steps)"


def test_ignored_info_keys_are_not_compared() -> None:
    x = [canonical({"observation": "o", "info": {"duration_s": 0.1, "n": 1}})]
    y = [canonical({"observation": "o", "info": {"duration_s": 0.3, "n": 1}})]
    assert first_difference(x, y) == "reset: info['duration_s'] differs: 0.1 vs 0.3"
    assert first_difference(x, y, ignore={"duration_s"}) is None


def test_missing_keys_are_named() -> None:
    x = [{"observation": "o", "info": {"a": 1}}]
    y = [{"observation": "o", "info": {}}]
    assert first_difference(x, y) == "reset: info['a'] differs: 1 vs <missing>"


def test_first_step_numbers_a_continuation() -> None:
    x = [{"observation": "same"}, {"observation": "left"}]
    y = [{"observation": "same"}, {"observation": "right"}]
    assert first_difference(x, y, first_step=3).startswith("step 4: observation differs")


def test_short_repr_keeps_short_values() -> None:
    assert short_repr("abc") == "'abc'"
    assert short_repr(b"x" * 500).endswith("(500 chars)")


def test_record_episode_works_on_wrapped_envs() -> None:
    gymnasium.register(id="tk-test/Counter-v0", entry_point=Counter, max_episode_steps=2)
    ep = record_episode(gymnasium.make("tk-test/Counter-v0"), 0, replay(["a", "b", "c"]))
    assert len(ep.actions) == 2 and ep.records[-1]["truncated"] is True
