"""A LoRA warm start: teach a pretrained chat model an env's answer format with a short SFT on demonstrations.

A real instruct model (SmolLM2-135M-Instruct) often knows an answer but never writes it the way the env reads
it (``ANSWER: <value>``), so every GRPO group ties at reward 0 and RL has nothing to learn from. A short
supervised warm start fixes the format and leaves the skill to RL::

    rows    = oracle demonstrations (one correct turn each)
            + the corrected turn of retry demonstrations (wrong answer, "Incorrect. ...", the reference)
    adapter = attach a LoRA adapter (the base stays frozen); train_sft(adapter, rows)
    cache   = <cache>/warmstart/<key>/  (key: the model, the env settings, this config, torch, the float path)

The build runs on :data:`turnkit.models.recipe.BUILD_THREADS` thread(s), so a cached adapter is the same bits
whatever thread count the caller uses; ``ATEN_CPU_CAPABILITY`` is part of the key, because another float path
trains other bits.

Example:
    >>> WarmStartConfig(steps=0)
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: WarmStartConfig.steps must be an int >= 1, got 0
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import gymnasium
import torch

from turnkit.agents.hf import HFPolicy
from turnkit.configs import check_int, flat_dict, table_field
from turnkit.envs.math.oracle import RetryOracle
from turnkit.errors import ConfigError
from turnkit.learners.config import check_rank, flat_keys
from turnkit.learners.learner import Learner, LoraConfig, OptimConfig
from turnkit.models.recipe import BUILD_THREADS, write_folder_atomically
from turnkit.models.sft import SFTConfig, train_sft
from turnkit.models.threads import torch_threads
from turnkit.models.tiny import cache_dir
from turnkit.rollout.batch import TokenRow
from turnkit.rollout.collect import collect_batch
from turnkit.rollout.demos import collect_demos, demo_rows
from turnkit.types import Trajectory

VERSION = 1
"""Bump when the warm start's code changes what it trains (old cached adapters are then not reused)."""
INFO_FILE = "turnkit_warmstart.json"
"""The file in each cached adapter folder that records the settings and the SFT's numbers."""


WARM_START_OPTIM = OptimConfig(lr=2e-3, warmup_steps=5, schedule="cosine", min_lr_ratio=0.1)
"""Default :attr:`WarmStartConfig.optim`: peak 2e-3 after 5 warmup steps, cosine to 10%, clipped at norm 1."""


@dataclass(frozen=True)
class WarmStartConfig:
    """Settings of :func:`warm_start`. Validated on construction.

    Example:
        >>> WarmStartConfig().lora.r, WarmStartConfig(optim={"lr": 1.0}).optim.lr
        (8, 1.0)
        >>> WarmStartConfig(lora={"r": 0})
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: WarmStartConfig.lora.r must be an int >= 1, got 0
    """

    FLAT_KEYS: ClassVar[dict[str, tuple[str, str]]] = flat_keys("lr", "warmup_steps", "lora_r", "lora_alpha")
    """Keys written flat before the ``optim`` and ``lora`` tables; they move into them with a ``FutureWarning``."""
    FLAT_ORDER: ClassVar[tuple[str, ...]] = (
        "demos", "retry_demos", "retry_spread", "steps", "batch_size", "lr", "warmup_steps", "lora_r", "lora_alpha",
        "seed",
    )  # fmt: skip
    """The fields before the tables, in order: the cache key hashes this shape (:meth:`cache_dict`)."""

    demos: int = 64
    """Oracle episodes (seeds ``0 ..``): one correct turn each."""
    retry_demos: int = 64
    """Retry episodes (the seeds after the oracle's): only the corrected second turn is trained. 0: none."""
    retry_spread: int = 12
    """The demonstrated wrong answer is the reference +- 1 .. this (:class:`~turnkit.envs.math.oracle.RetryOracle`)."""
    steps: int = 30
    """SFT optimizer steps."""
    batch_size: int = 8
    """Rows per SFT step."""
    optim: OptimConfig = field(default_factory=lambda: WARM_START_OPTIM)
    """The adapter's AdamW (:class:`~turnkit.learners.learner.OptimConfig`): peak ``lr`` after ``warmup_steps``
    (at most ``steps``), then cosine to ``min_lr_ratio`` of it."""
    lora: LoraConfig = field(default_factory=LoraConfig)
    """The adapter (:class:`~turnkit.learners.learner.LoraConfig`): rank ``r`` 8, ``alpha`` 16, on q/k/v/o."""
    seed: int = 0
    """Adapter initialisation and the SFT's row order."""

    def __post_init__(self) -> None:
        check_int(self, "demos", "steps", "batch_size", "retry_spread", low=1)
        check_int(self, "retry_demos", "seed", low=0)
        table_field(self, "optim", WARM_START_OPTIM)
        table_field(self, "lora", LoraConfig())
        check_rank(self)

    def lora_config(self) -> LoraConfig:
        """The adapter the warm start trains (``lora``)."""
        return self.lora

    def sft_config(self) -> SFTConfig:
        """The SFT it runs: ``steps`` and ``batch_size`` over the rows, ``optim`` with the warmup cut to ``steps``."""
        optim = replace(self.optim, warmup_steps=min(self.optim.warmup_steps, self.steps))
        return SFTConfig(steps=self.steps, batch_size=self.batch_size, optim=optim, seed=self.seed)

    def cache_dict(self) -> dict[str, Any]:
        """The config as the cache key hashes it: the flat fields of before the tables (:func:`flat_dict`).

        Example:
            >>> WarmStartConfig(optim={"lr": 1e-2}).cache_dict()["lr"], WarmStartConfig().cache_dict()["lora_r"]
            (0.01, 8)
        """
        return flat_dict(self)


def demonstrations(
    env_id: str, env_kwargs: Mapping[str, Any], cfg: WarmStartConfig, *, split: str = "id"
) -> tuple[list[Trajectory], list[Trajectory]]:
    """The oracle's one-turn episodes (seeds ``0 .. demos-1``) and the retry episodes that ended in success.

    Example:
        >>> plain, retry = demonstrations("turnkit/MathEpisodes-v0", {"difficulty": 1, "max_attempts": 2},
        ...                               WarmStartConfig(demos=2, retry_demos=2))
        >>> [len(t.steps) for t in plain], [len(t.steps) for t in retry]
        ([1, 1], [2, 2])
    """
    plain = list(collect_demos(env_id, episodes=cfg.demos, seed=0, split=split, env_kwargs=env_kwargs).trajectories)
    if cfg.retry_demos == 0:
        return plain, []
    seeds = list(range(cfg.demos, cfg.demos + cfg.retry_demos))
    envs = [gymnasium.make(env_id, split=split, **dict(env_kwargs)) for _ in seeds]
    try:
        played = collect_batch(envs, RetryOracle(cfg.retry_spread), seeds)
    finally:
        for env in envs:
            env.close()
    return plain, [t for t in played if t.success and t.error is None and len(t.steps) >= 2]


def warm_start_rows(plain: list[Trajectory], retry: list[Trajectory], tokenizer: Any) -> list[TokenRow]:
    """SFT rows: every oracle turn, and each retry episode's turns after the first (the corrections).

    Example:
        >>> from turnkit.models.tiny import build_tiny_tokenizer
        >>> plain, retry = demonstrations("turnkit/MathEpisodes-v0", {"max_attempts": 2},
        ...                               WarmStartConfig(demos=2, retry_demos=1))
        >>> [r.turn_index for r in warm_start_rows(plain, retry, build_tiny_tokenizer())]
        [0, 0, 1]
    """
    return demo_rows(plain, tokenizer) + [r for r in demo_rows(retry, tokenizer) if r.turn_index >= 1]


def warm_start_key(model_id: str, env_id: str, env_kwargs: Mapping[str, Any], cfg: WarmStartConfig) -> str:
    """The cache folder name: a hash of everything that changes the trained adapter's bits.

    Example:
        >>> a = warm_start_key("smollm2", "turnkit/MathEpisodes-v0", {"difficulty": 2}, WarmStartConfig())
        >>> a == warm_start_key("smollm2", "turnkit/MathEpisodes-v0", {"difficulty": 2}, WarmStartConfig(seed=1))
        False
    """
    blob = {
        "model": model_id,
        "env_id": env_id,
        "env_kwargs": dict(env_kwargs),
        "config": cfg.cache_dict(),
        "version": VERSION,
        "torch": torch.__version__,
        "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY", ""),
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]


def warm_start(
    policy: HFPolicy,
    *,
    model_id: str,
    env_id: str,
    env_kwargs: Mapping[str, Any],
    cfg: WarmStartConfig,
    cache: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Attach a LoRA adapter to ``policy`` and give it the warm start: from the cache, or trained and cached.

    Args:
        policy: A policy without an adapter (its base weights stay frozen).
        model_id: A name of the base model for the cache key (a built-in name or the folder's path).
        env_id: The env the demonstrations come from (its family needs an oracle).
        env_kwargs: The env's ``gymnasium.make`` arguments.
        cfg: Settings.
        cache: Cache root (default ``$TURNKIT_CACHE`` or ``~/.cache/turnkit``).
        progress: Show the SFT's progress bar.

    Returns:
        The record saved beside the adapter: the settings, rows and tokens, SFT losses and wall time, plus
        ``adapter_dir`` and ``from_cache``.

    Example:
        >>> import tempfile
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> fresh = lambda: HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
        >>> cfg = WarmStartConfig(demos=2, retry_demos=2, steps=1, batch_size=2)
        >>> cache = tempfile.mkdtemp()
        >>> first = warm_start(fresh(), model_id="micro", env_id="turnkit/MathEpisodes-v0", env_kwargs={},
        ...                    cfg=cfg, cache=cache, progress=False)
        >>> again = warm_start(fresh(), model_id="micro", env_id="turnkit/MathEpisodes-v0", env_kwargs={},
        ...                    cfg=cfg, cache=cache, progress=False)
        >>> first["from_cache"], again["from_cache"], again["loss"] == first["loss"]
        (False, True, True)
    """
    root = Path(cache) if cache is not None else cache_dir()
    folder = root / "warmstart" / warm_start_key(model_id, env_id, env_kwargs, cfg)
    if (folder / INFO_FILE).is_file():
        policy.load_adapter(folder)
        info = json.loads((folder / INFO_FILE).read_text(encoding="utf-8"))
        return {**info, "adapter_dir": str(folder), "from_cache": True}
    start = time.perf_counter()
    plain, retry = demonstrations(env_id, env_kwargs, cfg)
    rows = warm_start_rows(plain, retry, policy.tokenizer)
    sft = cfg.sft_config()
    if policy.has_adapter:
        raise ConfigError("warm_start needs a policy without a LoRA adapter: it attaches its own")
    learner = Learner(policy, sft.optim_config(), lora=cfg.lora_config(), total_steps=sft.steps, seed=cfg.seed)
    with torch_threads(BUILD_THREADS):
        history = train_sft(learner, rows, sft, pad_id=policy.pad_token_id, progress=progress)
    info = {
        "model": model_id,
        "env_id": env_id,
        "env_kwargs": dict(env_kwargs),
        "config": cfg.cache_dict(),
        "version": VERSION,
        "oracle_episodes": len(plain),
        "retry_episodes": len(retry),
        "rows": len(rows),
        "row_tokens_mean": sum(len(r.input_ids) for r in rows) / len(rows),
        "sft_tokens": sum(h["tokens"] for h in history),
        "loss": [round(h["loss"], 4) for h in history],
        "sft_s": time.perf_counter() - start,
    }

    def write(tmp: Path) -> None:
        policy.save_adapter(tmp)
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    write_folder_atomically(folder, write, done=INFO_FILE)
    return {**info, "adapter_dir": str(folder), "from_cache": False}
