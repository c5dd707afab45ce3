"""The one recipe builder of every locally trained model: cache key, atomic one-thread build, load.

The embedded tiny policy (:mod:`turnkit.models.embedded`), the tiny simulated human
(:mod:`turnkit.models.tiny_human`), the tiny CollabCode agent (:mod:`turnkit.models.tiny_agent`) and the tiny
WebShop shopper (:mod:`turnkit.models.tiny_shopper`) are recipes: frozen dataclasses that subclass
:class:`TinyTrainingRecipe` and say how to train themselves. :func:`load_or_build` trains one on demand and
caches it under ``<cache>/<kind>/<recipe key>``; :func:`recipe_policy` wraps the result in an
:class:`~turnkit.agents.hf.HFPolicy`. All of them go through this module so that

* the key is a hash of the whole recipe and its code version (any change builds a new model);
* the build runs on :data:`BUILD_THREADS` torch thread(s), so the cached weights are the same bits on every
  machine with the same instruction set (see :mod:`turnkit.models.threads`);
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
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar, Protocol

from transformers import PreTrainedTokenizerFast

from turnkit.agents.hf import HFPolicy
from turnkit.configs import check_int, flat_dict, from_dict
from turnkit.errors import ConfigError
from turnkit.models.progress import hf_progress_bars
from turnkit.models.sft import SFTConfig
from turnkit.models.threads import torch_threads
from turnkit.models.tiny import TinyModelConfig, cache_dir, load_tiny, save_tiny

BUILD_THREADS = 1
"""Torch threads of every build: fixed, because the thread count changes the trained weights' last bits."""
INFO_FILE = "turnkit_recipe.json"
"""The file in each cached folder that records the recipe, its version and the build's numbers."""

Trainer = Callable[[], tuple[Any, PreTrainedTokenizerFast, dict[str, Any]]]
"""Trains a model: returns ``(model, tokenizer, info)``; ``info`` (JSON-able) is saved next to the weights."""


class CachedRecipe(Protocol):
    """What :func:`load_or_build` needs of a recipe: a frozen dataclass with these members.

    :class:`TinyTrainingRecipe` subclasses have them, and so does :class:`turnkit.models.smollm2.SmolLM2Recipe`
    (a conversion rather than a training run).
    """

    kind: ClassVar[str]
    version: ClassVar[int]
    max_new_tokens: int
    policy_defaults: ClassVar[dict[str, Any]]

    def key(self) -> str:
        """The cache folder name."""
        ...

    def build(self, *, progress: bool) -> tuple[Any, Any, dict[str, Any]]:
        """``(model, tokenizer, info)``."""
        ...


class TinyTrainingRecipe:
    """Base of the recipe dataclasses that train a tiny model: model and SFT configs, cache key, build.

    A recipe has the fields ``model`` (a :class:`~turnkit.models.tiny.TinyModelConfig`, the model's shape),
    ``sft`` (a :class:`~turnkit.models.sft.SFTConfig`, its training), ``seed`` (model initialisation and the
    recipe's own data sampling) and ``max_new_tokens``, and calls :meth:`check_common` in ``__post_init__``;
    to be built by :func:`load_or_build` it also sets the class variables :attr:`kind` and :attr:`version`
    and implements :meth:`build`. :meth:`from_dict` reads one from nested tables (a file, ``--set``).

    Example:
        >>> from dataclasses import dataclass, field
        >>> @dataclass(frozen=True)
        ... class Recipe(TinyTrainingRecipe):
        ...     model: TinyModelConfig = field(default_factory=lambda: TinyModelConfig(32, num_layers=1, num_heads=2))
        ...     sft: SFTConfig = field(default_factory=lambda: SFTConfig(steps=5))
        ...     seed: int = 0
        ...     max_new_tokens: int = 8
        ...     def __post_init__(self):
        ...         self.check_common()
        >>> r = Recipe.from_dict({"model": {"num_layers": 2}, "sft": {"optim": {"lr": 1e-3}}})
        >>> r.model.hidden_size, r.model.num_layers, r.sft.steps, r.sft.optim.lr
        (32, 2, 5, 0.001)
        >>> Recipe(sft={"steps": 5})
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: Recipe.sft must be of type SFTConfig, got {'steps': 5}
    """

    model: TinyModelConfig
    sft: SFTConfig
    seed: int
    max_new_tokens: int

    kind: ClassVar[str] = "tiny"
    """The cache sub-folder of this kind of model (``<cache>/<kind>/<key>``)."""
    version: ClassVar[int] = 1
    """Bumped whenever the recipe's code changes what it builds (invalidates every cached copy)."""
    policy_defaults: ClassVar[dict[str, Any]] = {}
    """:class:`~turnkit.agents.hf.HFPolicy` arguments of :func:`recipe_policy` (callers' arguments win)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "recipe") -> Any:
        """Build from a mapping; a partial ``model`` or ``sft`` table changes only those keys of the defaults."""
        return from_dict(cls, data, source=source)

    def check_common(self) -> None:
        """Check the fields every recipe has (call from ``__post_init__``).

        Raises:
            ConfigError: ``model`` or ``sft`` of the wrong class, or an invalid ``seed`` or ``max_new_tokens``.
        """
        for name, kind in (("model", TinyModelConfig), ("sft", SFTConfig)):
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(
                    f"{type(self).__name__}.{name} must be of type {kind.__name__}, got {getattr(self, name)!r}"
                )
        check_int(self, "seed", low=0)
        check_int(self, "max_new_tokens")

    def key(self) -> str:
        """A short hash of the recipe and its :attr:`version`: the cache folder name."""
        return recipe_key(self, version=self.version)

    def build(self, *, progress: bool) -> tuple[Any, PreTrainedTokenizerFast, dict[str, Any]]:
        """Train the model: ``(model, tokenizer, info)``, ``info`` JSON-able (saved next to the weights)."""
        raise NotImplementedError(f"{type(self).__name__} does not say how to build itself")

    def model_config(self) -> TinyModelConfig:
        """The :class:`~turnkit.models.tiny.TinyModelConfig` of this recipe (its ``model``)."""
        return self.model

    def sft_config(self) -> SFTConfig:
        """The :class:`~turnkit.models.sft.SFTConfig` of this recipe (its ``sft``)."""
        return self.sft


def recipe_key(recipe: Any, *, version: int) -> str:
    """A short hash of a recipe dataclass and its code version: the cache folder name.

    The recipe is hashed in its flat shape (:func:`turnkit.configs.flat_dict`), so moving settings into tables
    (``sft.optim``) keeps every cached model's key.
    """
    blob = json.dumps({"recipe": flat_dict(recipe), "version": version}, sort_keys=True, default=list)
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
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
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

    def write(tmp: Path) -> None:
        save_tiny(model, tokenizer, tmp)
        record = {"recipe": asdict(recipe), "recipe_version": version, **info, "build_s": time.perf_counter() - start}
        (tmp / INFO_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    write_folder_atomically(folder, write, done="config.json", replace=replace)


def write_folder_atomically(folder: Path, write: Callable[[Path], None], *, done: str, replace: bool = False) -> None:
    """Fill a temporary sibling of ``folder`` with ``write(tmp)``, then rename it into place.

    A reader, or a concurrent writer, never sees a half-written folder. If another writer finished first
    (``folder/done`` exists) its copy is kept, unless ``replace``. A failing ``write`` leaves nothing behind and
    its exception propagates.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp()) / "cached"
        >>> write_folder_atomically(folder, lambda tmp: (tmp / "done.txt").write_text("first"), done="done.txt")
        >>> write_folder_atomically(folder, lambda tmp: (tmp / "done.txt").write_text("second"), done="done.txt")
        >>> (folder / "done.txt").read_text(), sorted(p.name for p in folder.parent.iterdir())
        ('first', ['cached'])
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    try:
        write(tmp)
        if (folder / done).is_file() and not replace:  # a concurrent writer finished first
            shutil.rmtree(tmp)
            return
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    except BaseException:  # leave no half-written sibling behind; the caller sees the original error
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def model_folder(recipe: CachedRecipe, cache: str | Path | None = None) -> Path:
    """Where ``recipe``'s model is (or will be) cached: ``<cache>/<recipe.kind>/<recipe.key()>``.

    Args:
        recipe: The recipe.
        cache: Cache root; defaults to :func:`turnkit.models.tiny.cache_dir` (``$TURNKIT_CACHE``).

    Example:
        >>> from turnkit.models.tiny_human import TinyHumanRecipe
        >>> model_folder(TinyHumanRecipe(), "/tmp/c").parent
        PosixPath('/tmp/c/tiny_human')
    """
    return (Path(cache) if cache is not None else cache_dir()) / recipe.kind / recipe.key()


def ensure_built(
    recipe: CachedRecipe, *, cache: str | Path | None = None, rebuild: bool = False, progress: bool = True
) -> Path:
    """``recipe``'s cached model folder, built first (:meth:`~TinyTrainingRecipe.build`) if it is not there yet.

    Args:
        recipe: What to build.
        cache: Cache root (see :func:`model_folder`).
        rebuild: Build again even if a cached copy exists, and replace it.
        progress: Show progress bars while building, saving and loading.

    Example:
        >>> import tempfile
        >>> from turnkit.models.embedded import TinyRecipe
        >>> micro = TinyRecipe.from_dict({"model": {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64},
        ...                               "sft": {"steps": 1}, "demo_episodes": 4, "corpus_tasks": 20,
        ...                               "vocab_size": 300})
        >>> with tempfile.TemporaryDirectory() as d:
        ...     folder = ensure_built(micro, cache=d, progress=False)
        ...     sorted(p.name for p in folder.glob("*.json"))[:2]
        ['config.json', 'generation_config.json']
    """
    folder = model_folder(recipe, cache)
    if rebuild or not (folder / "config.json").is_file():
        with hf_progress_bars(progress):
            build_into(
                folder, lambda: recipe.build(progress=progress), recipe=recipe, version=recipe.version, replace=rebuild
            )
    return folder


def load_or_build(
    recipe: CachedRecipe, *, cache: str | Path | None = None, rebuild: bool = False, progress: bool = True
) -> tuple[Any, PreTrainedTokenizerFast]:
    """``recipe``'s model and tokenizer: loaded from the cache, or built first (:func:`ensure_built`).

    Args:
        recipe: What to build.
        cache: Cache root (see :func:`model_folder`).
        rebuild: Train again even if a cached copy exists, and replace it.
        progress: Show progress bars while building, saving and loading.

    Example:
        >>> import tempfile
        >>> from turnkit.models.embedded import TinyRecipe
        >>> micro = TinyRecipe.from_dict({"model": {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64},
        ...                               "sft": {"steps": 2}, "demo_episodes": 8, "corpus_tasks": 30,
        ...                               "vocab_size": 300})
        >>> with tempfile.TemporaryDirectory() as d:
        ...     model, tokenizer = load_or_build(micro, cache=d, progress=False)  # trained and cached
        ...     cached = (model_folder(micro, d) / INFO_FILE).is_file()
        ...     again, _ = load_or_build(micro, cache=d, progress=False)  # loaded from the cache
        >>> cached, len(tokenizer), again.config.hidden_size
        (True, 300, 32)
    """
    folder = ensure_built(recipe, cache=cache, rebuild=rebuild, progress=progress)
    with hf_progress_bars(progress):
        return load_tiny(folder)


def recipe_policy(
    recipe: CachedRecipe,
    *,
    cache: str | Path | None = None,
    rebuild: bool = False,
    progress: bool = True,
    **policy_kwargs: Any,
) -> HFPolicy:
    """``recipe``'s model as a fresh :class:`~turnkit.agents.hf.HFPolicy` (its own copy, safe to train).

    ``policy_kwargs`` win over the recipe's :attr:`~TinyTrainingRecipe.policy_defaults`, which win over
    ``max_new_tokens=recipe.max_new_tokens`` and ``max_batch_size=64``. The other arguments are
    :func:`load_or_build`'s.

    Example:
        >>> import tempfile
        >>> from turnkit.models.tiny_agent import TinyAgentRecipe
        >>> micro = TinyAgentRecipe.from_dict({"model": {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64},
        ...                                    "sft": {"steps": 1, "batch_size": 2}, "vocab_size": 300,
        ...                                    "train_tasks": 1, "per_task": 1})
        >>> with tempfile.TemporaryDirectory() as d:
        ...     default = recipe_policy(micro, cache=d, progress=False)
        ...     greedy = recipe_policy(micro, cache=d, progress=False, temperature=0.0, max_new_tokens=8)
        >>> default.sampling.temperature, default.sampling.max_new_tokens, greedy.sampling.temperature
        (1.0, 128, 0.0)
    """
    model, tokenizer = load_or_build(recipe, cache=cache, rebuild=rebuild, progress=progress)
    kwargs = {"max_new_tokens": recipe.max_new_tokens, "max_batch_size": 64, **recipe.policy_defaults}
    return HFPolicy(model, tokenizer, **{**kwargs, **policy_kwargs})
