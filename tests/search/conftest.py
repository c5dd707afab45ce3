"""Shared fixtures for the search tests: a cheap stochastic agent with exact log-probs, and tiny HF policies."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from turnkit.agents.base import Context
from turnkit.agents.sampling import context_seeds
from turnkit.types import AgentTurn


class ChoiceAgent:
    """Samples one of a few texts per context; ``"{answer}"`` in a text is the task's reference answer.

    Seeds come from :func:`turnkit.agents.sampling.context_seeds`, so identical contexts in one batch differ
    and the same batch gives the same samples. Each text is one "token" whose log-prob is ``log p``.
    Records every batch size it was called with.
    """

    uses_privileged = True

    def __init__(self, texts: Sequence[str], probs: Sequence[float], seed: int = 0) -> None:
        self.texts = list(texts)
        self.probs = np.asarray(probs, dtype=float) / float(np.sum(probs))
        self.seed = seed
        self.calls: list[int] = []
        self._rng = np.random.default_rng(seed)

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        self.calls.append(len(contexts))
        out = []
        for ctx, s in zip(contexts, context_seeds(contexts, seed=self.seed, rng=self._rng), strict=True):
            i = int(np.random.default_rng(s).choice(len(self.texts), p=self.probs))
            answer = ctx.task.privileged.get("answer", "") if ctx.task is not None else ""
            text = self.texts[i].replace("{answer}", str(answer))
            logp = (math.log(self.probs[i]),)
            out.append(AgentTurn(text, token_ids=(100 + i,), logprobs=logp, prompt_token_ids=(1,)))
        return out


@pytest.fixture
def choice_agent():
    """A factory for :class:`ChoiceAgent`."""
    return ChoiceAgent


@pytest.fixture(scope="session")
def tiny_hf():
    """A factory of small random-init HF policies (fast enough for unit tests)."""
    from turnkit.agents.hf import HFPolicy
    from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()

    def make(seed: int = 0, max_new_tokens: int = 6) -> HFPolicy:
        cfg = TinyModelConfig(
            hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_position_embeddings=4096
        )
        return HFPolicy(build_tiny_model(tok, cfg, seed=seed), tok, max_new_tokens=max_new_tokens, seed=seed)

    return make
