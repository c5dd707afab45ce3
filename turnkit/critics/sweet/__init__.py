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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from turnkit.configs import check_bool, check_choice, check_float, check_int, check_str, table_field
from turnkit.critics.base import CriticContext, lazy_exports
from turnkit.errors import ConfigError
from turnkit.learners.config import LoraConfig, OptimConfig, check_rank, flat_keys

if TYPE_CHECKING:
    from turnkit.critics.sweet.model import SweetCritic

PRIVILEGED_TEMPLATE = "In light that the final answer is: {reference}."
"""How the training-time information is glued in front of the critic's conversation (from the paper's code)."""


SWEET_OPTIM = OptimConfig(lr=1e-3)
"""Default :attr:`SweetConfig.optim`: the critic's AdamW at a constant 1e-3, clipped at norm 1."""
SWEET_LORA = LoraConfig(r=16, alpha=32)
"""Default :attr:`SweetConfig.lora`: the critic's adapter, rank 16, alpha 32, on q/k/v/o."""


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

    FLAT_KEYS: ClassVar[dict[str, tuple[str, str]]] = flat_keys(
        "lr", "max_grad_norm", "lora_r", "lora_alpha", "lora_targets"
    )
    """Keys written flat before the ``optim`` and ``lora`` tables (``critic.sweet.lr`` ...); they move into them
    with a ``FutureWarning``."""

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
    max_pairs_per_task: int | None = 4
    """Trajectory pairs per task (``None``: all)."""
    require_success: float | None = 1.0
    """Only tasks whose best rollout reaches this reward give pairs (``None``: every task)."""
    score_batch_size: int = 64
    """Turns per forward pass when scoring."""
    seed: int = 0
    """LoRA initialisation, pair subsampling and batch order."""
    optim: OptimConfig = field(default_factory=lambda: SWEET_OPTIM)
    """The critic's AdamW (:class:`~turnkit.learners.learner.OptimConfig`): ``lr`` 1e-3, gradient norm clipped at
    ``max_grad_norm`` 1."""
    lora: LoraConfig = field(default_factory=lambda: SWEET_LORA)
    """The critic's LoRA adapter (:class:`~turnkit.learners.learner.LoraConfig`): ``r`` 16, ``alpha`` 32,
    ``targets`` q/k/v/o."""

    def __post_init__(self) -> None:
        check_choice(self, "trajectory_score", ("sum", "mean"))
        check_choice(self, "placement", ("prefix", "suffix"))
        if not isinstance(self.template, str) or "{reference}" not in self.template:
            raise ConfigError(f"SweetConfig.template must contain '{{reference}}', got {self.template!r}")
        check_float(self, "beta", low=0.0, open_low=True)
        check_int(self, "steps", "batch_size", "score_batch_size")
        check_int(self, "max_pairs_per_task", optional=True)
        check_int(self, "seed", low=0)
        check_float(self, "require_success", optional=True)
        check_str(self, "reference_key", optional=True)
        check_bool(self, "length_normalize")
        table_field(self, "optim", SWEET_OPTIM)
        table_field(self, "lora", SWEET_LORA)
        check_rank(self)

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
