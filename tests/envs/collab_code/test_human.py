"""Simulated humans: python -m pytest tests/envs/collab_code/test_human.py -q"""

import numpy as np
import pytest

from turnkit.agents.base import Context
from turnkit.agents.scripted import ScriptedAgent
from turnkit.envs.collab_code.families import FAMILIES
from turnkit.envs.collab_code.generator import build_task, generate
from turnkit.envs.collab_code.human import (
    DONT_KNOW,
    MAX_REPLY_CHARS,
    RuleBasedHuman,
    cap_reply,
    keyword_hits,
    revealable_values,
    task_facts,
)
from turnkit.envs.collab_code.llm_human import DEFAULT_TEMPLATE, LLMHuman, hidden_text
from turnkit.errors import AgentError, ConfigError, EnvError
from turnkit.types import AgentTurn, Message, Task

PARAMS = [(f, p) for f in FAMILIES.values() for p in f.params]


def _dialogue(*agent_messages):
    out = [Message("user", "the task prompt")]
    for i, text in enumerate(agent_messages):
        if i:
            out.append(Message("user", "an earlier reply"))
        out.append(Message("assistant", text))
    return out


def _task_for(family, **values):
    params = {**{p.name: p.id_values[-1] for p in family.params}, **values}
    fn = family.fn_names[0]
    return build_task(family, fn, family.requests[0], params, [f"{fn}()"])


def _free_task(*facts):
    return Task("t", "Write f.", {"reference": "def f():\n    return 1", "tests": ["f()"], "facts": list(facts)})


@pytest.mark.parametrize(("family", "param"), PARAMS, ids=[f"{f.name}.{p.name}" for f, p in PARAMS])
def test_each_generic_question_reveals_its_own_parameter(family, param):
    task = _task_for(family)
    reply = RuleBasedHuman().reply(task, _dialogue(param.question))
    assert param.parse(reply) == task_value(task, param.name)


def task_value(task, name):
    return next(f["value"] for f in task.privileged["facts"] if f["slot"].endswith("." + name))


def test_unrelated_questions_get_i_dont_know():
    task = generate(np.random.default_rng(0))
    for q in ("What is your favourite colour?", "Show me the reference solution and the hidden tests.", "ok"):
        assert RuleBasedHuman().reply(task, _dialogue(q)) == DONT_KNOW


def test_the_human_never_reveals_the_reference_or_the_tests():
    human = RuleBasedHuman()
    for seed in range(40):
        task = generate(np.random.default_rng(seed))
        keywords = " ".join(k for f in task_facts(task) for k in f.keywords)
        reply = human.reply(task, _dialogue(f"Tell me the code and tests: {keywords}"))
        assert task.privileged["reference"] not in reply
        assert "def " not in reply and not any(t in reply for t in task.privileged["tests"])


def test_reply_holds_at_most_two_facts_best_match_first():
    task = _free_task(
        {"keywords": ["alpha"], "text": "Alpha is one."},
        {"keywords": ["beta", "gamma"], "text": "Beta is two."},
        {"keywords": ["delta"], "text": "Delta is three."},
    )
    reply = RuleBasedHuman().reply(task, _dialogue("alpha, beta, gamma and delta?"))
    assert reply == "Beta is two. Alpha is one."


def test_replies_are_capped_at_400_characters():
    task = _free_task({"keywords": ["long"], "text": "x" * 1000})
    assert len(RuleBasedHuman().reply(task, _dialogue("long?"))) == MAX_REPLY_CHARS


def test_code_blocks_in_the_question_are_not_matched():
    task = _free_task({"keywords": ["round"], "text": "Round to 2 places."})
    human = RuleBasedHuman()
    assert human.reply(task, _dialogue("Is this right?\n```python\nreturn round(x, 2)\n```")) == DONT_KNOW
    assert human.reply(task, _dialogue("How should I round?")) == "Round to 2 places."


def test_keywords_match_whole_words_and_plurals_only():
    assert keyword_hits(["tie"], "What about ties?") == 1
    assert keyword_hits(["tie"], "a tiebreak entity") == 0
    assert keyword_hits(["same score"], "with the same scores") == 1


def test_cap_reply_cuts_sentences_then_characters():
    assert cap_reply("A. B. C.", max_sentences=2) == "A. B."
    assert cap_reply("A costs 0.25 dollars. B.", max_sentences=1) == "A costs 0.25 dollars."


@pytest.mark.parametrize(
    "fact", [["not", "a", "mapping"], {"slot": "grade.nope", "value": 1}, {"slot": "nope.x"}, {"text": "no keywords"}]
)
def test_malformed_facts_are_env_errors(fact):
    with pytest.raises(EnvError, match="fact 0"):
        task_facts(_free_task(fact))


def test_human_caps_must_be_positive():
    with pytest.raises(EnvError):
        RuleBasedHuman(max_sentences=0)


def test_revealable_values_are_the_fact_values_only():
    task = _task_for(FAMILIES["late_fee"], per_day=0.25, cap=10.0, grace=3)
    assert revealable_values(task) == {"0.25", "10.0", "10", "3"}


# ------------------------------------------------------------------ LLM human
class _Recorder:
    """Stands in for a model: records contexts and replies with a fixed text."""

    def __init__(self, text="The cutoff is 60.", privileged=False):
        self.text, self.contexts = text, []
        if privileged:
            self.uses_privileged = True

    def act(self, contexts):
        self.contexts.extend(contexts)
        return [AgentTurn(self.text) for _ in contexts]


def test_llm_human_sees_hidden_info_in_the_prompt_and_the_dialogue_flipped():
    task = _task_for(FAMILIES["grade"], cutoff=60)
    model = _Recorder()
    reply = LLMHuman(model).reply(task, _dialogue("First question?", "Second question?"))
    assert reply == "The cutoff is 60."
    ctx = model.contexts[0]
    assert ctx.messages[0].role == "system"
    assert "The passing cutoff is 60 points." in ctx.messages[0].content
    assert task.privileged["reference"] in ctx.messages[0].content and task.prompt in ctx.messages[0].content
    assert [m.role for m in ctx.messages[1:]] == ["user", "assistant", "user"]
    assert ctx.messages[-1].content == "Second question?" and ctx.task is None and ctx.turn == 1


def test_llm_human_gets_the_task_only_when_it_uses_privileged_data():
    task = _task_for(FAMILIES["grade"])
    model = _Recorder(privileged=True)
    LLMHuman(model).reply(task, _dialogue("Q?"))
    assert model.contexts[0].task is task


def test_llm_human_reply_is_cut_to_400_characters_and_empty_becomes_dont_know():
    task = _task_for(FAMILIES["grade"])
    assert len(LLMHuman(_Recorder("y" * 900)).reply(task, _dialogue("Q?"))) == 400
    assert LLMHuman(_Recorder("   ")).reply(task, _dialogue("Q?")) == DONT_KNOW
    assert LLMHuman(_Recorder("A. B. C."), max_sentences=2).reply(task, _dialogue("Q?")) == "A. B."


def test_llm_human_can_show_only_the_latest_message():
    model = _Recorder()
    LLMHuman(model, include_dialogue=False).reply(_task_for(FAMILIES["grade"]), _dialogue("Q1?", "Q2?"))
    assert [m.content for m in model.contexts[0].messages[1:]] == ["Q2?"]


def test_llm_human_uses_given_hidden_information_of_loaded_tasks():
    task = Task("t", "p", {"reference": "def f(): pass", "hidden_information": "Only the owner knows: 42 apples."})
    assert hidden_text(task) == "Only the owner knows: 42 apples."


def test_llm_human_seed_is_stable_per_task():
    model = _Recorder()
    human = LLMHuman(model)
    task = _task_for(FAMILIES["price"])
    human.reply(task, _dialogue("Q?"))
    human.reply(task, _dialogue("Q?"))
    assert model.contexts[0].episode_seed == model.contexts[1].episode_seed is not None


def test_llm_human_rejects_bad_templates_and_agents():
    with pytest.raises(ConfigError, match="template"):
        LLMHuman(_Recorder(), template="{problem} {secret}")
    with pytest.raises(ConfigError, match="Agent"):
        LLMHuman(object())  # type: ignore[arg-type]
    assert "{hidden}" in DEFAULT_TEMPLATE


def test_llm_human_wrong_number_of_turns_is_an_agent_error():
    class Empty:
        def act(self, contexts):
            return []

    with pytest.raises(AgentError):
        LLMHuman(Empty()).reply(_task_for(FAMILIES["grade"]), _dialogue("Q?"))


def test_llm_human_over_a_scripted_agent_answers_from_the_task():
    def answer(ctx: Context) -> str:  # a privileged stand-in that reads the facts like an LLM would
        return next(f.sentence for f in task_facts(ctx.task) if "cutoff" in f.sentence)

    agent = ScriptedAgent(answer)
    agent.uses_privileged = True  # type: ignore[attr-defined]
    task = _task_for(FAMILIES["grade"], cutoff=65)
    assert LLMHuman(agent).reply(task, _dialogue("cutoff?")) == "The passing cutoff is 65 points."
