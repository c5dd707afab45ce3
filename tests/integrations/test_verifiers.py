"""turnkit envs inside verifiers, for real: the verifiers package plays them against a loopback model server.

verifiers 0.4 (``verifiers.v1``) runs the ``player`` seat with its own ``null`` chat program (a ``uv`` script in a
subprocess) through its interception server, which calls turnkit's ``AgentServer`` on 127.0.0.1 over a tiny
transformers model decoding greedily. The same policy plays the same seeds in process with turnkit's
``collect_batch``; transcripts, step rewards, flags and returns must be equal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import gymnasium
import pytest

from turnkit.agents.hf import HFPolicy
from turnkit.agents.serve import AgentServer
from turnkit.errors import ConfigError, EnvError
from turnkit.models.sft import SFTConfig, train_sft
from turnkit.models.threads import torch_threads
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from turnkit.rollout.collect import collect_batch
from turnkit.rollout.demos import collect_demos, demo_rows
from turnkit.types import Trajectory

vf = pytest.importorskip("verifiers.v1", reason="verifiers is not installed (pip install 'turnkit[verifiers]')")
from turnkit.integrations.verifiers import REWARD_NAME, load_environment, task_seeds  # noqa: E402

MATH = "turnkit/MathEpisodes-v0"
CODE = "turnkit/CollabCode-v0"
MAX_NEW_TOKENS = 16
KEY_VAR = "TURNKIT_TEST_VERIFIERS_KEY"


@pytest.fixture(scope="module", autouse=True)
def offline_on_one_thread() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp, torch_threads(1):
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv(KEY_VAR, "unused")  # AgentServer needs no key; verifiers' client sends one
        yield


@pytest.fixture(scope="module")
def policy() -> HFPolicy:
    """A tiny model taught MathEpisodes' answer format by a short SFT, decoding greedily.

    On MathEpisodes it is right on some seeds and wrong for three turns on others; on CollabCode it answers the
    person in text for three turns (room for CollabCode's long first observation) and fails the hidden tests.
    """
    tok = build_tiny_tokenizer()
    cfg = TinyModelConfig(
        hidden_size=64, num_layers=1, num_heads=2, intermediate_size=128, max_position_embeddings=4096
    )
    model = build_tiny_model(tok, cfg, seed=0)
    demos = collect_demos(MATH, episodes=200, seed=10_000)
    sft = SFTConfig(steps=80, batch_size=16, lr=1e-2, warmup_steps=5)
    train_sft(model, demo_rows(demos.trajectories, tok), sft, pad_id=tok.pad_token_id, progress=False)
    return HFPolicy(model, tok, temperature=0.0, max_new_tokens=MAX_NEW_TOKENS)


def play_in_verifiers(policy: HFPolicy, env_id: str, seeds: Sequence[int], **env_kwargs: Any) -> list[Any]:
    """Every task of ``load_environment(env_id, seeds=seeds)`` played by verifiers against ``AgentServer(policy)``."""
    env = load_environment(env_id, seeds=seeds, **env_kwargs)
    tasks = list(env.taskset)
    assert [t.data.seed for t in tasks] == list(seeds)
    with AgentServer(policy, model_name="tiny") as server:
        client = vf.EvalClientConfig(base_url=server.base_url, api_key_var=KEY_VAR)
        sampling = vf.SamplingConfig(temperature=0.0, max_tokens=MAX_NEW_TOKENS)
        ctx = vf.ModelContext(client=client, model="tiny", sampling=sampling)

        async def run() -> list[Any]:
            async with env.serving():
                return await asyncio.gather(*(env.run_episode(task, ctx) for task in tasks))

        return asyncio.run(run())


def check_same_episode(episode: Any, traj: Trajectory) -> None:
    """One verifiers episode against turnkit's own trajectory of the same seed and policy."""
    assert traj.error is None and traj.steps
    assert episode.ok, [e.message for e in episode.errors]
    [trace] = episode.traces
    assert trace.ok, [e.message for e in trace.errors]
    # the transcript: the first observation, then each reply and the env's answer to it, exactly
    assert [(m.role, m.content) for m in trace.messages] == [(m.role, m.content) for m in traj.messages()]
    assert trace.num_turns == len(traj.steps) == len(trace.calls)  # one model call per turn, through verifiers
    # the rubric is the env's reward: the return, and every step's reward and flags
    record = trace.info["turnkit"]
    assert record["seed"] == traj.seed
    assert [(s["reward"], s["terminated"], s["truncated"]) for s in record["steps"]] == [
        (s.reward, s.terminated, s.truncated) for s in traj.steps
    ]
    assert trace.rewards[REWARD_NAME].score == traj.total_reward == trace.reward
    assert trace.metrics["turns"] == len(traj.steps)
    assert trace.metrics["success"] == float(traj.success)
    assert trace.metrics["truncated"] == float(not traj.steps[-1].terminated)


@pytest.mark.slow
def test_math_episodes_in_verifiers_equal_turnkit_rollouts(policy):
    seeds = [0, 1, 2, 3, 4, 5]
    episodes = play_in_verifiers(policy, MATH, seeds)
    trajs = collect_batch([gymnasium.make(MATH) for _ in seeds], policy, seeds)
    for episode, traj in zip(episodes, trajs, strict=True):
        check_same_episode(episode, traj)
    # the comparison covers what matters: multi-turn episodes, and both rewarded and unrewarded ones
    assert max(len(t.steps) for t in trajs) >= 3
    assert {t.total_reward > 0 for t in trajs} == {True, False}


@pytest.mark.slow
def test_collab_code_in_verifiers_equals_turnkit_rollouts(policy):
    seeds = [0, 1]
    # max_turns=3: the third message is graded in the sandbox whatever it says
    episodes = play_in_verifiers(policy, CODE, seeds, max_turns=3)
    trajs = collect_batch([gymnasium.make(CODE, max_turns=3) for _ in seeds], policy, seeds)
    for episode, traj in zip(episodes, trajs, strict=True):
        check_same_episode(episode, traj)
        assert len(traj.steps) == 3 and "hidden tests" in traj.final_observation
        assert all(s.action.text.strip() for s in traj.steps)  # the replies are text, not empty turns


def test_the_taskset_is_the_env_seeds_and_bad_input_fails_clearly():
    env = load_environment(MATH, seeds=range(10**6, 10**6 + 3), split="ood")
    local = gymnasium.make(MATH, split="ood")
    for task in env.taskset:
        assert task.data.prompt == local.reset(seed=task.data.seed)[0]
        assert task.data.env_kwargs == {"split": "ood"} and task.data.system_prompt is None
    assert [t.data.seed for t in env.taskset.take(2)] == [10**6, 10**6 + 1]
    assert len(list(load_environment(MATH).taskset)) == 1024
    with pytest.raises(EnvError, match="did you mean 'turnkit/MathEpisodes-v0'"):
        load_environment("turnkit/MathEpisods-v0")
    with pytest.raises(EnvError, match="cannot make"):
        load_environment(MATH, no_such_kwarg=1)
    bad: list[list[Any]] = [[], [1, 1], [-1], ["0"]]
    for seeds in bad:
        with pytest.raises(ConfigError):
            load_environment(MATH, seeds=seeds)
    assert task_seeds(None, 2, seed_start=5) == [5, 6]


def test_the_taskset_loads_by_id_as_verifiers_plugins_do():
    """verifiers' own loaders (eval CLI, prime-rl) find the taskset and env by the id ``turnkit-verifiers``."""
    config = vf.resolve_env_config({"taskset": {"id": "turnkit-verifiers", "env_id": MATH, "num_seeds": 2}})
    env = vf.load_environment(config)
    assert type(env).__name__ == "TurnkitEnv" and config.player.harness.id == "null"
    assert [t.data.name for t in env.taskset] == [f"{MATH}#0", f"{MATH}#1"]
