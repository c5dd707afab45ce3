"""A tiny language-model *shopper* for WebShop-v0, taught by SFT on oracle demonstrations, built and cached.

The embedded tiny policy speaks arithmetic; WebShop needs a model that reads a page and answers with
``search[...]`` or ``click[...]``. This recipe builds one from the same parts:

1. data: :func:`turnkit.rollout.demos.collect_demos` plays the WebShop oracle on seeds ``first_seed ..``
   (1,000,000 by default; studies evaluate on smaller seeds, so the two never overlap);
2. rows: every oracle turn with the env's real observations as context, rendered by the chat-template path
   :class:`~turnkit.agents.hf.HFPolicy` samples with (:func:`turnkit.rollout.demos.demo_rows`);
3. a byte-level BPE tokenizer learned from the episodes' text with the product ids cut out (random ids would
   otherwise become arbitrary merges, and the same id would be spelled by different tokens on a result page
   and in ``click[...]``: kept out, an id is one token per character, which a small model can copy), a
   randomly initialised
   :func:`~turnkit.models.tiny.build_tiny_model` and SFT (:func:`turnkit.models.sft.train_sft`).

Deliberately short SFT leaves a policy that knows the command format but often picks the wrong product or
forgets an option: what RL (``turnkit train --set env_id=turnkit/WebShop-v0 --set model=<folder>``) improves.
The model is saved under ``cache_dir()/tiny_shopper/<key>``.

Example:
    >>> import tempfile
    >>> micro = TinyShopperRecipe.from_dict({"model": {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64},
    ...                                      "sft": {"steps": 1, "batch_size": 2}, "vocab_size": 300, "train_tasks": 2,
    ...                                      "corpus_episodes": 2})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     shopper = tiny_shopper(recipe=micro, cache=d, progress=False)
    >>> shopper.sampling.temperature, len(shopper.tokenizer)
    (1.0, 300)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from transformers import PreTrainedTokenizerFast

from turnkit.agents.hf import HFPolicy
from turnkit.configs import check_choice, check_int
from turnkit.envs.web.webshop.catalogue import SPLITS
from turnkit.errors import ConfigError
from turnkit.models.recipe import TinyTrainingRecipe, recipe_policy
from turnkit.models.sft import SFTConfig, train_sft
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from turnkit.models.tiny_agent import check_rows, episode_texts
from turnkit.rollout.demos import collect_demos, demo_rows

RECIPE_VERSION = 2
"""Bumped whenever the code changes what a recipe builds (invalidates every cached tiny shopper).
2: product ids are kept out of the BPE corpus (version 1 merged random id characters and could not copy ids)."""

_PRODUCT_ID = re.compile(r"B0[A-Z0-9]{8}")
ENV_ID = "turnkit/WebShop-v0"


@dataclass(frozen=True)
class TinyShopperRecipe(TinyTrainingRecipe):
    """Everything that determines the tiny shopper (its hash is the cache key).

    Example:
        >>> TinyShopperRecipe().model.max_position_embeddings
        2048
        >>> TinyShopperRecipe(split="test")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: TinyShopperRecipe.split must be one of ['id', 'ood', 'combo'], got 'test'
    """

    model: TinyModelConfig = field(
        default_factory=lambda: TinyModelConfig(
            hidden_size=128, num_layers=2, num_heads=4, intermediate_size=384, max_position_embeddings=2048
        )
    )
    """Model shape (``max_position_embeddings``: the longest prompt + turn, in tokens; every row is checked)."""
    vocab_size: int = 1024
    """BPE vocabulary size (byte alphabet and special tokens included)."""
    split: str = "id"
    """Task split of the demonstrations."""
    train_tasks: int = 400
    """Oracle episodes (seeds ``first_seed ..``)."""
    first_seed: int = 1_000_000
    """First demonstration seed."""
    corpus_episodes: int = 400
    """Episodes whose text trains the BPE merges."""
    sft: SFTConfig = field(default_factory=lambda: SFTConfig(steps=1500, batch_size=16, optim={"lr": 3e-3}))
    """SFT on the training rows (short on purpose: see the module docstring); ``sft.seed`` shuffles the rows."""
    seed: int = 0
    """Model initialisation seed."""
    max_new_tokens: int = 48
    """Generation limit per turn of the returned policy."""

    kind: ClassVar[str] = "tiny_shopper"
    version: ClassVar[int] = RECIPE_VERSION
    policy_defaults: ClassVar[dict[str, Any]] = {"temperature": 1.0}

    def __post_init__(self) -> None:
        self.check_common()
        check_choice(self, "split", SPLITS)
        check_int(self, "vocab_size", "train_tasks", "corpus_episodes")
        check_int(self, "first_seed", low=0)

    def build(self, *, progress: bool) -> tuple[Any, PreTrainedTokenizerFast, dict[str, Any]]:
        """Collect oracle demonstrations, learn the tokenizer, SFT; the info records the data and the losses."""
        demos = collect_demos(ENV_ID, episodes=self.train_tasks, seed=self.first_seed, split=self.split)
        episodes = list(demos.trajectories)
        if not episodes:
            raise ConfigError("no successful oracle demonstration to learn from")
        corpus_idx = np.random.default_rng(self.seed).permutation(len(episodes))[: self.corpus_episodes]
        corpus = [_PRODUCT_ID.sub(" ", text) for text in episode_texts([episodes[i] for i in sorted(corpus_idx)])]
        tokenizer = build_tiny_tokenizer(corpus, vocab_size=self.vocab_size)
        rows = demo_rows(episodes, tokenizer)
        check_rows(rows, self.model.max_position_embeddings)
        model = build_tiny_model(tokenizer, self.model_config(), seed=self.seed)
        history = train_sft(
            model, rows, self.sft_config(), pad_id=int(tokenizer.pad_token_id), progress=progress, desc="shopper sft"
        )
        info = {
            "episodes": len(episodes),
            "dropped": [demos.dropped_errors, demos.dropped_failures],
            "rows": len(rows),
            "max_row_tokens": max(len(r.input_ids) for r in rows),
            "mean_row_tokens": float(np.mean([len(r.input_ids) for r in rows])),
            "parameters": int(sum(p.numel() for p in model.parameters())),
            "sft_first_loss": history[0]["loss"],
            "sft_final_loss": history[-1]["loss"],
        }
        return model, tokenizer, info


DEFAULT_SHOPPER_RECIPE = TinyShopperRecipe()
"""The recipe of :func:`tiny_shopper` when none is given."""


def tiny_shopper(
    recipe: TinyShopperRecipe | None = None,
    *,
    cache: str | Path | None = None,
    progress: bool = True,
    rebuild: bool = False,
    **policy_kwargs: Any,
) -> HFPolicy:
    """The tiny WebShop shopper as an :class:`~turnkit.agents.hf.HFPolicy`: loaded from the cache or built.

    Args:
        recipe: What to build; default :data:`DEFAULT_SHOPPER_RECIPE`.
        cache: Cache root; defaults to ``turnkit.models.tiny.cache_dir()``.
        progress: Show a progress bar while building.
        rebuild: Train again even if a cached copy exists.
        **policy_kwargs: Passed to :class:`~turnkit.agents.hf.HFPolicy` (``temperature`` defaults to 1).
    """
    recipe = recipe if recipe is not None else DEFAULT_SHOPPER_RECIPE
    return recipe_policy(recipe, cache=cache, rebuild=rebuild, progress=progress, **policy_kwargs)
