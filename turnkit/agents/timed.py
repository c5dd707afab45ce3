"""`TimedAgent`: adds up the wall time an agent spends in ``act``, to split policy time from env time."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from turnkit.agents.base import Context
from turnkit.types import AgentTurn


class TimedAgent:
    """Wraps an agent and adds up the wall time spent inside ``act``.

    Example:
        >>> from turnkit.agents.scripted import ScriptedAgent
        >>> agent = TimedAgent(ScriptedAgent(["hi"]))
        >>> _ = agent.act([Context(messages=())])
        >>> agent.calls, agent.seconds >= 0
        (1, True)
    """

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.seconds = 0.0
        self.calls = 0
        self.uses_privileged = bool(getattr(agent, "uses_privileged", False))

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """Call the wrapped agent, timing it."""
        start = time.perf_counter()
        try:
            return self.agent.act(contexts)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1
