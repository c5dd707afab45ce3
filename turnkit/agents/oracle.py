"""Oracle agents: solve any built-in env from its privileged task data.

Each env family ships ``turnkit.envs.<family>.oracle.oracle_reply(context) -> str``; :class:`OracleAgent`
dispatches on ``context.task.family`` (a dotted family such as ``web.webshop`` names a subpackage). Oracles are
for tests, demos and SFT demonstrations.

Example:
    >>> import gymnasium, turnkit
    >>> from turnkit.agents.oracle import OracleAgent
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
    >>> traj = turnkit.collect(env, OracleAgent(), seed=0)
    >>> traj.success
    True
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from turnkit.agents.base import Context
from turnkit.errors import AgentError
from turnkit.types import AgentTurn

OracleFn = Callable[[Context], str]


def oracle_for(family: str) -> OracleFn:
    """The oracle reply function of an env family (``turnkit.envs.<family>.oracle.oracle_reply``)."""
    try:
        module = importlib.import_module(f"turnkit.envs.{family}.oracle")
    except ModuleNotFoundError as exc:
        raise AgentError(f"no oracle for env family {family!r}") from exc
    return module.oracle_reply


class OracleAgent:
    """Solves tasks using their privileged data (``uses_privileged = True``)."""

    uses_privileged = True

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One oracle reply per context; each context must carry its task."""
        out = []
        for ctx in contexts:
            if ctx.task is None:
                raise AgentError("OracleAgent needs Context.task; run it through turnkit.collect")
            out.append(AgentTurn(text=oracle_for(ctx.task.family)(ctx)))
        return out
