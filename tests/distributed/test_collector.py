"""RayCollector on a real local Ray cluster: same trajectories as local collection, and killed workers."""

from __future__ import annotations

import os
import signal
import time

import gymnasium
import pytest
import torch

import turnkit  # noqa: F401  (registers the built-in envs)
from turnkit.agents.oracle import OracleAgent
from turnkit.distributed import EnvSpec, RayCollector, RayConfig, SharedAgent, snapshot_weights
from turnkit.errors import ConfigError
from turnkit.rollout.collect import collect_batch
from turnkit.train.backends import generator_copy
from turnkit.types import ErrorCause

from .helpers import MATH, slow_oracle

SEEDS = [s for s in range(40, 48) for _ in range(2)]
GROUPS = [g for g in range(8) for _ in range(2)]


def local(seeds: list[int], groups: list[int], agent: object, env_id: str = MATH) -> list:
    envs = [gymnasium.make(env_id) for _ in seeds]
    try:
        return collect_batch(envs, agent, seeds, groups=groups)  # type: ignore[arg-type]
    finally:
        for env in envs:
            env.close()


def test_same_trajectories_as_local_collection(ray_cluster: object) -> None:
    with RayCollector(EnvSpec(MATH), SharedAgent(OracleAgent()), RayConfig(workers=3)) as collector:
        result = collector.submit(SEEDS, groups=GROUPS).result()
    assert result.trajectories == local(SEEDS, GROUPS, OracleAgent())
    assert len(set(result.workers)) == 3 and result.timing["retries"] == 0


def test_sampled_turns_and_loaded_weights_match_the_learner(ray_cluster: object, policy_factory) -> None:
    learner = policy_factory()
    learner.attach_lora(r=4, alpha=8, target_modules=("q_proj", "v_proj"), seed=0)
    start = generator_copy(learner)  # what the workers get: the start weights
    with torch.no_grad():
        for name, p in learner.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(len(name)))
    snapshot = snapshot_weights(learner.model, version=1)
    seeds, groups = SEEDS[:6], GROUPS[:6]
    config = RayConfig(workers=1, cpus_per_worker=1)  # one chunk: the same batch as local collection
    with RayCollector(EnvSpec(MATH), SharedAgent(start), config) as collector:
        stale = collector.collect(seeds, groups=groups, sampling={"seed": 5})
        fresh = collector.collect(seeds, groups=groups, sampling={"seed": 5}, weights=snapshot)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the worker's float path
    try:
        expected = local(seeds, groups, learner.with_sampling(seed=5))
    finally:
        torch.set_num_threads(threads)
    assert fresh == expected
    assert [t.steps[0].action.text for t in stale] != [t.steps[0].action.text for t in fresh]


def kill_one_worker_during(collector: RayCollector, seconds: float) -> tuple[object, int]:
    collector.collect(SEEDS[:4], groups=GROUPS[:4])  # both workers are up and have made envs
    victim = collector.worker_pids()[0]
    pending = collector.submit(SEEDS, groups=GROUPS)
    time.sleep(seconds)  # every chunk is inside its first (2 s) agent call
    os.kill(victim, signal.SIGKILL)
    return pending.result(), victim


def test_a_killed_worker_s_episodes_are_rerun_none_lost_none_twice(ray_cluster: object) -> None:
    with RayCollector(EnvSpec(MATH), slow_oracle(2.0), RayConfig(workers=2, max_retries=2)) as collector:
        result, victim = kill_one_worker_during(collector, 1.0)
        assert collector.replaced == 1 and victim not in collector.worker_pids()
    assert result.timing["retries"] >= 1 and result.timing["lost_episodes"] == 0
    assert [(t.seed, t.group) for t in result.trajectories] == list(zip(SEEDS, GROUPS, strict=True))
    assert result.trajectories == local(SEEDS, GROUPS, OracleAgent())  # complete episodes, as if nothing happened
    assert str(victim) not in [name.split("@")[0] for name in result.workers]


def test_past_the_retry_budget_episodes_are_recorded_as_worker_errors(ray_cluster: object) -> None:
    with RayCollector(EnvSpec(MATH), slow_oracle(2.0), RayConfig(workers=2, max_retries=0)) as collector:
        result, _ = kill_one_worker_during(collector, 1.0)
    lost = [t for t in result.trajectories if t.error is not None]
    assert result.timing["lost_episodes"] == len(lost) == len(SEEDS) // 2
    assert all(t.error.cause is ErrorCause.WORKER and t.steps == () and not t.success for t in lost)
    assert [(t.seed, t.group) for t in result.trajectories] == list(zip(SEEDS, GROUPS, strict=True))
    played = [t for t in result.trajectories if t.error is None]
    assert all(t.success for t in played) and len(played) == len(SEEDS) // 2


def test_a_bug_inside_a_worker_is_raised_in_the_driver(ray_cluster: object) -> None:
    spec, agent = EnvSpec("turnkit/NoSuchEnv-v0"), SharedAgent(OracleAgent())
    with RayCollector(spec, agent, RayConfig(workers=1)) as c, pytest.raises(gymnasium.error.Error, match="NoSuchEnv"):
        c.collect([1])


class Unpicklable:
    """An agent factory whose agent cannot be built in the worker (its constructor raises there)."""

    def __call__(self, index: int) -> object:
        raise RuntimeError("no agent here")


def test_a_worker_that_cannot_start_is_a_config_error_not_a_lost_worker(ray_cluster: object) -> None:
    config = RayConfig(workers=1, max_retries=3)
    with (
        RayCollector(EnvSpec(MATH), Unpicklable(), config) as c,
        pytest.raises(ConfigError, match=r"(?s)start.*no agent"),
    ):
        c.collect([1])
