"""PAV's critic (arXiv 2410.08146): prover advantages ``A^μ_h = Q^μ_{h+1} − Q^μ_h`` of a frozen prover.

``Q^μ`` is estimated from ``samples`` rollouts of the prover to the end of the episode from each prefix,
after the Best-of-K transform ``1 − (1 − Q)^K`` (``best_of``). In training the prover is the frozen start
policy. The math lives in :mod:`turnkit.critics.progress`; this module is the critic a run names as
``critic.pav``.

Example:
    >>> import gymnasium
    >>> from turnkit.agents.scripted import ScriptedAgent
    >>> pav_critic(gymnasium.make("turnkit/MathEpisodes-v0"), ScriptedAgent(["ANSWER: 0"]), best_of=4).best_of
    4
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gymnasium

from turnkit.agents.base import Agent, Context
from turnkit.configs import check_float, check_int
from turnkit.critics.base import CriticContext
from turnkit.critics.progress import Credit, ProgressCritic, RolloutValue
from turnkit.types import AgentTurn

if TYPE_CHECKING:  # the model code loads with the policy, not when a run's config is validated
    from turnkit.agents.hf import HFPolicy


@dataclass(frozen=True)
class PAVConfig:
    """Keys of ``critic.pav`` in a run's config.

    Example:
        >>> PAVConfig().best_of
        4
        >>> PAVConfig(best_of=0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: PAVConfig.best_of must be an int >= 1, got 0
    """

    samples: int = 8
    """Prover rollouts per prefix that estimate ``Q^μ``."""
    temperature: float = 0.6
    """Sampling temperature of the prover."""
    best_of: int = 4
    """``K`` of the Best-of-K prover built from the frozen start policy (``1``: the start policy itself)."""
    alpha: float = 1.0
    """Weight of the progress term inside the critic (the table's ``weight`` scales it again)."""

    def __post_init__(self) -> None:
        check_int(self, "samples", "best_of")
        check_float(self, "temperature", low=0.0, open_low=True)
        check_float(self, "alpha")


Config = PAVConfig
"""The table keys of ``critic.pav`` (see :mod:`turnkit.critics.registry`)."""


class FrozenProver:
    """A fixed prover (e.g. the start policy) that samples at the seed of the batch being scored.

    Its view prefills each prefix's prompt once for all the rollouts that start there (``share_prefill``).

    Example:
        >>> from turnkit.agents.hf import HFPolicy
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> from turnkit.types import Message
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok,
        ...                   max_new_tokens=2)
        >>> prover = FrozenProver(policy, seed=lambda: 3, temperature=0.6)
        >>> len(prover.act([Context(messages=(Message("user", "2+2?"),), episode_seed=0)]))
        1
    """

    def __init__(self, prover: HFPolicy, *, seed: Callable[[], int], temperature: float) -> None:
        self.prover, self.seed, self.temperature = prover, seed, temperature

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """Sample one turn per context from the fixed prover."""
        view = self.prover.with_sampling(temperature=self.temperature, seed=self.seed())
        view.share_prefill = True  # the rollouts from one prefix share its prompt
        return view.act(contexts)


def pav_critic(
    env: gymnasium.Env,
    prover: Agent,
    *,
    rollouts: int = 20,
    alpha: float = 1.0,
    best_of: int = 1,
    credit: Credit = "advantage",
) -> ProgressCritic:
    """PAV progress ``α A^μ`` with Monte Carlo ``Q^μ`` from ``rollouts`` prover rollouts per prefix.

    Args:
        env: A spare env like the trajectories' (the critic replays and branches it).
        prover: The prover ``μ``.
        rollouts: Prover rollouts per prefix.
        alpha: Weight of the progress term.
        best_of: ``K`` of the Best-of-K transform.
        credit: How progress becomes rewards (:func:`~turnkit.critics.progress.progress_step_rewards`).
    """
    values = RolloutValue(env, prover, samples=rollouts)
    return ProgressCritic(values, alpha=alpha, credit=credit, best_of=best_of, name="pav")


def from_context(ctx: CriticContext, config: PAVConfig) -> ProgressCritic:
    """PAV in a training run: the frozen start policy under Best-of-``best_of``, ``samples`` rollouts."""
    prover = FrozenProver(ctx.start_policy(), seed=ctx.live_seed, temperature=config.temperature)
    return pav_critic(ctx.make_env(), prover, rollouts=config.samples, alpha=config.alpha, best_of=config.best_of)


__all__ = ["Config", "FrozenProver", "PAVConfig", "from_context", "pav_critic"]
