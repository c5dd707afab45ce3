"""turnkit envs inside verifiers, for real: the verifiers package plays them against a loopback model server.

verifiers 0.4 (``verifiers.v1``) runs the ``player`` seat with its own ``null`` chat program (a ``uv`` script in a
subprocess) through its interception server, which calls turnkit's ``AgentServer`` on 127.0.0.1 over a tiny
transformers model decoding greedily. The same policy plays the same seeds in process with turnkit's
``collect_batch``; transcripts, step rewards, flags and returns must be equal. Once the chat program is locked
(set-up), a process with no network (a new network namespace: bubblewrap's ``--unshare-net``, loopback only)
plays the same episodes; without the lock it fails before any episode, saying why.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import gymnasium
import pytest

from turnkit.agents.hf import HFPolicy
from turnkit.agents.serve import AgentServer
from turnkit.errors import ConfigError, EnvError
from turnkit.models.sft import SFTConfig, train_sft
from turnkit.models.threads import torch_threads
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer, save_tiny
from turnkit.rollout.collect import collect_batch
from turnkit.rollout.demos import collect_demos, demo_rows
from turnkit.types import Trajectory

vf = pytest.importorskip("verifiers.v1", reason="verifiers is not installed (pip install 'turnkit[verifiers]')")
from turnkit.integrations.verifiers import REWARD_NAME, load_environment, task_seeds  # noqa: E402
from turnkit.integrations.verifiers_chat import chat_program_script, lock_path, prepare_chat_program  # noqa: E402

MATH = "turnkit/MathEpisodes-v0"
CODE = "turnkit/CollabCode-v0"
MAX_NEW_TOKENS = 16
KEY_VAR = "TURNKIT_TEST_VERIFIERS_KEY"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


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
    sft = SFTConfig(steps=80, batch_size=16, optim={"lr": 1e-2, "warmup_steps": 5})
    train_sft(model, demo_rows(demos.trajectories, tok), sft, pad_id=tok.pad_token_id, progress=False)
    return HFPolicy(model, tok, temperature=0.0, max_new_tokens=MAX_NEW_TOKENS)


def play_in_verifiers(policy: HFPolicy, env_id: str, seeds: Sequence[int], **env_kwargs: Any) -> list[Any]:
    """Every task of ``load_environment(env_id, seeds=seeds)`` played by verifiers against ``AgentServer(policy)``."""
    with AgentServer(policy, model_name="tiny") as server:
        return play_against(server.base_url, env_id, seeds, **env_kwargs)


def play_against(base_url: str, env_id: str, seeds: Sequence[int], **env_kwargs: Any) -> list[Any]:
    """Every task of ``load_environment(env_id, seeds=seeds)`` played by verifiers against the model ``tiny``."""
    env = load_environment(env_id, seeds=seeds, **env_kwargs)
    tasks = list(env.taskset)
    assert [t.data.seed for t in tasks] == list(seeds)
    client = vf.EvalClientConfig(base_url=base_url, api_key_var=KEY_VAR)
    sampling = vf.SamplingConfig(temperature=0.0, max_tokens=MAX_NEW_TOKENS)
    ctx = vf.ModelContext(client=client, model="tiny", sampling=sampling)

    async def run() -> list[Any]:
        async with env.serving():
            return await asyncio.gather(*(env.run_episode(task, ctx) for task in tasks))

    return asyncio.run(run())


def without_network(argv: Sequence[str]) -> list[str]:
    """``argv`` in a new network namespace (bubblewrap ``--unshare-net``): loopback only, nothing else reachable."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap): it cuts a process off the network")
    return [bwrap, "--dev-bind", "/", "/", "--unshare-net", "--die-with-parent", "--", *argv]


def run_child(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -c code`` with no network, importing this checkout's turnkit (and this test module as ``t``)."""
    full_env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{HERE}",
        KEY_VAR: "unused",
        "HF_HUB_OFFLINE": "1",
        **env,
    }
    argv = without_network([sys.executable, "-c", code])
    return subprocess.run(argv, env=full_env, capture_output=True, text=True, timeout=600)


def offline_child(model_dir: str, seeds: list[int], out: str) -> None:
    """In the child with no network: play MathEpisodes against the saved model served on loopback; episodes as JSON."""
    interfaces = [name for _, name in socket.if_nameindex()]
    assert interfaces == ["lo"], f"the episode process can reach a network: {interfaces}"
    with torch_threads(1):
        policy = HFPolicy.from_pretrained(model_dir, temperature=0.0, max_new_tokens=MAX_NEW_TOKENS)
        episodes = play_in_verifiers(policy, MATH, seeds)
    Path(out).write_text(json.dumps([episode.model_dump(mode="json") for episode in episodes]))


UNPREPARED_CHILD = """
import asyncio, json, sys
from turnkit.integrations.verifiers import load_environment

async def serve():
    async with load_environment("turnkit/MathEpisodes-v0", seeds=[0]).serving():
        pass

try:
    asyncio.run(serve())
    raised = None
except Exception as exc:
    raised = {"type": type(exc).__name__, "message": str(exc)}
print(json.dumps(raised))
"""
"""In the child with no network and empty caches: what ``env.serving()`` raises, as JSON (no model: it is quick)."""


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


@pytest.mark.slow
def test_math_episodes_run_in_verifiers_with_no_network(policy, tmp_path):
    """Set-up locks verifiers' chat program once; then a process with no network plays the same episodes."""
    program = prepare_chat_program()  # the set-up step (.ci/setup.sh; a no-op once locked)
    assert program.lock == lock_path(chat_program_script()) and program.lock.is_file()
    model_dir = save_tiny(policy.model, policy.tokenizer, tmp_path / "model")
    seeds = [0, 1, 2, 3]
    out = tmp_path / "episodes.json"
    done = run_child(f"import test_verifiers as t; t.offline_child({str(model_dir)!r}, {seeds!r}, {str(out)!r})")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    episodes = [vf.Episode.model_validate(e) for e in json.loads(out.read_text())]
    trajs = collect_batch([gymnasium.make(MATH) for _ in seeds], policy, seeds)
    for episode, traj in zip(episodes, trajs, strict=True):
        check_same_episode(episode, traj)
    assert max(len(t.steps) for t in trajs) >= 3 and {t.total_reward > 0 for t in trajs} == {True, False}


@pytest.mark.slow
def test_an_unlocked_chat_program_with_no_network_fails_before_any_episode(tmp_path):
    """No lock (empty caches) and no network: ``env.serving()`` raises, naming the set-up step and uv's reason."""
    home = tmp_path / "home"
    caches = {"HOME": str(home), "UV_CACHE_DIR": str(home / "uv-cache"), "UV_HTTP_RETRIES": "0"}
    done = run_child(UNPREPARED_CHILD, **caches)
    assert done.returncode == 0, done.stderr[-3000:]
    raised = json.loads(done.stdout.strip().splitlines()[-1])
    assert raised is not None and raised["type"] == "AgentError", raised
    assert "python -m turnkit.integrations.verifiers" in raised["message"] and "needs PyPI" in raised["message"]
    assert "pypi.org" in raised["message"]  # uv's own reason: it could not reach the index
    assert not list(home.glob(".cache/verifiers/runtimes/scripts/*.py.lock"))


def test_an_episode_whose_player_cannot_reach_the_model_fails_with_the_reason():
    """A player that never got a reply is a failed episode naming the seed and why, not a return of 0."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"  # nothing listens once the socket is closed
    [episode] = play_against(dead, MATH, [5])
    assert not episode.ok
    [error] = episode.errors
    assert "AgentError" in error.message and f"{MATH} seed 5: the player's run stopped" in error.message
    assert "after 0 env turns" in error.message and "connection" in error.message.lower()
    [trace] = episode.traces
    assert REWARD_NAME not in trace.rewards and trace.metrics == {}  # no return is made up for it
    assert trace.info["turnkit"]["steps"] == []


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
    # the local chat program runs from its lock (UV_FROZEN); a runtime that builds it in its own box does not
    assert config.player.harness.env == {"UV_FROZEN": "1", "UV_NATIVE_TLS": "true"}
    docker = {"taskset": {"id": "turnkit-verifiers"}, "player": {"runtime": {"type": "docker"}}}
    assert "UV_FROZEN" not in vf.resolve_env_config(docker).player.harness.env


def test_an_install_without_the_taskset_module_says_to_reinstall(monkeypatch):
    """``turnkit_verifiers`` is a real module shipped with turnkit; an install that lacks it is told so."""
    from turnkit.integrations.verifiers import plugin_module

    assert plugin_module().__file__ == str(ROOT / "turnkit_verifiers" / "__init__.py")
    monkeypatch.setitem(sys.modules, "turnkit_verifiers", None)  # what importing a module that is not there does
    with pytest.raises(ConfigError, match=r"lacks \(it predates it\): reinstall turnkit"):
        plugin_module()
