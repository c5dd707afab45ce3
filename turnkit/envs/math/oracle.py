"""The math oracle: answer every math task correctly from its privileged reference answer (and a retry demo).

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

from collections.abc import Sequence

from turnkit.agents.base import Context
from turnkit.errors import AgentError
from turnkit.tools import format_tool_call
from turnkit.types import AgentTurn, Task


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


class RetryOracle:
    """Demonstrates a retry: a wrong answer first, then, after the env's feedback, the reference.

    The wrong value is the reference shifted by ``1 .. spread`` (sign and size drawn from the episode seed), or
    the reference with a ``0`` appended when it is not an integer. Train only on the second turn (its prompt
    holds the wrong attempt and ``Incorrect. ...``): that teaches a model to correct itself, not to err.
    Keep ``spread`` well above 1: with a shift of exactly +-1 a model learns the shortcut "answer the last
    value +-1" rather than to compute again.

    Args:
        spread: Largest shift of the wrong first answer.

    Example:
        >>> from turnkit.types import Message
        >>> task = Task(task_id="t", prompt="2+2?", privileged={"answer": "4"}, family="math")
        >>> agent = RetryOracle(spread=3)
        >>> [agent.act([Context(messages=(Message("user", "2+2?"),), task=task, episode_seed=s)])[0].text
        ...  for s in (0, 1, 4)]
        ['ANSWER: 5', 'ANSWER: 3', 'ANSWER: 7']
        >>> retry = (Message("user", "2+2?"), Message("assistant", "ANSWER: 5"), Message("user", "Incorrect."))
        >>> agent.act([Context(messages=retry, task=task, episode_seed=0)])[0].text
        'ANSWER: 4'
    """

    uses_privileged = True

    def __init__(self, spread: int = 12) -> None:
        if not isinstance(spread, int) or spread < 1:
            raise AgentError(f"RetryOracle needs spread >= 1, got {spread!r}")
        self.spread = spread

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One reply per context: wrong on the first turn, the reference on every later one."""
        return [AgentTurn(self.reply(ctx)) for ctx in contexts]

    def reply(self, context: Context) -> str:
        """The turn for one context (``context.task`` must be set)."""
        if context.task is None:
            raise AgentError("RetryOracle needs Context.task (run it through turnkit.collect)")
        right = oracle_reply_for(context.task)
        if any(m.role == "assistant" for m in context.messages):
            return right
        answer = right.removeprefix("ANSWER: ")
        seed = context.episode_seed or 0
        shift = (1 + (seed // 2) % self.spread) * (1 if seed % 2 == 0 else -1)
        try:
            return f"ANSWER: {int(answer) + shift}"
        except ValueError:
            return f"ANSWER: {answer}0"
