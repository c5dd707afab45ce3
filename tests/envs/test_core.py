"""The TextEnv base: invalid actions, feedback, reset options, splits, snapshots and rendering."""

from __future__ import annotations

import gymnasium
import pytest

from turnkit.envs.core import (
    EnvSnapshot,
    InvalidAction,
    TextEnv,
    Transition,
    restore_env,
    snapshot_env,
    validate_action,
)
from turnkit.envs.spaces import TextSpace
from turnkit.errors import EnvError
from turnkit.types import Task


class Dice(TextEnv):
    """Say "roll" to roll a die from the episode RNG; "stop" ends the episode.

    Snapshots replay the history unless ``state_snapshots`` (then ``get_state``/``set_state`` are used).
    """

    def __init__(self, *, state_snapshots: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.state_snapshots = state_snapshots
        self.set_state_calls = 0

    def generate_task(self, rng):
        target = int(rng.integers(1, 7))
        return Task(
            task_id=f"dice-{target}",
            prompt="Roll until you hit the target.",
            privileged={"target": target},
            family="dice",
            split=self.split,
            difficulty=2.0,
        )

    def begin(self, task):
        self.rolls: list[int] = []
        return task.prompt

    def respond(self, action):
        if action.strip() == "stop":
            return Transition("Stopped.", terminated=True, info={"success": False})
        self.rolls.append(int(self.np_random.integers(1, 7)))
        hit = self.rolls[-1] == self.task.privileged["target"]
        return Transition(f"You rolled {self.rolls[-1]}.", reward=float(hit), info={"rolls": len(self.rolls)})

    def get_state(self):
        return {"rolls": self.rolls} if self.state_snapshots else super().get_state()

    def set_state(self, state):
        self.set_state_calls += 1
        self.rolls = state["rolls"]


TASKS = (
    Task(task_id="fixed-0", prompt="Task zero.", privileged={"target": 1}),
    Task(task_id="fixed-1", prompt="Task one.", privileged={"target": 2}),
    Task(task_id="fixed-2", prompt="Task two.", privileged={"target": 3}),
)

gymnasium.register(id="tk-test/Dice-v0", entry_point=Dice, max_episode_steps=4)


def started(env: TextEnv | None = None, seed: int = 0) -> TextEnv:
    env = env if env is not None else Dice()
    env.reset(seed=seed)
    return env


# ------------------------------------------------------------------------------------------ validate_action
@pytest.mark.parametrize(
    ("action", "reason"),
    [
        (None, InvalidAction.NOT_TEXT),
        (42, InvalidAction.NOT_TEXT),
        (["roll"], InvalidAction.NOT_TEXT),
        ("", InvalidAction.EMPTY),
        (" \n\t", InvalidAction.EMPTY),
        ("x" * 11, InvalidAction.TOO_LONG),
        ("ro\x00ll", InvalidAction.NUL_BYTES),
        ("\udc80", InvalidAction.INVALID_UTF8),
        (b"\xff", InvalidAction.INVALID_UTF8),
    ],
)
def test_validate_action_rejects(action, reason: InvalidAction) -> None:
    assert validate_action(action, 10) == ("", reason)


@pytest.mark.parametrize(("action", "text"), [("roll", "roll"), (b"r\xc3\xb6ll", "röll"), ("x" * 10, "x" * 10)])
def test_validate_action_accepts(action, text: str) -> None:
    assert validate_action(action, 10) == (text, None)


# ------------------------------------------------------------------------------------------ steps and feedback
def test_reset_returns_prompt_and_public_info() -> None:
    obs, info = Dice(split="ood").reset(seed=1)
    assert obs == "Roll until you hit the target."
    assert info == {"task_id": info["task_id"], "family": "dice", "split": "ood", "difficulty": 2.0, "turn": 0,
                    "invalid_actions": 0}  # fmt: skip


def test_step_passes_respond_through_and_adds_counters() -> None:
    env = started()
    obs, reward, terminated, truncated, info = env.step("roll")
    assert obs.startswith("You rolled ") and isinstance(reward, float)
    assert (terminated, truncated) == (False, False)
    assert info["rolls"] == 1 and info["turn"] == 1 and info["invalid_actions"] == 0 and info["family"] == "dice"


def test_invalid_action_is_explained_not_raised() -> None:
    obs, reward, terminated, _, info = started().step("")
    assert obs == "Your last message was not accepted: it was empty. 2 more invalid message(s) end the episode."
    assert (reward, terminated, info["invalid_action"], info["invalid_actions"]) == (0.0, False, "empty", 1)


def test_too_long_feedback_names_the_limit() -> None:
    obs = started(Dice(max_action_chars=5)).step("rolling")[0]
    assert "longer than 5 characters" in obs


def test_invalid_allowance_ends_the_episode_when_exceeded() -> None:
    env = started(Dice(max_invalid_actions=2))
    results = [env.step(None) for _ in range(3)]
    assert [r[2] for r in results] == [False, False, True]
    assert results[-1][0].endswith("The episode is over.") and results[-1][4]["success"] is False


def test_valid_actions_do_not_reset_the_invalid_count() -> None:
    env = started(Dice(max_invalid_actions=1))
    env.step("")
    env.step("roll")
    assert env.step("")[2] is True


def test_zero_allowance_ends_on_the_first_invalid_action() -> None:
    assert started(Dice(max_invalid_actions=0)).step("")[2] is True


def test_step_after_the_end_answers_episode_over() -> None:
    env = started()
    env.step("stop")
    with pytest.warns(UserWarning, match="after the episode ended"):
        obs, reward, terminated, truncated, info = env.step("roll")
    assert (obs, reward, terminated, truncated) == ("The episode has ended.", 0.0, True, False)
    assert info["invalid_action"] == InvalidAction.EPISODE_OVER.value


def test_step_before_reset_raises_env_error() -> None:
    with pytest.raises(EnvError, match="call reset"):
        Dice().step("roll")


def test_task_before_reset_raises_env_error() -> None:
    with pytest.raises(EnvError, match="call reset"):
        _ = Dice().task


def test_same_seed_same_episode() -> None:
    a, b = started(seed=5), started(seed=5)
    assert a.task == b.task
    assert [a.step("roll")[0] for _ in range(4)] == [b.step("roll")[0] for _ in range(4)]


def test_privileged_is_the_tasks_hidden_data() -> None:
    env = started()
    assert env.privileged() == env.task.privileged == {"target": env.task.privileged["target"]}


def test_spaces_are_text_spaces_bounded_by_max_action_chars() -> None:
    env = Dice(max_action_chars=99)
    assert env.action_space == TextSpace(max_length=99)
    assert isinstance(env.observation_space, TextSpace)


# ------------------------------------------------------------------------------------------ reset options and tasks
def test_reset_option_task_plays_that_task() -> None:
    obs, info = Dice().reset(seed=0, options={"task": TASKS[1]})
    assert (obs, info["task_id"]) == ("Task one.", "fixed-1")


def test_reset_option_task_must_be_a_task() -> None:
    with pytest.raises(EnvError, match=r"must be a turnkit\.Task, got dict"):
        Dice().reset(options={"task": {"prompt": "hi"}})


def test_fixed_task_list_with_index() -> None:
    env = Dice(tasks=TASKS)
    assert env.reset(options={"task_index": 2})[1]["task_id"] == "fixed-2"


def test_fixed_task_list_index_out_of_range() -> None:
    with pytest.raises(EnvError, match="task_index 3 out of range for 3 tasks"):
        Dice(tasks=TASKS).reset(options={"task_index": 3})


def test_fixed_task_list_draws_by_seed() -> None:
    drawn = {seed: Dice(tasks=TASKS).reset(seed=seed)[1]["task_id"] for seed in range(12)}
    assert set(drawn.values()) == {t.task_id for t in TASKS}
    assert drawn == {seed: Dice(tasks=TASKS).reset(seed=seed)[1]["task_id"] for seed in range(12)}


def test_fixed_task_list_skips_split_validation() -> None:
    assert Dice(tasks=TASKS, split="my-benchmark").split == "my-benchmark"


def test_empty_task_list_is_an_error() -> None:
    with pytest.raises(EnvError, match="task list is empty"):
        Dice(tasks=[])


def test_without_generator_a_task_list_is_needed() -> None:
    class NoGenerator(TextEnv):
        def begin(self, task):
            return task.prompt

    with pytest.raises(NotImplementedError, match="pass tasks="):
        NoGenerator().reset(seed=0)
    assert NoGenerator(tasks=TASKS).reset(seed=0)[0].startswith("Task")


def test_task_index_without_a_task_list_is_an_error() -> None:
    with pytest.raises(EnvError, match="task_index"):
        Dice().reset(seed=0, options={"task_index": 1})


# ------------------------------------------------------------------------------------------ constructor checks
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"split": "test"}, r"unknown split 'test'; choose one of \['id', 'ood', 'combo'\]"),
        ({"max_invalid_actions": -1}, "max_invalid_actions must be >= 0"),
        ({"max_action_chars": 0}, "max_action_chars must be >= 1"),
        ({"render_mode": "rgb_array"}, "unknown render_mode 'rgb_array'"),
    ],
)
def test_bad_constructor_arguments_raise_env_error(kwargs: dict, message: str) -> None:
    with pytest.raises(EnvError, match=message):
        Dice(**kwargs)


# ------------------------------------------------------------------------------------------ snapshots
def continuation(env: gymnasium.Env, actions: list[str]) -> list[tuple]:
    return [tuple(env.step(a)[:4]) for a in actions]


ACTIONS = ["roll", "", "roll", "roll", "stop"]


@pytest.mark.parametrize("state_snapshots", [False, True])
def test_restore_gives_an_identical_continuation(state_snapshots: bool) -> None:
    env = started(Dice(state_snapshots=state_snapshots), seed=3)
    env.step("roll")
    snap = env.snapshot()
    first = continuation(env, ACTIONS)
    env.restore(snap)
    assert continuation(env, ACTIONS) == first
    env.restore(snap)  # a snapshot can be restored any number of times
    assert continuation(env, ACTIONS) == first


def test_default_snapshot_replays_the_history() -> None:
    env = started()
    env.step("roll")
    env.step("")
    snap = env.snapshot()
    assert snap.state[0] == "replay" and snap.state[2] == ["roll", ""]
    assert (snap.turn, snap.invalid_actions, snap.done) == (2, 1, False)


def test_state_snapshot_uses_get_state_and_a_private_copy() -> None:
    env = started(Dice(state_snapshots=True))
    env.step("roll")
    snap = env.snapshot()
    assert snap.state[0] == "state"
    env.restore(snap)
    env.rolls.append(99)  # mutating the live state must not change the snapshot
    env.restore(snap)
    assert env.set_state_calls == 2 and len(env.rolls) == 1


def test_restore_brings_back_counters_and_done() -> None:
    env = started(Dice(max_invalid_actions=1))
    env.step("")
    snap = env.snapshot()
    assert env.step("")[2] is True
    env.restore(snap)
    _, _, terminated, _, info = env.step("roll")
    assert not terminated and info["invalid_actions"] == 1 and info["turn"] == 2


def test_restore_into_another_instance() -> None:
    env = started(seed=4)
    env.step("roll")
    snap = env.snapshot()
    other = started(seed=9)
    other.restore(snap)
    assert other.task == env.task
    assert continuation(other, ACTIONS) == continuation(env, ACTIONS)


def test_snapshot_is_frozen() -> None:
    snap = started().snapshot()
    assert isinstance(snap, EnvSnapshot)
    with pytest.raises(AttributeError):
        snap.turn = 5  # type: ignore[misc]


def test_restore_env_restores_the_time_limit_counter() -> None:
    env = gymnasium.make("tk-test/Dice-v0")
    env.reset(seed=0)
    env.step("roll")
    snap = snapshot_env(env)
    assert [env.step("roll")[3] for _ in range(3)] == [False, False, True]
    restore_env(env, snap)
    assert [env.step("roll")[3] for _ in range(3)] == [False, False, True]


def test_snapshot_env_needs_a_text_env() -> None:
    env = gymnasium.make("CartPole-v1")
    env.reset(seed=0)
    with pytest.raises(EnvError, match=r"snapshot needs a turnkit\.TextEnv, got CartPoleEnv"):
        snapshot_env(env)


def test_restore_env_needs_a_text_env() -> None:
    snap = started().snapshot()
    with pytest.raises(EnvError, match=r"restore needs a turnkit\.TextEnv"):
        restore_env(gymnasium.make("CartPole-v1"), snap)


def test_restore_env_into_a_fresh_made_env() -> None:
    env = gymnasium.make("tk-test/Dice-v0")
    env.reset(seed=0)
    snap = snapshot_env(env)
    fresh = gymnasium.make("tk-test/Dice-v0")
    restore_env(fresh, snap)
    assert fresh.step("roll")[:4] == env.step("roll")[:4]


# ------------------------------------------------------------------------------------------ rendering
def test_render_ansi_shows_the_prompt_then_the_last_exchange() -> None:
    env = Dice(render_mode="ansi")
    env.reset(seed=0)
    assert env.render() == "Roll until you hit the target."
    obs = env.step("roll")[0]
    assert env.render() == f"[agent] roll\n[env] {obs}"


def test_render_marks_invalid_actions() -> None:
    env = started(Dice(render_mode="ansi"))
    env.step(None)
    assert env.render().startswith("[agent] <invalid: not_text>\n[env] Your last message was not accepted")


def test_render_human_prints(capsys: pytest.CaptureFixture[str]) -> None:
    env = started(Dice(render_mode="human"))
    assert env.render() is None
    assert capsys.readouterr().out == "Roll until you hit the target.\n"


def test_render_after_restore_matches_the_snapshot_point() -> None:
    env = started(Dice(state_snapshots=True, render_mode="ansi"))
    env.step("roll")
    shown, snap = env.render(), env.snapshot()
    env.step("stop")
    env.restore(snap)
    assert env.render() == shown
