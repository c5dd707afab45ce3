"""The collaborative-coding oracle: answer at once with the privileged reference solution.

:class:`turnkit.agents.oracle.OracleAgent` calls :func:`oracle_reply` for tasks of family
``"collab_code"``. It asks nothing: the reply is ``I WANT TO ANSWER:`` and the reference in a fenced block,
which passes every hidden test by construction (the two run in separate sandbox executions).

Example:
    >>> import numpy as np, turnkit
    >>> from turnkit.agents.oracle import OracleAgent
    >>> from turnkit.envs.collab_code.env import CollabCodeEnv
    >>> traj = turnkit.collect(CollabCodeEnv(split="combo"), OracleAgent(), seed=5)
    >>> traj.success, len(traj.steps), traj.total_reward
    (True, 1, 1.0)
"""

from __future__ import annotations

from turnkit.agents.base import Context
from turnkit.envs.collab_code.grading import ANSWER_MARKER
from turnkit.errors import AgentError
from turnkit.types import Task


def oracle_reply_for(task: Task) -> str:
    """The oracle's turn for a task.

    Example:
        >>> print(oracle_reply_for(Task("t", "p", {"reference": "def f():\\n    return 1"})))
        I WANT TO ANSWER:
        ```python
        def f():
            return 1
        ```
    """
    reference = task.privileged.get("reference")
    if not isinstance(reference, str) or not reference.strip():
        raise AgentError(f"collab_code task {task.task_id!r} has no privileged 'reference'")
    return f"{ANSWER_MARKER}\n```python\n{reference.strip()}\n```"


def oracle_reply(context: Context) -> str:
    """The oracle's turn for one episode context (``context.task`` must be set).

    Example:
        >>> oracle_reply(Context(messages=(), task=Task("t", "p", {"reference": "x = 1"}))).splitlines()[2]
        'x = 1'
    """
    if context.task is None:
        raise AgentError("the collab_code oracle needs Context.task (run it through turnkit.collect)")
    return oracle_reply_for(context.task)
