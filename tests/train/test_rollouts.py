"""One rollout protocol: every source plays a job's episode seeds and groups at the job's sampling seed.

Inline, in the background thread and on Ray workers, the same :class:`RolloutJob` gives the same episodes, and
the learner's own sampling settings are left as they were.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from transformers import PreTrainedTokenizerFast

from turnkit.agents.hf import HFPolicy
from turnkit.distributed.worker import EnvSpec
from turnkit.train.backends import HFBackend
from turnkit.train.config import TrainConfig
from turnkit.train.loop import step_sampling_seed
from turnkit.train.rollouts import InlineRollouts, RolloutJob, ThreadRollouts
from turnkit.types import Trajectory

from .conftest import make_policy

MATH = "turnkit/MathEpisodes-v0"  # a built-in env: Ray workers make it by name
CFG = TrainConfig(env_id=MATH, env_kwargs={}, grpo={"group_size": 2}, groups_per_step=2, max_turns=2)
JOB = RolloutJob(step=1, task_seeds=[3, 8], sampling_seed=step_sampling_seed(0, 1), group_size=2)


def episodes(trajs: list[Trajectory]) -> list[Any]:
    """What an episode is, without timings: seed, group, every turn's ids and reward, and its error."""
    return [(t.seed, t.group, [(s.action.token_ids, s.reward) for s in t.steps], t.error) for t in trajs]


def logprobs(trajs: list[Trajectory]) -> list[float]:
    """Every sampled token's log-prob (another process or batch may round them differently)."""
    return [lp for t in trajs for s in t.steps for lp in s.action.logprobs]


def same_play(trajs: list[Trajectory], expected: list[Trajectory]) -> bool:
    return episodes(trajs) == episodes(expected) and logprobs(trajs) == pytest.approx(logprobs(expected), abs=1e-4)


@contextmanager
def inline(policy: HFPolicy) -> Iterator[InlineRollouts]:
    envs = [EnvSpec(MATH).make() for _ in range(len(JOB.episode_seeds))]
    source = InlineRollouts(HFBackend(policy), envs, CFG, chat=None)
    try:
        yield source
    finally:
        source.close()


def play_inline(policy: HFPolicy, job: RolloutJob) -> list[Trajectory]:
    with inline(policy) as source:
        return source.submit(job).result()[0]


def test_inline_plays_the_job_without_changing_the_learners_sampling(tokenizer: PreTrainedTokenizerFast) -> None:
    policy = make_policy(tokenizer)
    before = policy.sampling
    with inline(policy) as source:
        trajs, _ = source.submit(JOB).result()
    assert policy.sampling == before
    assert [(t.seed, t.group) for t in trajs] == list(zip(JOB.episode_seeds, JOB.groups, strict=True))
    other = RolloutJob(step=2, task_seeds=JOB.task_seeds, sampling_seed=step_sampling_seed(0, 2), group_size=2)
    assert episodes(play_inline(policy, other)) != episodes(trajs)  # the job's sampling seed decides the draws


def test_inline_and_thread_sources_play_a_job_identically(tokenizer: PreTrainedTokenizerFast) -> None:
    policy = make_policy(tokenizer)
    expected = play_inline(policy, JOB)
    source = ThreadRollouts(EnvSpec(MATH), policy, max_turns=CFG.max_turns, chat=None)
    try:
        assert same_play(source.submit(JOB).result()[0], expected)
    finally:
        source.close()


@pytest.mark.slow
def test_ray_workers_play_a_job_as_the_loop_does(tokenizer: PreTrainedTokenizerFast) -> None:
    pytest.importorskip("ray")
    from turnkit.distributed.cluster import RayConfig
    from turnkit.train.rollouts import RayRollouts

    policy = make_policy(tokenizer)
    expected = play_inline(policy, JOB)
    config = RayConfig(workers=2)  # each worker plays one group: other batches, same episodes
    source = RayRollouts(EnvSpec(MATH), policy, config, max_turns=CFG.max_turns, chat=None)
    try:
        assert same_play(source.submit(JOB).result()[0], expected)
    finally:
        source.close()
