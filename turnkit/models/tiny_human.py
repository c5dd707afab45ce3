"""A tiny language-model simulated human for CollabCode, built and trained locally and cached.

No language model can be downloaded here, so the "real LLM human" is a small Llama-style model
(:func:`~turnkit.models.tiny.build_tiny_model`) fine-tuned to play the human through the ordinary
:class:`~turnkit.envs.collab_code.llm_human.LLMHuman` prompt:

1. data (:mod:`turnkit.envs.collab_code.human_data`): the clarifying scripted agent plays seeded CollabCode
   episodes (seeds ``first_seed ..``, every split) against the rule-based human; each of its questions, plus
   a few probe questions (off-topic, asking for the code, another family's question), becomes one example;
2. the *input* is exactly what ``LLMHuman(policy, include_dialogue=recipe.include_dialogue)`` sends: the
   :data:`~turnkit.envs.collab_code.llm_human.DEFAULT_TEMPLATE` filled with the request and the hidden
   information (fact sentences and the reference code), then the question; the *target* is the rule-based
   human's reply;
3. a byte-level BPE tokenizer learned from those prompts and replies, a randomly initialised model, and SFT
   (:func:`turnkit.models.sft.train_sft`).

The result is saved with ``save_pretrained`` under ``cache_dir()/tiny_human/<key>`` (``key`` hashes the
recipe and :data:`RECIPE_VERSION`); later calls load it. Evaluation seeds (0, 1, ... in the studies) never
overlap the training seeds (``first_seed`` = 1,000,000 by default).

Example:
    >>> import tempfile
    >>> recipe = TinyHumanRecipe.from_dict({"model": {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64},
    ...                                     "sft": {"steps": 2, "batch_size": 4}, "vocab_size": 300, "train_tasks": 6})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     human = tiny_llm_human(recipe=recipe, cache=d, progress=False)
    ...     again = tiny_human_policy(recipe=recipe, cache=d, progress=False)   # loaded, not trained
    >>> human.include_dialogue, human.agent.sampling.temperature, len(again.tokenizer)
    (False, 0.0, 300)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from transformers import PreTrainedTokenizerFast

from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.configs import check_bool, check_int
from turnkit.envs.collab_code.generator import SPLITS
from turnkit.envs.collab_code.human_data import TRAIN_PROBES, HumanExample, clarify_examples, probe_examples
from turnkit.envs.collab_code.llm_human import LLMHuman
from turnkit.errors import ConfigError
from turnkit.models.recipe import TinyTrainingRecipe, recipe_policy
from turnkit.models.sft import SFTConfig, train_sft
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from turnkit.rollout.batch import TokenRow
from turnkit.rollout.demos import completion_ids

RECIPE_VERSION = 1
"""Bumped whenever the code changes what a recipe builds (invalidates every cached tiny human)."""


@dataclass(frozen=True)
class TinyHumanRecipe(TinyTrainingRecipe):
    """Everything that determines the tiny simulated human (its hash is the cache key).

    Example:
        >>> TinyHumanRecipe().model.num_layers
        2
        >>> TinyHumanRecipe(splits=("train",))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: TinyHumanRecipe.splits must be a non-empty subset of ('id', 'ood', ...
    """

    model: TinyModelConfig = field(
        default_factory=lambda: TinyModelConfig(
            hidden_size=128, num_layers=2, num_heads=4, intermediate_size=384, max_position_embeddings=1024
        )
    )
    """Model shape (``max_position_embeddings``: the longest prompt + reply, in tokens.)."""
    vocab_size: int = 1024
    """BPE vocabulary size (byte alphabet and special tokens included)."""
    splits: tuple[str, ...] = SPLITS
    """Splits the training tasks are drawn from (the human serves every split)."""
    train_tasks: int = 1500
    """Seeded tasks per split (seeds ``first_seed ..``)."""
    first_seed: int = 1_000_000
    """First training seed (evaluation uses small seeds, so the two never overlap)."""
    probes_per_task: int = 1
    """Probe questions per task (see :func:`~turnkit.envs.collab_code.human_data.probe_examples`)."""
    include_dialogue: bool = False
    """Show the whole dialogue to the model (``False``: the latest question only, like the rule-based human)."""
    corpus_examples: int = 1500
    """Examples whose text trains the BPE merges."""
    sft: SFTConfig = field(default_factory=lambda: SFTConfig(steps=600, batch_size=16, optim={"lr": 3e-3}))
    """SFT on the training rows; ``sft.seed`` shuffles the rows."""
    seed: int = 0
    """Model initialisation, probe seed."""
    max_new_tokens: int = 64
    """Generation limit per reply of the returned policy."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra :class:`~turnkit.envs.collab_code.env.CollabCodeEnv` arguments of the data episodes (``kinds``)."""

    def __post_init__(self) -> None:
        self.check_common()
        if not self.splits or any(s not in SPLITS for s in self.splits):
            raise ConfigError(
                f"TinyHumanRecipe.splits must be a non-empty subset of {SPLITS}, got {tuple(self.splits)}"
            )
        check_int(self, "vocab_size", "train_tasks", "corpus_examples")
        check_int(self, "probes_per_task", "first_seed", low=0)
        check_bool(self, "include_dialogue")

    kind: ClassVar[str] = "tiny_human"
    version: ClassVar[int] = RECIPE_VERSION
    policy_defaults: ClassVar[dict[str, Any]] = {"temperature": 0.0}

    def build(self, *, progress: bool) -> tuple[Any, PreTrainedTokenizerFast, dict[str, Any]]:
        """Train the model (:func:`train_tiny_human`); the info records the data and the SFT losses.

        Example:
            >>> TinyHumanRecipe().key() == TinyHumanRecipe().key() != TinyHumanRecipe(sft=SFTConfig(steps=10)).key()
            True
        """
        model, tokenizer, history, data_info = train_tiny_human(self, progress=progress)
        info = {"data": data_info, "sft_first_loss": history[0]["loss"], "sft_final_loss": history[-1]["loss"]}
        return model, tokenizer, info


DEFAULT_HUMAN_RECIPE = TinyHumanRecipe()
"""The recipe of :func:`tiny_human_policy` when none is given (the benchmarked tiny human)."""


def training_examples(recipe: TinyHumanRecipe) -> list[HumanExample]:
    """The recipe's examples: clarifying questions and probes over ``train_tasks`` seeded tasks per split.

    Example:
        >>> ex = training_examples(TinyHumanRecipe(train_tasks=2, splits=("id",)))
        >>> sorted({e.source for e in ex}), all(e.seed >= 1_000_000 for e in ex)
        (['clarify', 'probe'], True)
    """
    rng = np.random.default_rng(recipe.seed)
    seeds = range(recipe.first_seed, recipe.first_seed + recipe.train_tasks)
    out: list[HumanExample] = []
    for split in recipe.splits:
        clarify = clarify_examples(split=split, seeds=seeds, **recipe.env_kwargs)
        out += clarify
        if recipe.probes_per_task:
            out += probe_examples(clarify, probes=TRAIN_PROBES, rng=rng, per_task=recipe.probes_per_task)
    return out


def human_for(policy: Any, recipe: TinyHumanRecipe | None = None) -> LLMHuman:
    """The :class:`~turnkit.envs.collab_code.llm_human.LLMHuman` that wraps a policy as the recipe trained it.

    Example:
        >>> from turnkit.agents.scripted import ScriptedAgent
        >>> human_for(ScriptedAgent(["ok"])).include_dialogue
        False
    """
    recipe = recipe if recipe is not None else DEFAULT_HUMAN_RECIPE
    return LLMHuman(policy, include_dialogue=recipe.include_dialogue)


def example_rows(examples: list[HumanExample], tokenizer: PreTrainedTokenizerFast, human: LLMHuman) -> list[TokenRow]:
    """SFT rows: the ``LLMHuman`` prompt ids (chat template), loss on the rule-based reply's ids + EOS.

    Example:
        >>> from turnkit.agents.scripted import ScriptedAgent
        >>> from turnkit.models.tiny import build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> ex = training_examples(TinyHumanRecipe(train_tasks=1, splits=("id",), probes_per_task=0))
        >>> row = example_rows(ex[:1], tok, human_for(ScriptedAgent(["x"])))[0]
        >>> tok.decode([i for i, m in zip(row.input_ids, row.loss_mask) if m]) == ex[0].reply + "<|end|>"
        True
    """
    rows = []
    for i, ex in enumerate(examples):
        prompt = chat_prompt_ids(tokenizer, human.context(ex.task, ex.dialogue).messages)
        rows.append(TokenRow.from_prompt_completion(prompt, completion_ids(tokenizer, ex.reply), traj_index=i))
    return rows


def train_tiny_human(
    recipe: TinyHumanRecipe, *, progress: bool = True
) -> tuple[Any, PreTrainedTokenizerFast, list[dict[str, Any]], dict[str, Any]]:
    """Build data, tokenizer and model and run the recipe's SFT.

    Returns:
        ``(model, tokenizer, sft_history, data_info)``; ``data_info`` counts examples and prompt lengths.

    Raises:
        ConfigError: A prompt + reply longer than ``max_position_embeddings``.

    Example:
        >>> recipe = TinyHumanRecipe.from_dict({"model": {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64},
        ...                                     "sft": {"steps": 2, "batch_size": 4}, "vocab_size": 300,
        ...                                     "train_tasks": 4, "splits": ["id"]})
        >>> model, tok, history, info = train_tiny_human(recipe, progress=False)
        >>> len(history), info["examples"] == info["clarify_examples"] + info["probe_examples"]
        (2, True)
    """
    examples = training_examples(recipe)
    template_human = human_for(_NoAgent(), recipe)
    contexts = [template_human.context(ex.task, ex.dialogue) for ex in examples]
    corpus: list[str] = []
    for ctx, ex in list(zip(contexts, examples, strict=True))[: recipe.corpus_examples]:
        corpus += [m.content for m in ctx.messages] + [ex.reply]
    tokenizer = build_tiny_tokenizer(corpus, vocab_size=recipe.vocab_size)
    rows = example_rows(examples, tokenizer, template_human)
    longest = max(len(r.input_ids) for r in rows)
    if longest > recipe.model.max_position_embeddings:
        raise ConfigError(f"a training row has {longest} tokens > max_position_embeddings")
    model = build_tiny_model(tokenizer, recipe.model_config(), seed=recipe.seed)
    history = train_sft(
        model, rows, recipe.sft_config(), pad_id=int(tokenizer.pad_token_id), progress=progress, desc="tiny human sft"
    )
    reply_tokens = [sum(r.loss_mask) for r in rows]
    info = {
        "examples": len(examples),
        "clarify_examples": sum(ex.source == "clarify" for ex in examples),
        "probe_examples": sum(ex.source == "probe" for ex in examples),
        "max_row_tokens": longest,
        "mean_row_tokens": float(np.mean([len(r.input_ids) for r in rows])),
        "max_reply_tokens": int(max(reply_tokens)),
    }
    return model, tokenizer, history, info


def tiny_human_policy(
    *,
    rebuild: bool = False,
    cache: str | Path | None = None,
    progress: bool = True,
    recipe: TinyHumanRecipe | None = None,
    **policy_kwargs: Any,
) -> HFPolicy:
    """The tiny human model as a greedy :class:`~turnkit.agents.hf.HFPolicy`: loaded from the cache or built.

    Args:
        rebuild: Train again even if a cached copy exists (and replace it).
        cache: Cache root; defaults to ``turnkit.models.tiny.cache_dir()`` (``$TURNKIT_CACHE``).
        progress: Show a progress bar while building.
        recipe: What to build; default :data:`DEFAULT_HUMAN_RECIPE`.
        **policy_kwargs: Passed to :class:`~turnkit.agents.hf.HFPolicy`; ``temperature`` defaults to ``0``
            (greedy, like ColBench's simulator) and ``max_new_tokens`` to ``recipe.max_new_tokens``.
    """
    recipe = recipe if recipe is not None else DEFAULT_HUMAN_RECIPE
    return recipe_policy(recipe, cache=cache, rebuild=rebuild, progress=progress, **policy_kwargs)


def tiny_llm_human(*, recipe: TinyHumanRecipe | None = None, **kwargs: Any) -> LLMHuman:
    """:func:`tiny_human_policy` wrapped in the :class:`LLMHuman` it was trained for (same arguments)."""
    return human_for(tiny_human_policy(recipe=recipe, **kwargs), recipe)


class _NoAgent:
    """A placeholder agent: the template human is only used to render prompts."""

    def act(self, contexts: Any) -> list[Any]:  # pragma: no cover - never called
        raise ConfigError("the template human renders prompts only")
