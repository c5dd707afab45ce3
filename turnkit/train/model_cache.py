"""Locally trained models cached on disk by recipe: the key, and the atomic, one-thread build.

The embedded tiny policy (:mod:`turnkit.train.embedded`) and the tiny simulated human
(:mod:`turnkit.envs.collab_code.tiny_human`) are both trained here on demand and cached under
``<cache>/<kind>/<recipe key>``. Both go through this module so that

* the key is a hash of the whole recipe and its code version (any change builds a new model);
* the build runs on :data:`BUILD_THREADS` torch thread(s), so the cached weights are the same bits on every
  machine with the same instruction set (see :mod:`turnkit.train.threads`);
* the folder appears atomically: a reader, or a concurrent builder, never sees a half-written model.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Recipe:
    ...     width: int = 8
    >>> recipe_key(Recipe(), version=1) == recipe_key(Recipe(), version=1) != recipe_key(Recipe(), version=2)
    True
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerFast

from turnkit.agents.tiny import TinyModelConfig, save_tiny
from turnkit.train.sft import SFTConfig
from turnkit.train.threads import torch_threads

BUILD_THREADS = 1
"""Torch threads of every build: fixed, because the thread count changes the trained weights' last bits."""
INFO_FILE = "turnkit_recipe.json"
"""The file in each cached folder that records the recipe, its version and the build's numbers."""

Trainer = Callable[[], tuple[Any, PreTrainedTokenizerFast, dict[str, Any]]]
"""Trains a model: returns ``(model, tokenizer, info)``; ``info`` (JSON-able) is saved next to the weights."""


class TinyTrainingRecipe:
    """Mixin for recipe dataclasses that train a tiny model: their model and SFT configs.

    The recipe must have the fields ``hidden_size``, ``num_layers``, ``num_heads``, ``intermediate_size``,
    ``max_position_embeddings``, ``sft_steps``, ``sft_batch_size``, ``sft_lr`` and ``seed``.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class Recipe(TinyTrainingRecipe):
        ...     hidden_size: int = 32
        ...     num_layers: int = 1
        ...     num_heads: int = 2
        ...     intermediate_size: int = 64
        ...     max_position_embeddings: int = 256
        ...     sft_steps: int = 5
        ...     sft_batch_size: int = 4
        ...     sft_lr: float = 1e-3
        ...     seed: int = 0
        >>> Recipe().model_config().hidden_size, Recipe().sft_config().steps
        (32, 5)
    """

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_position_embeddings: int
    sft_steps: int
    sft_batch_size: int
    sft_lr: float
    seed: int

    def model_config(self) -> TinyModelConfig:
        """The :class:`~turnkit.agents.tiny.TinyModelConfig` of this recipe."""
        return TinyModelConfig(
            hidden_size=self.hidden_size,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            intermediate_size=self.intermediate_size,
            max_position_embeddings=self.max_position_embeddings,
        )

    def sft_config(self) -> SFTConfig:
        """The :class:`~turnkit.train.sft.SFTConfig` of this recipe."""
        return SFTConfig(steps=self.sft_steps, batch_size=self.sft_batch_size, lr=self.sft_lr, seed=self.seed)


def recipe_key(recipe: Any, *, version: int) -> str:
    """A short hash of a recipe dataclass and its code version: the cache folder name."""
    blob = json.dumps({"recipe": asdict(recipe), "version": version}, sort_keys=True, default=list)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def build_into(folder: Path, train: Trainer, *, recipe: Any, version: int, replace: bool) -> None:
    """Train on :data:`BUILD_THREADS` thread(s) and save into ``folder`` atomically.

    Args:
        folder: The cache folder to create (or to replace, with ``replace``).
        train: The training function.
        recipe: The recipe dataclass (recorded in :data:`INFO_FILE`).
        version: The recipe code version (recorded too).
        replace: Replace an existing folder; otherwise a folder that a concurrent build finished first wins.

    Example:
        >>> import tempfile
        >>> from turnkit.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class Recipe:
        ...     width: int = 16
        >>> def train():
        ...     tok = build_tiny_tokenizer()
        ...     cfg = TinyModelConfig(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
        ...     return build_tiny_model(tok, cfg), tok, {"note": "untrained"}
        >>> folder = Path(tempfile.mkdtemp()) / "m"
        >>> build_into(folder, train, recipe=Recipe(), version=1, replace=False)
        >>> json.loads((folder / INFO_FILE).read_text())["note"]
        'untrained'
    """
    start = time.perf_counter()
    with torch_threads(BUILD_THREADS):
        model, tokenizer, info = train()
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    try:
        save_tiny(model, tokenizer, tmp)
        record = {"recipe": asdict(recipe), "recipe_version": version, **info, "build_s": time.perf_counter() - start}
        (tmp / INFO_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if (folder / "config.json").is_file() and not replace:  # a concurrent build finished first
            shutil.rmtree(tmp)
            return
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
