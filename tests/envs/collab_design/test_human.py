from __future__ import annotations

from collections.abc import Sequence

import pytest

from turnkit.agents.base import Context
from turnkit.agents.scripted import ScriptedAgent
from turnkit.envs.collab_design.differences import Difference
from turnkit.envs.collab_design.human import CLOSE_ENOUGH, LLMHuman, RuleBasedHuman, View, compose
from turnkit.errors import AgentError
from turnkit.types import AgentTurn, Task

TASK = Task("t1", "prompt", privileged={"reference_html": "<p>x</p>", "description": "Layout: hero. Navy bar."})
DIFFS = tuple(Difference("missing_box", 100.0 - i, f"Sentence number {i} is here.") for i in range(5))


def view(diffs: Sequence[Difference] = DIFFS) -> View:
    return View(task=TASK, agent=None, reference=None, similarity=0.42, differences=tuple(diffs))


def test_compose_takes_the_first_items_in_order() -> None:
    assert compose(DIFFS, max_items=2) == "Sentence number 0 is here. Sentence number 1 is here."


def test_compose_stops_before_the_character_cap() -> None:
    reply = compose(DIFFS, max_items=5, max_chars=60)
    assert reply == "Sentence number 0 is here. Sentence number 1 is here."
    assert len(reply) <= 60


def test_compose_cuts_a_single_overlong_sentence() -> None:
    long = Difference("x", 1.0, "y" * 500)
    assert compose([long], max_chars=400) == "y" * 400


def test_compose_without_differences_says_close() -> None:
    assert compose([]) == CLOSE_ENOUGH


def test_rule_based_human_uses_its_limits() -> None:
    assert RuleBasedHuman(max_items=1).reply(view()) == "Sentence number 0 is here."
    with pytest.raises(ValueError):
        RuleBasedHuman(max_items=0)


class Recorder:
    uses_privileged = True

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.contexts: list[Context] = []

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        self.contexts.extend(contexts)
        return [AgentTurn(self.reply) for _ in contexts]


def test_llm_human_prompt_has_description_and_differences() -> None:
    agent = Recorder("  Make the bar navy.  ")
    assert LLMHuman(agent).reply(view()) == "Make the bar navy."
    (ctx,) = agent.contexts
    prompt = ctx.messages[0].content
    assert "Layout: hero. Navy bar." in prompt and "- Sentence number 0 is here." in prompt
    assert ctx.task is TASK


def test_llm_human_gets_no_task_unless_privileged() -> None:
    agent = Recorder("ok")
    agent.uses_privileged = False  # type: ignore[misc]
    LLMHuman(agent).reply(view())
    assert agent.contexts[0].task is None


def test_llm_human_reply_is_capped() -> None:
    assert len(LLMHuman(ScriptedAgent(["z" * 1000])).reply(view())) == 400


def test_llm_human_needs_an_agent_and_one_turn() -> None:
    with pytest.raises(AgentError):
        LLMHuman(object())  # type: ignore[arg-type]

    class TwoTurns:
        def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
            return [AgentTurn("a"), AgentTurn("b")]

    with pytest.raises(AgentError, match="2 turns"):
        LLMHuman(TwoTurns()).reply(view())
