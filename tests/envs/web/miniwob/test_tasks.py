"""Every curated task: deterministic (also in a fresh process), restorable from snapshots; solvers solve theirs.

The full ``turnkit.check_env`` (all checks, cross-process included) runs on the registered default in
tests/contract and on a multi-step task here; ``benchmarks/bench_miniwob.py --check`` runs it on every curated
task (see docs/envs/miniwob.md). In CI every curated task gets the per-task tests below for determinism, the
fresh process and snapshots (a fraction of check_env's cost), and check_env's other checks (leaks, garbage
actions, the invalid allowance, truncation) themselves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import gymnasium
import pytest

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.envs.core import restore_env, snapshot_env
from turnkit.envs.web.miniwob.baselines import random_action
from turnkit.envs.web.miniwob.env import MiniWoBEnv
from turnkit.envs.web.miniwob.solvers import SOLVERS
from turnkit.envs.web.miniwob.tasks import CURATED
from turnkit.envs.web.miniwob.view import parse_page
from turnkit.rollout.collect import collect_batch

SEED = 20_240_601
STEPS = 3


@pytest.fixture(scope="module")
def env(chromium: None) -> Iterator[MiniWoBEnv]:
    e = MiniWoBEnv(allow_uncurated=False)
    yield e
    e.close()


def _play(env: MiniWoBEnv, name: str, actions: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(observations, actions) of one episode of ``name``; random valid actions unless ``actions`` are given."""
    import numpy as np

    obs, _ = env.reset(options={"task": env.make_task(name, SEED)})
    rng, observations, taken = np.random.default_rng(SEED), [obs], []
    for i in range(STEPS if actions is None else len(actions)):
        page = parse_page(obs)
        if actions is None and page is None:
            break
        action = actions[i] if actions is not None else random_action(page, rng)  # type: ignore[arg-type]
        obs, _, terminated, _, _ = env.step(action)
        observations.append(obs)
        taken.append(action)
        if terminated:
            break
    return observations, taken


@pytest.mark.parametrize("name", sorted(CURATED))
def test_a_curated_task_replays_identically_and_restores_from_a_snapshot(env: MiniWoBEnv, name: str) -> None:
    observations, actions = _play(env, name)
    assert _play(env, name, actions)[0] == observations
    if actions:
        env.reset(options={"task": env.make_task(name, SEED)})
        env.step(actions[0])
        snap = snapshot_env(env)
        rest = [env.step(a)[0] for a in actions[1:]]
        env.reset(seed=1)  # another episode in between
        restore_env(env, snap)
        assert [env.step(a)[0] for a in actions[1:]] == rest


_CHILD = """
import json, sys
from turnkit.envs.web.miniwob.env import MiniWoBEnv
job = json.load(sys.stdin)
env = MiniWoBEnv()
out = {}
for name, actions in job["episodes"].items():
    obs, _ = env.reset(options={"task": env.make_task(name, job["seed"])})
    out[name] = [obs] + [env.step(a)[0] for a in actions]
env.close()
print("RESULT:" + json.dumps(out))
"""


def test_every_curated_task_gives_the_same_episode_in_a_fresh_process(env: MiniWoBEnv) -> None:
    episodes = {name: _play(env, name) for name in sorted(CURATED)}
    job = {"seed": SEED, "episodes": {name: actions for name, (_, actions) in episodes.items()}}
    child_env = {**os.environ, "PYTHONHASHSEED": "123", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT:")), None)
    assert line is not None, proc.stderr[-2000:]
    theirs = json.loads(line[len("RESULT:") :])
    for name, (observations, _) in episodes.items():
        assert theirs[name] == observations, name


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_the_scripted_solver_solves_its_task(env: MiniWoBEnv, name: str) -> None:
    for seed in (1, 2):
        task = env.make_task(name, seed)
        (traj,) = collect_batch([env], OracleAgent(), [None], max_turns=12, reset_options=[{"task": task}])
        assert traj.success, (name, seed, [s.action.text for s in traj.steps], traj.final_observation[-300:])


def test_solvers_cover_only_curated_tasks() -> None:
    assert set(SOLVERS) <= set(CURATED) and len(SOLVERS) >= 5 and len(CURATED) >= 20


def test_a_multi_step_task_passes_the_full_check_env(chromium: None) -> None:
    env = gymnasium.make("turnkit/MiniWoB-v0", task="click-checkboxes")
    try:
        report = turnkit.check_env(env, seeds=(0,), raise_on_failure=False)
        assert report.ok, str(report)
        assert report.result("cross_process").status.value == "passed", str(report)
    finally:
        env.close()


def test_every_page_of_the_wheel_is_curated_or_left_out_with_a_reason(chromium: None) -> None:
    from turnkit.envs.web.miniwob.assets import task_names
    from turnkit.envs.web.miniwob.tasks import LEFT_OUT

    assert set(task_names()) == set(CURATED) | set(LEFT_OUT) and not set(CURATED) & set(LEFT_OUT)
    assert all(LEFT_OUT.values()) and all(CURATED.values())


LIGHT_CHECKS = ["gymnasium", "text_env", "privileged_leak", "garbage_actions", "invalid_allowance", "truncation"]
"""The check_env checks the tests above do not already cover per task (determinism, snapshots, fresh process)."""


@pytest.mark.parametrize("name", sorted(CURATED))
def test_every_curated_task_passes_the_rest_of_check_env(chromium: None, name: str) -> None:
    env = gymnasium.make("turnkit/MiniWoB-v0", task=name)
    try:
        report = turnkit.check_env(env, seeds=(0,), cross_process=False, checks=LIGHT_CHECKS, raise_on_failure=False)
    finally:
        env.close()
    assert report.ok, str(report)
