"""The tiny LM human: python -m pytest tests/models/test_tiny_human.py -q -p no:cacheprovider

Uses a micro recipe (one 32-wide layer, a few SFT steps) so every test runs in seconds; the benchmarked
default recipe is exercised by studies/collab_llm_human.py.
"""

import dataclasses

import pytest
import torch

import turnkit
from turnkit.agents.openai import OpenAIAgent
from turnkit.agents.serve import AgentServer
from turnkit.envs.collab_code.agents import ClarifyingAgent
from turnkit.envs.collab_code.env import CollabCodeEnv
from turnkit.envs.collab_code.human_data import clarify_examples
from turnkit.envs.collab_code.llm_human import DEFAULT_TEMPLATE, LLMHuman, hidden_text
from turnkit.errors import ConfigError
from turnkit.models import tiny_human as tiny_human_module
from turnkit.models.recipe import model_folder
from turnkit.models.sft import SFTConfig
from turnkit.models.tiny import TinyModelConfig
from turnkit.models.tiny_human import (
    TinyHumanRecipe,
    human_for,
    tiny_human_policy,
    tiny_llm_human,
    training_examples,
)

MICRO = TinyHumanRecipe(
    model=TinyModelConfig(
        hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_position_embeddings=1024
    ),
    sft=SFTConfig(steps=4, batch_size=4),
    vocab_size=300,
    splits=("id",),
    train_tasks=6,
    corpus_examples=30,
    max_new_tokens=12,
    env_kwargs={"kinds": ("grade", "late_fee")},
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-human-cache")
    tiny_human_policy(recipe=MICRO, cache=root, progress=False)
    return root


@pytest.fixture(scope="module")
def policy(cache):
    return tiny_human_policy(recipe=MICRO, cache=cache, progress=False)


def _weights(policy):
    return {k: v.clone() for k, v in policy.model.state_dict().items()}


def test_builder_is_deterministic(cache, tmp_path, policy):
    rebuilt = tiny_human_policy(recipe=MICRO, cache=tmp_path, progress=False)
    a, b = _weights(policy), _weights(rebuilt)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert policy.tokenizer.get_vocab() == rebuilt.tokenizer.get_vocab()


def test_second_call_loads_the_cache_without_training(cache, monkeypatch, policy):
    def no_training(*args, **kwargs):
        raise AssertionError("trained again although the recipe is cached")

    monkeypatch.setattr(tiny_human_module, "train_tiny_human", no_training)
    again = tiny_human_policy(recipe=MICRO, cache=cache, progress=False)
    a, b = _weights(policy), _weights(again)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (model_folder(MICRO, cache) / "turnkit_recipe.json").is_file()
    assert model_folder(MICRO, cache).name == MICRO.key()


def test_rebuild_replaces_the_cached_copy(tmp_path, monkeypatch):
    calls = []
    real = tiny_human_module.train_tiny_human

    def counting(recipe, **kwargs):
        calls.append(recipe.key())
        return real(recipe, **kwargs)

    monkeypatch.setattr(tiny_human_module, "train_tiny_human", counting)
    tiny_human_policy(recipe=MICRO, cache=tmp_path, progress=False)
    tiny_human_policy(recipe=MICRO, cache=tmp_path, progress=False)
    tiny_human_policy(recipe=MICRO, cache=tmp_path, progress=False, rebuild=True)
    assert calls == [MICRO.key(), MICRO.key()]


def test_recipe_key_changes_with_every_field_that_matters():
    keys = {MICRO.key(), dataclasses.replace(MICRO, sft=dataclasses.replace(MICRO.sft, steps=5)).key()}
    keys.add(TinyHumanRecipe(**{**MICRO.__dict__, "include_dialogue": True}).key())
    keys.add(TinyHumanRecipe(**{**MICRO.__dict__, "splits": ("ood",)}).key())
    assert len(keys) == 4
    with pytest.raises(ConfigError, match="train_tasks"):
        TinyHumanRecipe(train_tasks=0)


def test_training_examples_are_the_rule_human_replies_to_the_llm_human_prompt():
    examples = training_examples(MICRO)
    clarify = [e for e in examples if e.source == "clarify"]
    assert clarify and len(examples) == len(clarify) + MICRO.train_tasks  # one probe per task
    assert all(e.seed >= MICRO.first_seed for e in examples)
    assert {e.task.metadata["kind"] for e in examples} <= {"grade", "late_fee"}
    ctx = human_for(ClarifyingAgent(), MICRO).context(clarify[0].task, clarify[0].dialogue)
    assert ctx.messages[0].content == DEFAULT_TEMPLATE.format(
        problem=clarify[0].task.prompt, hidden=hidden_text(clarify[0].task)
    )
    assert [m.role for m in ctx.messages] == ["system", "user"]  # include_dialogue=False: the question only
    assert ctx.messages[1].content == clarify[0].dialogue[-1].content


def test_env_episode_with_the_hf_human_runs_and_is_deterministic(policy):
    human = human_for(policy, MICRO)
    env = CollabCodeEnv(kinds=("grade",), human=human)
    first = turnkit.collect(env, ClarifyingAgent(), seed=4)
    second = turnkit.collect(CollabCodeEnv(kinds=("grade",), human=human_for(policy, MICRO)), ClarifyingAgent(), seed=4)
    assert first.error is None and len(first.steps) >= 2
    assert [s.observation for s in first.steps] == [s.observation for s in second.steps]
    assert first.total_reward == second.total_reward
    replies = [s.observation for s in first.steps[1:]]
    assert all(0 < len(r) <= 400 for r in replies)


def test_env_with_the_hf_human_passes_check_env_determinism(policy):
    agent = ClarifyingAgent()
    env = CollabCodeEnv(kinds=("grade", "late_fee"), human=human_for(policy, MICRO))
    report = turnkit.check_env(
        env,
        seeds=(0, 1),
        steps=4,
        checks=["determinism", "snapshot"],
        policy=lambda ctx: agent.next_message(ctx.messages),
        raise_on_failure=False,
    )
    assert report.ok, str(report)


def test_http_path_gives_the_in_process_replies_at_temperature_zero(policy):
    examples = clarify_examples(split="ood", seeds=range(3), kinds=("late_fee", "grade"))
    items = [(e.task, e.dialogue) for e in examples]
    local = human_for(policy, MICRO)
    expected = [local.reply(t, d) for t, d in items]
    with AgentServer(policy, model_name="tiny-human") as server:
        client = OpenAIAgent(server.base_url, "tiny-human", temperature=0.0, max_tokens=MICRO.max_new_tokens)
        remote = LLMHuman(client, include_dialogue=False)
        got = [remote.reply(t, d) for t, d in items]
        batched = remote.replies(items)
    assert len(expected) >= 4 and got == expected and batched == expected


def test_batched_replies_equal_single_replies(policy):
    examples = clarify_examples(split="combo", seeds=range(3), kinds=("grade",))
    human = human_for(policy, MICRO)
    items = [(e.task, e.dialogue) for e in examples]
    assert human.replies(items) == [human.reply(t, d) for t, d in items]


def test_tiny_llm_human_wraps_the_cached_policy(cache, policy):
    human = tiny_llm_human(recipe=MICRO, cache=cache, progress=False)
    assert isinstance(human, LLMHuman) and not human.include_dialogue
    assert human.agent.sampling.temperature == 0.0 and human.agent.sampling.max_new_tokens == MICRO.max_new_tokens
