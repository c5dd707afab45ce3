"""IQLearn's extracted reward as a critic: its table (:class:`IQLearnCriticConfig`) and :func:`from_context`.

This module is what the registry imports to validate ``critic.iqlearn``, so it loads no torch. The reward
(:class:`~turnkit.critics.iqlearn.model.IQLearnReward`) lives in :mod:`turnkit.critics.iqlearn.model`; its names
import from here too (``from turnkit.critics.iqlearn import IQLearnReward``), loading the model code on first
use.

Example:
    >>> from_context(None, IQLearnCriticConfig())
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: critic.iqlearn needs model, the folder of an IQLearn run (turnkit iqlearn --out)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from turnkit import configs
from turnkit.critics.base import CriticContext, lazy_exports
from turnkit.errors import ConfigError

if TYPE_CHECKING:
    from turnkit.critics.iqlearn.model import IQLearnReward


@dataclass(frozen=True)
class IQLearnCriticConfig:
    """Keys of ``critic.iqlearn`` in a run's config.

    Example:
        >>> IQLearnCriticConfig(model="runs/iqlearn").batch_size
        32
    """

    model: str | None = None
    """An IQLearn run folder (its newest intact checkpoint is used) or a model folder (required to build it)."""
    batch_size: int = 32
    """Turns scored per forward pass."""

    def __post_init__(self) -> None:
        configs.check_str(self, "model", optional=True)
        configs.check_int(self, "batch_size")


Config = IQLearnCriticConfig
"""The table keys of ``critic.iqlearn`` (see :mod:`turnkit.critics.registry`)."""


def from_context(ctx: CriticContext, config: IQLearnCriticConfig) -> IQLearnReward:
    """IQLearn's extracted reward from a trained run, summed per turn; frozen.

    Raises:
        ConfigError: No ``model`` was given, or its tokenizer is not the policy's (it could not score its ids).
    """
    if not config.model:
        raise ConfigError("critic.iqlearn needs model, the folder of an IQLearn run (turnkit iqlearn --out)")
    from turnkit.critics.iqlearn.model import load_reward

    critic = load_reward(config.model, batch_size=config.batch_size)
    if critic.policy.tokenizer.get_vocab() != ctx.policy.tokenizer.get_vocab():
        raise ConfigError(f"critic.iqlearn model {config.model} has another tokenizer than the policy: it cannot "
                          "score its ids")  # fmt: skip
    return critic


_MODEL = (
    "IQLearnReward",
    "load_reward",
)
"""The names of :mod:`turnkit.critics.iqlearn.model`, importable from here as well; the first use imports it."""


__getattr__, __dir__ = lazy_exports(__name__, _MODEL)
