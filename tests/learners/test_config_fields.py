"""The learner's settings have one owner: ``OptimConfig`` and ``LoraConfig``, nested as tables by every config."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import turnkit
from turnkit.learners.config import LoraConfig, OptimConfig

LEARNER_FIELDS = {"lr", "weight_decay", "max_grad_norm", "lora_r", "lora_alpha", "lora_targets", "prm_lr"}
"""Fields of the learner that config classes used to repeat flat."""
OWNERS = {OptimConfig, LoraConfig}
NOT_SETTINGS = {"turnkit.models.names.NamedModel.lora_r"}
"""Dataclass fields of that name that are no learner setting: a built-in model's default for ``lora.r``."""
SKIP = ("turnkit.integrations.vllm", "turnkit.agents.vllm")
"""Modules that need an accelerator's packages to import (their configs declare no learner fields)."""


def _config_classes() -> set[type]:
    found = set()
    for info in pkgutil.walk_packages(turnkit.__path__, "turnkit."):
        if info.name.startswith(SKIP) or info.name.endswith("__main__"):  # a __main__ runs the CLI on import
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue
        for value in vars(module).values():
            if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__.startswith("turnkit"):
                found.add(value)
    return found


def test_no_config_class_repeats_the_learners_fields() -> None:
    classes = _config_classes()
    names = {c.__name__ for c in classes}
    assert {"TrainConfig", "SFTConfig", "DPOConfig", "WarmStartConfig", "PrimeConfig", "SweetConfig"} <= names
    assert {"AfDConfig", "IQLearnConfig"} <= names
    repeated = sorted(
        f"{c.__module__}.{c.__name__}.{f.name}"
        for c in classes - OWNERS
        for f in dataclasses.fields(c)
        if f.name in LEARNER_FIELDS
    )
    repeated = [name for name in repeated if name not in NOT_SETTINGS]
    assert repeated == []
