"""Shared fixtures for the agent backend tests: a tiny random-weight model (hidden 64, 2 layers)."""

from __future__ import annotations

import pytest
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from turnkit.types import Message

TEST_CONFIG = TinyModelConfig(hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128)


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerFast:
    return build_tiny_tokenizer()


@pytest.fixture(scope="session")
def model(tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    return build_tiny_model(tokenizer, TEST_CONFIG, seed=0)


@pytest.fixture
def policy(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast) -> HFPolicy:
    return HFPolicy(model, tokenizer, max_new_tokens=24)


def make_context(text: str, *, seed: int | None = 0, turn: int = 0) -> Context:
    return Context(messages=(Message("user", text),), episode_seed=seed, turn=turn)
