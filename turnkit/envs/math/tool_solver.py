"""A scripted MathEpisodes solver that uses the ``python`` tool when the env offers it, and estimates otherwise.

:class:`ToolSolverAgent` reads the problem from the public conversation only (the first user message; it never
reads ``Context.task``, and ``uses_privileged`` is ``False``). :func:`~turnkit.envs.math.translate.read_problem`
turns the text into a plan (an equation is solved by undoing its steps in reverse order). Then:

* **With tools** (``Context.tools`` lists ``python``, e.g. ``gymnasium.make("turnkit/MathEpisodes-v0",
  tools=["python"])``): it runs the plan as a program over :class:`fractions.Fraction` in the env's python
  session, one operation per call, with the session holding ``x`` between calls (``x = Fraction(597)``,
  ``x = x + 574``, ..., ``print(x)``). It then reads the printed value from the last tool message and answers
  ``ANSWER: <value>``. If that output is not a number (an error, a restarted session), it runs the whole
  program once more in a single call; if that fails too, it answers with its own estimate (below).
* **Without tools** it computes "in its head", modelled as *limited-precision mental arithmetic*: every
  intermediate result (the value after each operation) is rounded to ``digits`` significant digits (default
  2, halves away from zero), the way a person estimates ``597 + 574 + 728`` as ``1200 + 728 ≈ 1900``. The
  operands are used as written. One rule, chosen because it is simple, deterministic and relative (the same
  precision at every magnitude: it hurts numbers with many significant digits and awkward fractions alike,
  and leaves round numbers exact); it is a pipeline
  demonstration of what a tool buys an agent, not a model of human error or a learning claim. Consequences:
  an answer is right only when the rounding happens not to change the final value (so the answer itself has
  at most ``digits`` significant digits), and fractions other than short terminating decimals (``1/4 = 0.25``)
  nearly always fail.

Turns: a rejected answer is repeated (the agent is deterministic and has nothing new to offer), so a wrong
estimate spends all ``max_attempts``. Text the reader cannot read (e.g. a GSM8K problem) gives a no-answer
turn (``"I cannot read this problem."``), which the env counts as a reasoning turn; the agent never raises.

Example:
    >>> import gymnasium, turnkit
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0", difficulty=3, tools=["python"])
    >>> traj = turnkit.collect(env, ToolSolverAgent(), seed=10_000)
    >>> traj.task.prompt
    'Start with 597, add 574, then add 728. What is the result?'
    >>> [m.content for m in traj.messages() if m.role == "tool"], traj.steps[-1].action.text, traj.success
    (['(no output)', '(no output)', '(no output)', '1899\\n'], 'ANSWER: 1899', True)
    >>> env.close()
    >>> bare = gymnasium.make("turnkit/MathEpisodes-v0", difficulty=3)
    >>> traj = turnkit.collect(bare, ToolSolverAgent(), seed=10_000)
    >>> [s.action.text for s in traj.steps], traj.success
    (['ANSWER: 1900', 'ANSWER: 1900', 'ANSWER: 1900'], False)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from turnkit.agents.base import Context
from turnkit.envs.math.translate import Plan, program, program_steps, read_problem, render_number, run_plan
from turnkit.tools import format_tool_call
from turnkit.types import AgentTurn

NO_ANSWER = "I cannot read this problem."
"""The turn for a problem the reader cannot read (no ``ANSWER:``; the env counts it as a reasoning turn)."""
_VALUE = re.compile(r"-?\d+(?:/\d+)?")


def offered_tools(context: Context) -> set[str]:
    """The names of the tools the env offers in this context.

    Example:
        >>> from turnkit.tools import PYTHON_SPEC
        >>> offered_tools(Context(messages=(), tools=(PYTHON_SPEC.openai_schema(),)))
        {'python'}
    """
    names = set()
    for schema in context.tools:
        function = schema.get("function") if isinstance(schema, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def problem_text(context: Context) -> str:
    """The problem: the first user message (with the env's format line and tool instructions, which are ignored).

    Example:
        >>> from turnkit.types import Message
        >>> problem_text(Context(messages=(Message("user", "What is 2 plus 3?\\nReply with ANSWER: <value>."),)))
        'What is 2 plus 3?\\nReply with ANSWER: <value>.'
    """
    return next((m.content for m in context.messages if m.role == "user"), "")


def read_output(text: str) -> str | None:
    """The value a program printed: the last non-empty line of a tool message, if it is a number.

    Example:
        >>> read_output("5/18\\n"), read_output("Traceback ...\\nNameError: x\\n[exit status 1]")
        ('5/18', None)
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or _VALUE.fullmatch(lines[-1]) is None:
        return None
    return lines[-1]


class ToolSolverAgent:
    """Reads a MathEpisodes problem, runs it through the ``python`` tool when offered, else estimates.

    See the module docstring for the protocol and the no-tool rule.

    Args:
        digits: Significant digits kept after each operation when computing without tools.

    Example:
        >>> from turnkit.types import Message
        >>> ctx = Context(messages=(Message("user", "Solve for x: 3(x + 2) = 24."),))
        >>> ToolSolverAgent().reply(ctx), ToolSolverAgent().reply(Context(messages=(Message("user", "Hi"),)))
        ('ANSWER: 6', 'I cannot read this problem.')
    """

    uses_privileged = False

    def __init__(self, digits: int = 2) -> None:
        if isinstance(digits, bool) or not isinstance(digits, int) or digits < 1:
            raise ValueError(f"digits must be an int >= 1, got {digits!r}")
        self.digits = digits

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One turn per context (see :meth:`reply`)."""
        return [AgentTurn(text=self.reply(ctx)) for ctx in contexts]

    def reply(self, context: Context) -> str:
        """The agent's next message for one episode context; never raises."""
        plan = read_problem(problem_text(context))  # total: unreadable text gives None (tested on damaged prompts)
        if plan is None:
            return NO_ANSWER
        if "python" in offered_tools(context):
            turn = self._tool_turn(plan, [m.content for m in context.messages if m.role == "tool"])
            if turn is not None:
                return turn
        return self.estimate(plan)

    def estimate(self, plan: Plan) -> str:
        """The answer computed without tools: each intermediate result rounded to ``digits`` significant digits.

        Example:
            >>> from turnkit.envs.math.translate import read_problem
            >>> ToolSolverAgent().estimate(read_problem("What is 5/12 times 2/3?"))
            'ANSWER: 0.28'
        """
        value = run_plan(plan, digits=self.digits)
        return NO_ANSWER if value is None else f"ANSWER: {render_number(value)}"

    @staticmethod
    def _tool_turn(plan: Plan, outputs: list[str]) -> str | None:
        """The next call or the answer read from the tool; ``None``: the tool failed twice, estimate instead."""
        pieces = program_steps(plan)
        done = len(outputs)
        if done < len(pieces):
            return format_tool_call("python", {"code": pieces[done]})
        value = read_output(outputs[-1])
        if value is not None:
            return f"ANSWER: {value}"
        if done == len(pieces):  # the step-by-step run failed: once more, the whole program in one call
            return format_tool_call("python", {"code": program(plan)})
        return None
