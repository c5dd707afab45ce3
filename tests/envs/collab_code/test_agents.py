"""Scripted collab-code agents and the oracle: python -m pytest tests/envs/collab_code/test_agents.py -q"""

import numpy as np
import pytest

import turnkit
from turnkit.agents.base import Context, uses_privileged
from turnkit.agents.oracle import oracle_for
from turnkit.envs.collab_code.agents import (
    AnswerAtOnceAgent,
    ClarifyingAgent,
    PartialClarifier,
    parse_replies,
    read_signature,
    write_code,
)
from turnkit.envs.collab_code.env import CollabCodeEnv
from turnkit.envs.collab_code.families import FAMILIES
from turnkit.envs.collab_code.generator import generate
from turnkit.envs.collab_code.oracle import oracle_reply, oracle_reply_for
from turnkit.errors import AgentError
from turnkit.types import Message, Task


def _ctx(*contents, task=None):
    roles = ["user", "assistant"]
    return Context(messages=tuple(Message(roles[i % 2], c) for i, c in enumerate(contents)), task=task)


def test_baseline_agents_do_not_use_privileged_data():
    assert not uses_privileged(ClarifyingAgent()) and not uses_privileged(AnswerAtOnceAgent())


def test_answer_at_once_writes_the_default_code_on_the_first_turn():
    task = generate(np.random.default_rng(0))
    [turn] = AnswerAtOnceAgent().act([_ctx(task.prompt)])
    family = FAMILIES[task.metadata["kind"]]
    assert turn.text.startswith("I WANT TO ANSWER:")
    assert family.render(task.metadata["function"], family.defaults()) in turn.text


def test_clarifying_agent_asks_each_unknown_parameter_then_answers():
    prompt = "The signature of the function is: def leaderboard(scores)"
    family = FAMILIES["leaderboard"]
    agent = ClarifyingAgent()
    q1 = agent.next_message(_ctx(prompt).messages)
    assert q1 == family.param("direction").question
    q2 = agent.next_message(_ctx(prompt, q1, "Lower scores rank first, like in golf.").messages)
    assert q2 == family.param("ties").question
    history = [prompt, q1, "Lower scores rank first, like in golf.", q2, "I don't know."]
    q3 = agent.next_message(_ctx(*history).messages)
    assert q3 == family.param("top").question  # an unanswered question is not asked again
    history += [q3, "Return only the top 3 players.", agent.next_message(_ctx(*history, q3, "x").messages), "x"]
    final = agent.next_message(_ctx(*history).messages)
    assert final.startswith("I WANT TO ANSWER:") and "pair[1]" in final and "ranked[:3]" in final


def test_clarifying_agent_answers_on_the_last_allowed_turn():
    prompt = "The signature of the function is: def exam_result(score)"
    agent = ClarifyingAgent(max_turns=2)
    first = agent.next_message(_ctx(prompt).messages)
    assert not first.startswith("I WANT")
    assert agent.next_message(_ctx(prompt, first, "I don't know.").messages).startswith("I WANT TO ANSWER:")


def test_unknown_functions_get_a_stub():
    assert write_code("The signature of the function is: def odd(a, b)") == "def odd(a, b):\n    return None"
    assert write_code("no signature here").startswith("def solution(")
    assert ClarifyingAgent().next_message(_ctx("Do it.\ndef zz(q)").messages).startswith("I WANT TO ANSWER:")


def test_parse_replies_later_replies_win():
    fam = FAMILIES["grade"]
    got = parse_replies(fam, ["The passing cutoff is 55 points.", "Sorry: the passing cutoff is 70 points."])
    assert got == {"cutoff": 70}


def test_read_signature_prefers_the_signature_line():
    assert read_signature("def helper(x)\nThe signature of the function is: def main(a, b)") == ("main", "a, b")


def test_oracle_replies_with_the_reference_and_needs_the_task():
    task = generate(np.random.default_rng(1))
    text = oracle_reply(_ctx(task.prompt, task=task))
    assert text == oracle_reply_for(task) and task.privileged["reference"] in text
    assert oracle_for("collab_code") is oracle_reply
    with pytest.raises(AgentError):
        oracle_reply(_ctx(task.prompt))
    with pytest.raises(AgentError):
        oracle_reply_for(Task("t", "p", {}))


def test_partial_clarifier_mixture_spans_answer_at_once_to_full_clarifying():
    env = CollabCodeEnv(kinds=("late_fee",))
    turns = [len(turnkit.collect(env, PartialClarifier(v, slip=0.0), seed=s).steps) for s in range(5) for v in range(8)]
    assert min(turns) == 1 and max(turns) == 4  # never asks .. asks all three hidden parameters


def test_partial_clarifier_guesses_come_from_the_id_values_and_repeat_per_episode():
    family = FAMILIES["late_fee"]
    guesses = [PartialClarifier(v, unasked="guess").plan(3, family)[2] for v in range(40)]
    for p in family.params:
        seen = {g[p.name] for g in guesses}
        assert seen <= set(p.id_values) and len(seen) > 1
    assert PartialClarifier(5, unasked="guess").plan(3, family) == PartialClarifier(5, unasked="guess").plan(3, family)
    assert PartialClarifier(5).plan(3, family)[2] == family.defaults()


def test_partial_clarifier_guessing_changes_only_the_unlearned_values():
    env = CollabCodeEnv(kinds=("late_fee",))
    for v in range(6):
        by_default = turnkit.collect(env, PartialClarifier(v, slip=0.0), seed=4)
        by_guess = turnkit.collect(env, PartialClarifier(v, slip=0.0, unasked="guess"), seed=4)
        # same questions in the same order; only the final code may differ
        assert [s.action for s in by_default.steps[:-1]] == [s.action for s in by_guess.steps[:-1]]


def test_partial_clarifier_rejects_bad_settings():
    with pytest.raises(ValueError, match="slip"):
        PartialClarifier(0, slip=1.5)
    with pytest.raises(ValueError, match="unasked"):
        PartialClarifier(0, unasked="random")
