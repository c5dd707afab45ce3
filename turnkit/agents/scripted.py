"""Zero-cost agents for tests, demos and overhead benchmarks.

Example:
    >>> from turnkit.agents.base import Context
    >>> from turnkit.types import Message
    >>> ctx = Context(messages=(Message("user", "2+2?"),), episode_seed=1)
    >>> ScriptedAgent(["ANSWER: 4"]).act([ctx])[0].text
    'ANSWER: 4'
    >>> a, b = RandomAgent().act([ctx, ctx])
    >>> a.text == b.text  # same episode seed and turn -> same text
    True
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence

import numpy as np

from turnkit.agents.base import Context
from turnkit.types import AgentTurn

_ALPHABET = np.array(list(string.ascii_letters + string.digits + " .,:-+*/=()"))


class ScriptedAgent:
    """Replies from a fixed list (indexed by turn, last reply repeated) or from a function of the context.

    Args:
        replies: A list of replies, or a callable ``context -> str``.
    """

    def __init__(self, replies: Sequence[str] | Callable[[Context], str]) -> None:
        if not callable(replies) and len(replies) == 0:
            raise ValueError("ScriptedAgent needs at least one reply")
        self._replies = replies

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One scripted reply per context."""
        out = []
        for ctx in contexts:
            if callable(self._replies):
                text = self._replies(ctx)
            else:
                text = self._replies[min(ctx.turn, len(self._replies) - 1)]
            out.append(AgentTurn(text=text))
        return out


class RandomAgent:
    """Random short text, deterministic per (episode seed, turn): a floor for success rates.

    Args:
        max_chars: Longest reply.
        seed: Mixed into the per-episode seed.
    """

    def __init__(self, max_chars: int = 40, seed: int = 0) -> None:
        self.max_chars = max_chars
        self.seed = seed

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One random reply per context."""
        out = []
        for ctx in contexts:
            rng = np.random.default_rng([self.seed, ctx.episode_seed or 0, ctx.turn])
            n = int(rng.integers(1, self.max_chars + 1))
            out.append(AgentTurn(text="".join(rng.choice(_ALPHABET, size=n))))
        return out
