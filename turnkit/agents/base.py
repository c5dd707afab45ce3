"""The :class:`Agent` protocol: a batched policy over conversation contexts.

An agent maps a batch of :class:`Context` (one per live episode) to one :class:`~turnkit.types.AgentTurn`
each. Batching across episodes lets a model-backed policy see full batches.

Privileged data is opt-in and explicit: the rollout layer fills ``Context.task`` only for agents whose
``uses_privileged`` attribute is ``True`` (oracle agents, simulated humans). A trained policy never sees it.

Example:
    >>> from turnkit.agents.base import Context, Agent
    >>> from turnkit.agents.scripted import ScriptedAgent
    >>> from turnkit.types import Message
    >>> agent = ScriptedAgent(["hello"])
    >>> isinstance(agent, Agent)
    True
    >>> agent.act([Context(messages=(Message("user", "hi"),))])[0].text
    'hello'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from turnkit.types import AgentTurn, Message, Task


@dataclass(frozen=True)
class Context:
    """What an agent conditions on for one turn of one episode.

    Attributes:
        messages: The conversation so far, ending with the env's latest message (role ``user``).
        env_id: The env id, for agents that specialise per env.
        turn: Zero-based index of the turn about to be taken.
        episode_seed: The episode's reset seed, for agents that derive per-episode sampling seeds.
        task: The full task including privileged data; set only for agents with ``uses_privileged``.
    """

    messages: tuple[Message, ...]
    env_id: str = ""
    turn: int = 0
    episode_seed: int | None = None
    task: Task | None = None


@runtime_checkable
class Agent(Protocol):
    """A batched policy. Implementations may also set ``uses_privileged = True`` (see module docstring)."""

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """Return one turn per context, in order."""
        ...


def uses_privileged(agent: object) -> bool:
    """Whether the rollout layer should give this agent the privileged task."""
    return bool(getattr(agent, "uses_privileged", False))
