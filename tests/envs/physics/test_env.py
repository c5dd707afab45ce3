"""The physics env: protocol, determinism, snapshots, privileged data and robustness to bad answers."""

import gymnasium
import numpy as np
import pytest

import turnkit
from turnkit.agents.base import Context
from turnkit.agents.oracle import OracleAgent
from turnkit.envs.physics.env import PhysicsPredictionEnv
from turnkit.envs.physics.oracle import oracle_reply
from turnkit.envs.physics.protocol import parse_positions, parse_request
from turnkit.envs.physics.tasks import CHUNKS
from turnkit.errors import ConfigError, EnvError
from turnkit.types import Message

ENV_ID = "turnkit/PhysicsPrediction-v0"


def _oracle_text(env, obs):
    return oracle_reply(Context(messages=(Message("user", obs),), task=env.unwrapped.task))


def _play(env, seed, answers):
    """Reset with ``seed`` and send ``answers`` (callables of (env, obs) or strings); return the transcript."""
    obs, info = env.reset(seed=seed)
    out = [(obs, info)]
    for a in answers:
        text = a(env, obs) if callable(a) else a
        obs, reward, terminated, truncated, info = env.step(text)
        out.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return out


def test_splits_attribute_lists_every_split():
    assert PhysicsPredictionEnv.splits == ("id", "ood", "interp_train", "interp", "combo_train", "combo")


def test_unknown_split_and_bad_options_raise():
    with pytest.raises(EnvError, match="unknown split"):
        PhysicsPredictionEnv(split="test")
    with pytest.raises(ConfigError, match="ood_level"):
        PhysicsPredictionEnv(split="ood", ood_level="everything")
    with pytest.raises(ConfigError, match="max_format_retries"):
        PhysicsPredictionEnv(max_format_retries=-1)


def test_first_observation_shows_world_bodies_and_three_frames():
    env = gymnasium.make(ENV_ID, kind="collision")
    obs, _ = env.reset(seed=4)
    assert "A: " in obs and "B: " in obs and "There is no gravity." in obs
    assert sorted({f for f, _ in parse_positions(obs)}) == [0, 1, 2]
    assert parse_request(obs) == (3, 9)


def test_parabola_states_gravity():
    obs, _ = gymnasium.make(ENV_ID, kind="parabola").reset(seed=0)
    assert "Gravity is (0, -2.5) units/s^2." in obs


def test_oracle_episode_walks_the_chunks_and_succeeds():
    env = gymnasium.make(ENV_ID, kind="uniform", split="id")
    steps = _play(env, 0, [_oracle_text] * 6)[1:]
    assert [s[4]["frames"] for s in steps] == list(CHUNKS)[: len(steps)]
    assert all(s[1] > 0.99 for s in steps)
    assert steps[-1][2] and steps[-1][4]["success"]
    assert not any(s[2] for s in steps[:-1])


@pytest.mark.parametrize("split", PhysicsPredictionEnv.splits)
def test_oracle_succeeds_on_every_task(split):
    env = gymnasium.make(ENV_ID, split=split)
    trajs = [turnkit.collect(env, OracleAgent(), seed=s) for s in range(100)]
    assert all(t.success for t in trajs), [t.seed for t in trajs if not t.success]
    assert {t.task.metadata["kind"] for t in trajs} == {"uniform", "collision", "parabola"}


def test_same_seed_same_episode_in_fresh_envs():
    a = _play(gymnasium.make(ENV_ID, split="ood"), 11, [_oracle_text] * 4)
    b = _play(gymnasium.make(ENV_ID, split="ood"), 11, [_oracle_text] * 4)
    assert a == b
    assert a[0][0] != _play(gymnasium.make(ENV_ID, split="ood"), 12, [])[0][0]


def test_privileged_positions_appear_only_after_their_chunk_is_answered():
    env = gymnasium.make(ENV_ID, kind="collision")
    transcript = _play(env, 3, [_oracle_text] * 6)
    revealed = 2
    for entry in transcript:
        obs, info = entry[0], entry[-1]
        shown = {f for f, _ in parse_positions(obs)}
        assert max(shown) <= max(revealed, info.get("frames", (0, 0))[1])
        revealed = max(revealed, info.get("frames", (0, 0))[1])
        assert "frames" not in info or isinstance(info["frames"], tuple)
        assert not any(k in info for k in ("privileged", "velocities", "collision_time"))


def _constant_velocity_group(kind, seeds=range(40)):
    from turnkit.agents.scripted import ScriptedAgent
    from turnkit.envs.physics.baselines import constant_velocity_reply

    env = gymnasium.make(ENV_ID, kind=kind)
    return [turnkit.collect(env, ScriptedAgent(constant_velocity_reply), seed=s) for s in seeds]


def test_constant_velocity_baseline_solves_uniform_motion():
    trajs = _constant_velocity_group("uniform")
    assert np.mean([t.success for t in trajs]) == 1.0
    assert np.mean([t.total_reward / len(t.steps) for t in trajs]) > 0.9


@pytest.mark.parametrize("kind", ["parabola", "collision"])
def test_constant_velocity_baseline_fails_gravity_and_collisions(kind):
    trajs = _constant_velocity_group(kind)
    assert np.mean([t.success for t in trajs]) < 0.25
    uniform = np.mean([t.total_reward / len(t.steps) for t in _constant_velocity_group("uniform")])
    assert np.mean([t.total_reward / len(t.steps) for t in trajs]) < uniform - 0.2


@pytest.mark.parametrize("reply", ["random_text", "random_positions"])
def test_random_agents_score_near_zero(reply):
    from turnkit.agents.scripted import RandomAgent, ScriptedAgent
    from turnkit.envs.physics.baselines import random_positions_reply

    agent = RandomAgent() if reply == "random_text" else ScriptedAgent(random_positions_reply)
    env = gymnasium.make(ENV_ID)
    trajs = [turnkit.collect(env, agent, seed=s) for s in range(30)]
    assert not any(t.success for t in trajs)
    assert np.mean([t.total_reward for t in trajs]) < 0.05
    assert all(t.steps[-1].terminated for t in trajs)  # the env ends it (TimeLimit may flag step 6 too)


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        " ",
        "frame",
        "frame 3 A: x=",
        "frame 3 A: x=nan y=nan",
        "frame 99 Z: x=1 y=1",
        "x" * 20_000,
        "a\x00b",
        b"\xff\xfe",
        123,
        "frame 3 A: x=1e999 y=-1e999\n" * 50,
    ],
)
def test_garbage_answers_never_raise(garbage):
    env = gymnasium.make(ENV_ID, kind="collision")
    env.reset(seed=1)
    for _ in range(6):
        obs, reward, terminated, truncated, _ = env.step(garbage)
        assert isinstance(obs, str) and 0.0 <= reward <= 1.0
        if terminated or truncated:
            break


def test_format_errors_explain_and_retry_then_forfeit():
    env = gymnasium.make(ENV_ID, kind="uniform", max_format_retries=1)
    obs, _ = env.reset(seed=2)
    obs, reward, terminated, _, info = env.step("I think it keeps moving.")
    assert (reward, terminated, info["format_retries_left"]) == (0.0, False, 0)
    assert "frame 3 A: x=<x> y=<y>" in obs and parse_request(obs) == (3, 9)
    assert "invalid_action" not in info
    obs, reward, terminated, _, info = env.step("still no numbers")
    assert reward == 0.0 and info["forfeited"] and parse_request(obs) == (10, 16)
    assert info["velocity_error"] >= 0.0  # scored as "stays where last shown"
    while not terminated:
        obs, reward, terminated, _, info = env.step(_oracle_text(env, obs))
    assert info["forfeited_chunks"] == 1 and info["success"] is False


def test_scores_match_hand_computed_offset():
    env = gymnasium.make(ENV_ID, kind="uniform")
    obs, _ = env.reset(seed=5)
    exact = parse_positions(_oracle_text(env, obs), ("A",))
    shifted = "\n".join(f"frame {f} A: x={x + 0.01:.6f} y={y:.6f}" for (f, _), (x, y) in exact.items())
    _, reward, _, _, info = env.step(shifted)
    # A constant 0.01 offset: position error 0.01 everywhere; velocity error 0.1 at frame 3 only (anchor is true).
    assert info["position_error"] == pytest.approx(0.01, abs=2e-4)
    assert info["velocity_error"] == pytest.approx(0.1 / 7, abs=2e-3)
    assert reward == pytest.approx(np.exp(-(info["velocity_error"] + info["position_error"])))


def test_snapshot_restore_gives_identical_continuation():
    env = gymnasium.make(ENV_ID, split="combo")
    obs, _ = env.reset(seed=8)
    obs, *_ = env.step("not an answer")  # use a format retry before the snapshot
    obs, *_ = env.step(_oracle_text(env, obs))
    snap = turnkit.snapshot_env(env)
    plan = ["frame 10 A: x=1 y=1", _oracle_text, _oracle_text, _oracle_text, _oracle_text]

    def run():
        out, o = [], obs
        for a in plan:
            step = env.step(a(env, o) if callable(a) else a)
            out.append(step)
            o = step[0]
            if step[2] or step[3]:
                break
        return out

    first = run()
    env.reset(seed=99)  # a different episode in between
    turnkit.restore_env(env, snap)
    assert run() == first


def test_snapshot_state_is_small():
    env = PhysicsPredictionEnv()
    obs, _ = env.reset(seed=0)
    env.step(_oracle_text(env, obs))
    state = env.get_state()
    assert set(state) == {"chunk", "retries_left", "scores"} and len(state["scores"]) == 1


def test_fixed_task_list_replays_a_task():
    env = PhysicsPredictionEnv(split="ood")
    env.reset(seed=3)
    task = env.task
    fixed = PhysicsPredictionEnv(tasks=[task])
    obs, info = fixed.reset(seed=0)
    assert obs == task.prompt and info["task_id"] == task.task_id


def test_episode_ends_by_itself_within_the_time_limit_with_default_retries():
    env = gymnasium.make(ENV_ID)
    assert env.spec.max_episode_steps == 6
    for seed in range(20):
        transcript = _play(env, seed, ["nonsense"] * 6)
        assert len(transcript) - 1 <= 6 and transcript[-1][2]


@pytest.mark.parametrize("split", ["id", "ood", "combo"])
def test_check_env_passes(split):
    assert turnkit.check_env(gymnasium.make(ENV_ID, split=split)).ok
