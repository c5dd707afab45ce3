"""`EnvWorker`: one process's envs and policy side, playing chunks of episodes.

A worker makes its envs itself from an :class:`EnvSpec` (so sandboxes and browsers start, live and die in the
worker's process), builds its agent from a picklable factory, and plays an :class:`EpisodeChunk` with
:func:`~turnkit.rollout.collect.collect_batch`, one batch per chunk. It is a plain class: the
:class:`~turnkit.distributed.collector.RayCollector` runs it as a Ray actor, and the training loop's
one-step-off mode runs it in a background thread.

A chunk holds whole same-seed groups, and an agent's sampling seeds depend only on the episode seed, the turn,
the conversation and the rank within its group (:func:`~turnkit.agents.sampling.context_seeds`), so where a
chunk is played does not change what is sampled.

Example:
    >>> from turnkit.agents.oracle import OracleAgent
    >>> worker = EnvWorker(EnvSpec("turnkit/MathEpisodes-v0"), SharedAgent(OracleAgent()))
    >>> result = worker.play(EpisodeChunk(index=0, seeds=(3, 3, 4), groups=(0, 0, 1)))
    >>> [t.success for t in result.trajectories], [t.group for t in result.trajectories]
    ([True, True, True], [0, 0, 1])
    >>> worker.close()
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium

from turnkit.agents.base import Agent
from turnkit.agents.timed import TimedAgent
from turnkit.distributed.weights import WeightsSnapshot, load_weights
from turnkit.errors import ConfigError
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect_batch
from turnkit.types import Trajectory

AgentFactory = Callable[[int], Agent]
"""Builds a worker's agent from the worker's index (picklable: it travels to the worker's process)."""


@dataclass(frozen=True)
class EnvSpec:
    """How a worker makes its envs: ``gymnasium.make(env_id, **kwargs)``.

    An env registered outside turnkit must be registered in the worker too: name it ``"module:EnvName-v0"`` so
    gymnasium imports ``module`` first.
    """

    env_id: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def make(self) -> gymnasium.Env:
        """A new env instance."""
        return gymnasium.make(self.env_id, **self.kwargs)


@dataclass(frozen=True)
class EpisodeChunk:
    """Episodes one worker plays as one batch.

    Attributes:
        index: The chunk's place in its rollout (results are put back in this order).
        seeds: Reset seed per episode.
        groups: Group index per episode (whole groups only).
        sampling: ``SamplingConfig`` changes for this chunk (e.g. ``{"seed": ...}``, a training step's seed).
    """

    index: int
    seeds: tuple[int | None, ...]
    groups: tuple[int | None, ...]
    sampling: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChunkResult:
    """What a worker hands back for one chunk.

    Attributes:
        index: The chunk's index.
        trajectories: One finished trajectory per episode, in the chunk's order.
        generate_s: Seconds inside the agent.
        play_s: Seconds for the whole chunk (agent and envs).
        load_s: Seconds spent loading new weights first (0 when the version was current).
        worker: ``"pid@host"`` of the process that played it.
    """

    index: int
    trajectories: list[Trajectory]
    generate_s: float
    play_s: float
    load_s: float
    worker: str


class SharedAgent:
    """An :data:`AgentFactory` handing every worker (its own pickled copy of) one agent.

    Example:
        >>> from turnkit.agents.scripted import ScriptedAgent
        >>> agent = ScriptedAgent(["hi"])
        >>> SharedAgent(agent)(3) is agent
        True
    """

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def __call__(self, index: int) -> Agent:
        """The agent (the same object within a process)."""
        return self.agent


class EnvWorker:
    """Envs, an agent and the current weights version of one worker.

    Args:
        env: How to make the envs (made lazily; as many as the largest chunk has episodes).
        agent_factory: Builds the agent (called once, with ``index``).
        index: The worker's index (picks e.g. a server from a pool).
        threads: Torch threads in this process (``None``: leave as is).
        max_turns: See :func:`~turnkit.rollout.collect.collect_batch`.
        chat: Token-exact contexts (see :func:`~turnkit.rollout.collect.collect_batch`).
    """

    def __init__(
        self,
        env: EnvSpec,
        agent_factory: AgentFactory,
        index: int = 0,
        *,
        threads: int | None = None,
        max_turns: int | None = None,
        chat: ChatDelta | None = None,
    ) -> None:
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        self.env_spec = env
        self.agent = agent_factory(index)
        self.max_turns = max_turns
        self.chat = chat
        self.version: int | None = None
        self.envs: list[gymnasium.Env] = []
        self.name = f"{os.getpid()}@{os.uname().nodename}"

    def pid(self) -> int:
        """The worker's process id."""
        return os.getpid()

    def play(self, chunk: EpisodeChunk, weights: WeightsSnapshot | None = None) -> ChunkResult:
        """Play the chunk's episodes as one batch, after loading ``weights`` if they are a new version.

        Raises:
            ConfigError: ``weights`` were given but the agent has no ``model`` to load them into.
        """
        start = time.perf_counter()
        if weights is not None and weights.version != self.version:
            model = getattr(self.agent, "model", None)
            if model is None:
                raise ConfigError(f"{type(self.agent).__name__} has no model to load weights into")
            load_weights(model, weights)
            self.version = weights.version
        load_s = time.perf_counter() - start
        while len(self.envs) < len(chunk.seeds):
            self.envs.append(self.env_spec.make())
        agent: Any = self.agent
        if chunk.sampling and hasattr(agent, "with_sampling"):
            agent = agent.with_sampling(**chunk.sampling)
        timed = TimedAgent(agent)
        trajs = collect_batch(
            self.envs[: len(chunk.seeds)],
            timed,
            list(chunk.seeds),
            groups=list(chunk.groups),
            max_turns=self.max_turns,
            chat=self.chat,
        )
        return ChunkResult(chunk.index, trajs, timed.seconds, time.perf_counter() - start, load_s, self.name)

    def close(self) -> None:
        """Close the envs (their sandboxes and browsers); idempotent."""
        envs, self.envs = self.envs, []
        for env in envs:
            env.close()
