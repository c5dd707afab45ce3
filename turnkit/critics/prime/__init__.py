"""PRIME's implicit process reward as a critic: its table (:class:`PrimeConfig`) and :func:`from_context`.

This module is what the registry imports to validate ``critic.prime``, so it loads no torch. The PRM, its loss
and PRIME's update live in :mod:`turnkit.critics.prime.model` (see there for the method); their names import
from here too (``from turnkit.critics.prime import ImplicitPRM``), loading the model code on first use.

Example:
    >>> from turnkit.critics.registry import critic_config
    >>> critic_config("prime", {"beta": 0.1}, seed=3)
    PrimeConfig(beta=0.1, prm_minibatches=1, acc_low=0.2, acc_high=0.8, process_coef=1.0, gamma=1.0, \
policy_minibatches=1, clip_eps=0.2, score_batch_size=64, prm_chunk=8, seed=3, labels='episode', \
norm='none', optim=OptimConfig(lr=0.001, weight_decay=0.0, max_grad_norm=1.0, warmup_steps=0, schedule='constant', \
min_lr_ratio=0.1, betas=(0.9, 0.999), eps=1e-08), lora=LoraConfig(r=16, alpha=32, dropout=0.0, \
targets=('q_proj', 'k_proj', 'v_proj', 'o_proj')))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from turnkit.configs import check_choice, check_float, check_int, table_field
from turnkit.critics.base import CriticContext, lazy_exports
from turnkit.errors import ConfigError
from turnkit.learners.config import LoraConfig, OptimConfig, check_rank, flat_keys

if TYPE_CHECKING:
    from turnkit.critics.prime.model import ImplicitPRM


PRM_LABELS = ("episode", "turn")
"""The values of :attr:`PrimeConfig.labels`."""
PROCESS_NORMS = ("none", "batch")
"""The values of :attr:`PrimeConfig.norm`."""
PRM_OPTIM = OptimConfig(lr=1e-3)
"""Default :attr:`PrimeConfig.optim`: the PRM's AdamW at a constant 1e-3, clipped at norm 1."""
PRM_LORA = LoraConfig(r=16, alpha=32)
"""Default :attr:`PrimeConfig.lora`: the PRM's adapter, rank 16, alpha 32, on q/k/v/o."""


@dataclass(frozen=True)
class PrimeConfig:
    """Settings of the PRM and its update (:mod:`turnkit.critics.prime.model`). Validated on construction.

    Example:
        >>> PrimeConfig().beta, PrimeConfig().acc_low, PrimeConfig().acc_high, PrimeConfig().optim.lr
        (0.05, 0.2, 0.8, 0.001)
        >>> PrimeConfig(acc_low=0.9, acc_high=0.1)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: PrimeConfig needs acc_low <= acc_high, got 0.9, 0.1
    """

    FLAT_KEYS: ClassVar[dict[str, tuple[str, str]]] = {
        "prm_lr": ("optim", "lr"),
        **flat_keys("max_grad_norm", "lora_r", "lora_alpha"),
    }
    """Keys written flat before the ``optim`` and ``lora`` tables (``critic.prime.prm_lr`` ...); they move into
    them with a ``FutureWarning``."""

    beta: float = 0.05
    """Implicit reward scale ``β``."""
    prm_minibatches: int = 1
    """PRM optimizer steps per rollout batch (one pass over the batch)."""
    acc_low: float = 0.2
    """Lowest group accuracy kept by the prompt filter."""
    acc_high: float = 0.8
    """Highest group accuracy kept by the prompt filter."""
    process_coef: float = 1.0
    """Weight of the process-reward source in the advantage (``0``: outcome-only RLOO)."""
    gamma: float = 1.0
    """Discount of the returns-to-go."""
    policy_minibatches: int = 1
    """Policy optimizer steps per rollout batch (PRIME: 1 epoch)."""
    clip_eps: float = 0.2
    """PPO clip."""
    score_batch_size: int = 64
    """Sequences (an episode, or a turn where the context is not token-exact) per PRM forward pass when scoring."""
    prm_chunk: int = 8
    """Episodes per forward + backward inside one PRM step (gradients accumulate over chunks: the same loss, and
    memory bounded by the chunk, not the batch)."""
    seed: int = 0
    """PRM LoRA initialisation."""
    labels: str = "episode"
    """What the PRM's BCE is trained on: ``"episode"`` (PRIME: one response, the whole episode, labelled by its
    outcome) or ``"turn"`` (each turn a response, labelled by its own env reward clipped to ``[0, 1]``: for envs
    that grade every attempt, such as MathEpisodes' retries, where a won episode's wrong attempts would otherwise
    be labelled right)."""
    norm: str = "none"
    """Scale of the process rewards: ``"none"`` (``β`` alone) or ``"batch"`` (PRIME's ``prime_norm =
    batch_norm``: divided by the largest ``|Σ_{t'≥t} r_t'|`` of the scored batch, so that no process
    return-to-go leaves ``[-1, 1]``, the outcome's scale; :func:`~turnkit.critics.prime.model.process_scale`)."""
    optim: OptimConfig = field(default_factory=lambda: PRM_OPTIM)
    """The PRM's AdamW (:class:`~turnkit.learners.learner.OptimConfig`): ``lr`` 1e-3, gradient norm clipped at
    ``max_grad_norm`` 1 (the policy's learner clips by the run's own ``optim``)."""
    lora: LoraConfig = field(default_factory=lambda: PRM_LORA)
    """The PRM's LoRA adapter (:class:`~turnkit.learners.learner.LoraConfig`): ``r`` 16, ``alpha`` 32; its base,
    adapter disabled, is ``π_ref``."""

    def __post_init__(self) -> None:
        check_float(self, "beta", low=0.0, open_low=True)
        check_float(self, "acc_low", "acc_high", "gamma", low=0.0, high=1.0)
        if self.acc_low > self.acc_high:
            raise ConfigError(f"PrimeConfig needs acc_low <= acc_high, got {self.acc_low}, {self.acc_high}")
        check_int(self, "prm_minibatches", "policy_minibatches", "score_batch_size", "prm_chunk")
        check_int(self, "seed", low=0)
        check_choice(self, "labels", PRM_LABELS)
        check_choice(self, "norm", PROCESS_NORMS)
        check_float(self, "process_coef", low=0.0)
        check_float(self, "clip_eps", low=0.0, high=1.0, open_low=True, open_high=True)
        table_field(self, "optim", PRM_OPTIM)
        table_field(self, "lora", PRM_LORA)
        check_rank(self)


Config = PrimeConfig
"""The table keys of ``critic.prime`` (see :mod:`turnkit.critics.registry`); ``seed`` defaults to the run's."""


def from_context(ctx: CriticContext, config: PrimeConfig) -> ImplicitPRM:
    """PRIME in a training run: a PRM started from a LoRA copy of the start policy (its base is ``π_ref``)."""
    from turnkit.critics.prime.model import ImplicitPRM

    return ImplicitPRM.from_policy(ctx.start_policy(), config)


_MODEL = (
    "ImplicitPRM",
    "accuracy_filter",
    "episode_layout",
    "group_ranking_accuracy",
    "implicit_token_rewards",
    "policy_rows",
    "prime_update",
    "prm_bce_loss",
    "process_scale",
    "token_advantages",
)
"""The names of :mod:`turnkit.critics.prime.model`, importable from here as well; the first use imports it."""


__getattr__, __dir__ = lazy_exports(__name__, _MODEL)
