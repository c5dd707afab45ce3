r"""Critics as options of the training loop: one hook turns a rollout batch into per-turn rewards.

``TrainConfig.critic`` names the critics of a run, ``"mrt"`` (weighted by ``critic_weight``) or a table
``{"prime": 1.0, "mrt": 0.5}``. :func:`build_critics` builds them once per run; each step the loop calls
:meth:`LoopCritics.rewards` on the fresh rollout batch (before the policy update), which scores every clean
episode with

``r_h = r_h^env + Σ_i w_i · r_h^{(i)}``

(a :class:`~turnkit.critics.base.WeightedSum` with the env reward at weight 1), then lets every *learned*
critic take its own update on the same batch (the rewards come from the critic *before* its update, PRIME's
"single forward"). The advantages are per-turn returns-to-go of ``r`` (``per_turn`` is implied).

=========  ========================================================================================  ========
name       per-turn reward                                                                           learned
=========  ========================================================================================  ========
``mrt``    MRT's progress bonus ``J_{h+1} − J_h``; ``J`` from ``critic_samples`` answers of the *live*  no
           policy forced to answer now (``critic_force``) at ``critic_temperature``
``pav``    PAV's prover advantage ``A^μ_h = Q^μ_{h+1} − Q^μ_h``, ``Q^μ`` from ``critic_samples`` full     no
           rollouts of the *frozen start policy* under the Best-of-``critic_best_of`` transform
``prime``  PRIME's implicit process reward, summed per turn: ``β Σ_t (log π_φ − log π_ref)``; the PRM     yes
           (a LoRA copy of the start policy) takes one BCE pass on the batch's outcomes, on the groups
           with accuracy in ``[0.2, 0.8]``
``sweet``  SWEET-RL's turn advantage ``mean_t (log π_c − log π_ref)`` from a critic that reads            yes
           ``Task.privileged[critic_reference_key]``; ``critic_fit_steps`` Bradley–Terry steps per batch
``judge``  an LLM judge behind an OpenAI-compatible ``judge_url`` scores each episode in ``[0, 1]``          no
           (on its last turn)
``iqlearn`` IQLearn's extracted reward ``Σ_t Q(s_t, a_t) − γ V(s_{t+1})`` over the turn, from the policy      no
           of an IQLearn run (``critic_model``; :mod:`turnkit.critics.iqlearn`)
``afd``    AfD's reward-model logit ``log D − log(1 − D)`` per turn, from a reward model written by           no
           ``turnkit afd`` (``critic_model``; :mod:`turnkit.critics.afd`)
``m:f``    ``m.f(context: CriticContext) -> Critic``: any :class:`~turnkit.critics.base.Critic` (may
           also offer ``update(trajectories) -> metrics``, ``save(folder)`` and ``load(folder)``)
=========  ========================================================================================  ========

A learned critic keeps its adapter and optimizer state in every checkpoint (``critics/<name>/``), so a
resumed run continues the critic where it stopped. PRIME's token-level rewards are summed per turn here
(the loop's advantages are per turn); the paper's token-level RLOO estimator stays in
:func:`turnkit.critics.prime.prime_update`.

Example:
    >>> from turnkit.train.config import TrainConfig
    >>> build_critics(TrainConfig(), None) is None
    True
"""

from __future__ import annotations

import copy
import importlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch

from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy
from turnkit.critics.base import Critic, CriticResult, WeightedSum, score_all
from turnkit.critics.judge import JudgeConfig, JudgeCritic
from turnkit.critics.prime import ImplicitPRM, PrimeConfig, accuracy_filter, group_ranking_accuracy
from turnkit.critics.progress import ProgressCritic, RolloutValue, force_answer
from turnkit.critics.rules import EnvReward
from turnkit.critics.sweet import SweetConfig, SweetCritic
from turnkit.errors import ConfigError
from turnkit.train.config import TrainConfig
from turnkit.types import AgentTurn, Trajectory


@dataclass(frozen=True)
class CriticContext:
    """What a critic factory gets to build its critic from.

    Attributes:
        config: The run's settings.
        policy: The live policy (trained in place; read its weights, never update them).
        start_policy: A frozen copy of the start policy (built on first use; PAV's prover, PRIME's reference).
        make_env: Makes a spare env of the run's kind (the critic's own, for branching or replay).
    """

    config: TrainConfig
    policy: HFPolicy
    make_env: Callable[[], gymnasium.Env]
    start_policy: Callable[[], HFPolicy]


class LiveProver:
    """The policy as it is *now*, sampled at another temperature (the MRT prover of the current step).

    Every call takes a fresh :meth:`~turnkit.agents.hf.HFPolicy.with_sampling` view, so the prover follows
    the policy's weights and its per-step sampling seed.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> from turnkit.types import Message
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok,
        ...                   max_new_tokens=2)
        >>> prover = LiveProver(policy, temperature=0.6)
        >>> len(prover.act([Context(messages=(Message("user", "2+2?"),), episode_seed=0)]))
        1
    """

    def __init__(self, policy: HFPolicy, temperature: float) -> None:
        self.policy, self.temperature = policy, temperature

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """Sample one turn per context from the current policy."""
        return self.policy.with_sampling(temperature=self.temperature).act(contexts)


class FrozenProver:
    """A fixed prover (e.g. the start policy) that samples with the live policy's per-step seed.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> from turnkit.types import Message
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok,
        ...                   max_new_tokens=2)
        >>> prover = FrozenProver(policy, live=policy, temperature=0.6)
        >>> len(prover.act([Context(messages=(Message("user", "2+2?"),), episode_seed=0)]))
        1
    """

    def __init__(self, prover: HFPolicy, *, live: HFPolicy, temperature: float) -> None:
        self.prover, self.live, self.temperature = prover, live, temperature

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """Sample one turn per context from the fixed prover."""
        view = self.prover.with_sampling(temperature=self.temperature, seed=self.live.sampling.seed)
        return view.act(contexts)


# ---------------------------------------------------------------------------------------------- built-ins


def mrt_critic(ctx: CriticContext) -> ProgressCritic:
    """MRT: progress of the live policy forced to answer now, ``critic_samples`` answers per turn boundary."""
    cfg = ctx.config
    force = force_answer(cfg.critic_force) if cfg.critic_force else None
    values = RolloutValue(
        ctx.make_env(), LiveProver(ctx.policy, cfg.critic_temperature), samples=cfg.critic_samples, max_turns=1,
        force=force,
    )  # fmt: skip
    return ProgressCritic(values, budget=cfg.regret_budget, name="mrt")


def pav_critic(ctx: CriticContext) -> ProgressCritic:
    """PAV: advantages of the frozen start policy (Best-of-``critic_best_of``), ``critic_samples`` rollouts."""
    cfg = ctx.config
    prover = FrozenProver(ctx.start_policy(), live=ctx.policy, temperature=cfg.critic_temperature)
    values = RolloutValue(ctx.make_env(), prover, samples=cfg.critic_samples)
    return ProgressCritic(values, best_of=cfg.critic_best_of, name="pav")


class PrimeLoopCritic:
    """PRIME's implicit PRM inside the loop: score the batch with the current PRM, then one BCE pass on it.

    Metrics: ``implicit_return`` (per episode), ``rank_acc`` (the pre-update PRM's within-group ranking of
    correct over incorrect episodes, ``nan`` without such pairs) and, from :meth:`update`, ``prm_loss``,
    ``prm_accuracy`` and ``prm_kept`` (share of episodes in groups with accuracy in ``[0.2, 0.8]``).
    """

    name = "prime"

    def __init__(self, prm: ImplicitPRM) -> None:
        self.prm = prm

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
        """Per-turn summed implicit rewards of the PRM as it is before this batch's update."""
        results = self.prm.score_batch(trajectories)
        acc, _ = group_ranking_accuracy(
            [r.total for r in results], [float(t.success) for t in trajectories], [_group(t) for t in trajectories]
        )
        return [CriticResult(r.step_rewards, {**r.metrics, "rank_acc": acc}) for r in results]

    def score(self, trajectory: Trajectory) -> CriticResult:
        """One episode's per-turn rewards."""
        return self.score_batch([trajectory])[0]

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """One BCE pass over the episodes of the batch's informative groups (PRIME's accuracy filter)."""
        cfg = self.prm.config
        keep = accuracy_filter(
            [float(t.success) for t in trajectories], [_group(t) for t in trajectories], low=cfg.acc_low,
            high=cfg.acc_high,
        )  # fmt: skip
        kept = [t for t, k in zip(trajectories, keep, strict=True) if k]
        out = {"prm_kept": len(kept) / max(len(trajectories), 1)}
        if kept:
            out.update(self.prm.fit(kept))
        return out

    def save(self, folder: Path) -> None:
        """Write the PRM's adapter and optimizer state."""
        self.prm.prm.save_adapter(folder / "adapter")
        torch.save(self.prm.optimizer.state_dict(), folder / "optimizer.pt")

    def load(self, folder: Path) -> None:
        """Restore what :meth:`save` wrote."""
        self.prm.prm.load_adapter(folder / "adapter")
        self.prm.optimizer.load_state_dict(torch.load(folder / "optimizer.pt", map_location=self.prm.prm.device))


def prime_critic(ctx: CriticContext) -> PrimeLoopCritic:
    """PRIME: a PRM started from a LoRA copy of the start policy (its base is the reference ``π_ref``)."""
    cfg = ctx.config
    prime = PrimeConfig(prm_lr=cfg.critic_lr, seed=cfg.seed)
    return PrimeLoopCritic(ImplicitPRM.from_policy(ctx.start_policy(), prime))


class SweetLoopCritic:
    """SWEET-RL's critic inside the loop: turn advantages now, then ``steps`` Bradley–Terry steps on the batch.

    Batches without a same-task pair of different rewards leave the critic as it is (``pairs`` 0).
    """

    name = "sweet"

    def __init__(self, critic: SweetCritic, *, steps: int, seed: int) -> None:
        self.critic, self.steps, self.seed, self._updates = critic, steps, seed, 0

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
        """Per-turn advantages of the critic as it is before this batch's update."""
        return self.critic.score_batch(trajectories)

    def score(self, trajectory: Trajectory) -> CriticResult:
        """One episode's per-turn advantages."""
        return self.score_batch([trajectory])[0]

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """Bradley–Terry steps on the batch's same-task pairs (a fresh pair order per update)."""
        self._updates += 1
        seed = self.seed * 1_000_003 + self._updates
        if not self.critic.pairs(trajectories, np.random.default_rng(seed)):
            return {"pairs": 0.0}
        fit = self.critic.fit(trajectories, steps=self.steps, seed=seed)
        return {k: v for k, v in fit.items() if k != "seconds"}

    def save(self, folder: Path) -> None:
        """Write the critic's adapter, optimizer state and update count."""
        self.critic.critic.save_adapter(folder / "adapter")
        torch.save({"optimizer": self.critic.optimizer_state(), "updates": self._updates}, folder / "optimizer.pt")

    def load(self, folder: Path) -> None:
        """Restore what :meth:`save` wrote."""
        self.critic.critic.load_adapter(folder / "adapter")
        state = torch.load(folder / "optimizer.pt", map_location=self.critic.critic.device)
        self.critic.load_optimizer_state(state["optimizer"])
        self._updates = int(state["updates"])


def sweet_critic(ctx: CriticContext) -> SweetLoopCritic:
    """SWEET-RL: a LoRA copy of the start policy that reads the task's privileged reference."""
    cfg = ctx.config
    sweet = SweetConfig(
        reference_key=cfg.critic_reference_key or None, lr=cfg.critic_lr, seed=cfg.seed, require_success=None
    )  # on-policy batches: every task with two different rewards gives pairs
    critic = SweetCritic.from_policy(ctx.start_policy(), sweet)
    return SweetLoopCritic(critic, steps=cfg.critic_fit_steps, seed=cfg.seed)


def judge_critic(ctx: CriticContext) -> JudgeCritic:
    """An LLM judge over HTTP (``judge_url``), greedy, one score per episode; malformed replies count, score 0."""
    from turnkit.agents.openai import OpenAIAgent

    cfg = ctx.config
    if not cfg.judge_url:
        raise ConfigError("critic=judge needs judge_url, the API root of an OpenAI-compatible judge server")
    agent = OpenAIAgent(cfg.judge_url, cfg.judge_model, temperature=0.0, max_tokens=64, seed=cfg.seed, token_ids=False)
    judge = JudgeConfig(reference_key=cfg.critic_reference_key or None, on_malformed="record", malformed_reward=0.0)
    return JudgeCritic(agent, judge)


def iqlearn_critic(ctx: CriticContext) -> Critic:
    """IQLearn's extracted reward from a trained run (``critic_model``), summed per turn; frozen."""
    from turnkit.train.iqlearn import load_iqlearn_reward

    if not ctx.config.critic_model:
        raise ConfigError("critic=iqlearn needs critic_model, the folder of an IQLearn run (turnkit iqlearn --out)")
    critic = load_iqlearn_reward(ctx.config.critic_model)
    if critic.policy.tokenizer.get_vocab() != ctx.policy.tokenizer.get_vocab():
        raise ConfigError(
            f"critic_model {ctx.config.critic_model} has another tokenizer than the policy: it cannot score its ids"
        )
    return critic


def afd_critic(ctx: CriticContext) -> Critic:
    """AfD's IRL reward model from a folder written by ``turnkit afd`` (``critic_model``); frozen."""
    from turnkit.critics.afd import AfDCritic

    if not ctx.config.critic_model:
        raise ConfigError("critic=afd needs critic_model, a reward-model folder (turnkit afd --out DIR: DIR/rm/<data>)")
    path = Path(ctx.config.critic_model)
    if not (path / "config.json").is_file():
        raise ConfigError(f"critic_model {path} is not a reward-model folder (no config.json)")
    critic = AfDCritic.load(path)
    if critic.tokenizer.get_vocab() != ctx.policy.tokenizer.get_vocab():
        raise ConfigError(f"critic_model {path} has another tokenizer than the policy: it cannot score its ids")
    return critic


BUILDERS: dict[str, Callable[[CriticContext], Critic]] = {
    "mrt": mrt_critic,
    "pav": pav_critic,
    "prime": prime_critic,
    "sweet": sweet_critic,
    "judge": judge_critic,
    "iqlearn": iqlearn_critic,
    "afd": afd_critic,
}
"""The built-in critics by name (see the module docstring)."""


def load_factory(spec: str) -> Callable[[CriticContext], Critic]:
    """Import ``"module:callable"`` (a dotted attribute path after the colon is allowed).

    Raises:
        ConfigError: The module cannot be imported or has no such attribute, or it is not callable.

    Example:
        >>> load_factory("turnkit.train.critic_hook:mrt_critic") is mrt_critic
        True
        >>> load_factory("turnkit.train.critic_hook:nothing")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: critic 'turnkit.train.critic_hook:nothing': module turnkit.train.critic_hook has \
no attribute 'nothing'
    """
    module_name, _, attr = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"critic {spec!r}: cannot import module {module_name!r} ({exc})") from exc
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"critic {spec!r}: module {module_name} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ConfigError(f"critic {spec!r} is not callable")
    return target


# ---------------------------------------------------------------------------------------------- the hook


class LoopCritics:
    """The run's critics and their weights: per-turn rewards for a batch, updates, checkpoint state.

    Args:
        parts: ``(name, weight, critic)`` triples.
        envs: Envs the critics own (closed by :meth:`close`).

    Example:
        >>> from turnkit.critics.rules import LengthPenalty
        >>> from turnkit.types import AgentTurn, Step
        >>> critics = LoopCritics([("short", 0.5, LengthPenalty(per_unit=1.0, unit="words"))])
        >>> traj = Trajectory("d", 0, (Step("q", AgentTurn("two words"), 1.0, True),))
        >>> critics.rewards([traj])[0]  # 1.0 (env) + 0.5 x (-2)
        [(0.0,)]
    """

    def __init__(self, parts: Sequence[tuple[str, float, Critic]], envs: Sequence[gymnasium.Env] = ()) -> None:
        self.parts = list(parts)
        self.envs = list(envs)
        named: list[tuple[float, Critic]] = [(w, _Named(c, n)) for n, w, c in self.parts]
        self.critic = WeightedSum([(1.0, EnvReward()), *named], name="critic")

    def rewards(self, trajs: Sequence[Trajectory]) -> tuple[list[tuple[float, ...]], dict[str, float]]:
        """Per-turn rewards of every episode (errored ones: zeros, they are masked), then the learned updates.

        Returns:
            ``(turn_rewards, metrics)``: each critic metric averaged over the clean episodes (``<name>/<metric>``),
            ``critic_reward_mean`` (mean episode total), the learned critics' update metrics
            (``<name>/<metric>``), and ``critic_s`` (wall time of scoring and updates).
        """
        start = time.perf_counter()
        rewards, metrics = critic_rewards(self.critic, trajs)
        clean = [t for t in trajs if t.error is None]
        for name, _, critic in self.parts:
            update = getattr(critic, "update", None)
            if callable(update) and clean:
                metrics.update({f"{name}/{k}": float(v) for k, v in update(clean).items()})
        metrics["critic_s"] = time.perf_counter() - start
        return rewards, metrics

    def save(self, folder: Path) -> None:
        """Write every stateful critic's state into ``folder/<name>/``."""
        for name, _, critic in self.parts:
            if callable(getattr(critic, "save", None)):
                (folder / _safe(name)).mkdir(parents=True, exist_ok=True)
                critic.save(folder / _safe(name))  # type: ignore[attr-defined]

    def stateful(self) -> list[str]:
        """Folder names (under a checkpoint's ``critics/``) of the critics whose state a checkpoint keeps."""
        return [_safe(name) for name, _, c in self.parts if callable(getattr(c, "save", None))]

    def load(self, folder: Path) -> None:
        """Restore what :meth:`save` wrote (every stateful critic must be there)."""
        for name, _, critic in self.parts:
            if callable(getattr(critic, "load", None)):
                critic.load(folder / _safe(name))  # type: ignore[attr-defined]

    def close(self) -> None:
        """Close the critics' envs and their branch pools."""
        pools = [getattr(getattr(c, "value_fn", None), "_pool", []) for _, _, c in self.parts]
        for env in [*self.envs, *[e for pool in pools for e in pool]]:
            env.close()


@dataclass(frozen=True)
class _Named:
    """A critic under the name its config gave it (metrics are kept as ``<name>/<metric>``)."""

    critic: Any
    name: str

    def score(self, trajectory: Trajectory) -> CriticResult:
        return self.score_batch([trajectory])[0]

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
        return score_all(self.critic, trajectories)


def _safe(name: str) -> str:
    return name.replace(":", "--").replace("/", "_")


def _group(trajectory: Trajectory) -> Any:
    return trajectory.group if trajectory.group is not None else (trajectory.env_id, trajectory.seed)


def build_critics(cfg: TrainConfig, policy: HFPolicy | None, *, make_env: Callable[[], gymnasium.Env] | None = None
                  ) -> LoopCritics | None:  # fmt: skip
    """The critics named by ``cfg.critic`` (``None`` without any), built around the run's live ``policy``.

    Call it before the policy gets its training adapter: PRIME and SWEET copy the start policy.

    Args:
        cfg: The run's settings.
        policy: The live policy.
        make_env: Makes a spare env (default: ``gymnasium.make(cfg.env_id, split=cfg.split, **cfg.env_kwargs)``).

    Raises:
        ConfigError: An unknown or unloadable critic, or a critic that cannot be built for this run.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> from turnkit.types import AgentTurn, Step
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok,
        ...                   max_new_tokens=2)
        >>> critics = build_critics(TrainConfig(critic={"prime": 0.5}), policy)
        >>> turn = AgentTurn("x", token_ids=(60, 2), logprobs=(-1.0, -1.0), prompt_token_ids=(1, 4))
        >>> won = Trajectory("d", 0, (Step("q", turn, 1.0, True, info={"success": True}),), group=0)
        >>> rewards, metrics = critics.rewards([won])  # the PRM starts as its reference: implicit reward 0
        >>> rewards, metrics["prime/total"], critics.stateful()
        ([(1.0,)], 0.0, ['prime'])
    """
    parts = cfg.critic_parts()
    if not parts:
        return None
    assert policy is not None
    envs: list[gymnasium.Env] = []

    def spare_env() -> gymnasium.Env:
        env = make_env() if make_env is not None else gymnasium.make(cfg.env_id, split=cfg.split, **cfg.env_kwargs)
        envs.append(env)
        return env

    frozen: list[HFPolicy] = []

    def start_policy() -> HFPolicy:
        if not frozen:
            if policy.has_adapter:
                raise ConfigError("the start policy has a LoRA adapter; merge it before training with this critic")
            model = copy.deepcopy(policy.model).eval()
            for p in model.parameters():
                p.requires_grad_(False)
            copied = HFPolicy(model, policy.tokenizer, max_batch_size=policy.max_batch_size)
            copied.sampling = policy.sampling
            frozen.append(copied)
        return frozen[0]

    ctx = CriticContext(cfg, policy, spare_env, start_policy)
    built = []
    for name, weight in parts:
        factory = BUILDERS.get(name) or load_factory(name)
        critic = factory(ctx)
        if not callable(getattr(critic, "score", None)) and not callable(getattr(critic, "score_batch", None)):
            raise ConfigError(f"critic {name!r}: the factory returned {type(critic).__name__}, which has no score()")
        built.append((name, weight, critic))
    return LoopCritics(built, envs)


def critic_rewards(critic: Critic, trajs: Sequence[Trajectory]) -> tuple[list[tuple[float, ...]], dict[str, float]]:
    """Score the clean episodes of a batch: per-turn rewards for every episode, and mean metrics.

    Errored episodes are not scored (their advantages are masked anyway); they get zero rewards.

    Returns:
        ``(turn_rewards, metrics)``: one reward tuple per trajectory, and each critic metric averaged over
        the clean episodes (``nan`` values are left out of the mean), plus ``critic_reward_mean``.

    Example:
        >>> from turnkit.types import Step
        >>> win = Trajectory("d", 0, (Step("q", AgentTurn("a"), 0.5, terminated=True),))
        >>> rewards, metrics = critic_rewards(EnvReward(), [win])
        >>> rewards, metrics["critic_reward_mean"]
        ([(0.5,)], 0.5)
    """
    clean = [i for i, t in enumerate(trajs) if t.error is None]
    results = score_all(critic, [trajs[i] for i in clean])
    rewards: list[tuple[float, ...]] = [tuple(0.0 for _ in t.steps) for t in trajs]
    sums: dict[str, list[float]] = {}
    for i, result in zip(clean, results, strict=True):
        rewards[i] = result.step_rewards
        for key, value in result.metrics.items():
            if value == value:  # not nan
                sums.setdefault(key, []).append(float(value))
    metrics = {key: sum(values) / len(values) for key, values in sums.items()}
    metrics["critic_reward_mean"] = sum(r.total for r in results) / max(len(clean), 1)
    return rewards, metrics


__all__ = [
    "BUILDERS",
    "CriticContext",
    "FrozenProver",
    "LiveProver",
    "LoopCritics",
    "build_critics",
    "critic_rewards",
    "load_factory",
]
