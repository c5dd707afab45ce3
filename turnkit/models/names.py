"""Model names: the one place where ``tiny``, ``smollm2`` and the other built-in models become folders or policies.

Every verb that takes a model (``turnkit train --set model=NAME``, ``turnkit eval --agent NAME``, ``turnkit synth
--policy NAME``, ``turnkit iqlearn --set model=NAME``) and the library (``resolve_model("smollm2")`` for TRL's
``GRPOTrainer(model=...)``, or ``python -m turnkit.agents.serve``) resolves it here:

================  ====================================================  ==============================================
name              model                                                 train defaults
================  ====================================================  ==============================================
``tiny``          the embedded SFT math policy (:mod:`.embedded`)       full fine-tuning
``tiny-human``    CollabCode's simulated human (:mod:`.tiny_human`)     full fine-tuning
``tiny-agent``    a tiny CollabCode coding agent (:mod:`.tiny_agent`)   full fine-tuning
``tiny-shopper``  a tiny WebShop shopper (:mod:`.tiny_shopper`)         full fine-tuning
``smollm2``       SmolLM2-135M-Instruct, float32 (:mod:`.smollm2`)      LoRA r 8, 4 groups x 4 episodes, 1 thread
``smollm2-bf16``  SmolLM2-135M-Instruct, bfloat16                       as ``smollm2``
================  ====================================================  ==============================================

A name is built on first use and cached (:mod:`turnkit.models.recipe`); anything else is a local HF model folder
(write ``./smollm2`` for a folder that happens to be called like a model).

Importing this module is cheap (no torch): the recipes are imported when a name is resolved.

Example:
    >>> model_names()
    ('tiny', 'tiny-human', 'tiny-agent', 'tiny-shopper', 'smollm2', 'smollm2-bf16')
    >>> default_lora_rank("smollm2"), default_lora_rank("tiny"), default_lora_rank("runs/my-model")
    (8, 0, 0)
    >>> MODELS["smollm2"].train["groups_per_step"], MODELS["smollm2"].threads, MODELS["tiny"].threads
    (4, 1, None)
    >>> resolve_model("smollm3")
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: unknown model 'smollm3': not a model name (tiny, tiny-human, tiny-agent, \
tiny-shopper, smollm2, smollm2-bf16) nor a folder with a config.json
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turnkit.errors import ConfigError

if TYPE_CHECKING:
    from turnkit.agents.hf import HFPolicy
    from turnkit.models.recipe import CachedRecipe


def _tiny() -> CachedRecipe:
    from turnkit.models.embedded import DEFAULT_RECIPE

    return DEFAULT_RECIPE


def _tiny_human() -> CachedRecipe:
    from turnkit.models.tiny_human import DEFAULT_HUMAN_RECIPE

    return DEFAULT_HUMAN_RECIPE


def _tiny_agent() -> CachedRecipe:
    from turnkit.models.tiny_agent import DEFAULT_AGENT_RECIPE

    return DEFAULT_AGENT_RECIPE


def _tiny_shopper() -> CachedRecipe:
    from turnkit.models.tiny_shopper import DEFAULT_SHOPPER_RECIPE

    return DEFAULT_SHOPPER_RECIPE


def _smollm2(dtype: str) -> Callable[[], CachedRecipe]:
    def recipe() -> CachedRecipe:
        from turnkit.models.smollm2 import SmolLM2Recipe

        return SmolLM2Recipe.installed(dtype)

    return recipe


@dataclass(frozen=True)
class NamedModel:
    """A built-in model: its name, what it is, how to get its recipe, and how ``turnkit train`` trains it.

    Example:
        >>> MODELS["smollm2"].summary
        'SmolLM2-135M-Instruct (Q4_1 GGUF dequantised), float32'
    """

    name: str
    summary: str
    recipe: Callable[[], CachedRecipe]
    """The recipe (imports its module; may raise :class:`~turnkit.errors.ConfigError` if a package is missing)."""
    lora_r: int = 0
    """``TrainConfig.lora.r`` when the config leaves it unset: ``0`` fine-tunes every weight."""
    train: Mapping[str, Any] = field(default_factory=dict)
    """``turnkit train``'s defaults for this model, ``{"key" or "table.key": value}``: what a run gets for each key
    its config file and ``--set`` leave out (:mod:`turnkit.train.model_defaults`). Empty: the plain defaults."""
    threads: int | None = None
    """Torch CPU threads ``turnkit train`` runs it with when ``--threads`` is not given (``None``: torch's own)."""


SMOLLM2_LORA_R = 8
"""The LoRA rank ``turnkit train`` gives SmolLM2 by default: full fine-tuning of its 134.5M weights keeps four
float32 copies (weights, gradients, two AdamW moments: about 2.2 GB) and updates all of them every step on the
CPU, and a frozen reference for a KL term would be a fifth; a rank-8 adapter on the attention projections
trains 0.92M weights (0.7%) and its reference is the same model with the adapter off."""

SMOLLM2_TRAIN: Mapping[str, Any] = {"groups_per_step": 4, "grpo.group_size": 4, "rollout.reuse_kv": True}
"""``turnkit train``'s batch defaults for SmolLM2: 4 groups x 4 episodes (the quickstart recipe's), where the
plain defaults (16 groups x 8, tuned for the 0.5M-parameter tiny model) sample 8x the episodes and ran over 10
minutes a step on 2 threads (docs/training.md, "SmolLM2": the measured step). ``sampling.max_new_tokens`` stays 24, the
recipe's too: an untrained SmolLM2 writes prose to the limit on every turn, so its step's time grows with it."""
SMOLLM2_THREADS = 1
"""``turnkit train``'s thread default for SmolLM2 on a CPU: one. A second thread gained 1.15x on a quiet 2-core
box and cost 3.2x when another process held a core (BENCHMARKS.md, "Thread counts on a loaded box"); the
rollout's environments and evaluators share the cores. ``--threads N`` on a machine of your own."""

MODELS: dict[str, NamedModel] = {
    m.name: m
    for m in (
        NamedModel("tiny", "the embedded tiny policy: math SFT (the quickstart's start point)", _tiny),
        NamedModel("tiny-human", "CollabCode's tiny simulated human", _tiny_human),
        NamedModel("tiny-agent", "a tiny CollabCode coding agent (RFT/DPO/SWEET studies)", _tiny_agent),
        NamedModel("tiny-shopper", "a tiny WebShop shopper (SFT on oracle demonstrations)", _tiny_shopper),
        NamedModel(
            "smollm2",
            "SmolLM2-135M-Instruct (Q4_1 GGUF dequantised), float32",
            _smollm2("float32"),
            SMOLLM2_LORA_R,
            SMOLLM2_TRAIN,
            SMOLLM2_THREADS,
        ),
        NamedModel(
            "smollm2-bf16",
            "SmolLM2-135M-Instruct, bfloat16",
            _smollm2("bfloat16"),
            SMOLLM2_LORA_R,
            SMOLLM2_TRAIN,
            SMOLLM2_THREADS,
        ),
    )
}
"""Every built-in model, by name."""


def model_names() -> tuple[str, ...]:
    """The built-in model names, in :data:`MODELS` order."""
    return tuple(MODELS)


def default_lora_rank(model: str) -> int:
    """The LoRA rank a run of ``model`` gets when its config leaves ``lora_r`` unset (``0``: full fine-tuning)."""
    entry = MODELS.get(model)
    return entry.lora_r if entry is not None else 0


def resolve_model(
    model: str | Path, *, cache: str | Path | None = None, rebuild: bool = False, progress: bool = True
) -> Path:
    """The local HF folder of ``model``: a built-in name (built and cached on first use) or a folder.

    Args:
        model: A name of :data:`MODELS` or a path.
        cache: Cache root of the built-in models (default ``$TURNKIT_CACHE`` or ``~/.cache/turnkit``).
        rebuild: Build a named model again even if it is cached.
        progress: Show progress bars while building.

    Raises:
        ConfigError: ``model`` is neither a name nor a folder with a ``config.json`` (a path with a separator
            is returned as it is, for the loader to refuse), or a named model's packages are missing.

    Example:
        >>> resolve_model("runs/my-model")
        PosixPath('runs/my-model')
    """
    entry = MODELS.get(str(model))
    if entry is None:
        path = Path(model)
        if not (path / "config.json").is_file() and len(path.parts) == 1 and not str(model).startswith("."):
            raise ConfigError(
                f"unknown model {str(model)!r}: not a model name ({', '.join(MODELS)}) nor a folder with a config.json"
            )
        return path
    from turnkit.models.recipe import ensure_built

    return ensure_built(entry.recipe(), cache=cache, rebuild=rebuild, progress=progress)


def load_policy(
    model: str | Path, *, cache: str | Path | None = None, progress: bool = True, **policy_kwargs: Any
) -> HFPolicy:
    """A fresh :class:`~turnkit.agents.hf.HFPolicy` over ``model`` (a built-in name or a local folder).

    A built-in model gets its recipe's policy settings (e.g. ``max_new_tokens``, ``max_batch_size=64``;
    :func:`turnkit.models.recipe.recipe_policy`), a folder :class:`~turnkit.agents.hf.HFPolicy`'s defaults;
    ``policy_kwargs`` win over both.

    Example:
        >>> load_policy("/nonexistent")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: no HF model at /nonexistent: expected /nonexistent/config.json
    """
    from turnkit.agents.hf import HFPolicy

    entry = MODELS.get(str(model))
    if entry is None:
        return HFPolicy.from_pretrained(resolve_model(model), **policy_kwargs)
    from turnkit.models.recipe import recipe_policy

    return recipe_policy(entry.recipe(), cache=cache, progress=progress, **policy_kwargs)
