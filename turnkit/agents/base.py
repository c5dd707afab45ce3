"""The :class:`Agent` protocol: a batched policy over conversation contexts.

An agent maps a batch of :class:`Context` (one per live episode) to one :class:`~turnkit.types.AgentTurn`
each. Batching across episodes lets a model-backed policy see full batches.

Continuing a partial turn is opt-in too: step-level search (:mod:`turnkit.search.mcts` with
``step_delimiter``) sends contexts with ``prefix_text``/``prefix_token_ids`` (the assistant text generated
so far this turn) and ``stop`` strings. Only agents whose ``supports_prefix`` attribute is ``True`` honour
them (they continue after the prefix, stop after the first stop string and report
``finish_reason="stop_string"`` when they did); the search refuses other agents with a clear error.

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

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
        prefix_text: Assistant text already generated this turn; the agent continues it and returns only the
            continuation (agents with ``supports_prefix`` only).
        prefix_token_ids: The exact ids of ``prefix_text`` (token-in/token-out); empty: tokenise the text.
        stop: Stop strings: generation ends after the first token whose text completes one of them, with
            ``finish_reason="stop_string"`` (agents with ``supports_prefix`` only).
        prompt_token_ids: The exact prompt ids to condition on instead of rendering ``messages`` with the chat
            template (token-in, e.g. a multi-turn context built from the ids the policy generated earlier);
            honoured by the token-level agents (``HFPolicy``, ``VLLMPolicy``), ignored by text agents.
        tools: The tools the env offers, in OpenAI ``tools=[...]`` form (:mod:`turnkit.tools`); ``OpenAIAgent``
            sends them to its server and ``HFPolicy`` renders them with a chat template that takes tools.
    """

    messages: tuple[Message, ...]
    env_id: str = ""
    turn: int = 0
    episode_seed: int | None = None
    task: Task | None = None
    prefix_text: str = ""
    prefix_token_ids: tuple[int, ...] = ()
    stop: tuple[str, ...] = ()
    prompt_token_ids: tuple[int, ...] = ()
    tools: tuple[Mapping[str, Any], ...] = ()


@runtime_checkable
class Agent(Protocol):
    """A batched policy. Implementations may also set ``uses_privileged = True`` (see module docstring)."""

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """Return one turn per context, in order."""
        ...


def uses_privileged(agent: object) -> bool:
    """Whether the rollout layer should give this agent the privileged task."""
    return bool(getattr(agent, "uses_privileged", False))
