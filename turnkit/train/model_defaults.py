"""Per-model defaults of a run: a built-in model brings the batch and thread settings that fit it.

The plain :class:`~turnkit.train.config.TrainConfig` defaults (16 groups x 8 episodes) are tuned for the
0.5M-parameter tiny model; on SmolLM2-135M they make a step of over ten minutes on two threads. A name
of :data:`turnkit.models.names.MODELS` therefore carries ``train`` defaults (``{"key" or "table.key": value}``)
and a ``threads`` default, and ``turnkit train`` fills them in for every key the user left out. What the user
wrote always wins, whatever its value: a key given in the ``--config`` file or by ``--set`` (a table given
whole, such as ``grpo``, counts for each of its keys) keeps its value, even one equal to the plain default.
A resumed run keeps its saved config as it is.

Example:
    >>> from turnkit.train.config import TrainConfig
    >>> cfg = with_model_defaults(TrainConfig(model="smollm2", groups_per_step=16), given={"groups_per_step"})
    >>> cfg.groups_per_step, cfg.grpo.group_size
    (16, 4)
    >>> with_model_defaults(TrainConfig(), given=set()) == TrainConfig()  # the tiny model: the plain defaults
    True
    >>> sorted(given_keys({"steps": 2, "grpo": {"kl_coef": 0.1}, "group_size": 4}, ["lr=0.1", "rollout.async=true"]))
    ['grpo.group_size', 'grpo.kl_coef', 'optim.lr', 'rollout.async_rollout', 'steps']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from turnkit.errors import ConfigError
from turnkit.models.names import MODELS
from turnkit.train.config import TrainConfig, canonical_key


def given_keys(data: Mapping[str, Any], overrides: Iterable[str] = ()) -> set[str]:
    """The dotted keys a user set: a config file's ``data`` (nested tables flattened) and ``KEY=VALUE`` overrides.

    Aliases (``async``) and flat keys of old files (``group_size`` for ``grpo.group_size``) are spelt as
    :class:`~turnkit.train.config.TrainConfig` stores them (:func:`~turnkit.train.config.canonical_key`).
    """
    keys = set(_flatten(data))
    keys.update(item.partition("=")[0] for item in overrides)
    return {canonical_key(key) for key in keys}


def with_model_defaults(cfg: TrainConfig, *, given: Iterable[str]) -> TrainConfig:
    """``cfg`` with its model's ``train`` defaults in every key that ``given`` (the keys the user set) leaves out.

    Args:
        cfg: The run's config as built from the user's file and flags over the plain defaults.
        given: Dotted keys the user set (:func:`given_keys`); a key is also given when a table above it is.

    Raises:
        ConfigError: The model's defaults do not make a valid config (a bug in :data:`~turnkit.models.names.MODELS`).
    """
    entry = MODELS.get(cfg.model)
    if entry is None or not entry.train:
        return cfg
    given = set(given)
    data = cfg.to_dict()
    changed = False
    for key, value in entry.train.items():
        parts = key.split(".")
        if any(".".join(parts[: i + 1]) in given for i in range(len(parts))):
            continue
        table = data
        for part in parts[:-1]:
            table = table[part]
        table[parts[-1]] = value
        changed = True
    if not changed:
        return cfg
    try:
        return TrainConfig.from_dict(data, source=f"model {cfg.model!r} defaults")
    except ConfigError as exc:
        raise ConfigError(f"the built-in defaults of model {cfg.model!r} are not a valid config: {exc}") from exc


def model_threads(model: str, device: str | None = None) -> int | None:
    """Torch threads for a run of ``model`` when ``--threads`` is not given (``None``: torch's own count).

    The model's ``threads`` default applies on the CPU only (``device`` ``None`` or ``"cpu"``); a GPU run keeps
    torch's count.

    Example:
        >>> model_threads("smollm2"), model_threads("smollm2", "cuda"), model_threads("tiny")
        (1, None, None)
    """
    entry = MODELS.get(model)
    if entry is None or device not in (None, "cpu"):
        return None
    return entry.threads


def _flatten(data: Mapping[str, Any], prefix: str = "") -> Iterable[str]:
    """The leaf keys of ``data``: a file's ``[grpo]`` table gives the keys written in it, not the whole table."""
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield prefix + key
