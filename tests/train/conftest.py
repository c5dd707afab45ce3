"""Shared fixtures for the training tests: byte-level tokenizer and tiny random models (hidden 32-64)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from transformers import PreTrainedTokenizerFast

from turnkit.agents.hf import HFPolicy
from turnkit.envs.core import TextEnv, Transition
from turnkit.learners.learner import Learner, OptimConfig
from turnkit.models.embedded import TinyRecipe
from turnkit.models.sft import SFTConfig
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from turnkit.types import Task

SMALL = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_position_embeddings=512)

MICRO_RECIPE = TinyRecipe(
    model=SMALL,
    sft=SFTConfig(steps=4, batch_size=16),
    vocab_size=300,
    corpus_tasks=20,
    demo_episodes=16,
    max_new_tokens=8,
)
"""A recipe that builds in about a second (for caching and quickstart smoke tests)."""


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerFast:
    return build_tiny_tokenizer()


def learner_of(policy: HFPolicy, lr: float, *, sgd: bool = False, optim: OptimConfig | None = None) -> Learner:
    """A full fine-tuning learner of ``policy`` over torch's AdamW (its default weight decay) or plain SGD.

    ``optim`` gives the clipping (default: :class:`OptimConfig`'s, norm 1).
    """
    params = policy.model.parameters()
    optimizer = torch.optim.SGD(params, lr=lr) if sgd else torch.optim.AdamW(params, lr=lr)
    return Learner(policy, optim, optimizer=optimizer)


def make_policy(tokenizer: PreTrainedTokenizerFast, *, seed: int = 0, **kwargs: object) -> HFPolicy:
    """A fresh tiny random policy (its own model, safe to train)."""
    kwargs.setdefault("max_new_tokens", 6)
    return HFPolicy(build_tiny_model(tokenizer, SMALL, seed=seed), tokenizer, **kwargs)  # type: ignore[arg-type]


class LetterEnv(TextEnv):
    """A one-turn test env with a dense reward: the share of lowercase ASCII letters in the reply.

    A random tiny model earns different rewards in every group, so GRPO always has a signal.
    """

    def generate_task(self, rng: np.random.Generator) -> Task:
        n = int(rng.integers(1, 9))
        return Task(task_id=f"letters-{n}", prompt=f"Write {n} letters.", family="test")

    def begin(self, task: Task) -> str:
        return task.prompt

    def respond(self, action: str) -> Transition:
        reward = sum("a" <= c <= "z" for c in action) / max(len(action), 1)
        return Transition("Done.", reward=reward, terminated=True, info={"success": reward > 0.2})


LETTER_ENV = "turnkit-test/Letters-v0"
if LETTER_ENV not in gymnasium.registry:
    gymnasium.register(LETTER_ENV, entry_point=LetterEnv, max_episode_steps=2)
