r"""Where the GRPO loop's rollouts are played: in the loop, in a background thread, or on Ray workers.

The loop asks for the rollout of step ``s`` with :meth:`RolloutSource.submit` (a :class:`RolloutJob`: the
step's task seeds and sampling seed) and later takes it with ``.result()``. Three sources:

* :class:`InlineRollouts` (the default): plays the job at once with the generation backend's agent (the
  learner itself for ``rollout.backend="hf"``); the synchronous loop of :mod:`turnkit.train.loop`.
* :class:`ThreadRollouts` (``rollout.async=true`` on one machine): a frozen copy of the policy plays jobs in a
  background thread while the learner updates.
* :class:`RayRollouts` (``rollout.ray.address`` set): copies of the policy on Ray env workers
  (:class:`~turnkit.distributed.collector.RayCollector`), sync or async.

**One-step-off.** With staleness ``k`` (``rollout.max_staleness``; 0 when ``rollout.async`` is off) the loop submits
the jobs of steps ``t .. t+k`` before it updates at step ``t``. A job plays with the newest weights the loop
has :meth:`~RolloutSource.sync`\ ed when it is submitted, so the batch of step ``t + k`` comes from the policy
after step ``t − 1``: the learner at step ``t`` trains on data at most ``k`` updates old
(``policy_lag`` in the metrics), and PPO's ratio uses the log-probs recorded when the data was sampled, so it
corrects for exactly that lag. The task seeds of a step are drawn from the run's generator when its job is
submitted, in step order, so the tasks of every step are the same in every mode.

Every source plays a job the same way: :func:`play` runs :func:`~turnkit.rollout.collect.collect_batch` on
the job's :attr:`~RolloutJob.episode_seeds` and :attr:`~RolloutJob.groups` with an agent at the job's
:attr:`~RolloutJob.sampling` (the loop makes the seed, :func:`~turnkit.train.loop.step_sampling_seed`); the
learner's own sampling settings are never changed. So a job gives the same episodes inline, in the thread and on
Ray workers.

Example:
    >>> job = RolloutJob(step=3, task_seeds=[11, 12], sampling_seed=7, group_size=2)
    >>> job.episode_seeds, job.groups, job.sampling
    ([11, 11, 12, 12], [0, 0, 1, 1], {'seed': 7})
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import gymnasium

from turnkit.agents.hf import HFPolicy
from turnkit.agents.timed import TimedAgent
from turnkit.distributed.cluster import RayConfig
from turnkit.distributed.weights import WeightsSnapshot, snapshot_weights
from turnkit.distributed.worker import EnvSpec, EnvWorker, EpisodeChunk, SharedAgent
from turnkit.errors import ConfigError
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect_batch
from turnkit.train.backends import GenerationBackend, build_backend, generator_copy
from turnkit.train.config import TrainConfig
from turnkit.types import Trajectory

Rollout = tuple[list[Trajectory], dict[str, float]]
"""A finished rollout: the trajectories (group-major, as :attr:`RolloutJob.episode_seeds`) and timings."""


@dataclass(frozen=True)
class RolloutJob:
    """One training step's rollout.

    Attributes:
        step: The training step that will learn from it.
        task_seeds: One task seed per group.
        sampling_seed: The policy's sampling seed for this step.
        group_size: Episodes per task.
    """

    step: int
    task_seeds: list[int]
    sampling_seed: int
    group_size: int

    @property
    def episode_seeds(self) -> list[int]:
        """Each episode's reset seed (every task ``group_size`` times, group-major)."""
        return [s for s in self.task_seeds for _ in range(self.group_size)]

    @property
    def groups(self) -> list[int]:
        """Each episode's group index."""
        return [g for g in range(len(self.task_seeds)) for _ in range(self.group_size)]

    @property
    def sampling(self) -> dict[str, Any]:
        """The ``SamplingConfig`` changes the job plays with (its sampling seed), for ``agent.with_sampling``."""
        return {"seed": self.sampling_seed}


class RolloutHandle(Protocol):
    """A submitted job; ``result()`` blocks until it is played."""

    version: int
    """The learner step whose weights play it."""

    def result(self) -> Rollout:
        """The trajectories and timings (waits for the job)."""
        ...


@dataclass
class DoneRollout:
    """A job already played (inline, or restored from a checkpoint)."""

    rollout: Rollout
    version: int

    def result(self) -> Rollout:
        """The rollout."""
        return self.rollout


@dataclass
class _FutureRollout:
    future: Future[Rollout]
    version: int

    def result(self) -> Rollout:
        return self.future.result()


class RolloutSource(Protocol):
    """Plays :class:`RolloutJob`\\ s for the loop and follows the learner's weights."""

    def submit(self, job: RolloutJob) -> RolloutHandle:
        """Start (or do) the job with the newest synced weights."""
        ...

    def sync(self, policy: HFPolicy, step: int) -> dict[str, float]:
        """Take the learner's weights after ``step``'s update for later jobs; returns ``sync_s`` (and more)."""
        ...

    def agent(self, **changes: Any) -> Any:
        """An agent with the learner's current weights (for evaluation), with ``SamplingConfig`` changes."""
        ...

    def close(self) -> None:
        """Release envs, threads and workers; idempotent."""
        ...


class InlineRollouts:
    """Play each job at once, in the loop, with the generation backend's agent (the synchronous loop).

    Args:
        backend: The generation backend (its ``agent()`` plays; its ``sync`` follows the learner).
        envs: One env per episode of a step.
        cfg: The run's settings (group size, turn limit).
        chat: Token-exact contexts.
        version: The learner step of the start weights (after a resume, the resumed step).
    """

    def __init__(
        self,
        backend: GenerationBackend,
        envs: Sequence[gymnasium.Env],
        cfg: TrainConfig,
        *,
        chat: ChatDelta | None,
        version: int = 0,
    ) -> None:
        self.backend, self.envs, self.cfg, self.chat = backend, list(envs), cfg, chat
        self.version = version

    def submit(self, job: RolloutJob) -> RolloutHandle:
        """Play the job now."""
        agent = self.backend.agent(**job.sampling)
        return DoneRollout(play(agent, self.envs, job, max_turns=self.cfg.max_turns, chat=self.chat), self.version)

    def sync(self, policy: HFPolicy, step: int) -> dict[str, float]:
        """The backend's sync (nothing to do for ``hf``: the generator is the learner)."""
        self.version = step
        return self.backend.sync(policy, step)

    def agent(self, **changes: Any) -> Any:
        """The backend's agent."""
        return self.backend.agent(**changes)

    def close(self) -> None:
        """Close the backend and the envs."""
        self.backend.close()
        envs, self.envs = self.envs, []
        for env in envs:
            env.close()


class _SnapshotSync:
    """Weight following shared by the sources whose generator is a copy of the learner."""

    snapshot: WeightsSnapshot
    policy: HFPolicy

    def agent(self, **changes: Any) -> Any:
        """The learner itself (evaluation runs in the loop's process, on the newest weights)."""
        return self.policy.with_sampling(**changes) if changes else self.policy

    def sync(self, policy: HFPolicy, step: int) -> dict[str, float]:
        """Snapshot the learner's trainable weights as version ``step`` (``sync_s``, ``sync_mb``)."""
        start = time.perf_counter()
        self.snapshot = snapshot_weights(policy.model, version=step)
        return {"sync_s": time.perf_counter() - start, "sync_mb": self.snapshot.num_bytes / 2**20}


class ThreadRollouts(_SnapshotSync):
    """Play jobs in one background thread with a frozen copy of the policy (one-step-off on one machine).

    Args:
        env: How to make the envs (the thread makes its own).
        policy: The learner at its start weights (copied once).
        max_turns: See :func:`~turnkit.rollout.collect.collect_batch`.
        chat: Token-exact contexts.
        version: The learner step the start weights belong to (after a resume, the resumed step).
    """

    def __init__(
        self, env: EnvSpec, policy: HFPolicy, *, max_turns: int | None, chat: ChatDelta | None, version: int = 0
    ) -> None:
        self.policy = policy
        self.worker = EnvWorker(env, SharedAgent(generator_copy(policy)), max_turns=max_turns, chat=chat)
        self.snapshot = snapshot_weights(policy.model, version=version)
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turnkit-rollout")

    def submit(self, job: RolloutJob) -> RolloutHandle:
        """Queue the job behind the earlier ones, to play with the newest snapshot."""
        chunk = EpisodeChunk(0, tuple(job.episode_seeds), tuple(job.groups), job.sampling)
        snapshot = self.snapshot
        future = self.pool.submit(lambda: _as_rollout(self.worker.play(chunk, snapshot)))
        return _FutureRollout(future, snapshot.version)

    def close(self) -> None:
        """Finish queued jobs, stop the thread, close the envs."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.worker.close()


class RayRollouts(_SnapshotSync):
    """Play jobs on Ray env workers, each with a copy of the policy (sync, or async with staleness).

    Args:
        env: How workers make their envs.
        policy: The learner at its start weights (copied to every worker once).
        config: The cluster and worker settings.
        max_turns: See :func:`~turnkit.rollout.collect.collect_batch`.
        chat: Token-exact contexts.
        version: The learner step the start weights belong to.

    Raises:
        ConfigError: The learner is not on the CPU (workers unpickle its copy on machines that may have no GPU).
    """

    def __init__(
        self,
        env: EnvSpec,
        policy: HFPolicy,
        config: RayConfig,
        *,
        max_turns: int | None,
        chat: ChatDelta | None,
        version: int = 0,
    ) -> None:
        from turnkit.distributed.collector import RayCollector

        if policy.device.type != "cpu":
            raise ConfigError(
                f"ray rollouts need the learner on the CPU for now (it is on {policy.device}): the workers unpickle "
                "its copy wherever they run; drop device or rollout.ray"
            )
        self.policy = policy
        agent = SharedAgent(generator_copy(policy))
        self.collector = RayCollector(env, agent, config, max_turns=max_turns, chat=chat)
        self.snapshot = snapshot_weights(policy.model, version=version)

    def submit(self, job: RolloutJob) -> RolloutHandle:
        """Send the job's chunks to the workers with the newest snapshot."""
        pending = self.collector.submit(
            job.episode_seeds, groups=job.groups, sampling=job.sampling, weights=self.snapshot
        )
        return _RayRollout(pending, self.snapshot.version)

    def close(self) -> None:
        """Stop the workers (and a local cluster)."""
        self.collector.close()


@dataclass
class _RayRollout:
    pending: Any
    version: int

    def result(self) -> Rollout:
        got = self.pending.result()
        return got.trajectories, got.timing


def build_rollouts(
    cfg: TrainConfig, policy: HFPolicy, *, run_dir: Path, chat: ChatDelta | None, start_step: int = 0
) -> RolloutSource:
    """The rollout source ``cfg`` asks for.

    Ray workers when ``rollout.ray`` is set, a background thread for ``rollout.async``, otherwise the loop itself with
    the generation backend (``rollout.backend``).
    """
    env = EnvSpec(cfg.env_id, {"split": cfg.split, **cfg.env_kwargs})
    ray_cfg = cfg.ray_config()
    if ray_cfg is not None:
        return RayRollouts(env, policy, ray_cfg, max_turns=cfg.max_turns, chat=chat, version=start_step)
    if cfg.rollout.async_rollout:
        return ThreadRollouts(env, policy, max_turns=cfg.max_turns, chat=chat, version=start_step)
    backend = build_backend(
        cfg.rollout.backend, policy, run_dir=run_dir, url=cfg.rollout.backend_url, start_step=start_step
    )
    envs = [env.make() for _ in range(cfg.grpo.group_size * cfg.groups_per_step)]
    return InlineRollouts(backend, envs, cfg, chat=chat, version=start_step)


def play(
    agent: Any, envs: Sequence[gymnasium.Env], job: RolloutJob, *, max_turns: int | None, chat: ChatDelta | None
) -> Rollout:
    """Play a job's episodes (:attr:`RolloutJob.episode_seeds`, its groups) in one batched collection.

    Args:
        agent: The generating agent, already at the job's sampling (``agent.with_sampling(**job.sampling)``).
        envs: At least one env per episode.
        job: The job.
        max_turns: See :func:`~turnkit.rollout.collect.collect_batch`.
        chat: Token-exact multi-turn contexts (see :func:`~turnkit.rollout.collect.collect_batch`).

    Returns:
        ``(trajectories, timing)`` with ``rollout_s`` (wall), ``generate_s`` (inside the agent) and ``env_s``.
    """
    timed = TimedAgent(agent)
    seeds = job.episode_seeds
    start = time.perf_counter()
    trajs = collect_batch(list(envs)[: len(seeds)], timed, seeds, groups=job.groups, max_turns=max_turns, chat=chat)
    wall = time.perf_counter() - start
    return trajs, {"rollout_s": wall, "generate_s": timed.seconds, "env_s": wall - timed.seconds}


def _as_rollout(result: Any) -> Rollout:
    timing = {"rollout_s": result.play_s, "generate_s": result.generate_s, "load_s": result.load_s}
    timing["env_s"] = result.play_s - result.generate_s - result.load_s
    return result.trajectories, timing
