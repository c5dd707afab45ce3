"""The math oracle: answer every math task correctly from its privileged reference answer.

:class:`turnkit.agents.oracle.OracleAgent` calls :func:`oracle_reply` for tasks of family ``"math"``.
The reply is the shortest correct turn, ``ANSWER: <reference>``, which suits SFT demonstrations.

Example:
    >>> import gymnasium, turnkit
    >>> from turnkit.agents.oracle import OracleAgent
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0", split="combo", difficulty=3)
    >>> traj = turnkit.collect(env, OracleAgent(), seed=4)
    >>> traj.success, len(traj.steps), traj.steps[0].action.text == oracle_reply_for(traj.task)
    (True, 1, True)
"""

from __future__ import annotations

from turnkit.agents.base import Context
from turnkit.errors import AgentError
from turnkit.types import Task


def oracle_reply_for(task: Task) -> str:
    """The oracle's turn for a task: ``ANSWER: <reference answer>`` on one line.

    Example:
        >>> oracle_reply_for(Task(task_id="t", prompt="1+1?", privileged={"answer": "2"}, family="math"))
        'ANSWER: 2'
    """
    if "answer" not in task.privileged:
        raise AgentError(f"math task {task.task_id!r} has no privileged 'answer'")
    answer = " ".join(str(task.privileged["answer"]).split())  # one line, whatever the source
    return f"ANSWER: {answer}"


def oracle_reply(context: Context) -> str:
    """The oracle's turn for one episode context (``context.task`` must be set).

    Example:
        >>> task = Task(task_id="t", prompt="1/2 + 1/2?", privileged={"answer": "1"}, family="math")
        >>> oracle_reply(Context(messages=(), task=task))
        'ANSWER: 1'
    """
    if context.task is None:
        raise AgentError("the math oracle needs Context.task (run it through turnkit.collect)")
    return oracle_reply_for(context.task)
