"""The collaborative-coding oracle: answer with the privileged reference solution, trying it first when it can.

:class:`turnkit.agents.oracle.OracleAgent` calls :func:`oracle_reply` for tasks of family
``"collab_code"``. It asks nothing: the reply is ``I WANT TO ANSWER:`` and the reference in a fenced block,
which passes every hidden test by construction (the two run in separate sandbox executions).

When the env offers a ``python`` tool (``tools=["python"]``), the oracle does what a careful coder does with
a scratchpad: it first runs its draft (the reference) on a few example calls in the tool session
(:func:`draft_check_code`), reads the output in the next turn, then answers, through ``submit`` when that
tool is offered. The reply depends only on the context (the number of tool messages so far), so replays and
snapshots see the same oracle.

Example:
    >>> import numpy as np, turnkit
    >>> from turnkit.agents.oracle import OracleAgent
    >>> from turnkit.envs.collab_code.env import CollabCodeEnv
    >>> traj = turnkit.collect(CollabCodeEnv(split="combo"), OracleAgent(), seed=5)
    >>> traj.success, len(traj.steps), traj.total_reward
    (True, 1, 1.0)
    >>> env = CollabCodeEnv(split="combo", tools=["python"])
    >>> traj = turnkit.collect(env, OracleAgent(), seed=5)
    >>> [m.role for m in traj.messages()], traj.steps[0].info["tool"]["status"], traj.success
    (['user', 'assistant', 'tool', 'assistant'], 'ok', True)
    >>> env.close()
"""

from __future__ import annotations

import re

from turnkit.agents.base import Context
from turnkit.envs.collab_code.grading import ANSWER_MARKER
from turnkit.errors import AgentError
from turnkit.tools import format_tool_call
from turnkit.types import Task

EXAMPLE_CALLS = 3
"""How many example calls the oracle runs its draft on before answering."""

_BUDGET = re.compile(r"You can send at most (\d+) messages")


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
    return f"{ANSWER_MARKER}\n```python\n{_reference(task)}\n```"


def draft_check_code(task: Task, examples: int = EXAMPLE_CALLS) -> str:
    """Python code that defines the draft (the reference) and prints its result on a few example calls.

    The prompt shows only the function's signature, so the example calls are the first hidden test calls
    (the oracle is privileged anyway). A call that raises prints the exception instead of ending the run.

    Example:
        >>> task = Task("t", "p", {"reference": "def f(x):\\n    return 2 * x", "tests": ["f(1)", "f('a')", "f(3)"]})
        >>> print(draft_check_code(task, examples=2))
        def f(x):
            return 2 * x
        <BLANKLINE>
        for call in ['f(1)', "f('a')"]:
            try:
                print(call, '->', repr(eval(call)))
            except Exception as exc:
                print(call, '->', type(exc).__name__, exc)
        >>> from turnkit.tools import Toolbox
        >>> box = Toolbox(["python"])
        >>> print(box.take_turn(f"<python>{draft_check_code(task)}</python>").observation, end="")
        f(1) -> 2
        f('a') -> 'aa'
        f(3) -> 6
        >>> box.close()
    """
    tests = task.privileged.get("tests")
    if not isinstance(tests, (list, tuple)) or not all(isinstance(t, str) for t in tests):
        raise AgentError(f"collab_code task {task.task_id!r} has no privileged 'tests'")
    calls = [t.strip() for t in tests[:examples]]
    return (
        f"{_reference(task)}\n\n"
        f"for call in {calls!r}:\n"
        "    try:\n"
        "        print(call, '->', repr(eval(call)))\n"
        "    except Exception as exc:\n"
        "        print(call, '->', type(exc).__name__, exc)"
    )


def oracle_reply(context: Context) -> str:
    """The oracle's turn for one episode context (``context.task`` must be set).

    Without a ``python`` tool, the answer at once. With one: first a ``python`` call that runs the draft on
    example calls (:func:`draft_check_code`), then, once a tool message came back, the answer (a ``submit``
    call when ``submit`` is offered). The trial run is skipped when it would not leave a message for the
    answer within the budget the instructions state ("You can send at most N messages"; tool calls count).

    Example:
        >>> from turnkit.tools import PYTHON_SPEC
        >>> from turnkit.types import Message
        >>> task = Task("t", "p", {"reference": "def f():\\n    return 1", "tests": ["f()"]})
        >>> oracle_reply(Context(messages=(), task=task)).splitlines()[2]
        'def f():'
        >>> tools = (PYTHON_SPEC.openai_schema(),)
        >>> first = Message("user", "You can send at most 10 messages.")
        >>> print(oracle_reply(Context(messages=(first,), task=task, tools=tools)))
        <python>def f():
            return 1
        <BLANKLINE>
        for call in ['f()']:
            try:
                print(call, '->', repr(eval(call)))
            except Exception as exc:
                print(call, '->', type(exc).__name__, exc)</python>
        >>> ran = (first, Message("assistant", "<python>...</python>"), Message("tool", "f() -> 1\\n"))
        >>> oracle_reply(Context(messages=ran, task=task, tools=tools)).splitlines()[0]
        'I WANT TO ANSWER:'
    """
    if context.task is None:
        raise AgentError("the collab_code oracle needs Context.task (run it through turnkit.collect)")
    task = context.task
    tools = {t["function"]["name"] for t in context.tools if isinstance(t.get("function"), dict)}
    tool_turns = sum(1 for m in context.messages if m.role == "tool")
    if "python" in tools and tool_turns == 0 and _can_afford(context, 2):
        return f"<python>{draft_check_code(task)}</python>"
    if "submit" in tools:
        return format_tool_call("submit", {"answer": _reference(task)})
    return oracle_reply_for(task)


def _reference(task: Task) -> str:
    reference = task.privileged.get("reference")
    if not isinstance(reference, str) or not reference.strip():
        raise AgentError(f"collab_code task {task.task_id!r} has no privileged 'reference'")
    return reference.strip()


def _can_afford(context: Context, messages: int) -> bool:
    """Whether ``messages`` more messages fit in the budget stated in the first message (if it states one)."""
    first = next((m.content for m in context.messages if m.role == "user"), "")
    match = _BUDGET.search(first)
    if match is None:
        return True
    sent = sum(1 for m in context.messages if m.role == "assistant")
    return sent + messages <= int(match.group(1))
