"""`RayCollector`: play episodes on Ray env workers and get back the trajectories local collection would give.

The driver splits a rollout into chunks of whole same-seed groups (:func:`plan_chunks`), hands them to
:class:`~turnkit.distributed.worker.EnvWorker` actors, and puts the trajectories back in the order of the
seeds it was given. For the same seeds and a deterministic agent the result equals
:func:`~turnkit.rollout.collect.collect_batch` on one machine.

**Faults.** When a worker's process (or its node) dies, every chunk it held is re-run on a fresh worker from
its seeds, up to ``RayConfig.max_retries`` times; past that its episodes come back as trajectories with
``error.cause == ErrorCause.WORKER`` and no steps, which learners mask. A chunk's result is taken once, from the
run that finished, so no episode is lost or doubled and no half episode ever reaches the learner. An exception
raised by turnkit's own code inside a worker is a bug, not a fault: it is re-raised in the driver, and a worker
that cannot start (its agent factory or env spec raises, e.g. a class the worker cannot import) is a
:class:`~turnkit.errors.ConfigError`. (Env, sandbox and agent failures never get that far: collection records
them on the trajectory.)

**Weights.** ``submit(..., weights=snapshot)`` sends a :class:`~turnkit.distributed.weights.WeightsSnapshot`
through Ray's object store once per rollout; a worker loads it before playing if its version is new, so
rollouts can be generated with the learner's weights of an earlier step while it trains (one-step-off).

Example:
    >>> from turnkit.agents.oracle import OracleAgent
    >>> from turnkit.distributed import EnvSpec, RayConfig, SharedAgent
    >>> with RayCollector(EnvSpec("turnkit/MathEpisodes-v0"), SharedAgent(OracleAgent()),
    ...                   RayConfig(workers=2)) as collector:  # doctest: +SKIP
    ...     trajs = collector.collect([5, 5, 6, 6], groups=[0, 0, 1, 1])
    >>> [t.success for t in trajs]  # doctest: +SKIP
    [True, True, True, True]
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from turnkit.distributed.cluster import RayConfig, ray_session
from turnkit.distributed.weights import WeightsSnapshot
from turnkit.distributed.worker import AgentFactory, ChunkResult, EnvSpec, EnvWorker, EpisodeChunk
from turnkit.errors import ConfigError
from turnkit.rollout.chat import ChatDelta
from turnkit.types import ErrorCause, Trajectory, TrajectoryError


def plan_chunks(
    seeds: Sequence[int | None],
    groups: Sequence[int | None],
    *,
    workers: int,
    max_chunk: int | None = None,
) -> list[tuple[int, ...]]:
    """Split episode indices into chunks of whole same-seed units: one per worker, about equal in size.

    Episodes with the same seed stay together (their samples differ by their rank among identical
    contexts, which only one batch can give); an episode without a seed is a unit of its own.

    Args:
        seeds: Reset seed per episode.
        groups: Group index per episode (carried along; chunks follow the seeds).
        workers: Number of workers to spread over.
        max_chunk: Most episodes per chunk (a worker's envs); ``None``: no limit (one chunk per worker).

    Returns:
        Episode indices per chunk, every index exactly once.

    Raises:
        ConfigError: A same-seed unit is larger than ``max_chunk``.

    Example:
        >>> plan_chunks([7, 7, 8, 8, 9, 9], [0, 0, 1, 1, 2, 2], workers=2)
        [(0, 1, 2, 3), (4, 5)]
        >>> plan_chunks([1, 2, 3], [None] * 3, workers=5)
        [(0,), (1,), (2,)]
        >>> plan_chunks([1, 1, 2, 2, 3, 3, 4, 4], [None] * 8, workers=1, max_chunk=4)
        [(0, 1, 2, 3), (4, 5, 6, 7)]
    """
    if len(seeds) != len(groups):
        raise ValueError(f"got {len(seeds)} seeds but {len(groups)} groups")
    units: dict[Any, list[int]] = {}
    for i, seed in enumerate(seeds):
        units.setdefault(("seed", seed) if seed is not None else ("episode", i), []).append(i)
    k, n = min(workers, len(units)), len(seeds)
    balanced: list[list[list[int]]] = [[]]
    done = 0
    for j, unit in enumerate(units.values()):  # contiguous runs of units, about n / k episodes each
        if max_chunk is not None and len(unit) > max_chunk:
            raise ConfigError(
                f"{len(unit)} episodes share seed {seeds[unit[0]]}, more than envs_per_worker={max_chunk}"
            )
        opened = len(balanced)
        if balanced[-1] and opened < k and (done >= opened * n / k or len(units) - j <= k - opened):
            balanced.append([])
        balanced[-1].append(unit)
        done += len(unit)
    chunks: list[list[int]] = []
    for part in balanced:
        chunks.append([])
        for unit in part:  # split a worker's share where it exceeds its envs
            if max_chunk is not None and chunks[-1] and len(chunks[-1]) + len(unit) > max_chunk:
                chunks.append([])
            chunks[-1].extend(unit)
    return [tuple(c) for c in chunks if c]


@dataclass
class RolloutResult:
    """A finished distributed rollout.

    Attributes:
        trajectories: One per seed, in the order given.
        timing: ``rollout_s`` (submit to last chunk), ``wait_s`` (time the caller blocked in ``result``),
            ``generate_s``, ``play_s`` and ``env_s`` (play minus generation and weight loading; summed over
            chunks), ``load_s`` (the slowest weights load),
            ``retries`` (chunks re-run), ``lost_episodes`` (recorded with ``ErrorCause.WORKER``).
        workers: ``"pid@host"`` per chunk that finished.
    """

    trajectories: list[Trajectory]
    timing: dict[str, float]
    workers: list[str] = field(default_factory=list)


@dataclass
class _Running:
    chunk: EpisodeChunk
    slot: int
    attempt: int


class PendingRollout:
    """A submitted rollout; its chunks run while the caller does other work. :meth:`result` gathers them."""

    def __init__(
        self, collector: RayCollector, chunks: list[EpisodeChunk], plan: list[tuple[int, ...]], weights: Any
    ) -> None:
        self._collector = collector
        self._plan = plan
        self._weights = weights
        self._start = time.perf_counter()
        self._running: dict[Any, _Running] = {}
        self._done: dict[int, ChunkResult | list[Trajectory]] = {}
        self._retries = 0
        for chunk in chunks:
            self._dispatch(chunk, chunk.index % len(collector._workers), attempt=0)
        self._result: RolloutResult | None = None

    def _dispatch(self, chunk: EpisodeChunk, slot: int, *, attempt: int) -> None:
        ref = self._collector._workers[slot].play.remote(chunk, self._weights)
        self._running[ref] = _Running(chunk, slot, attempt)

    def done(self) -> bool:
        """Whether every chunk has come back (without blocking)."""
        if self._result is not None or not self._running:
            return True
        ray = self._collector.ray
        ready, _ = ray.wait(list(self._running), num_returns=len(self._running), timeout=0)
        return len(ready) == len(self._running)

    def result(self) -> RolloutResult:
        """Wait for every chunk (re-running those whose worker died) and return the trajectories in order."""
        if self._result is not None:
            return self._result
        ray, lost_errors = self._collector.ray, self._collector.lost_errors
        waited = time.perf_counter()
        while self._running:
            ready, _ = ray.wait(list(self._running), num_returns=1)
            ref = ready[0]
            run = self._running.pop(ref)
            try:
                self._done[run.chunk.index] = ray.get(ref)
            except lost_errors as exc:
                if getattr(exc, "actor_init_failed", False):  # the worker could not even start: not a fault
                    raise ConfigError(
                        f"an env worker failed to start (its agent or env factory raised): {exc}"
                    ) from exc
                self._collector._replace(run.slot)
                if run.attempt < self._collector.config.max_retries:
                    self._retries += 1
                    self._dispatch(run.chunk, run.slot, attempt=run.attempt + 1)
                else:
                    self._done[run.chunk.index] = self._collector._lost(run.chunk, run.attempt + 1, exc)
            except ray.exceptions.RayTaskError as exc:  # turnkit's own code raised inside the worker: a bug
                raise exc.as_instanceof_cause() from None
        self._result = self._assemble(time.perf_counter() - waited)
        return self._result

    def _assemble(self, wait_s: float) -> RolloutResult:
        n = sum(len(c) for c in self._plan)
        out: list[Trajectory | None] = [None] * n
        timing = {"generate_s": 0.0, "play_s": 0.0, "env_s": 0.0, "load_s": 0.0, "lost_episodes": 0.0}
        names: list[str] = []
        for index, indices in enumerate(self._plan):
            got = self._done[index]
            if isinstance(got, ChunkResult):
                trajs = got.trajectories
                timing["generate_s"] += got.generate_s
                timing["play_s"] += got.play_s
                timing["env_s"] += got.play_s - got.generate_s - got.load_s
                timing["load_s"] = max(timing["load_s"], got.load_s)
                names.append(got.worker)
            else:
                trajs = got
                timing["lost_episodes"] += len(trajs)
            for i, traj in zip(indices, trajs, strict=True):
                out[i] = traj
        assert all(t is not None for t in out), "a chunk came back short"
        timing.update(rollout_s=time.perf_counter() - self._start, wait_s=wait_s, retries=float(self._retries))
        return RolloutResult([t for t in out if t is not None], timing, names)


class RayCollector:
    """Env workers on a Ray cluster and the driver side that feeds them (see the module docstring).

    Use it as a context manager (or call :meth:`close`): it connects to the cluster ``config.address`` names
    (starting a local one for ``"local"``) unless this process is already connected.

    Args:
        env: How workers make their envs.
        agent_factory: Builds each worker's agent (e.g. :class:`SharedAgent` with a policy copy, or a function
            picking one server of a pool by worker index).
        config: Cluster address, worker count and sizes, retry budget.
        max_turns: See :func:`~turnkit.rollout.collect.collect_batch`.
        chat: Token-exact contexts (see :func:`~turnkit.rollout.collect.collect_batch`).
    """

    def __init__(
        self,
        env: EnvSpec,
        agent_factory: AgentFactory,
        config: RayConfig,
        *,
        max_turns: int | None = None,
        chat: ChatDelta | None = None,
    ) -> None:
        self.env = env
        self.config = config
        self._stack = ExitStack()
        self.ray = self._stack.enter_context(ray_session(config))
        exc = self.ray.exceptions
        self.lost_errors = (
            exc.RayActorError,
            exc.WorkerCrashedError,
            exc.ObjectLostError,
            exc.NodeDiedError,
            exc.OutOfMemoryError,
            exc.LocalRayletDiedError,
        )
        self._actor = self.ray.remote(num_cpus=config.cpus_per_worker, max_restarts=0)(EnvWorker)
        self._worker_args = (env, agent_factory)
        self._worker_kwargs = {"threads": config.threads, "max_turns": max_turns, "chat": chat}
        self._workers = [self._spawn(i) for i in range(config.workers)]
        self.replaced = 0
        """Workers started again after a death."""
        self._weights: tuple[int, Any] | None = None

    def _spawn(self, index: int) -> Any:
        return self._actor.remote(*self._worker_args, index, **self._worker_kwargs)

    def _replace(self, slot: int) -> None:
        """Start a fresh worker in ``slot`` unless that was done already for this death."""
        handle = self._workers[slot]
        try:
            self.ray.get(handle.pid.remote(), timeout=30)
            return  # alive: an earlier failure of this slot already replaced it
        except (*self.lost_errors, self.ray.exceptions.GetTimeoutError):
            pass
        self.ray.kill(handle, no_restart=True)
        self._workers[slot] = self._spawn(slot)
        self.replaced += 1

    def _lost(self, chunk: EpisodeChunk, attempts: int, exc: BaseException) -> list[Trajectory]:
        message = f"worker lost {attempts} time(s) playing this episode: {type(exc).__name__}: {exc}"
        return [
            Trajectory(env_id=self.env.env_id, seed=s, error=TrajectoryError(ErrorCause.WORKER, message), group=g)
            for s, g in zip(chunk.seeds, chunk.groups, strict=True)
        ]

    def worker_pids(self) -> list[int]:
        """The process id of each worker (e.g. to kill one in a fault test)."""
        return list(self.ray.get([w.pid.remote() for w in self._workers]))

    def submit(
        self,
        seeds: Sequence[int | None],
        *,
        groups: Sequence[int | None] | None = None,
        sampling: dict[str, Any] | None = None,
        weights: WeightsSnapshot | None = None,
    ) -> PendingRollout:
        """Start playing one episode per seed on the workers; returns at once.

        Args:
            seeds: Reset seed per episode.
            groups: Group index per episode (recorded on the trajectories).
            sampling: ``SamplingConfig`` changes for the workers' agents (e.g. the step's sampling seed).
            weights: Load these into the workers' policies before playing (sent once per version).
        """
        groups = list(groups) if groups is not None else [None] * len(seeds)
        plan = plan_chunks(seeds, groups, workers=len(self._workers), max_chunk=self.config.envs_per_worker)
        chunks = [
            EpisodeChunk(i, tuple(seeds[j] for j in idx), tuple(groups[j] for j in idx), dict(sampling or {}))
            for i, idx in enumerate(plan)
        ]
        ref = None
        if weights is not None:
            if self._weights is None or self._weights[0] != weights.version:
                self._weights = (weights.version, self.ray.put(weights))
            ref = self._weights[1]
        return PendingRollout(self, chunks, plan, ref)

    def collect(self, seeds: Sequence[int | None], **kwargs: Any) -> list[Trajectory]:
        """:meth:`submit` and wait: one trajectory per seed, in order."""
        return self.submit(seeds, **kwargs).result().trajectories

    def close(self) -> None:
        """Close the workers' envs, stop the workers, and leave the cluster if this collector joined it."""
        workers, self._workers = self._workers, []
        if workers:
            try:
                self.ray.get([w.close.remote() for w in workers], timeout=60)
            except (*self.lost_errors, self.ray.exceptions.GetTimeoutError):
                pass
            for w in workers:
                self.ray.kill(w, no_restart=True)
        self._stack.close()

    def __enter__(self) -> RayCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
