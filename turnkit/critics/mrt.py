"""MRT's critic (arXiv 2503.07572): the progress bonus of the live policy forced to answer after each turn.

``J_h`` is the success rate of ``samples`` answers the policy gives when told to answer now (``force``) after
turn ``h``; turn ``h`` is rewarded with ``J_{h+1} − J_h`` (:func:`~turnkit.critics.progress.progress_bonus`).
The logged ``regret`` is MRT's normalised regret at the token budget ``budget`` (``C0``). The math lives in
:mod:`turnkit.critics.progress`; this module is the critic a run names as ``critic.mrt``.

Example:
    >>> import gymnasium
    >>> from turnkit.agents.scripted import ScriptedAgent
    >>> critic = mrt_critic(gymnasium.make("turnkit/MathEpisodes-v0"), ScriptedAgent(["ANSWER: 0"]))
    >>> critic.name, critic.value_fn.max_turns
    ('mrt', 1)
    >>> MRTConfig(samples=0)
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: MRTConfig.samples must be an int >= 1, got 0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gymnasium

from turnkit.agents.base import Agent, Context
from turnkit.configs import check_float, check_int, check_str
from turnkit.critics.base import CriticContext
from turnkit.critics.progress import FORCE_ANSWER, Credit, Force, ProgressCritic, RolloutValue, force_answer
from turnkit.types import AgentTurn

if TYPE_CHECKING:  # the model code loads with the policy, not when a run's config is validated
    from turnkit.agents.hf import HFPolicy


@dataclass(frozen=True)
class MRTConfig:
    """Keys of ``critic.mrt`` in a run's config.

    Example:
        >>> MRTConfig().samples, MRTConfig().temperature
        (8, 0.6)
    """

    samples: int = 8
    """``K``: forced answers per turn boundary that estimate ``J``."""
    temperature: float = 0.6
    """Sampling temperature of the forced answers (MRT uses 0.6)."""
    budget: float | None = None
    """Token budget ``C0`` of the logged normalised regret (``None``: ``max_new_tokens x (max_turns or 1)``)."""
    force: str = FORCE_ANSWER
    """Instruction appended to the prover's last prompt ("answer now"); ``""`` appends nothing."""
    alpha: float = 1.0
    """Weight of the progress term inside the critic (the table's ``weight`` scales it again)."""

    def __post_init__(self) -> None:
        check_int(self, "samples")
        check_float(self, "temperature", low=0.0, open_low=True)
        check_float(self, "budget", low=0.0, open_low=True, optional=True)
        check_str(self, "force", empty=True)
        check_float(self, "alpha")


Config = MRTConfig
"""The table keys of ``critic.mrt`` (see :mod:`turnkit.critics.registry`)."""


class LiveProver:
    """The policy as it is *now*, sampled at another temperature (the MRT prover of the current step).

    Every call takes a fresh :meth:`~turnkit.agents.hf.HFPolicy.with_sampling` view, so the prover follows
    the policy's weights, at the sampling seed of the batch being scored (``seed()``; default: the policy's own).
    The view prefills each boundary's prompt once for its ``K`` answers (``share_prefill``).

    Example:
        >>> from turnkit.agents.hf import HFPolicy
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> from turnkit.types import Message
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok,
        ...                   max_new_tokens=2)
        >>> prover = LiveProver(policy, temperature=0.6)
        >>> len(prover.act([Context(messages=(Message("user", "2+2?"),), episode_seed=0)]))
        1
    """

    def __init__(self, policy: HFPolicy, temperature: float, seed: Callable[[], int] | None = None) -> None:
        self.policy, self.temperature, self.seed = policy, temperature, seed

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """Sample one turn per context from the current policy."""
        seed = {} if self.seed is None else {"seed": self.seed()}
        view = self.policy.with_sampling(temperature=self.temperature, **seed)
        view.share_prefill = True  # the K answers from one boundary share its prompt
        return view.act(contexts)


def mrt_critic(
    env: gymnasium.Env,
    policy: Agent,
    *,
    samples: int = 8,
    alpha: float = 1.0,
    force: Force | None = None,
    budget: float | None = None,
    credit: Credit = "advantage",
) -> ProgressCritic:
    """MRT's progress bonus: ``J`` of ``policy`` forced to answer after each turn, ``K = samples``.

    Args:
        env: A spare env like the trajectories' (the critic replays and branches it).
        policy: The prover (in training: the live policy, :class:`LiveProver`).
        samples: Forced answers per turn boundary.
        alpha: Weight of the progress term.
        force: Rewrites the prover's prompt (default: :func:`~turnkit.critics.progress.force_answer`).
        budget: Token budget ``C0`` of the regret metric (``None``: no regret).
        credit: How progress becomes rewards (:func:`~turnkit.critics.progress.progress_step_rewards`).
    """
    values = RolloutValue(env, policy, samples=samples, max_turns=1, force=force or force_answer())
    return ProgressCritic(values, alpha=alpha, credit=credit, budget=budget, name="mrt")


def from_context(ctx: CriticContext, config: MRTConfig) -> ProgressCritic:
    """MRT in a training run: the live policy, forced to answer, ``config.samples`` answers per boundary."""
    force = force_answer(config.force) if config.force else (lambda messages: messages)
    budget = config.budget if config.budget is not None else float(ctx.token_budget)
    prover = LiveProver(ctx.policy, config.temperature, seed=ctx.sampling_seed)
    return mrt_critic(ctx.make_env(), prover, samples=config.samples, alpha=config.alpha, force=force, budget=budget)


__all__ = ["Config", "LiveProver", "MRTConfig", "from_context", "mrt_critic"]
