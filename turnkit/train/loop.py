r"""One readable GRPO/RLOO loop: sample groups, score them against each other, take PPO-clip steps.

Per step ``s`` (all randomness from the run seed, so a resumed run repeats an uninterrupted one exactly):

1. **Tasks.** Draw ``groups_per_step`` task seeds from the run's ``np.random.Generator`` (never inside the
   held-out evaluation range).
2. **Rollout.** Play ``grpo.group_size`` episodes of each task, *all groups in one batch*
   (:func:`~turnkit.rollout.collect.collect_batch` over ``group_size * groups_per_step`` envs), sampling at
   temperature ``T`` (``sampling.temperature``) with sampling seed ``hash(seed, s)``. Every turn keeps its prompt
   ids, sampled ids and their log-probs ``log π_old``.
3. **Advantages.** :func:`~turnkit.learners.advantages.trajectory_advantages`: within each group,
   ``A_i = (R_i − mean_g R) / (std_g R + ε)`` (GRPO), ``R_i − mean_g R`` (Dr. GRPO) or leave-one-out (RLOO).
   Errored episodes are masked (no advantage, no loss) and counted as ``masked_errors``.
4. **Update.** :func:`~turnkit.rollout.batch.build_turn_batch` (one row per turn: the exact ids the
   policy saw and produced), then ``update.ppo_epochs`` passes of ``update.minibatches`` AdamW steps on
   :func:`~turnkit.learners.grpo.policy_loss`:
   ``ℓ = −min(ρ A, clip(ρ, 1−ε, 1+ε_high) A) + β KL(π ‖ π_ref)`` with ``ρ = exp(log π − log π_old)``.
   The reference is the start policy: the base model with the LoRA adapter disabled, or a frozen copy when
   every weight is trained.
5. **Log, evaluate, checkpoint.** One JSONL record per step (reward, success, clip fraction, KL,
   tokens/s, rollout vs update seconds); held-out evaluation every ``eval.every`` steps; an atomic
   checkpoint (weights or adapter, optimizer, RNG states, step) every ``log.checkpoint_every`` steps.

**Critics.** With critics in ``TrainConfig.critic`` (a table ``{name: {weight, ...}}`` of
:mod:`turnkit.critics` modules or your own), step 3 uses dense per-turn rewards
``r_h = r_h^env + Σ_i w_i r_h^{(i)}`` from :mod:`turnkit.critics.registry` instead of the env's:
``trajectory_advantages(..., per_turn=True, turn_rewards=...)``. The critics score the rollout batch before
the update; learned critics (PRIME's PRM, SWEET's critic) then take their own step on the same batch, and
their adapters and optimizer states are part of every checkpoint. The learners never touch an env. Critic
metrics (``mrt/regret``, ``prime/rank_acc``, ...) are averaged over the clean episodes into the step's record,
with ``critic_s``. Without a critic the step is exactly the env-reward step above. With ``grpo.estimator`` one
of ``prime``, ``mrt``, ``pav``, ``sweet`` (or ``paper``: the critics' own) the env's and each critic's rewards
stay separate sources, combined as that method's paper does (:mod:`turnkit.learners.estimators`, no ``σ``).

**Token-exact contexts.** Every turn after the first conditions on the ids the policy saw and generated
before, extended by the chat template's ids for the env's reply (:class:`~turnkit.rollout.chat.ChatDelta`),
never on a re-rendering of earlier turns; so ``update.batch_layout="episodes"`` (one row per episode) is valid for
any prefix-preserving chat template, BPE tokenizers included.

Example:
    >>> import tempfile
    >>> from turnkit.agents.hf import HFPolicy
    >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    >>> tok = build_tiny_tokenizer()
    >>> model = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2,
    ...                                               intermediate_size=64))
    >>> cfg = TrainConfig(steps=1, grpo={"group_size": 2}, groups_per_step=2, sampling={"max_new_tokens": 4},
    ...                   max_turns=1, out_dir=tempfile.mkdtemp())
    >>> result = train(cfg, policy=HFPolicy(model, tok, max_new_tokens=4), progress=False)
    >>> result.steps_done, result.history[-1]["episodes"]
    (1, 4)
"""

from __future__ import annotations

import dataclasses
import math
import pickle
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import gymnasium
import numpy as np
import torch
from tqdm.auto import tqdm

from turnkit.agents.hf import HFPolicy
from turnkit.agents.kv_reuse import PrefixKV
from turnkit.checkpoint import reading
from turnkit.critics.base import CriticContext
from turnkit.critics.registry import CriticSet, build_critics, run_estimator
from turnkit.errors import ConfigError
from turnkit.learners.advantages import Estimator, trajectory_advantages
from turnkit.learners.estimators import SOURCE_ESTIMATORS, Source, env_sources, source_advantages
from turnkit.learners.grpo import GRPOConfig, aggregation_share, policy_loss
from turnkit.learners.learner import Learner
from turnkit.learners.logprobs import logits_fit, model_token_logprobs
from turnkit.rollout.batch import TurnBatch, build_episode_batch, build_turn_batch
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.evaluate import evaluate
from turnkit.train.config import TrainConfig, upgrade_config
from turnkit.train.policy_state import read_policy_state, save_policy_state
from turnkit.train.rollout_log import learner_records, write_step_rollouts
from turnkit.train.rollouts import DoneRollout, RolloutHandle, RolloutJob, build_rollouts
from turnkit.train.run import Cadence, Run
from turnkit.train.update_layout import length_sorted
from turnkit.types import Trajectory

SEED_SPACE = 2**31
"""Training task seeds lie in ``[0, SEED_SPACE)`` minus the evaluation range."""
RESUMABLE_CHANGES = frozenset(
    {"steps", "eval.every", "log.checkpoint_every", "log.tensorboard", "out_dir", "rollout.backend",
     "rollout.backend_url", "rollout.ray", "rollout.reuse_kv", "device"}
)  # fmt: skip
"""Config keys (dotted inside a table) a resumed run may change; any other difference is a different run
(ConfigError)."""
CURVES = ("reward_mean", "success_rate", "eval_success", "clip_frac", "approx_kl")
"""Metrics drawn into the run's ``curves.png``."""


@dataclass
class TrainResult:
    """What :func:`train` hands back.

    Attributes:
        run_dir: The run directory.
        steps_done: The last completed step.
        history: Every metrics record of the run (training steps and evaluations), in order.
        final_eval: The last evaluation record, if any.
        policy: The trained policy.
    """

    run_dir: Path
    steps_done: int
    history: list[dict[str, Any]]
    final_eval: dict[str, Any] | None
    policy: HFPolicy


# ---------------------------------------------------------------------------------------------- set-up


def build_policy(cfg: TrainConfig, *, progress: bool = True) -> HFPolicy:
    """The start policy of a run: a built-in model or a local HF model folder, with the run's sampling.

    Built-in names (``tiny``, ``smollm2``, ...) resolve through :mod:`turnkit.models.names`.

    Example:
        >>> build_policy(TrainConfig(model="/nonexistent"))
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: no HF model at /nonexistent: expected /nonexistent/config.json
    """
    sampling: dict[str, Any] = {
        "temperature": cfg.sampling.temperature,
        "top_p": cfg.sampling.top_p,
        "max_new_tokens": cfg.sampling.max_new_tokens,
    }
    from turnkit.models.names import load_policy

    return load_policy(cfg.model, progress=progress, **sampling)


def critic_context(cfg: TrainConfig, policy: HFPolicy, sampling_seed: Callable[[], int] | None = None) -> CriticContext:
    """What the run's critics may see: the live policy, a frozen start copy, spare envs, seeds and token limits.

    ``sampling_seed`` returns the sampling seed of the batch being scored (the loop's :class:`ScoredStep`).

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
        >>> ctx = critic_context(TrainConfig(sampling={"max_new_tokens": 8}, max_turns=3, seed=4), policy)
        >>> ctx.seed, ctx.token_budget, ctx.start_policy() is ctx.start_policy()
        (4, 24, True)
    """

    def make_env() -> gymnasium.Env:
        return gymnasium.make(cfg.env_id, split=cfg.split, **cfg.env_kwargs)

    return CriticContext.from_policy(
        policy,
        make_env,
        seed=cfg.seed,
        max_new_tokens=cfg.sampling.max_new_tokens,
        max_turns=cfg.max_turns,
        sampling_seed=sampling_seed,
    )


class ScoredStep:
    """The step whose batch the critics score now, and its sampling seed (what the rollout job played with).

    Example:
        >>> scored = ScoredStep(run_seed=0)
        >>> scored.step = 2
        >>> scored.sampling_seed() == step_sampling_seed(0, 2)
        True
    """

    def __init__(self, run_seed: int, step: int = 0) -> None:
        self.run_seed, self.step = run_seed, step

    def sampling_seed(self) -> int:
        """:func:`step_sampling_seed` of the scored step."""
        return step_sampling_seed(self.run_seed, self.step)


def place_policy(policy: HFPolicy, device: str | None) -> None:
    """Move the learner's model to ``device`` in place (``None``: leave it where it is).

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
        >>> place_policy(policy, "cpu"); policy.device
        device(type='cpu')
    """
    if device is None:
        return
    if device.startswith("cuda"):
        count = torch.cuda.device_count()  # 0 where torch has no CUDA build or sees no GPU
        index = int(device.partition(":")[2] or 0)
        if index >= count:
            raise ConfigError(
                f"TrainConfig.device={device!r}, but torch {torch.__version__} sees {count} CUDA device(s)"
            )
    policy.model.to(device)


def prepare_policy(policy: HFPolicy, cfg: TrainConfig) -> Learner:
    """Apply the run's sampling settings in place and build its :class:`~turnkit.learners.learner.Learner`.

    With a LoRA rank > 0 (:meth:`~turnkit.train.config.TrainConfig.lora_config`) a fresh adapter is attached
    unless the policy has one (the reference is the adapter-disabled base, no copy). With full fine-tuning and
    ``grpo.kl_coef > 0`` the reference is a frozen copy of the start model.
    """
    policy.sampling = dataclasses.replace(policy.sampling, **dataclasses.asdict(cfg.sampling))
    if cfg.rollout.reuse_kv:
        policy.kv = policy.kv if policy.kv is not None else PrefixKV()
        policy.share_prefill = True
    return Learner(policy, cfg.optim, lora=cfg.lora_config(), reference=cfg.grpo.kl_coef > 0, seed=cfg.seed)


def token_exact_chat(policy: HFPolicy, cfg: TrainConfig) -> ChatDelta | None:
    """The :class:`~turnkit.rollout.chat.ChatDelta` of the policy's chat template (token-exact multi-turn contexts).

    A template that rewrites earlier turns cannot give token-exact contexts: with ``update.batch_layout="turns"`` the
    run re-renders each turn's prompt (a warning says so); with ``"episodes"`` it is a :class:`ConfigError`.
    """
    try:
        return ChatDelta(policy.tokenizer)
    except ConfigError as exc:
        if cfg.update.batch_layout == "episodes":
            raise ConfigError(f"update.batch_layout='episodes' needs token-exact contexts: {exc}") from exc
        warnings.warn(f"{exc}; each turn's prompt is rendered again from text", stacklevel=2)
        return None


def sample_task_seeds(rng: np.random.Generator, n: int, cfg: TrainConfig) -> list[int]:
    """``n`` distinct training task seeds, none in the held-out range ``[eval.seed, eval.seed + eval.episodes)``.

    Example:
        >>> seeds = sample_task_seeds(np.random.default_rng(0), 4, TrainConfig(eval={"seed": 0, "episodes": 10}))
        >>> len(set(seeds)), min(seeds) >= 10
        (4, True)
    """
    start, width = cfg.eval.seed, cfg.eval.episodes
    seeds: list[int] = []
    while len(seeds) < n:
        seed = int(rng.integers(0, SEED_SPACE - width))
        seed += width if seed >= start else 0  # skip over the held-out range
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def step_sampling_seed(run_seed: int, step: int) -> int:
    """The policy's sampling seed at ``step`` (a hash of the run seed and the step; needs no RNG state).

    Example:
        >>> step_sampling_seed(0, 1) == step_sampling_seed(0, 1) != step_sampling_seed(0, 2)
        True
    """
    return int(np.random.SeedSequence([run_seed, step]).generate_state(1, dtype=np.uint64)[0] >> 1)


# ---------------------------------------------------------------------------------------------- one step


def rollout_metrics(trajs: Sequence[Trajectory], max_new_tokens: int) -> dict[str, float]:
    """Reward, success, error and length statistics of a rollout batch."""
    clean = [t for t in trajs if t.error is None]
    turns = [s.action for t in clean for s in t.steps]
    n = max(len(clean), 1)
    return {
        "episodes": len(trajs),
        "masked_errors": len(trajs) - len(clean),
        "reward_mean": sum(t.total_reward for t in clean) / n,
        "success_rate": sum(t.success for t in clean) / n,
        "turns_mean": len(turns) / n,
        "completion_tokens": sum(len(a.token_ids) for a in turns),
        "truncated_turn_frac": sum(len(a.token_ids) >= max_new_tokens for a in turns) / max(len(turns), 1),
    }


IDLE_STEPS_WARNING = 5
"""Steps in a row without a policy-changing update (every group tied) after which :func:`train` warns (or the
whole run, if it is shorter but has at least 2 steps)."""


def idle_warning(idle_steps: int, tied_frac: float, *, threshold: int = IDLE_STEPS_WARNING) -> str | None:
    """The warning for a run whose policy has had no signal for ``idle_steps`` steps in a row, once per streak.

    A step is idle when it took no optimizer step or every group tied (``tied_frac == 1``: with
    ``update.skip_zero_advantage=false`` or a KL term the tied rows still make optimizer steps, without reward signal).

    Example:
        >>> idle_warning(4, 1.0) is None, idle_warning(5, 1.0)[:38], idle_warning(2, 1.0, threshold=2) is None
        (True, '5 steps in a row took no optimizer ste', False)
    """
    if idle_steps != threshold:
        return None
    return (
        f"{idle_steps} step{'s' * (idle_steps != 1)} in a row took no optimizer step that could change the policy "
        f"(tied_frac {tied_frac:.2f}): every group's episodes got the same reward, so GRPO has no signal and the "
        "policy is not learning. Check that the env rewards this policy at all (e.g. its answer format: a model "
        "that never writes it needs a short SFT warm start on demonstrations first), or raise grpo.group_size "
        "or sampling.temperature."
    )


def step_advantages(
    trajs: Sequence[Trajectory],
    cfg: TrainConfig,
    turn_rewards: Sequence[Sequence[float]] | None = None,
    *,
    sources: dict[str, Source] | None = None,
    estimator: str | None = None,
    accuracy_range: tuple[float, float] | None = None,
) -> list[tuple[float, ...] | None]:
    """The advantages of one rollout batch: per episode, one per turn (``None``: errored, masked).

    Args:
        trajs: The rollout batch (with group ids).
        cfg: The run's settings (``grpo.estimator``, ``per_turn``, ``gamma``, ``adv_eps``).
        turn_rewards: Dense per-turn rewards (one sequence per trajectory, e.g. the critics'); the advantages
            are then per-turn returns-to-go of these instead of the env rewards.
        sources: The rewards by source (:meth:`~turnkit.critics.registry.CriticSet.sources`), for the
            estimators that keep them apart (``prime``, ``mrt``, ``pav``, ``sweet``); default: the env's alone.
        estimator: The estimator in effect (``grpo.estimator`` with ``"paper"`` resolved); default
            ``grpo.estimator``.
        accuracy_range: The ``prime`` estimator's prompt filter (:meth:`CriticSet.accuracy_range`); default
            the paper's ``[0.2, 0.8]``.
    """
    grpo = cfg.loss_config()
    name = estimator if estimator is not None else run_estimator(grpo.estimator, None)
    if name in SOURCE_ESTIMATORS:
        if sources is None and turn_rewards is not None:
            raise ConfigError(
                f"grpo.estimator={name!r} combines the rewards by source (CriticSet.sources), not summed turn_rewards"
            )
        by_source = sources if sources is not None else env_sources(trajs)
        extra = {"accuracy_range": accuracy_range} if accuracy_range is not None else {}
        return source_advantages(trajs, by_source, estimator=name, gamma=grpo.gamma, **extra)
    per_turn = grpo.per_turn or turn_rewards is not None
    return trajectory_advantages(
        trajs,
        estimator=cast(Estimator, name),
        per_turn=per_turn,
        gamma=grpo.gamma,
        eps=grpo.adv_eps,
        turn_rewards=turn_rewards,
    )


def trained_episodes(advantages: Sequence[Sequence[float] | None], cfg: TrainConfig) -> list[bool]:
    """Which episodes enter the policy loss: scored ones, less tied rows when ``update.skip_zero_advantage`` applies."""
    skip_tied = cfg.update.skip_zero_advantage and cfg.grpo.kl_coef == 0
    return [a is not None and (not skip_tied or any(x != 0.0 for x in a)) for a in advantages]


def update(
    learner: Learner,
    trajs: Sequence[Trajectory],
    cfg: TrainConfig,
    *,
    turn_rewards: Sequence[Sequence[float]] | None = None,
    advantages: Sequence[Sequence[float] | None] | None = None,
) -> dict[str, float]:
    """Advantages, token batch and ``update.ppo_epochs × update.minibatches`` PPO-clip steps on one rollout batch.

    Args:
        learner: The learner of the policy to update in place (its reference gives the KL term's).
        trajs: The rollout batch (with group ids).
        cfg: The run's settings.
        turn_rewards: Dense per-turn rewards (see :func:`step_advantages`).
        advantages: The batch's :func:`step_advantages`, when the caller already has them.

    Returns:
        Token-weighted means of :func:`~turnkit.learners.grpo.policy_loss`'s metrics over the optimizer
        steps, plus ``grad_norm``, ``rows``, ``tied_frac`` (episodes with advantage exactly 0) and
        ``update_tokens``. Without any informative row the policy is left unchanged (``optimizer_steps`` 0).
    """
    grpo = cfg.loss_config()
    policy = learner.policy
    if advantages is None:
        advantages = step_advantages(trajs, cfg, turn_rewards)
    scored = [a for a in advantages if a is not None]
    tied_frac = sum(all(x == 0.0 for x in a) for a in scored) / max(len(scored), 1)
    kept = trained_episodes(advantages, cfg)
    rows = [(t, a) for t, a, k in zip(trajs, advantages, kept, strict=True) if k and a is not None]
    out: dict[str, float] = {"tied_frac": tied_frac, "optimizer_steps": 0.0}
    if not rows:
        out.update(rows=0.0, update_tokens=0.0)
        return out
    pad_id = int(policy.pad_token_id)
    build = build_episode_batch if cfg.update.batch_layout == "episodes" else build_turn_batch
    batch = build([t for t, _ in rows], pad_id=pad_id, advantages=[a for _, a in rows])
    if batch.old_logprobs is None:
        raise ConfigError("the policy recorded no sampling log-probs; GRPO needs AgentTurn.logprobs")
    batch = batch.to(policy.device)
    size = math.ceil(len(batch) / cfg.update.minibatches)
    sums: dict[str, float] = {}
    weight = 0.0
    policy.model.train()
    for _epoch in range(cfg.update.ppo_epochs):
        for mb in batch.minibatches(size):
            metrics, norm = _minibatch_step(learner, mb, cfg, grpo)
            w = metrics["num_tokens"]
            for key, value in (*metrics.items(), ("grad_norm", norm)):
                if key != "num_tokens":
                    sums[key] = sums.get(key, 0.0) + w * value
            weight += w
            out["optimizer_steps"] += 1
    policy.model.eval()
    out.update({k: v / max(weight, 1.0) for k, v in sums.items()})
    out.update(rows=float(len(batch)), update_tokens=float(batch.attention_mask.sum()))
    return out


def _minibatch_step(
    learner: Learner, mb: TurnBatch, cfg: TrainConfig, grpo: GRPOConfig
) -> tuple[dict[str, float], float]:
    """One optimizer step on ``mb`` in micro-batches (gradients accumulate).

    Each part has at most ``update.micro_batch_tokens`` padded tokens and ``update.micro_batch_rows`` rows, and
    its log-probs come from :func:`~turnkit.learners.logprobs.model_token_logprobs` (no full-vocabulary logits). A
    minibatch whose whole logits fit :data:`~turnkit.learners.logprobs.PLAIN_LOGITS_BYTES` takes one pass;
    one that takes several is sorted by row length first (:mod:`turnkit.train.update_layout`).
    """
    policy = learner.policy
    learner.zero_grad()
    sums: dict[str, float] = {"loss": 0.0}
    tokens = 0.0
    budget = 0 if logits_fit(policy.model, mb.input_ids.shape) else cfg.update.micro_batch_tokens  # small: one pass
    parts = list(mb.token_slices(budget, cfg.update.micro_batch_rows))
    if len(parts) > 1:  # several passes: rows of near-equal length share one (little padding)
        parts = list(length_sorted(mb).token_slices(budget, cfg.update.micro_batch_rows))
    for part in parts:
        ref = _reference_logprobs(learner, part, cfg) if grpo.kl_coef > 0 else None  # before the graph
        logp = model_token_logprobs(
            policy.model, part.input_ids, part.attention_mask, part.loss_mask, temperature=cfg.sampling.temperature
        )
        assert part.old_logprobs is not None  # checked on the whole batch
        loss, metrics = policy_loss(logp, part.old_logprobs, part.advantages, part.loss_mask, grpo, ref_logprobs=ref)
        share = aggregation_share(part.loss_mask, mb.loss_mask, grpo.loss_agg)
        (loss * share).backward()
        del logp, loss
        sums["loss"] += share * metrics.pop("loss")
        n = metrics["num_tokens"]
        for key, value in metrics.items():
            if key.endswith("_max"):
                sums[key] = max(sums.get(key, -math.inf), value)
            elif key != "num_tokens":
                sums[key] = sums.get(key, 0.0) + n * value
        tokens += n
    norm = learner.step()
    means = {k: v if k == "loss" or k.endswith("_max") else v / max(tokens, 1.0) for k, v in sums.items()}
    return {**means, "num_tokens": tokens}, norm


@torch.no_grad()
def _reference_logprobs(learner: Learner, mb: TurnBatch, cfg: TrainConfig) -> torch.Tensor:
    with learner.reference() as ref:
        return model_token_logprobs(
            ref, mb.input_ids, mb.attention_mask, mb.loss_mask, temperature=cfg.sampling.temperature
        )


def evaluate_policy(
    policy: HFPolicy,
    cfg: TrainConfig,
    *,
    progress: bool = False,
    agent: Any = None,
    out_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Held-out evaluation (seeds ``eval.seed ..``) at ``eval.temperature``; an ``eval_*`` metrics record.

    ``agent`` generates instead of ``policy`` (a backend's generator, already at ``eval.temperature``). With
    ``out_dir`` the episodes are kept there as well (``trajectories.jsonl`` and ``summary.json``, which
    ``turnkit view`` shows).
    """
    view = agent if agent is not None else policy.with_sampling(temperature=cfg.eval.temperature)
    summary = evaluate(
        cfg.env_id,
        view,
        episodes=cfg.eval.episodes,
        seed=cfg.eval.seed,
        split=cfg.split,
        batch_size=64,
        env_kwargs=cfg.env_kwargs,
        progress=progress,
        out_dir=out_dir,
    )
    return summary.metrics()


# ---------------------------------------------------------------------------------------------- checkpoints


def save_checkpoint(
    run: Run,
    step: int,
    policy: HFPolicy,
    optimizer: torch.optim.Optimizer,
    rng: np.random.Generator,
    critics: CriticSet | None = None,
    *,
    pending: dict[int, RolloutHandle] | None = None,
) -> Path:
    """Write an atomic checkpoint: adapter (LoRA) or full weights, optimizer, RNG states, step and config.

    Learned critics write their adapters and optimizer states under ``critics/<name>/``. In one-step-off
    runs the rollouts already generated for later steps (``pending``; waited for here) go to ``pending.pkl``,
    so a resumed run trains on the same batches as an uninterrupted one.
    :meth:`Run.save <turnkit.train.run.Run.save>` stages it atomically with the run's config and a manifest of
    sizes and checksums, so a resume can tell an intact checkpoint from a damaged one.
    """

    def write(tmp: Path) -> None:
        if critics is not None:
            critics.save(tmp / "critics")
        save_policy_state(tmp, policy, optimizer)
        if pending:
            ahead = {step: (handle.result(), handle.version) for step, handle in sorted(pending.items())}
            (tmp / "pending.pkl").write_bytes(pickle.dumps(ahead))

    # HFPolicy draws from its own generator only for contexts without an episode seed.
    state = {"task_rng": rng.bit_generator.state, "policy_rng": policy.rng_state()}
    return run.save(step, write, state)


def restore_checkpoint(
    ckpt: Path,
    state: dict[str, Any],
    policy: HFPolicy,
    optimizer: torch.optim.Optimizer,
    rng: np.random.Generator,
    critics: CriticSet | None = None,
    *,
    pending: dict[int, RolloutHandle] | None = None,
) -> int:
    """Restore weights, optimizer, RNG states (and learned critics) in place from ``ckpt``; returns its step.

    ``state`` is the checkpoint's ``state.json`` as :meth:`Run.start <turnkit.train.run.Run.start>` read and
    checked it (the config upgraded to the current shape first). A one-step-off checkpoint's rollouts for later
    steps are put into ``pending`` (if given). Every file is read before anything is changed, so a damaged
    checkpoint leaves the run untouched.

    Raises:
        CheckpointError: A file is missing or cannot be read (the message names it).
    """
    with reading(ckpt / "state.json", base=ckpt):
        task_rng, policy_rng = state["task_rng"], state["policy_rng"]
    policy_state = read_policy_state(ckpt, policy)
    ahead: dict[int, tuple[Any, int]] = {}
    if (ckpt / "pending.pkl").exists():
        with reading(ckpt / "pending.pkl", base=ckpt):
            ahead = pickle.loads((ckpt / "pending.pkl").read_bytes())
    for name in critics.stateful() if critics is not None else []:
        with reading(ckpt / "critics" / name, base=ckpt):
            if not (ckpt / "critics" / name).is_dir():
                raise FileNotFoundError(f"no state of critic {name!r}")
    if critics is not None:
        with reading(ckpt / "critics", base=ckpt):
            critics.load(ckpt / "critics")
    policy_state.apply(policy, optimizer)
    rng.bit_generator.state = task_rng
    policy.set_rng_state(policy_rng)
    if pending is not None:
        pending.clear()
        pending.update({s: DoneRollout(rollout, version) for s, (rollout, version) in ahead.items()})
    return int(state["step"])


# ---------------------------------------------------------------------------------------------- the loop


def train(
    cfg: TrainConfig, *, resume: bool = False, progress: bool = True, policy: HFPolicy | None = None
) -> TrainResult:
    """Run (or, with ``resume``, continue) the GRPO/RLOO loop described in the module docstring.

    The run directory is locked for the whole call, and resumed, logged and checkpointed through
    :class:`~turnkit.train.run.Run`.

    Args:
        cfg: The run's settings.
        resume: Continue from the newest intact checkpoint in ``cfg.out_dir`` (a fresh start if there is
            none); damaged newer checkpoints are skipped with a :class:`~turnkit.errors.CheckpointWarning`.
        progress: Show progress bars.
        policy: The start policy; default :func:`build_policy` (``cfg.model``). It is trained in place.

    Returns:
        The run directory, history, final evaluation and trained policy.

    Raises:
        RunLockedError: Another process is using ``cfg.out_dir``.
        CheckpointError: ``resume`` found checkpoints, but none is intact.
    """
    defaults = TrainConfig().to_dict()  # keys newer than a checkpoint take their defaults
    run = Run(cfg.out_dir, cfg.to_dict(), resumable=RESUMABLE_CHANGES, defaults=defaults, upgrade=upgrade_config,
              tensorboard=cfg.log.tensorboard)  # fmt: skip
    with run:
        return _train(run, cfg, resume=resume, progress=progress, policy=policy)


def _train(run: Run, cfg: TrainConfig, *, resume: bool, progress: bool, policy: HFPolicy | None) -> TrainResult:
    policy = policy if policy is not None else build_policy(cfg, progress=progress)  # after: a bad log fails fast
    place_policy(policy, cfg.device)
    scored = ScoredStep(cfg.seed)  # critics that sample follow the scored batch's seed, in every rollout mode
    # before the adapter: critics copy the start policy
    critics = build_critics(cfg.critic, critic_context(cfg, policy, scored.sampling_seed))
    estimator = run_estimator(cfg.grpo.estimator, critics)  # "paper" resolved (or refused) before any rollout
    learner = prepare_policy(policy, cfg)
    optimizer = learner.optimizer
    rng = np.random.default_rng(cfg.seed)
    pending: dict[int, RolloutHandle] = {}  # submitted rollouts by the step that will learn from them

    def restore(ckpt: Path, state: dict[str, Any]) -> int:
        return restore_checkpoint(ckpt, state, policy, optimizer, rng, critics, pending=pending)

    start_step, _ = run.start(restore, resume=resume)
    chat = token_exact_chat(policy, cfg)
    source = build_rollouts(cfg, policy, run_dir=run.dir, chat=chat, start_step=start_step)
    evals = Cadence(cfg.eval.every, cfg.steps, enabled=cfg.eval.every > 0)
    saves = Cadence(cfg.log.checkpoint_every, cfg.steps)
    kept = Cadence(cfg.log.rollouts_every, cfg.steps, enabled=cfg.log.rollouts_every > 0)
    staleness = cfg.rollout.max_staleness if cfg.rollout.async_rollout else 0
    final_eval: dict[str, Any] | None = None
    idle_steps = 0
    bar = tqdm(range(start_step + 1, cfg.steps + 1), desc="grpo", disable=not progress, unit="step")
    try:
        for step in bar:
            lr = learner.set_lr(step - 1)  # the schedule counts from 0
            for ahead in range(step, min(step + staleness, cfg.steps) + 1):  # this step's job, and async ones
                if ahead not in pending:
                    seeds = sample_task_seeds(rng, cfg.groups_per_step, cfg)
                    job = RolloutJob(ahead, seeds, step_sampling_seed(cfg.seed, ahead), cfg.grpo.group_size)
                    pending[ahead] = source.submit(job)
            handle = pending.pop(step)
            waited = time.perf_counter()
            trajs, timing = handle.result()
            record: dict[str, Any] = {"step": step, "lr": lr, **rollout_metrics(trajs, cfg.sampling.max_new_tokens)}
            record.update(policy_lag=step - 1 - handle.version, rollout_wait_s=time.perf_counter() - waited)
            scored.step = step
            scores = critics.score(trajs) if critics is not None else None
            if scores is not None:
                record.update(scores.metrics)
            by_source = None
            if critics is not None and scores is not None and estimator in SOURCE_ESTIMATORS:
                by_source = critics.sources(trajs, scores)
            turn_rewards = scores.turn_rewards if scores is not None else None
            accuracy_range = critics.accuracy_range() if critics is not None else None
            advantages = step_advantages(
                trajs, cfg, turn_rewards, sources=by_source, estimator=estimator, accuracy_range=accuracy_range
            )
            if kept.due(step):
                credit = scores.credit if scores is not None else None
                rows = learner_records(trajs, advantages, trained_episodes(advantages, cfg), credit=credit)
                write_step_rollouts(run.dir, step, rows)
            start = time.perf_counter()  # update_s excludes the critics (logged as critic_s)
            record.update(update(learner, trajs, cfg, advantages=advantages))
            record["update_s"] = time.perf_counter() - start
            idle = record["optimizer_steps"] == 0 or record["tied_frac"] == 1.0
            idle_steps = idle_steps + 1 if idle else 0
            threshold = min(IDLE_STEPS_WARNING, max(cfg.steps, 2))  # a one-step smoke run stays quiet
            if (message := idle_warning(idle_steps, record["tied_frac"], threshold=threshold)) is not None:
                warnings.warn(message, stacklevel=2)
            record.update(source.sync(policy, step))
            record.update(timing)
            record["gen_tokens_per_s"] = record["completion_tokens"] / max(timing["generate_s"], 1e-9)
            record["train_tokens_per_s"] = (
                record["update_tokens"] * cfg.update.ppo_epochs / max(record["update_s"], 1e-9)
            )
            run.log(record)
            bar.set_postfix(reward=f"{record['reward_mean']:.2f}", success=f"{record['success_rate']:.2f}")
            if evals.due(step):
                generator = source.agent(temperature=cfg.eval.temperature)
                kept_at = run.dir / "eval" / f"step-{step:06d}"
                final_eval = {"step": step, **evaluate_policy(policy, cfg, agent=generator, out_dir=kept_at)}
                run.log(final_eval)
            if saves.due(step):
                save_checkpoint(run, step, policy, optimizer, rng, critics, pending=pending)
    finally:
        source.close()
        if critics is not None:
            critics.close()
    history = run.finish(CURVES, title=f"{cfg.env_id} GRPO")
    return TrainResult(run.dir, max(start_step, cfg.steps), history, final_eval, policy)
