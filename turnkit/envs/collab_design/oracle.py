"""The design oracle: answers at once with the privileged reference HTML (similarity 1 by construction).

Example:
    >>> import gymnasium, turnkit
    >>> from turnkit.agents.oracle import OracleAgent
    >>> env = gymnasium.make("turnkit/CollabDesign-v0", split="ood")
    >>> traj = turnkit.collect(env, OracleAgent(), seed=0)
    >>> traj.success, traj.total_reward, len(traj.steps)
    (True, 1.0, 1)
    >>> env.close()
"""

from __future__ import annotations

from turnkit.agents.base import Context
from turnkit.envs.collab_design.protocol import ANSWER_MARKER
from turnkit.errors import AgentError


def oracle_reply(context: Context) -> str:
    """``I WANT TO ANSWER:`` plus the reference HTML in a fenced block.

    Raises:
        AgentError: The context carries no task with ``privileged["reference_html"]``.

    Example:
        >>> from turnkit.types import Task
        >>> task = Task("t", "p", privileged={"reference_html": "<p>x</p>"}, family="collab_design")
        >>> print(oracle_reply(Context(messages=(), task=task)))
        I WANT TO ANSWER:
        ```html
        <p>x</p>
        ```
    """
    task = context.task
    if task is None or "reference_html" not in task.privileged:
        raise AgentError("the design oracle needs Context.task with privileged['reference_html']")
    return f"{ANSWER_MARKER}\n```html\n{task.privileged['reference_html'].strip()}\n```"
