"""The real model's quickstart recipe: SmolLM2-135M-Instruct on multi-turn MathEpisodes, warm start then GRPO.

SmolLM2-135M-Instruct (``turnkit models build smollm2``; its weights are the GGUF's Q4_1 weights dequantised,
an approximation of the released bf16 model) never writes MathEpisodes' ``ANSWER: <value>`` on its own, so:

1. a LoRA warm start (:func:`turnkit.train.warmstart.warm_start`, cached): 30 SFT steps on 64 oracle answers
   and 64 corrected retries; it teaches the format and leaves room to learn;
2. GRPO through the shared loop on the same task: difficulty 2 arithmetic (one of +, -, x; numbers up to 99),
   three attempts with ``Incorrect. N attempts left.`` between them, so episodes run 2-3 turns.

:data:`SMOLLM2_TRAIN` is the RL recipe (:class:`~turnkit.train.config.TrainConfig` keys) and
:data:`SMOLLM2_WARM_START` the warm start's settings; docs/training.md has the measured numbers.

Example:
    >>> SMOLLM2_TRAIN["env_kwargs"]["max_attempts"], SMOLLM2_WARM_START.lora.r == SMOLLM2_TRAIN["lora"]["r"]
    (3, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from turnkit.agents.hf import HFPolicy
from turnkit.models.names import load_policy
from turnkit.train.warmstart import WarmStartConfig
from turnkit.train.warmstart import warm_start as train_warm_start

MODEL = "smollm2"
"""The built-in model name (:func:`turnkit.models.names.resolve_model`)."""
ENV_ID = "turnkit/MathEpisodes-v0"
ENV_KWARGS: dict[str, Any] = {"difficulty": 2, "kinds": ["arithmetic"], "max_attempts": 3, "max_episode_steps": 4}
"""The task: the 4-turn cut only matters for a model that does not answer (three attempts end it first)."""

SMOLLM2_WARM_START = WarmStartConfig(
    demos=64, retry_demos=64, retry_spread=12, steps=30, batch_size=8, optim={"lr": 2e-3}
)
"""The warm start's settings (:class:`~turnkit.train.warmstart.WarmStartConfig`)."""

SMOLLM2_TRAIN: dict[str, Any] = {
    "env_id": ENV_ID,
    "env_kwargs": ENV_KWARGS,
    "model": MODEL,
    "lora": {"r": 8},
    "grpo": {"group_size": 4, "kl_coef": 0.0},
    "groups_per_step": 4,
    "steps": 20,
    "optim": {"lr": 3e-4, "warmup_steps": 3},
    "sampling": {"temperature": 1.0, "max_new_tokens": 24},
    "eval": {"temperature": 0.0, "episodes": 100},
    "log": {"checkpoint_every": 20, "rollouts_every": 10},
}
"""The RL recipe (any :class:`~turnkit.train.config.TrainConfig` key)."""


def smollm2_start_policy(
    *,
    cache: str | Path | None = None,
    progress: bool = True,
    max_new_tokens: int | None = None,
    warm_start: WarmStartConfig = SMOLLM2_WARM_START,
) -> tuple[HFPolicy, dict[str, Any]]:
    """SmolLM2 with its warm-started adapter (trained once, then from the cache) and the warm start's record.

    Args:
        cache: Cache root of the converted model and the adapter (default ``$TURNKIT_CACHE``).
        progress: Show progress bars.
        max_new_tokens: The policy's turn length (default the recipe's).
        warm_start: The warm start's settings (tests pass a smaller one).

    Example:
        A two-episode warm start into a fresh cache (the recipe's takes minutes); the second call reads it back:

        >>> import tempfile
        >>> micro = WarmStartConfig(demos=2, retry_demos=0, steps=1, batch_size=2)
        >>> with tempfile.TemporaryDirectory() as cache:
        ...     policy, info = smollm2_start_policy(cache=cache, progress=False, warm_start=micro)
        ...     again, cached = smollm2_start_policy(cache=cache, progress=False, warm_start=micro)
        >>> info["from_cache"], cached["from_cache"], info["oracle_episodes"], policy.has_adapter
        (False, True, 2, True)
    """
    policy = load_policy(
        MODEL,
        cache=cache,
        progress=progress,
        temperature=SMOLLM2_TRAIN["sampling"]["temperature"],
        max_new_tokens=max_new_tokens or SMOLLM2_TRAIN["sampling"]["max_new_tokens"],
    )
    info = train_warm_start(
        policy, model_id=MODEL, env_id=ENV_ID, env_kwargs=ENV_KWARGS, cfg=warm_start, cache=cache, progress=progress
    )
    return policy, info
