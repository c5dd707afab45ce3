"""SWEET-RL's critic with training-time information: its table (:class:`SweetConfig`) and :func:`from_context`.

This module is what the registry imports to validate ``critic.sweet``, so it loads no torch. The critic model,
its Bradley-Terry loss and the pair builders live in :mod:`turnkit.critics.sweet.model` (see there for the
method); their names import from here too (``from turnkit.critics.sweet import SweetCritic``), loading the
model code on first use.

Example:
    >>> SweetConfig(steps=4).steps, PRIVILEGED_TEMPLATE.format(reference=12)
    (4, 'In light that the final answer is: 12.')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from turnkit.configs import check_bool, check_choice, check_float, check_int, check_str
from turnkit.critics.base import CriticContext, lazy_exports
from turnkit.errors import ConfigError

if TYPE_CHECKING:
    from turnkit.critics.sweet.model import SweetCritic

PRIVILEGED_TEMPLATE = "In light that the final answer is: {reference}."
"""How the training-time information is glued in front of the critic's conversation (from the paper's code)."""


@dataclass(frozen=True)
class SweetConfig:
    """Settings of :class:`~turnkit.critics.sweet.model.SweetCritic`. Validated on construction.

    Example:
        >>> SweetConfig().beta, SweetConfig(reference_key=None).privileged
        (0.1, False)
        >>> SweetConfig(template="no field")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: SweetConfig.template must contain '{reference}', got 'no field'
    """

    reference_key: str | None = "answer"
    """Key of ``Task.privileged`` shown to the critic (rendered by
    :func:`~turnkit.critics.sweet.model.render_reference`); ``None`` is the ablation without training-time info."""
    template: str = PRIVILEGED_TEMPLATE
    """How the reference is written (must contain ``{reference}``)."""
    placement: str = "prefix"
    """``"prefix"``: the reference line opens the first message (the paper's code); ``"suffix"``: it closes the
    last message, right before the turn being scored (easier for very small critics to attend to)."""
    beta: float = 0.1
    """Bradley–Terry ``β``."""
    length_normalize: bool = True
    """Mean (not sum) of the token log-ratios per turn."""
    trajectory_score: str = "sum"
    """How turn advantages make a trajectory's Bradley–Terry score: ``"sum"`` (the paper) or ``"mean"`` over
    turns (removes a turn-count shortcut in envs where success ends the episode early; see docs)."""
    steps: int = 200
    """Critic optimizer steps in :meth:`~turnkit.critics.sweet.model.SweetCritic.fit`."""
    batch_size: int = 16
    """Trajectory pairs per step."""
    lr: float = 1e-3
    """AdamW learning rate of the critic's LoRA adapter."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm."""
    lora_r: int = 16
    """Critic LoRA rank."""
    lora_alpha: int = 32
    """Critic LoRA alpha."""
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    """Module names that get LoRA adapters."""
    max_pairs_per_task: int | None = 4
    """Trajectory pairs per task (``None``: all)."""
    require_success: float | None = 1.0
    """Only tasks whose best rollout reaches this reward give pairs (``None``: every task)."""
    score_batch_size: int = 64
    """Turns per forward pass when scoring."""
    seed: int = 0
    """LoRA initialisation, pair subsampling and batch order."""

    def __post_init__(self) -> None:
        check_choice(self, "trajectory_score", ("sum", "mean"))
        check_choice(self, "placement", ("prefix", "suffix"))
        if not isinstance(self.template, str) or "{reference}" not in self.template:
            raise ConfigError(f"SweetConfig.template must contain '{{reference}}', got {self.template!r}")
        check_float(self, "beta", "lr", "max_grad_norm", low=0.0, open_low=True)
        check_int(self, "steps", "batch_size", "lora_r", "lora_alpha", "score_batch_size")
        check_int(self, "max_pairs_per_task", optional=True)
        check_int(self, "seed", low=0)
        check_float(self, "require_success", optional=True)
        check_str(self, "reference_key", optional=True)
        check_bool(self, "length_normalize")
        object.__setattr__(self, "lora_targets", tuple(self.lora_targets))

    @property
    def privileged(self) -> bool:
        """Whether the critic sees training-time information."""
        return self.reference_key is not None


Config = SweetConfig
"""The table keys of ``critic.sweet`` (see :mod:`turnkit.critics.registry`); ``seed`` defaults to the run's."""


LOOP_DEFAULTS = {"steps": 4, "require_success": None}
"""Inside training: 4 critic steps per rollout batch, and pairs from every task with two different rewards."""


def from_context(ctx: CriticContext, config: SweetConfig) -> SweetCritic:
    """SWEET-RL in a training run: a LoRA copy of the start policy that reads the task's privileged reference."""
    from turnkit.critics.sweet.model import SweetCritic

    return SweetCritic.from_policy(ctx.start_policy(), config)


_MODEL = (
    "Segment",
    "SweetCritic",
    "bradley_terry_loss",
    "outcome_pairs",
    "ranking_accuracy",
    "render_reference",
    "sweet_pairs",
    "top_bottom_pairs",
    "turn_advantage",
)
"""The names of :mod:`turnkit.critics.sweet.model`, importable from here as well; the first use imports it."""


__getattr__, __dir__ = lazy_exports(__name__, _MODEL)
