"""The PAV didactic oracle: write the planted run in one turn.

:class:`turnkit.agents.oracle.OracleAgent` calls :func:`oracle_reply` for tasks of family ``"pav_didactic"``.

Example:
    >>> import turnkit
    >>> from turnkit.agents.oracle import OracleAgent
    >>> from turnkit.envs.pav_didactic.env import PAVDidacticEnv
    >>> traj = turnkit.collect(PAVDidacticEnv(), OracleAgent(), seed=3)
    >>> traj.success, len(traj.steps)
    (True, 1)
"""

from __future__ import annotations

from turnkit.agents.base import Context
from turnkit.errors import AgentError


def oracle_reply(context: Context) -> str:
    """The planted run as space-separated token ids (``context.task`` must be set).

    Example:
        >>> from turnkit.types import Task
        >>> oracle_reply(Context(messages=(), task=Task("t", "", privileged={"target": "4 2"})))
        '4 2'
    """
    if context.task is None or "target" not in context.task.privileged:
        raise AgentError("the pav_didactic oracle needs Context.task with a privileged 'target'")
    return str(context.task.privileged["target"])
