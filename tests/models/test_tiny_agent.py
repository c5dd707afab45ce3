"""The tiny CollabCode agent: python -m pytest tests/models/test_tiny_agent.py -q -p no:cacheprovider

Uses a micro recipe (one 32-wide layer, a few SFT steps) so every test runs in seconds; the default recipe is
exercised by studies/sweet_collab_policy.py.
"""

import dataclasses
import json

import gymnasium
import pytest
import torch

import turnkit
from turnkit.agents.hf import chat_prompt_ids
from turnkit.envs.collab_code.agents import PartialClarifier
from turnkit.errors import ConfigError
from turnkit.models import tiny_agent as tiny_agent_module
from turnkit.models.recipe import INFO_FILE, model_folder
from turnkit.models.sft import SFTConfig
from turnkit.models.tiny import TinyModelConfig
from turnkit.models.tiny_agent import (
    TinyAgentRecipe,
    tiny_code_agent,
    training_episodes,
)
from turnkit.rollout.demos import demo_rows

MICRO = TinyAgentRecipe(
    model=TinyModelConfig(
        hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_position_embeddings=1024
    ),
    sft=SFTConfig(steps=3, batch_size=4),
    vocab_size=400,
    train_tasks=4,
    per_task=2,
    corpus_episodes=8,
    max_new_tokens=16,
    env_kwargs={"kinds": ("grade", "late_fee")},
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny_agent_cache")


@pytest.fixture(scope="module")
def built(cache):
    return tiny_code_agent(recipe=MICRO, cache=cache, progress=False)


def test_build_caches_then_loads_without_training(built, cache, monkeypatch):
    folder = model_folder(MICRO, cache)
    info = json.loads((folder / INFO_FILE).read_text())
    assert info["recipe_version"] == tiny_agent_module.RECIPE_VERSION
    assert info["data"]["episodes"] == MICRO.train_tasks * MICRO.per_task
    assert info["data"]["max_row_tokens"] <= MICRO.model.max_position_embeddings

    def no_training(*args, **kwargs):
        raise AssertionError("a cached agent was trained again")

    monkeypatch.setattr(tiny_agent_module, "train_tiny_agent", no_training)
    again = tiny_code_agent(recipe=MICRO, cache=cache, progress=False, temperature=0.0)
    assert again.sampling.temperature == 0.0 and built.sampling.temperature == 1.0
    assert again.sampling.max_new_tokens == MICRO.max_new_tokens
    for a, b in zip(built.model.parameters(), again.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_data_are_the_scripted_mixture_on_training_seeds():
    eps = training_episodes(MICRO)
    assert len(eps) == 8 and all(t.seed >= 1_000_000 and t.error is None for t in eps)
    env = gymnasium.make("turnkit/CollabCode-v0", **MICRO.env_kwargs)
    again = turnkit.collect(env, PartialClarifier(1, MICRO.slip), seed=eps[1].seed)
    assert [s.action.text for s in again.steps] == [s.action.text for s in eps[1].steps]
    assert len({len(t.steps) for t in eps}) > 1  # the mixture varies the number of questions


class _Recorder:
    """Plays the scripted mixture member and records the contexts the rollout loop passes to the agent."""

    def __init__(self):
        self.inner = PartialClarifier(2, MICRO.slip)
        self.contexts = []

    def act(self, contexts):
        self.contexts += list(contexts)
        return self.inner.act(contexts)


def test_training_rows_are_what_the_policy_sees_at_rollout(built):
    env = gymnasium.make("turnkit/CollabCode-v0", **MICRO.env_kwargs)
    recorder = _Recorder()
    traj = turnkit.collect(env, recorder, seed=1_000_002)
    assert len(traj.steps) >= 2
    rows = demo_rows([traj], built.tokenizer)
    seen = built.with_sampling(max_new_tokens=1).act(recorder.contexts)
    tok = built.tokenizer
    for row, turn, ctx, step in zip(rows, seen, recorder.contexts, traj.steps, strict=True):
        prompt = [i for i, m in zip(row.input_ids, row.loss_mask, strict=True) if not m]
        target = [i for i, m in zip(row.input_ids, row.loss_mask, strict=True) if m]
        assert prompt == list(turn.prompt_token_ids)  # identical ids to what HFPolicy samples from
        text = tok.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in ctx.messages], add_generation_prompt=True, tokenize=False
        )
        assert tok.decode(prompt) == text and "hidden test calls" in ctx.messages[0].content
        assert tok.decode(target) == step.action.text + tok.eos_token
    assert chat_prompt_ids(tok, recorder.contexts[-1].messages) == list(seen[-1].prompt_token_ids)


def test_policy_rolls_out_in_the_env(built):
    env = gymnasium.make("turnkit/CollabCode-v0", **MICRO.env_kwargs)
    traj = turnkit.collect(env, built, seed=3)
    assert traj.error is None and traj.steps
    assert all(s.action.token_ids for s in traj.steps)


@pytest.mark.parametrize(
    "changes",
    [
        {"train_tasks": 0},
        {"per_task": 0},
        {"slip": -0.1},
        {"unasked": "never"},
        {"split": "test"},
        {"model": {"hidden_size": 0}},
        {"sft": {"lr": 0}},
    ],
)
def test_bad_recipe_raises(changes):
    with pytest.raises(ConfigError):
        TinyAgentRecipe.from_dict(changes)


def test_rows_longer_than_the_positions_raise(tmp_path):
    short = dataclasses.replace(
        MICRO, model=dataclasses.replace(MICRO.model, max_position_embeddings=64), train_tasks=1, per_task=1
    )
    with pytest.raises(ConfigError, match="max_position_embeddings=64"):
        tiny_code_agent(recipe=short, cache=tmp_path, progress=False)
    assert not model_folder(short, tmp_path).exists()
