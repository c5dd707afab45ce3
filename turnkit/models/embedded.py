"""The embedded default policy: a tiny Llama-style model taught by SFT on oracle math demonstrations.

No machine here can download weights, so turnkit's default agent (``--agent tiny``, the quickstart's start
point) is built locally, deterministically, and cached:

1. a byte-level BPE tokenizer learned from env text (MathEpisodes prompts, feedback and answers; any other
   text still round-trips through the byte alphabet);
2. a randomly initialised :func:`~turnkit.models.tiny.build_tiny_model` (about 0.5M parameters by default);
3. SFT (:func:`turnkit.models.sft.train_sft`) on oracle demonstrations of ``turnkit/MathEpisodes-v0``
   (:func:`turnkit.rollout.demos.collect_demos`), deliberately short, so that the policy is competent but far
   from reliable (it always answers in the right format, but a sampled answer is right only about half the
   time) and RL has something to improve.

The result is saved with ``save_pretrained`` under ``cache_dir()/tiny/<key>``, where ``key`` hashes the
recipe and :data:`RECIPE_VERSION`; later calls load it (about a second) instead of training again. The build
runs on one torch thread whatever the caller's setting, so its weights are the same bits in every process
(:mod:`turnkit.models.recipe`).

Example:
    >>> recipe = TinyRecipe.from_dict({"model": {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64},
    ...                                "sft": {"steps": 2}, "demo_episodes": 16, "corpus_tasks": 40, "vocab_size": 300})
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     policy = tiny_policy(recipe=recipe, cache=d, progress=False)
    ...     again = tiny_policy(recipe=recipe, cache=d, progress=False)  # loaded from the cache
    >>> policy.sampling.max_new_tokens, len(policy.tokenizer)
    (24, 300)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from transformers import PreTrainedTokenizerFast

from turnkit.agents.hf import HFPolicy
from turnkit.configs import check_int
from turnkit.envs.math.env import FORMAT_LINE
from turnkit.envs.math.generator import SPLITS, generate
from turnkit.errors import ConfigError
from turnkit.models.recipe import TinyTrainingRecipe, recipe_policy
from turnkit.models.sft import SFTConfig, train_sft
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from turnkit.rollout.demos import collect_demos, demo_rows

RECIPE_VERSION = 2
"""Bumped whenever the recipe's code changes what it builds (invalidates every cached tiny policy).
2: the build runs on one torch thread (version-1 builds depended on the builder's thread count)."""

MATH_ENV = "turnkit/MathEpisodes-v0"
FEEDBACK_TEXTS = (
    "Correct.",
    "Incorrect. 2 attempts left.",
    "Incorrect. 1 attempt left.",
    "Incorrect. No attempts left. The episode is over.",
    f"No answer yet. {FORMAT_LINE} 500 words left.",
)


@dataclass(frozen=True)
class TinyRecipe(TinyTrainingRecipe):
    """Everything that determines the embedded tiny policy (its hash is the cache key).

    Example:
        >>> TinyRecipe().model.hidden_size, TinyRecipe().sft.steps
        (128, 400)
        >>> TinyRecipe.from_dict({"sft": {"steps": 0}})
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: recipe: TinyRecipe.sft: SFTConfig.steps must be an int >= 1, got 0
    """

    model: TinyModelConfig = field(
        default_factory=lambda: TinyModelConfig(
            hidden_size=128, num_layers=2, num_heads=4, intermediate_size=384, max_position_embeddings=1024
        )
    )
    """Model shape (``max_position_embeddings``: the longest prompt + completion, in tokens)."""
    vocab_size: int = 1024
    """BPE vocabulary size (byte alphabet and special tokens included)."""
    corpus_tasks: int = 3000
    """Generated math tasks (over difficulties 1-2 and all splits) whose text trains the BPE merges."""
    env_kwargs: dict[str, Any] = field(default_factory=lambda: {"difficulty": 1})
    """``gymnasium.make`` arguments of the demonstration env (``turnkit/MathEpisodes-v0``)."""
    demo_episodes: int = 2000
    """Oracle episodes (seeds ``0 .. demo_episodes - 1``, split ``id``) used as SFT data."""
    sft: SFTConfig = field(default_factory=lambda: SFTConfig(steps=400, batch_size=32, optim={"lr": 3e-3}))
    """SFT on the demonstrations (not many steps on purpose: the start policy should leave room for RL);
    ``sft.seed`` shuffles the rows."""
    seed: int = 0
    """Model initialisation and BPE corpus seed."""
    max_new_tokens: int = 24
    """Generation limit per turn of the returned policy."""

    def __post_init__(self) -> None:
        self.check_common()
        check_int(self, "vocab_size", "corpus_tasks", "demo_episodes")

    kind: ClassVar[str] = "tiny"
    version: ClassVar[int] = RECIPE_VERSION

    def build(self, *, progress: bool) -> tuple[Any, PreTrainedTokenizerFast, dict[str, Any]]:
        """Train the policy (:func:`train_tiny`); the info records the final SFT loss.

        Example:
            >>> TinyRecipe().key() == TinyRecipe().key() != TinyRecipe(sft=SFTConfig(steps=10)).key()
            True
        """
        model, tokenizer, history = train_tiny(self, progress=progress)
        return model, tokenizer, {"sft_final_loss": history[-1]["loss"]}


DEFAULT_RECIPE = TinyRecipe()
"""The recipe of ``--agent tiny`` and of ``turnkit quickstart``."""


def math_corpus(num_tasks: int, *, seed: int = 0) -> list[str]:
    """Text for learning BPE merges: prompts and oracle answers of generated math tasks, plus env feedback.

    Tasks cycle over difficulties 1-2 and every split, so the merges are not tuned to one split.

    Example:
        >>> corpus = math_corpus(2)
        >>> len(corpus), corpus[1].startswith("ANSWER: ")
        (9, True)
    """
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    for i in range(num_tasks):
        task = generate(rng, split=SPLITS[i % len(SPLITS)], difficulty=1 + (i // len(SPLITS)) % 2)
        texts.append(f"{task.prompt}\n{FORMAT_LINE}")
        texts.append(f"ANSWER: {task.privileged['answer']}")
    texts.extend(FEEDBACK_TEXTS)
    return texts


def build_tiny_tokenizer_for(recipe: TinyRecipe) -> PreTrainedTokenizerFast:
    """The recipe's BPE tokenizer (deterministic for a given recipe).

    Example:
        >>> tok = build_tiny_tokenizer_for(TinyRecipe(corpus_tasks=30, vocab_size=300))
        >>> len(tok), tok.decode(tok("What is 6 plus 5?")["input_ids"])
        (300, 'What is 6 plus 5?')
    """
    return build_tiny_tokenizer(math_corpus(recipe.corpus_tasks, seed=recipe.seed), vocab_size=recipe.vocab_size)


def train_tiny(recipe: TinyRecipe, *, progress: bool = True) -> tuple[Any, PreTrainedTokenizerFast, list[dict]]:
    """Build the tokenizer and model and run the recipe's SFT; returns ``(model, tokenizer, sft_history)``.

    Example:
        >>> r = TinyRecipe.from_dict({"model": {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64},
        ...                           "sft": {"steps": 3}, "demo_episodes": 8, "corpus_tasks": 30, "vocab_size": 300})
        >>> model, tok, history = train_tiny(r, progress=False)
        >>> len(history), model.config.vocab_size
        (3, 300)
    """
    tokenizer = build_tiny_tokenizer_for(recipe)
    model = build_tiny_model(tokenizer, recipe.model_config(), seed=recipe.seed)
    demos = collect_demos(MATH_ENV, episodes=recipe.demo_episodes, seed=0, env_kwargs=recipe.env_kwargs)
    if demos.dropped_errors or demos.dropped_failures:
        raise ConfigError(
            f"the math oracle failed {demos.dropped_failures} and errored on {demos.dropped_errors} of "
            f"{recipe.demo_episodes} demonstration episodes with env_kwargs={recipe.env_kwargs}"
        )
    rows = demo_rows(demos.trajectories, tokenizer)
    history = train_sft(
        model, rows, recipe.sft_config(), pad_id=int(tokenizer.pad_token_id), progress=progress, desc="tiny sft"
    )
    return model, tokenizer, history


def tiny_policy(
    *,
    rebuild: bool = False,
    cache: str | Path | None = None,
    progress: bool = True,
    recipe: TinyRecipe | None = None,
    **policy_kwargs: Any,
) -> HFPolicy:
    """The embedded default policy: load it from the cache, or build it (about a minute on 2 CPU cores).

    Args:
        rebuild: Train again even if a cached copy exists (and replace it).
        cache: Cache root; defaults to ``turnkit.models.tiny.cache_dir()`` (``$TURNKIT_CACHE``).
        progress: Show progress bars while building.
        recipe: What to build; default :data:`DEFAULT_RECIPE` (the quickstart's start policy).
        **policy_kwargs: Passed to :class:`~turnkit.agents.hf.HFPolicy` (e.g. ``temperature``, ``seed``);
            ``max_new_tokens`` defaults to ``recipe.max_new_tokens``.

    Returns:
        A fresh :class:`~turnkit.agents.hf.HFPolicy` (its own model copy, safe to train).
    """
    recipe = recipe if recipe is not None else DEFAULT_RECIPE
    return recipe_policy(recipe, cache=cache, rebuild=rebuild, progress=progress, **policy_kwargs)
