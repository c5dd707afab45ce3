"""The MiniWoB oracle: the scripted solver of the episode's task (:mod:`~turnkit.envs.web.miniwob.solvers`).

Unlike other families' oracles it reads no privileged data: it parses the latest page listing out of the
conversation, as a policy would, and takes the task name from the public ``task.metadata["task"]``.
:class:`~turnkit.agents.oracle.OracleAgent` dispatches here on ``task.family == "web.miniwob"``.

Example:
    >>> import turnkit
    >>> from turnkit.agents.oracle import OracleAgent
    >>> from turnkit.envs.web.miniwob.env import MiniWoBEnv
    >>> env = MiniWoBEnv(task="choose-list")
    >>> traj = turnkit.collect(env, OracleAgent(), seed=3)
    >>> traj.success, [s.action.text.split("[")[0] for s in traj.steps]
    (True, ['select', 'click'])
    >>> env.close()
"""

from __future__ import annotations

from turnkit.agents.base import Context
from turnkit.envs.web.miniwob.solvers import SOLVERS, Unsolvable
from turnkit.envs.web.miniwob.view import latest_page
from turnkit.errors import AgentError


def oracle_reply(context: Context) -> str:
    """The next action of the scripted solver for ``context.task``'s MiniWoB task.

    Raises:
        AgentError: No task in the context, a task without a solver, or a page the solver cannot read.

    Example:
        >>> from turnkit.types import Message, Task
        >>> task = Task("t", "p", family="web.miniwob", metadata={"task": "click-test"})
        >>> obs = 'Instruction: Click the button.\\nPage:\\n[1] div "hi"\\n[2] button "Click Me!"'
        >>> oracle_reply(Context(messages=(Message("user", obs),), task=task))
        'click[2]'
    """
    task = context.task
    if task is None:
        raise AgentError("the MiniWoB oracle needs Context.task (its metadata names the task)")
    name = str(task.metadata.get("task", ""))
    solver = SOLVERS.get(name)
    if solver is None:
        raise AgentError(f"no scripted solver for MiniWoB task {name!r}; solved tasks: {sorted(SOLVERS)}")
    observations = [m.content for m in context.messages if m.role == "user"]
    page = latest_page(observations)
    if page is None:
        raise AgentError("no page listing in the conversation")
    try:
        return solver(page, observations)
    except Unsolvable as exc:
        raise AgentError(f"the {name} solver cannot read this page: {exc}") from exc
