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
from turnkit.tools import format_tool_call
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

    When the env offers a ``python`` tool, the oracle uses it before answering: it stores the reference in a
    variable, reads it back in a second call (so the session's state must survive snapshots and restores),
    then answers, through ``submit`` when that tool is offered.

    Example:
        >>> task = Task(task_id="t", prompt="1/2 + 1/2?", privileged={"answer": "1"}, family="math")
        >>> oracle_reply(Context(messages=(), task=task))
        'ANSWER: 1'
        >>> from turnkit.tools import PYTHON_SPEC, SUBMIT_SPEC
        >>> from turnkit.types import Message
        >>> tools = (PYTHON_SPEC.openai_schema(), SUBMIT_SPEC.openai_schema())
        >>> oracle_reply(Context(messages=(Message("user", "1/2 + 1/2?"),), task=task, tools=tools))
        "<python>answer = '1'</python>"
    """
    if context.task is None:
        raise AgentError("the math oracle needs Context.task (run it through turnkit.collect)")
    tools = {t["function"]["name"] for t in context.tools if isinstance(t.get("function"), dict)}
    if "python" not in tools:
        return oracle_reply_for(context.task)
    tool_turns = sum(1 for m in context.messages if m.role == "tool")
    answer = oracle_reply_for(context.task).removeprefix("ANSWER: ")
    if tool_turns == 0:
        return f"<python>answer = {answer!r}</python>"
    if tool_turns == 1:
        return "<python>print(answer)</python>"
    if "submit" in tools and context.messages[-1].role == "tool":
        return format_tool_call("submit", {"answer": answer})
    return oracle_reply_for(context.task)
