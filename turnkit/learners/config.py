"""The learners' settings as plain dataclasses: importable, and a run's config validated, without torch.

:class:`LoraConfig` and :class:`OptimConfig` are the tables of a :class:`~turnkit.learners.learner.Learner`,
:class:`GRPOConfig` the policy loss's (:mod:`turnkit.learners.grpo`); the names of the advantage and KL
estimators are here for them to check against. The modules that use them re-export them (``from
turnkit.learners.learner import LoraConfig`` keeps working), so the torch code stays there and
:class:`turnkit.train.config.TrainConfig` loads in a process that never imports torch.

Example:
    >>> GRPOConfig(estimator="rloo").estimator, OptimConfig(lr=1e-3).factor(0), LoraConfig(r=4).alpha
    ('rloo', 1.0, 16)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from turnkit.configs import check_bool, check_choice, check_float, check_int
from turnkit.errors import ConfigError

Estimator = Literal["grpo", "dr_grpo", "rloo"]
"""Group baseline: ``"grpo"`` (mean, divided by std), ``"dr_grpo"`` (mean only) or ``"rloo"`` (leave-one-out)."""

ESTIMATORS: tuple[str, ...] = get_args(Estimator)

SourceEstimator = Literal["prime", "mrt", "pav", "sweet"]
"""An estimator over rewards by source (:mod:`turnkit.learners.estimators`): the values of ``grpo.estimator``
that a run computes with :func:`~turnkit.learners.estimators.source_advantages`. ``grpo``, ``dr_grpo`` and
``rloo`` keep the summed-reward path of :func:`~turnkit.learners.advantages.turn_advantages`, so existing runs
stay bit-identical."""

SOURCE_ESTIMATORS: tuple[str, ...] = get_args(SourceEstimator)

RUN_ESTIMATORS: tuple[str, ...] = (*ESTIMATORS, *SOURCE_ESTIMATORS, "paper")
"""Every value of ``grpo.estimator``: the group baselines (``grpo``, ``dr_grpo``, ``rloo``) over summed rewards,
the by-source estimators, and ``"paper"`` (the estimator the run's critics' papers use)."""

KLEstimator = Literal["k1", "k2", "k3"]
"""Name of a per-token KL estimator: ``"k1"``, ``"k2"`` or ``"k3"``."""

KL_ESTIMATORS: tuple[str, ...] = get_args(KLEstimator)

LossAggregation = Literal["token_mean", "seq_mean", "seq_sum_norm"]
"""How per-token losses become one scalar; see :mod:`turnkit.learners.grpo`."""

LOSS_AGGREGATIONS: tuple[str, ...] = get_args(LossAggregation)


@dataclass(frozen=True)
class GRPOConfig:
    """Hyper-parameters of the GRPO policy loss and its advantages. Validated on construction.

    Example:
        >>> GRPOConfig(clip_eps=0.1).clip_high
        0.1
        >>> GRPOConfig(clip_eps=0.2, clip_eps_high=0.28).clip_high  # DAPO "clip-higher"
        0.28
        >>> GRPOConfig(group_size=1)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: GRPOConfig.group_size must be an int >= 2 (a lone sample has no baseline), got 1
    """

    group_size: int = 8
    """Episodes per group (same task and seed); advantages compare members of a group."""
    estimator: str = "grpo"
    """Group baseline over the summed rewards: ``"grpo"`` (mean and std), ``"dr_grpo"`` (mean only) or ``"rloo"``
    (leave-one-out); or a method's own estimator over the rewards by source, ``"prime"``, ``"mrt"``, ``"pav"``,
    ``"sweet"``, or ``"paper"`` (the one the run's critics' papers use; :mod:`turnkit.learners.estimators`)."""
    per_turn: bool = False
    """Credit each turn with its return-to-go (dense rewards) instead of the whole episode's return."""
    gamma: float = 1.0
    """Turn discount for ``per_turn`` returns-to-go, in ``[0, 1]``."""
    adv_eps: float = 1e-6
    """Added to the group std (``"grpo"``), so that all-equal groups give advantage 0."""
    clip_eps: float = 0.2
    """PPO ratio clip ``ε_low``: ratios below ``1 − clip_eps`` stop pushing down negative advantages."""
    clip_eps_high: float | None = None
    """Upper clip ``ε_high`` (DAPO clip-higher); ``None`` uses ``clip_eps``."""
    kl_coef: float = 0.0
    """Weight ``β`` of the per-token KL to the reference policy; ``0`` needs no reference model."""
    kl_estimator: KLEstimator = "k3"
    """Per-token KL estimator: ``"k1"``, ``"k2"`` or ``"k3"``."""
    loss_agg: LossAggregation = "token_mean"
    """Reduction of per-token losses: ``"token_mean"``, ``"seq_mean"`` or ``"seq_sum_norm"``."""
    max_tokens: int | None = None
    """Constant per-row token budget for ``"seq_sum_norm"`` (e.g. the generation limit); required there."""

    def __post_init__(self) -> None:
        try:
            check_int(self, "group_size", low=2)
        except ConfigError:
            raise ConfigError(
                f"GRPOConfig.group_size must be an int >= 2 (a lone sample has no baseline), got {self.group_size!r}"
            ) from None
        check_choice(self, "estimator", RUN_ESTIMATORS)
        check_choice(self, "kl_estimator", KL_ESTIMATORS)
        check_choice(self, "loss_agg", LOSS_AGGREGATIONS)
        check_bool(self, "per_turn")
        check_float(self, "gamma", low=0.0, high=1.0)
        check_float(self, "clip_eps", low=0.0, high=1.0, open_low=True, open_high=True)
        check_float(self, "clip_eps_high", low=0.0, open_low=True, optional=True)
        check_float(self, "kl_coef", low=0.0)
        check_float(self, "adv_eps", low=0.0, high=1.0, open_low=True)
        check_int(self, "max_tokens", optional=True)
        if self.loss_agg == "seq_sum_norm" and self.max_tokens is None:
            raise ConfigError("GRPOConfig.max_tokens is required when loss_agg='seq_sum_norm'")

    @property
    def clip_high(self) -> float:
        """The upper clip ``ε_high`` in effect."""
        return self.clip_eps if self.clip_eps_high is None else self.clip_eps_high


DEFAULT_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class LoraConfig:
    """A LoRA adapter's shape. Validated on construction.

    Example:
        >>> LoraConfig(r=4).alpha, LoraConfig(targets=["q_proj"]).targets
        (16, ('q_proj',))
        >>> LoraConfig(r=-1)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: LoraConfig.r must be null or an int >= 0, got -1
    """

    r: int | None = 8
    """Adapter rank; ``0``: no adapter (full fine-tuning). ``None`` leaves the rank to the run's model
    (:meth:`turnkit.train.config.TrainConfig.lora_rank`); a :class:`~turnkit.learners.learner.Learner` needs it
    resolved."""
    alpha: int = 16
    """LoRA scaling numerator (the update is scaled by ``alpha / r``)."""
    dropout: float = 0.0
    """Dropout on the adapter's input."""
    targets: tuple[str, ...] = DEFAULT_TARGETS
    """Module names the adapter wraps."""

    def __post_init__(self) -> None:
        if isinstance(self.targets, list):
            object.__setattr__(self, "targets", tuple(self.targets))
        check_int(self, "r", low=0, optional=True)
        check_int(self, "alpha")
        check_float(self, "dropout", low=0.0, high=1.0, open_high=True)
        if not isinstance(self.targets, tuple) or not self.targets:
            raise ConfigError(f"LoraConfig.targets must be a non-empty list of module names, got {self.targets!r}")
        bad = [t for t in self.targets if not isinstance(t, str) or not t]
        if bad:
            raise ConfigError(f"LoraConfig.targets must hold module names (non-empty strings), got {bad[0]!r}")


@dataclass(frozen=True)
class OptimConfig:
    """AdamW and its learning-rate schedule. Validated on construction.

    The rate at 0-based step ``s`` is ``lr * lr_factor(s)``: a linear warmup ``(s + 1) / warmup_steps`` over
    the first ``warmup_steps`` steps, then ``1`` (``schedule="constant"``) or a cosine decay to
    ``min_lr_ratio * lr`` at the last step (``"cosine"``, which needs the run's total steps).

    Example:
        >>> OptimConfig(lr=1e-3).max_grad_norm
        1.0
        >>> OptimConfig(schedule="linear")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: OptimConfig.schedule must be one of ['constant', 'cosine'], got 'linear'
    """

    lr: float = 1e-4
    """Peak AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Clip the global gradient norm to this (``0`` disables clipping)."""
    warmup_steps: int = 0
    """Linear warmup steps (``0``: none)."""
    schedule: Literal["constant", "cosine"] = "constant"
    """The rate after warmup: constant, or a cosine decay to ``min_lr_ratio * lr``."""
    min_lr_ratio: float = 0.1
    """Final rate of the cosine schedule as a fraction of ``lr``."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW's moment decay rates."""
    eps: float = 1e-8
    """AdamW's denominator term."""

    def __post_init__(self) -> None:
        if isinstance(self.betas, list):
            object.__setattr__(self, "betas", tuple(self.betas))
        check_float(self, "lr", low=0.0, open_low=True)
        check_float(self, "weight_decay", "max_grad_norm", low=0.0)
        check_int(self, "warmup_steps", low=0)
        check_choice(self, "schedule", ("constant", "cosine"))
        check_float(self, "min_lr_ratio", low=0.0, high=1.0)
        check_float(self, "eps", low=0.0, open_low=True)
        ok = isinstance(self.betas, tuple) and len(self.betas) == 2
        if not ok or not all(
            isinstance(b, (int, float)) and not isinstance(b, bool) and 0 <= b < 1 for b in self.betas
        ):
            raise ConfigError(f"OptimConfig.betas must be two numbers in [0, 1), got {self.betas!r}")

    def factor(self, step: int, total: int = 0) -> float:
        """The learning-rate multiplier at 0-based ``step`` of ``total`` (see the class docstring).

        Example:
            >>> cfg = OptimConfig(warmup_steps=2, schedule="cosine", min_lr_ratio=0.0)
            >>> [round(cfg.factor(s, 10), 3) for s in (0, 1, 2, 6, 9)]
            [0.5, 1.0, 1.0, 0.5, 0.038]
            >>> [OptimConfig(warmup_steps=4).factor(s) for s in (0, 3, 50)]
            [0.25, 1.0, 1.0]
        """
        if self.schedule == "cosine":
            return lr_factor(step, total=total, warmup=self.warmup_steps, min_ratio=self.min_lr_ratio)
        return min(1.0, (step + 1) / self.warmup_steps) if self.warmup_steps else 1.0


LEARNER_FLAT_KEYS: dict[str, tuple[str, str]] = {
    "lr": ("optim", "lr"), "weight_decay": ("optim", "weight_decay"), "max_grad_norm": ("optim", "max_grad_norm"),
    "warmup_steps": ("optim", "warmup_steps"), "min_lr_ratio": ("optim", "min_lr_ratio"),
    "lora_r": ("lora", "r"), "lora_alpha": ("lora", "alpha"), "lora_targets": ("lora", "targets"),
}  # fmt: skip
"""The learner's settings as configs wrote them before the ``optim`` and ``lora`` tables: ``{old: (table, key)}``."""


def flat_keys(*names: str) -> dict[str, tuple[str, str]]:
    """The ``FLAT_KEYS`` of a config class that had these learner fields flat (see :func:`turnkit.configs.from_dict`).

    Example:
        >>> flat_keys("lr", "lora_r")
        {'lr': ('optim', 'lr'), 'lora_r': ('lora', 'r')}
    """
    return {name: LEARNER_FLAT_KEYS[name] for name in names}


def check_rank(owner: object, *, low: int = 1) -> None:
    """In ``__post_init__``: ``owner.lora.r`` is an int ``>= low`` (a trainer that needs an adapter, or a rank).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> check_rank(NS(lora=LoraConfig(r=0)))
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: SimpleNamespace.lora.r must be an int >= 1, got 0
    """
    rank = owner.lora.r  # type: ignore[attr-defined]
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < low:
        raise ConfigError(f"{type(owner).__name__}.lora.r must be an int >= {low}, got {rank!r}")


def lr_factor(step: int, *, total: int, warmup: int, min_ratio: float) -> float:
    """Learning-rate multiplier at optimizer step ``step`` (0-based): linear warmup, then cosine decay.

    Example:
        >>> [round(lr_factor(s, total=10, warmup=2, min_ratio=0.0), 3) for s in (0, 1, 2, 6, 9)]
        [0.5, 1.0, 1.0, 0.5, 0.038]
    """
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


__all__ = [
    "DEFAULT_TARGETS",
    "ESTIMATORS",
    "KL_ESTIMATORS",
    "LEARNER_FLAT_KEYS",
    "LOSS_AGGREGATIONS",
    "RUN_ESTIMATORS",
    "SOURCE_ESTIMATORS",
    "Estimator",
    "GRPOConfig",
    "KLEstimator",
    "LoraConfig",
    "LossAggregation",
    "OptimConfig",
    "SourceEstimator",
    "check_rank",
    "flat_keys",
    "lr_factor",
]
