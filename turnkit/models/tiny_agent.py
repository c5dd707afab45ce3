"""A tiny language-model *coding agent* for CollabCode, built and trained locally and cached.

The embedded tiny policy only knows arithmetic; RL-style studies on CollabCode (RFT, DPO, SWEET-RL) need a
trainable agent whose rollouts vary in quality. This module builds one by imitation of a scripted mixture:

1. data: :class:`~turnkit.envs.collab_code.agents.PartialClarifier` ``(variant, slip, unasked)`` plays seeded
   ``turnkit/CollabCode-v0`` episodes (seeds ``first_seed ..``, ``per_task`` variants each) against the
   rule-based human. Per episode it asks a random share of the needed questions and sometimes forgets a
   learned value, so the episodes range from "answer at once with defaults" to "ask everything";
2. rows: every assistant turn, with the env's real observations as context, rendered by the same chat
   template path :class:`~turnkit.agents.hf.HFPolicy` samples with (:func:`turnkit.rollout.demos.demo_rows`:
   :func:`~turnkit.agents.hf.chat_prompt_ids` of :func:`~turnkit.rollout.demos.turn_messages`), loss on the
   turn's ids + EOS;
3. a byte-level BPE tokenizer learned from the episodes' text, a randomly initialised
   :func:`~turnkit.models.tiny.build_tiny_model`, and SFT (:func:`turnkit.models.sft.train_sft`).

Sampled at ``T = 1`` the model imitates the *mixture*, so its own rollouts of one task differ (some ask,
some do not; some copy a value, some slip): the spread RFT, DPO and SWEET-RL learn from. The model is saved
under ``cache_dir()/tiny_agent/<key>`` (``key`` hashes the recipe and :data:`RECIPE_VERSION`); later calls
load it. Studies evaluate on seeds below ``first_seed`` (1,000,000 by default), so the data never overlap.

Example:
    >>> import tempfile
    >>> recipe = TinyAgentRecipe.from_dict({"model": {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64},
    ...                                     "sft": {"steps": 2, "batch_size": 4}, "vocab_size": 300, "train_tasks": 3,
    ...                                     "per_task": 1})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     agent = tiny_code_agent(recipe=recipe, cache=d, progress=False)
    ...     again = tiny_code_agent(recipe=recipe, cache=d, progress=False, temperature=0.0)  # loaded
    >>> agent.sampling.temperature, again.sampling.temperature, len(again.tokenizer)
    (1.0, 0.0, 300)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import gymnasium
import numpy as np
from transformers import PreTrainedTokenizerFast

from turnkit.agents.hf import HFPolicy
from turnkit.configs import check_choice, check_float, check_int
from turnkit.envs import registration as _registration  # noqa: F401  (registers the built-in env ids)
from turnkit.envs.collab_code.agents import PartialClarifier
from turnkit.envs.collab_code.generator import SPLITS
from turnkit.errors import ConfigError
from turnkit.models.recipe import TinyTrainingRecipe, recipe_policy
from turnkit.models.sft import SFTConfig, train_sft
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from turnkit.rollout.batch import TokenRow
from turnkit.rollout.collect import collect_batch
from turnkit.rollout.demos import demo_rows
from turnkit.types import Trajectory

RECIPE_VERSION = 1
"""Bumped whenever the code changes what a recipe builds (invalidates every cached tiny agent)."""
ENV_ID = "turnkit/CollabCode-v0"
"""The env the data episodes are played in (and the agent is meant for)."""


@dataclass(frozen=True)
class TinyAgentRecipe(TinyTrainingRecipe):
    """Everything that determines the tiny CollabCode agent (its hash is the cache key).

    Example:
        >>> TinyAgentRecipe().model.num_layers
        2
        >>> TinyAgentRecipe(slip=2.0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: TinyAgentRecipe.slip must be a finite number >= 0 and <= 1, got 2.0
    """

    model: TinyModelConfig = field(
        default_factory=lambda: TinyModelConfig(
            hidden_size=128, num_layers=2, num_heads=4, intermediate_size=384, max_position_embeddings=1024
        )
    )
    """Model shape (``max_position_embeddings``: the longest prompt + turn, in tokens; every row is checked)."""
    vocab_size: int = 1024
    """BPE vocabulary size (byte alphabet and special tokens included)."""
    split: str = "id"
    """Task split of the data episodes."""
    train_tasks: int = 1500
    """Seeded tasks (seeds ``first_seed ..``)."""
    per_task: int = 2
    """Mixture members per task (``PartialClarifier(variant=0 .. per_task - 1)``)."""
    first_seed: int = 1_000_000
    """First training seed (studies use smaller seeds, so the two never overlap)."""
    slip: float = 0.2
    """``PartialClarifier.slip``: probability of forgetting a learned value."""
    unasked: str = "default"
    """``PartialClarifier.unasked``: ``"default"`` or ``"guess"``."""
    corpus_episodes: int = 1000
    """Episodes whose text trains the BPE merges."""
    sft: SFTConfig = field(default_factory=lambda: SFTConfig(steps=800, batch_size=32, optim={"lr": 3e-3}))
    """SFT on the training rows; ``sft.seed`` shuffles the rows."""
    seed: int = 0
    """Model initialisation seed."""
    max_new_tokens: int = 128
    """Generation limit per turn of the returned policy."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra ``gymnasium.make`` arguments of the data episodes (e.g. ``{"kinds": ("grade",)}``)."""

    def __post_init__(self) -> None:
        self.check_common()
        check_choice(self, "split", SPLITS)
        check_int(self, "vocab_size", "train_tasks", "per_task", "corpus_episodes")
        check_int(self, "first_seed", low=0)
        check_float(self, "slip", low=0.0, high=1.0)
        check_choice(self, "unasked", ("default", "guess"))

    kind: ClassVar[str] = "tiny_agent"
    version: ClassVar[int] = RECIPE_VERSION
    policy_defaults: ClassVar[dict[str, Any]] = {"temperature": 1.0}

    def build(self, *, progress: bool) -> tuple[Any, PreTrainedTokenizerFast, dict[str, Any]]:
        """Train the model (:func:`train_tiny_agent`); the info records the data and the SFT losses.

        Example:
            >>> TinyAgentRecipe().key() == TinyAgentRecipe().key() != TinyAgentRecipe(sft=SFTConfig(steps=10)).key()
            True
        """
        model, tokenizer, history, data_info = train_tiny_agent(self, progress=progress)
        info = {"data": data_info, "sft_first_loss": history[0]["loss"], "sft_final_loss": history[-1]["loss"]}
        return model, tokenizer, info


DEFAULT_AGENT_RECIPE = TinyAgentRecipe()
"""The recipe of :func:`tiny_code_agent` when none is given (the benchmarked tiny agent)."""


def training_episodes(recipe: TinyAgentRecipe, *, batch_size: int = 64) -> list[Trajectory]:
    """The recipe's data: ``per_task`` mixture episodes of each seeded task, grouped by task.

    Episode ``(task i, variant v)`` is ``PartialClarifier(v, slip, unasked)`` on seed ``first_seed + i``.

    Example:
        >>> eps = training_episodes(TinyAgentRecipe(train_tasks=2, per_task=2))
        >>> [(t.seed, t.group) for t in eps], all(t.error is None for t in eps)
        ([(1000000, 0), (1000000, 0), (1000001, 1), (1000001, 1)], True)
    """
    out: list[Trajectory] = []
    for v in range(recipe.per_task):
        agent = PartialClarifier(v, recipe.slip, recipe.unasked)  # type: ignore[arg-type]
        envs = [
            gymnasium.make(ENV_ID, split=recipe.split, **recipe.env_kwargs)
            for _ in range(min(batch_size, recipe.train_tasks))
        ]
        for lo in range(0, recipe.train_tasks, len(envs)):
            tasks = range(lo, min(lo + len(envs), recipe.train_tasks))
            seeds = [recipe.first_seed + i for i in tasks]
            out.extend(collect_batch(envs[: len(seeds)], agent, seeds, groups=list(tasks)))
        for env in envs:
            env.close()
    out.sort(key=lambda t: t.group if t.group is not None else -1)
    return out


def episode_texts(trajectories: Sequence[Trajectory]) -> list[str]:
    """Every observation and action text of the episodes (the BPE corpus).

    Example:
        >>> from turnkit.types import AgentTurn, Step
        >>> episode_texts([Trajectory("e", 0, (Step("ask?", AgentTurn("yes"), 0.0),))])
        ['ask?', 'yes']
    """
    return [text for t in trajectories for s in t.steps for text in (s.observation, s.action.text)]


def train_tiny_agent(
    recipe: TinyAgentRecipe, *, progress: bool = True
) -> tuple[Any, PreTrainedTokenizerFast, list[dict[str, Any]], dict[str, Any]]:
    """Build data, tokenizer and model and run the recipe's SFT.

    Returns:
        ``(model, tokenizer, sft_history, data_info)``; ``data_info`` has the episodes' mean reward,
        success rate and turns histogram, and the row lengths.

    Raises:
        ConfigError: A training row (prompt + turn + EOS) longer than ``max_position_embeddings``.

    Example:
        >>> recipe = TinyAgentRecipe.from_dict({"model": {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64},
        ...                                     "sft": {"steps": 1, "batch_size": 2}, "vocab_size": 300,
        ...                                     "train_tasks": 1, "per_task": 1})
        >>> model, tok, history, info = train_tiny_agent(recipe, progress=False)
        >>> len(history), info["episodes"], info["rows"] >= 1
        (1, 1, True)
    """
    episodes = training_episodes(recipe)
    errors = [t for t in episodes if t.error is not None]
    if errors:
        raise ConfigError(f"{len(errors)} data episodes ended with an error, e.g. {errors[0].error}")
    corpus_idx = np.random.default_rng(recipe.seed).permutation(len(episodes))[: recipe.corpus_episodes]
    tokenizer = build_tiny_tokenizer(
        episode_texts([episodes[i] for i in sorted(corpus_idx)]), vocab_size=recipe.vocab_size
    )
    rows = demo_rows(episodes, tokenizer)
    check_rows(rows, recipe.model.max_position_embeddings)
    model = build_tiny_model(tokenizer, recipe.model_config(), seed=recipe.seed)
    history = train_sft(
        model, rows, recipe.sft_config(), pad_id=int(tokenizer.pad_token_id), progress=progress, desc="tiny agent sft"
    )
    rewards = [t.total_reward for t in episodes]
    info = {
        "episodes": len(episodes),
        "rows": len(rows),
        "data_mean_reward": float(np.mean(rewards)),
        "data_success": float(np.mean([t.success for t in episodes])),
        "data_turns_hist": np.bincount([len(t.steps) for t in episodes]).tolist(),
        "max_row_tokens": max(len(r.input_ids) for r in rows),
        "mean_row_tokens": float(np.mean([len(r.input_ids) for r in rows])),
        "max_turn_tokens": int(max(sum(r.loss_mask) for r in rows)),
        "parameters": int(sum(p.numel() for p in model.parameters())),
    }
    return model, tokenizer, history, info


def check_rows(rows: Sequence[TokenRow], limit: int) -> None:
    """Raise if a row does not fit the model's positions.

    Raises:
        ConfigError: The longest row is longer than ``limit`` tokens.

    Example:
        >>> check_rows([TokenRow.from_prompt_completion([1, 2, 3], [4, 5])], limit=4)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: a training row has 5 tokens > max_position_embeddings=4
    """
    longest = max((len(r.input_ids) for r in rows), default=0)
    if longest > limit:
        raise ConfigError(f"a training row has {longest} tokens > max_position_embeddings={limit}")


def tiny_code_agent(
    recipe: TinyAgentRecipe | None = None,
    *,
    cache: str | Path | None = None,
    progress: bool = True,
    rebuild: bool = False,
    **policy_kwargs: Any,
) -> HFPolicy:
    """The tiny CollabCode agent as an :class:`~turnkit.agents.hf.HFPolicy`: loaded from the cache or built.

    Args:
        recipe: What to build; default :data:`DEFAULT_AGENT_RECIPE`.
        cache: Cache root; defaults to ``turnkit.models.tiny.cache_dir()`` (``$TURNKIT_CACHE``).
        progress: Show a progress bar while building.
        rebuild: Train again even if a cached copy exists (and replace it).
        **policy_kwargs: Passed to :class:`~turnkit.agents.hf.HFPolicy`; ``temperature`` defaults to ``1``
            (the stochastic mixture imitator), ``max_new_tokens`` to ``recipe.max_new_tokens`` and
            ``max_batch_size`` to 64.

    Example:
        >>> import tempfile
        >>> micro = TinyAgentRecipe.from_dict({"model": {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64},
        ...                                    "sft": {"steps": 1, "batch_size": 2}, "vocab_size": 300,
        ...                                    "train_tasks": 2, "per_task": 1})
        >>> with tempfile.TemporaryDirectory() as d:
        ...     agent = tiny_code_agent(recipe=micro, cache=d, progress=False, max_new_tokens=8)
        >>> agent.sampling.temperature, agent.sampling.max_new_tokens
        (1.0, 8)
    """
    recipe = recipe if recipe is not None else DEFAULT_AGENT_RECIPE
    return recipe_policy(recipe, cache=cache, rebuild=rebuild, progress=progress, **policy_kwargs)
