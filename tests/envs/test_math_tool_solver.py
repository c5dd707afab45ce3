"""The scripted tool-using math solver: translation of every phrasing, the no-tool rule, tools end to end."""

from __future__ import annotations

import contextlib
import io
import itertools
from fractions import Fraction

import gymnasium
import numpy as np
import pytest

import turnkit
from turnkit.agents.base import Context
from turnkit.envs.math.generator import KINDS, LEVELS, SPLITS, generate
from turnkit.envs.math.tool_solver import NO_ANSWER, ToolSolverAgent, read_output
from turnkit.envs.math.translate import (
    Plan,
    program,
    read_problem,
    render_number,
    round_significant,
    run_plan,
    translate,
)
from turnkit.tools import PYTHON_SPEC, SUBMIT_SPEC
from turnkit.types import Message

SEEDS_PER_CELL = 40


def _tasks(kind: str, split: str):
    for difficulty, seed in itertools.product(LEVELS, range(SEEDS_PER_CELL)):
        yield generate(np.random.default_rng([seed, difficulty, 7]), split=split, difficulty=difficulty, kinds=(kind,))


def _run_program(code: str) -> str:
    """Run a generated program (our own code, in a fresh namespace) and return what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<program>", "exec"), {})
    return out.getvalue()


@pytest.mark.parametrize(("kind", "split"), itertools.product(KINDS, SPLITS))
def test_every_generated_problem_translates_to_its_exact_answer(kind: str, split: str) -> None:
    styles = set()
    for task in _tasks(kind, split):
        plan = read_problem(task.prompt)
        assert plan is not None, task.prompt
        answer = Fraction(task.privileged["answer"])  # the test may read privileged data; the agent never does
        assert run_plan(plan) == answer, task.prompt
        assert _run_program(program(plan)).strip() == str(answer), task.prompt
        assert tuple(op for op, _ in plan.steps) == task.metadata["ops"], task.prompt  # the text's order
        styles.add(task.metadata["style"])
    assert len(styles) == 2  # both phrasings of the kind were read


def test_the_prompt_with_format_line_and_tool_instructions_reads_the_same() -> None:
    env = gymnasium.make("turnkit/MathEpisodes-v0", difficulty=3, tools=["python"])
    obs, _ = env.reset(seed=3)
    assert "Tools (" in obs
    assert read_problem(obs) == read_problem(env.unwrapped.task.prompt) is not None
    env.close()


def test_equations_are_solved_by_undoing_steps_in_reverse() -> None:
    plan = read_problem("A number is increased by 515, then multiplied by 8. The result is 7872. What is the number?")
    assert plan == Plan((("add", Fraction(515)), ("mul", Fraction(8))), result=Fraction(7872))
    assert plan.computation() == (Fraction(7872), (("div", Fraction(8)), ("sub", Fraction(515))))
    assert translate("Solve for x: 12(12x) = 135360.") == (
        "from fractions import Fraction\nx = Fraction(135360)\nx = x / 12\nx = x / 12\nprint(x)"
    )


def test_rounding_and_rendering() -> None:
    assert round_significant(Fraction(1171), 2) == 1200
    assert round_significant(Fraction(95), 1) == 100  # halves away from zero
    assert round_significant(Fraction(-1, 3), 2) == Fraction(-33, 100)
    assert round_significant(Fraction(999, 1000), 2) == 1
    assert [render_number(Fraction(v)) for v in ("3", "-1/8", "1/3", "12.5")] == ["3", "-0.125", "1/3", "12.5"]


def test_the_no_tool_path_rounds_every_intermediate_and_is_deterministic() -> None:
    env = gymnasium.make("turnkit/MathEpisodes-v0", difficulty=3)
    agent = ToolSolverAgent()
    runs = [[turnkit.collect(env, agent, seed=s) for s in range(10_000, 10_020)] for _ in range(2)]
    again = [turnkit.collect(env, ToolSolverAgent(), seed=s) for s in range(10_000, 10_020)]
    texts = [[[st.action.text for st in t.steps] for t in run] for run in (*runs, again)]
    assert texts[0] == texts[1] == texts[2]
    for traj in runs[0]:
        estimate = run_plan(read_problem(traj.task.prompt), digits=2)
        assert all(st.action.text == f"ANSWER: {render_number(estimate)}" for st in traj.steps)
        assert not any("tool" in st.info for st in traj.steps)
        assert traj.success == (estimate == Fraction(traj.task.privileged["answer"]))
    assert sum(t.success for t in runs[0]) < len(runs[0])  # 2 significant digits do lose at difficulty 3
    env.close()


@pytest.mark.parametrize("split", ["id", "ood"])
def test_with_tools_the_agent_succeeds_end_to_end(split: str) -> None:
    env = gymnasium.make("turnkit/MathEpisodes-v0", difficulty=3, split=split, tools=["python"])
    seeds = range(10_000, 10_006)
    trajs = [turnkit.collect(env, ToolSolverAgent(), seed=s) for s in seeds]
    env.close()
    for traj in trajs:
        assert traj.error is None and traj.success, traj.task.prompt
        calls = [st for st in traj.steps if "tool" in st.info]
        assert len(calls) == len(traj.task.metadata["ops"]) + 2  # start, one per operation, print
        assert all(st.info["tool"]["status"] == "ok" for st in calls)
        tool_messages = [m.content for m in traj.messages() if m.role == "tool"]
        assert Fraction(read_output(tool_messages[-1])) == Fraction(traj.task.privileged["answer"])
        assert traj.steps[-1].action.text == f"ANSWER: {tool_messages[-1].strip()}"


def test_the_agent_never_needs_the_privileged_task() -> None:
    assert ToolSolverAgent.uses_privileged is False
    env = gymnasium.make("turnkit/MathEpisodes-v0", difficulty=3, kinds=("linear",), tools=["python"])
    seen = []

    class Spy(ToolSolverAgent):
        def act(self, contexts):
            seen.extend(c.task for c in contexts)
            return super().act(contexts)

    assert turnkit.collect(env, Spy(), seed=10_001).success
    env.close()
    assert seen and all(task is None for task in seen)


def test_a_failing_tool_run_is_retried_in_one_call_then_estimated() -> None:
    agent = ToolSolverAgent()
    tools = (PYTHON_SPEC.openai_schema(), SUBMIT_SPEC.openai_schema())
    user = Message("user", "What is 7 times 8?\nReply with ANSWER: <value>.")
    first = agent.reply(Context(messages=(user,), tools=tools))
    assert first.startswith("<tool_call>") and "Fraction(7)" in first
    broken = "Traceback (most recent call last):\nNameError: name 'x' is not defined\n[exit status 1]"
    history = [user]
    for text in ("(no output)", "(no output)", broken):
        history += [Message("assistant", "<call>"), Message("tool", text)]
    retry = agent.reply(Context(messages=tuple(history), tools=tools))
    assert "x = x * 8\\nprint(x)" in retry  # the whole program in one call
    history += [Message("assistant", retry), Message("tool", "[timed out after 10 s and was interrupted]")]
    assert agent.reply(Context(messages=tuple(history), tools=tools)) == "ANSWER: 56"  # estimate: 56 has 2 digits


UNREADABLE = [
    "",
    "   ",
    "Hi",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.",
    "Compute .",
    "Compute 1 +.",
    "Compute (((1 + 2).",
    "Compute " + "(" * 5000 + "1" + ")" * 5000 + ".",
    "Compute 1 " + "+ 1 " * 3000 + ".",
    "Compute 1 + (2 × 3).",
    "Compute 2 ÷ 0.",
    "Solve for x: x × x = 4.",
    "Solve for x: 0x = 3.",
    "Solve for x: x + 1 = x.",
    "Solve for x: 5 - x = 3.",
    "Solve for x: = .",
    "What is 1 plus?",
    "What is 1/0 plus 2?",
    "Start with 3, fly to 4. What is the result?",
    "A number is increased by. The result is 3. What is the number?",
    "Ana has 5 apples. How many apples does Ana have now?",
    "Ana has 5 apples. Then Ana dances 3 times. How many?",
    "Ana has 1/0 apples. Then Ana gets 2 more. How many apples does Ana have now?",
    "\x00\x01 ÷÷ ×× ((",
    "Compute 99999999999999999999999999999 × 99999999999999999999999999.",
    "Solve for x: 3(x + 2) = 24.\nReply with ANSWER: <value>." * 100,
]


@pytest.mark.parametrize("text", UNREADABLE, ids=range(len(UNREADABLE)))
def test_unreadable_text_never_raises(text: str) -> None:
    plan = read_problem(text)
    for tools in ((), (PYTHON_SPEC.openai_schema(),)):
        reply = ToolSolverAgent().reply(Context(messages=(Message("user", text),), tools=tools))
        assert isinstance(reply, str)
        if plan is None:
            assert reply == NO_ANSWER
    assert read_problem(None) is None  # type: ignore[arg-type]


def test_mangled_prompts_never_raise() -> None:
    rng = np.random.default_rng(0)
    agent = ToolSolverAgent()
    for seed in range(200):
        prompt = generate(np.random.default_rng(seed), split="ood", difficulty=int(seed % 5) + 1).prompt
        chars = list(prompt)
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(len(chars)))
            op = int(rng.integers(3))
            if op == 0:
                del chars[i]
            elif op == 1:
                chars.insert(i, str(rng.choice(list("0123456789()-+×÷/x=. $"))))
            else:
                chars[i] = str(rng.choice(list("0()÷/=.")))
        text = "".join(chars)
        assert isinstance(agent.reply(Context(messages=(Message("user", text),))), str)


def test_an_unreadable_problem_is_a_no_answer_turn_the_env_counts() -> None:
    from turnkit.envs.math.env import MathEpisodesEnv
    from turnkit.types import Task

    task = Task("gsm", "Natalia sold 48 clips. How many clips in all?", {"answer": "72"}, family="math")
    env = MathEpisodesEnv(tasks=[task], token_budget=20)
    traj = turnkit.collect(env, ToolSolverAgent(), seed=0)
    assert traj.error is None and not traj.success
    assert {st.action.text for st in traj.steps} == {NO_ANSWER}
    assert traj.steps[-1].info["budget_left"] == 0
