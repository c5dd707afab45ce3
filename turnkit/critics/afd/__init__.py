"""AfD's IRL reward model as a critic: its table (:class:`AfDCriticConfig`) and :func:`from_context`.

This module is what the registry imports to validate ``critic.afd``, so it loads neither torch nor
transformers. The reward model, its training and the closed-form critic live in :mod:`turnkit.critics.afd.model`
(see there for the method); their names import from here too (``from turnkit.critics.afd import AfDCritic``),
loading the model code on first use.

Example:
    >>> from_context(None, AfDCriticConfig())
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: critic.afd needs model, a reward-model folder (turnkit afd --out DIR: DIR/rm/<data>)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from turnkit import configs
from turnkit.critics.base import CriticContext, lazy_exports
from turnkit.errors import ConfigError

if TYPE_CHECKING:
    from turnkit.critics.afd.model import AfDCritic


@dataclass(frozen=True)
class AfDCriticConfig:
    """Keys of ``critic.afd`` in a run's config.

    Example:
        >>> AfDCriticConfig(model="runs/afd/rm/sft").model
        'runs/afd/rm/sft'
    """

    model: str | None = None
    """A reward-model folder written by ``turnkit afd --out DIR`` (``DIR/rm/<data>``; required to build it)."""

    def __post_init__(self) -> None:
        configs.check_str(self, "model", optional=True)


Config = AfDCriticConfig
"""The table keys of ``critic.afd`` (see :mod:`turnkit.critics.registry`)."""


def from_context(ctx: CriticContext, config: AfDCriticConfig) -> AfDCritic:
    """AfD's IRL reward model from a folder written by ``turnkit afd``; frozen.

    Raises:
        ConfigError: No ``model``, not a reward-model folder, or another tokenizer than the policy's.
    """
    if not config.model:
        raise ConfigError("critic.afd needs model, a reward-model folder (turnkit afd --out DIR: DIR/rm/<data>)")
    path = Path(config.model)
    if not (path / "config.json").is_file():
        raise ConfigError(f"critic.afd model {path} is not a reward-model folder (no config.json)")
    from turnkit.critics.afd.model import AfDCritic

    critic = AfDCritic.load(path)
    if critic.tokenizer.get_vocab() != ctx.policy.tokenizer.get_vocab():
        raise ConfigError(f"critic.afd model {path} has another tokenizer than the policy: it cannot score its ids")
    return critic


_MODEL = (
    "AfDConfig",
    "AfDCritic",
    "CONFIG_FILE",
    "ClosedFormCritic",
    "RewardModel",
    "Sample",
    "collate_samples",
    "trajectory_samples",
    "turn_samples",
)
"""The names of :mod:`turnkit.critics.afd.model`, importable from here as well; the first use imports it."""


__getattr__, __dir__ = lazy_exports(__name__, _MODEL)
