r"""IQLearn for language: TD-regularised MLE on demonstrations, offline or with policy samples mixed in.

One optimizer step (the schedule, shuffling and clipping are :func:`~turnkit.models.sft.train_sft`'s, so that
``lam = 0`` trains bit for bit the same weights as SFT on the same rows)::

    rows   = next batch_size demonstration rows of a seeded permutation
             (+ round(alpha * batch_size) rows of the policy's own samples when alpha > 0)
    q, v   = token_q_values(model(batch).logits)            # Q = logits, V = logsumexp(logits)
    loss   = iqlearn_loss(q, v, mask, lam, gamma)           # −log π + λ (V + log π − γ V')², V' = 0 after EOS
    AdamW step with gradient clipping and a warmup + cosine learning-rate schedule

Demonstrations are the env's oracle episodes (:func:`~turnkit.rollout.demos.collect_demos`) or a JSONL of
conversations in the OpenAI chat format (``demos=path``); either way one row per agent turn, with the loss on
the agent's tokens only (env and user tokens are context). **Online** (``alpha > 0``): every ``online_every``
steps the current policy plays ``online_episodes`` fresh training episodes; their turns (the exact sampled
ids) enter the TD term with weight ``alpha`` (0.1 in the paper), never the likelihood term.

A run directory holds ``config.json``, ``metrics.jsonl``, ``checkpoints/`` (weights, optimizer, RNG, the
policy-sample pool), ``curves.png`` and, with ``eval_episodes > 0``, held-out evaluations (greedy by default)
on seeds the policy samples never use. ``resume=True`` continues from the newest intact checkpoint and
repeats an uninterrupted run exactly.

Example:
    >>> import tempfile
    >>> from turnkit.agents.hf import HFPolicy
    >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    >>> tok = build_tiny_tokenizer()
    >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(32, 1, 2, 64)), tok, max_new_tokens=4)
    >>> cfg = IQLearnConfig(steps=3, batch_size=4, demo_episodes=4, lam=0.1, eval_episodes=0,
    ...                     out_dir=tempfile.mkdtemp())
    >>> result = train_iqlearn(cfg, policy=policy, progress=False)
    >>> result.steps_done, sorted(k for k in result.history[-1] if k.startswith("td"))
    (3, ['td_sq'])
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import gymnasium
import numpy as np
import torch
from tqdm.auto import tqdm

from turnkit.agents.hf import HFPolicy
from turnkit.checkpoint import reading
from turnkit.configs import check_float, check_int, check_str, from_dict, table_field, upgrade_tables
from turnkit.errors import ConfigError, DataError
from turnkit.learners.config import flat_keys
from turnkit.learners.irl import iqlearn_loss, token_q_values
from turnkit.learners.learner import Learner, LoraConfig, OptimConfig
from turnkit.models.sft import batch_order
from turnkit.rollout.batch import TokenRow, TurnBatch, collate
from turnkit.rollout.collect import collect_batch
from turnkit.rollout.demos import collect_demos, demo_rows
from turnkit.rollout.evaluate import evaluate
from turnkit.train.config import EVAL_SEED_START
from turnkit.train.policy_state import read_policy_state, save_policy_state
from turnkit.train.run import Cadence, Run

RESUMABLE_CHANGES = frozenset({"eval_every", "checkpoint_every", "out_dir", "eval_episodes"})
"""Config fields a resumed run may change; any other difference is a different run (ConfigError)."""
IQLEARN_OPTIM = OptimConfig(lr=3e-3, warmup_steps=20, schedule="cosine", min_lr_ratio=0.1)
"""Default :attr:`IQLearnConfig.optim`."""
LEGACY_KEYS = flat_keys("lr", "warmup_steps", "min_lr_ratio", "weight_decay", "max_grad_norm", "lora_r", "lora_alpha")
"""Flat keys of configs written before the ``optim`` and ``lora`` tables: ``{old: (table, key)}``."""


def upgrade_iqlearn_config(saved: Mapping[str, Any]) -> dict[str, Any]:
    """A checkpoint's saved config in the current shape (flat keys moved quietly, tables in full).

    Example:
        >>> upgrade_iqlearn_config({"lr": 0.01, "lora_r": 2})["optim"]["lr"], upgrade_iqlearn_config({})
        (0.01, {})
    """
    return upgrade_tables(IQLearnConfig, saved)


@dataclass(frozen=True)
class IQLearnConfig:
    """Settings of one IQLearn run (:func:`train_iqlearn`). Validated on construction.

    Example:
        >>> IQLearnConfig(lam=0.5).lam
        0.5
        >>> IQLearnConfig(alpha=1.5)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: IQLearnConfig.alpha must be a finite number >= 0 and < 1, got 1.5
    """

    FLAT_KEYS: ClassVar[dict[str, tuple[str, str]]] = LEGACY_KEYS
    """Keys written flat before the ``optim`` and ``lora`` tables; they move into them with a ``FutureWarning``."""

    # --- demonstrations
    env_id: str = "turnkit/MathEpisodes-v0"
    """Env of the oracle demonstrations, the online samples and the evaluation."""
    env_kwargs: dict[str, Any] = field(default_factory=lambda: {"difficulty": 1})
    """Extra ``gymnasium.make`` arguments."""
    split: str = "id"
    """Task split of the demonstrations, samples and evaluation."""
    demos: str | None = None
    """A JSONL file of conversations in the OpenAI chat format; ``None``: the env's oracle demonstrations."""
    demo_episodes: int = 2000
    """Oracle demonstration episodes (seeds ``demo_seed ..``) when ``demos`` is ``None``."""
    demo_seed: int = 0
    """First oracle demonstration seed."""
    # --- policy
    model: str = "scratch"
    """``"scratch"`` (a fresh tiny model with the embedded recipe's tokenizer and size, seeded by ``seed``: the
    embedded default's recipe with IQLearn instead of SFT), a built-in model's name (``"tiny"``, the embedded SFT
    policy; ``"smollm2"``: :mod:`turnkit.models.names`) or a local HF model folder."""
    lora: LoraConfig = field(default_factory=lambda: LoraConfig(r=0))
    """The LoRA adapter (:class:`~turnkit.learners.learner.LoraConfig`); rank ``0`` (the default) trains every
    weight."""
    # --- IQLearn
    lam: float = 0.1
    """TD weight ``λ`` (``0`` is MLE/SFT exactly)."""
    gamma: float = 0.99
    """Token discount ``γ``."""
    stop_grad_next: bool = False
    """Treat ``V(s')`` as a constant target."""
    alpha: float = 0.0
    """Weight of the policy's own samples in the TD term (online IQLearn; the paper uses 0.1); ``0``: offline."""
    online_every: int = 25
    """Online: refresh the policy-sample pool every this many steps."""
    online_episodes: int = 32
    """Online: episodes played per refresh."""
    temperature: float = 1.0
    """Online sampling temperature."""
    max_new_tokens: int = 24
    """Generation limit per turn (samples and evaluation)."""
    # --- optimisation (as turnkit.models.sft.SFTConfig)
    steps: int = 400
    """Optimizer steps."""
    batch_size: int = 32
    """Demonstration rows per step."""
    optim: OptimConfig = field(default_factory=lambda: IQLEARN_OPTIM)
    """AdamW and its schedule (:class:`~turnkit.learners.learner.OptimConfig`): peak ``lr`` 3e-3, 20 warmup steps,
    then cosine to ``min_lr_ratio`` 0.1 of it, as SFT's."""
    seed: int = 0
    """Run seed: model initialisation (``scratch``), row order, online task and sampling seeds."""
    # --- evaluation, checkpoints
    eval_episodes: int = 200
    """Held-out episodes evaluated (greedy) after the last step (``0``: none)."""
    eval_every: int = 0
    """Also evaluate every this many steps (``0``: only at the end)."""
    eval_seed: int = EVAL_SEED_START
    """First held-out seed; online samples never use ``[eval_seed, eval_seed + eval_episodes)``."""
    checkpoint_every: int = 100
    """Checkpoint every this many steps and after the last (``0``: only after the last)."""
    out_dir: str = "runs/iqlearn"
    """Run directory."""

    def __post_init__(self) -> None:
        check_str(self, "env_id", "split", "model", "out_dir")
        if not isinstance(self.env_kwargs, dict):
            raise ConfigError(f"IQLearnConfig.env_kwargs must be a dict, got {self.env_kwargs!r}")
        check_int(self, "demo_episodes", "online_every", "online_episodes", "max_new_tokens", "steps", "batch_size")
        check_int(self, "eval_episodes", "eval_every", "checkpoint_every", "demo_seed", low=0)
        check_float(self, "lam", low=0)
        check_float(self, "gamma", low=0, high=1)
        check_float(self, "alpha", low=0, high=1, open_high=True)
        check_float(self, "temperature", low=0, open_low=True)
        table_field(self, "lora", LoraConfig(r=0))
        table_field(self, "optim", IQLEARN_OPTIM)

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-ready data."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "config") -> IQLearnConfig:
        """Build from a mapping; unknown keys raise :class:`ConfigError` naming them and ``source``.

        Flat keys of configs written before the ``optim`` and ``lora`` tables (``lr``, ``lora_r`` ...) move into
        them with one ``FutureWarning``.

        Example:
            >>> IQLearnConfig.from_dict({"lamda": 1.0})
            Traceback (most recent call last):
            ...
            turnkit.errors.ConfigError: config: unknown IQLearnConfig key 'lamda' (did you mean 'lam'?)
            >>> IQLearnConfig.from_dict({"optim": {"lr": 1e-3}}).optim.warmup_steps
            20
        """
        return from_dict(cls, data, source=source)

    @property
    def policy_rows_per_step(self) -> int:
        """Policy-sample rows added to each step's batch (``0`` offline)."""
        return max(1, round(self.alpha * self.batch_size)) if self.alpha > 0 else 0


@dataclass
class IQLearnResult:
    """What :func:`train_iqlearn` hands back: run folder, every metrics record, last evaluation, the policy."""

    run_dir: Path
    steps_done: int
    history: list[dict[str, Any]]
    final_eval: dict[str, Any] | None
    policy: HFPolicy


# ---------------------------------------------------------------------------------------------- parts


def build_start_policy(cfg: IQLearnConfig, *, progress: bool = True) -> HFPolicy:
    """The run's start policy (``cfg.model``), generating up to ``cfg.max_new_tokens`` per turn.

    Example:
        >>> build_start_policy(IQLearnConfig(model="/nonexistent"))
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: no HF model at /nonexistent: expected /nonexistent/config.json
    """
    if cfg.model == "scratch":
        from turnkit.models.embedded import DEFAULT_RECIPE, build_tiny_tokenizer_for
        from turnkit.models.tiny import build_tiny_model

        tokenizer = build_tiny_tokenizer_for(DEFAULT_RECIPE)
        model = build_tiny_model(tokenizer, DEFAULT_RECIPE.model_config(), seed=cfg.seed)
        return HFPolicy(model, tokenizer, max_new_tokens=cfg.max_new_tokens)
    from turnkit.models.names import load_policy

    return load_policy(cfg.model, progress=progress, max_new_tokens=cfg.max_new_tokens)


def demonstration_rows(cfg: IQLearnConfig, tokenizer: Any) -> list[TokenRow]:
    """The run's demonstration rows: ``cfg.demos`` (chat JSONL) or the env oracle's clean, solved episodes.

    Raises:
        DataError: A bad line in ``cfg.demos`` (naming file and line), or no demonstrations at all.
    """
    if cfg.demos is not None:
        from turnkit.rollout.chat_demos import chat_demo_rows

        return chat_demo_rows(cfg.demos, tokenizer)
    demos = collect_demos(
        cfg.env_id, episodes=cfg.demo_episodes, seed=cfg.demo_seed, split=cfg.split, env_kwargs=cfg.env_kwargs
    )
    if not demos.trajectories:
        raise DataError(
            f"the {cfg.env_id} oracle solved none of {cfg.demo_episodes} episodes "
            f"({demos.dropped_errors} errors, {demos.dropped_failures} failures): no demonstrations"
        )
    return demo_rows(demos.trajectories, tokenizer)


def iqlearn_batch_loss(
    model: torch.nn.Module, batch: TurnBatch, cfg: IQLearnConfig, *, eos_id: int | None, expert: torch.Tensor | None
) -> tuple[torch.Tensor, dict[str, float]]:
    """Forward ``batch`` and return :func:`~turnkit.learners.irl.iqlearn_loss` with the run's settings.

    A transition that emits EOS is terminal (``V(s') = 0``).
    """
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    q, v = token_q_values(logits, batch.input_ids, batch.loss_mask)
    terminal = batch.input_ids == eos_id if eos_id is not None else None
    return iqlearn_loss(
        q,
        v,
        batch.loss_mask,
        lam=cfg.lam,
        gamma=cfg.gamma,
        terminal=terminal,
        stop_grad_next=cfg.stop_grad_next,
        expert=expert,
        alpha=cfg.alpha,
    )


def online_task_seeds(cfg: IQLearnConfig, step: int) -> list[int]:
    """Task seeds of the policy samples taken at ``step``: a hash of (run seed, step), outside the eval range.

    Example:
        >>> cfg = IQLearnConfig(online_episodes=3, eval_seed=0, eval_episodes=10)
        >>> s = online_task_seeds(cfg, 5)
        >>> s == online_task_seeds(cfg, 5), min(s) >= 10, len(s)
        (True, True, 3)
    """
    rng = np.random.default_rng([cfg.seed, step, 1])
    width = cfg.eval_episodes
    seeds = rng.integers(0, 2**31 - width, size=cfg.online_episodes)
    return [int(s) + (width if s >= cfg.eval_seed else 0) for s in seeds]


def sample_policy_rows(
    policy: HFPolicy, envs: Sequence[gymnasium.Env], cfg: IQLearnConfig, step: int
) -> tuple[list[TokenRow], dict[str, float]]:
    """Play one episode per env with the current policy; one row per clean turn (its exact sampled ids).

    Returns:
        ``(rows, metrics)`` with the samples' ``sample_success`` and ``sample_errors``.
    """
    seed = int(np.random.SeedSequence([cfg.seed, step, 2]).generate_state(1)[0])
    agent = policy.with_sampling(temperature=cfg.temperature, seed=seed)
    trajs = collect_batch(envs, agent, online_task_seeds(cfg, step)[: len(envs)])
    rows = [
        TokenRow.from_prompt_completion(turn.action.prompt_token_ids, turn.action.token_ids)
        for traj in trajs
        if traj.error is None
        for turn in traj.steps
        if turn.action.token_ids and turn.action.prompt_token_ids
    ]
    clean = [t for t in trajs if t.error is None]
    metrics = {
        "sample_success": sum(t.success for t in clean) / max(len(clean), 1),
        "sample_errors": float(len(trajs) - len(clean)),
    }
    return rows, metrics


def evaluate_iqlearn(policy: HFPolicy, cfg: IQLearnConfig) -> dict[str, Any]:
    """Greedy held-out evaluation on ``cfg.eval_episodes`` seeds from ``cfg.eval_seed``; an ``eval_*`` record."""
    summary = evaluate(
        cfg.env_id,
        policy.with_sampling(temperature=0.0),
        episodes=cfg.eval_episodes,
        seed=cfg.eval_seed,
        split=cfg.split,
        batch_size=64,
        env_kwargs=cfg.env_kwargs,
        progress=False,
    )
    return summary.metrics()


# ---------------------------------------------------------------------------------------------- checkpoints


def _rows_json(rows: Sequence[TokenRow]) -> list[list[list[int]]]:
    return [[list(r.input_ids), [int(m) for m in r.loss_mask]] for r in rows]


def _rows_from_json(data: Sequence[Sequence[Sequence[int]]]) -> list[TokenRow]:
    return [TokenRow(tuple(ids), tuple(bool(m) for m in mask), (0.0,) * len(ids)) for ids, mask in data]


def save_iqlearn_checkpoint(
    run: Run, step: int, policy: HFPolicy, optimizer: torch.optim.Optimizer, pool: Sequence[TokenRow]
) -> Path:
    """An atomic checkpoint: weights (or adapter), optimizer, torch RNG, step, config and the policy-sample pool."""
    write = lambda tmp: save_policy_state(tmp, policy, optimizer)  # noqa: E731
    return run.save(step, write, {"pool": _rows_json(pool)})


def _restore(ckpt: Path, state: dict[str, Any], policy: HFPolicy, optimizer: torch.optim.Optimizer) -> list[TokenRow]:
    """Restore weights, optimizer and RNG in place from ``ckpt``; returns its policy-sample pool.

    ``state`` is the checkpoint's ``state.json`` as :meth:`Run.start <turnkit.train.run.Run.start>` read and
    checked it. Every file is read before anything changes, so a damaged checkpoint leaves the run untouched.
    """
    with reading(ckpt / "state.json", base=ckpt):
        pool = _rows_from_json(state["pool"])
    read_policy_state(ckpt, policy).apply(policy, optimizer)
    return pool


# ---------------------------------------------------------------------------------------------- the loop


def train_iqlearn(
    cfg: IQLearnConfig,
    *,
    resume: bool = False,
    progress: bool = True,
    policy: HFPolicy | None = None,
    rows: Sequence[TokenRow] | None = None,
) -> IQLearnResult:
    """Run (or continue) IQLearn as described in the module docstring; the run folder is locked meanwhile.

    Args:
        cfg: The run's settings.
        resume: Continue from the newest intact checkpoint in ``cfg.out_dir`` (a fresh start if none).
        progress: Show a progress bar.
        policy: The start policy (trained in place); default :func:`build_start_policy`.
        rows: The demonstration rows; default :func:`demonstration_rows`.

    Returns:
        The run folder, metrics history, last evaluation and the trained policy.

    Raises:
        DataError: Bad or empty demonstrations, or a batch without a loss token.
        RunLockedError: Another process uses ``cfg.out_dir``.
    """
    defaults = IQLearnConfig().to_dict()  # keys newer than a checkpoint take their defaults
    with Run(
        cfg.out_dir, cfg.to_dict(), resumable=RESUMABLE_CHANGES, defaults=defaults, upgrade=upgrade_iqlearn_config
    ) as run:
        return _train(run, cfg, resume=resume, progress=progress, policy=policy, rows=rows)


def _train(
    run: Run,
    cfg: IQLearnConfig,
    *,
    resume: bool,
    progress: bool,
    policy: HFPolicy | None,
    rows: Sequence[TokenRow] | None,
) -> IQLearnResult:
    policy = policy if policy is not None else build_start_policy(cfg, progress=progress)
    rows = list(rows) if rows is not None else demonstration_rows(cfg, policy.tokenizer)
    if not rows:
        raise DataError("train_iqlearn got no demonstration rows")
    learner = Learner(policy, cfg.optim, lora=cfg.lora, total_steps=cfg.steps, seed=cfg.seed)
    optimizer = learner.optimizer
    pad_id, eos_id = int(policy.tokenizer.pad_token_id), policy.tokenizer.eos_token_id
    order = batch_order(len(rows), cfg.batch_size, cfg.steps, np.random.default_rng(cfg.seed))
    start_step, pool = run.start(lambda ckpt, state: _restore(ckpt, state, policy, optimizer), resume=resume)
    pool = pool or []
    online = cfg.online_episodes if cfg.alpha > 0 else 0
    envs = [gymnasium.make(cfg.env_id, split=cfg.split, **cfg.env_kwargs) for _ in range(online)]
    evals = Cadence(cfg.eval_every, cfg.steps, enabled=cfg.eval_episodes > 0)
    saves = Cadence(cfg.checkpoint_every, cfg.steps)
    final_eval: dict[str, Any] | None = None
    bar = tqdm(range(start_step, cfg.steps), desc=f"iqlearn λ={cfg.lam:g}", disable=not progress, unit="step")
    try:
        for step in bar:
            record = _step(learner, rows, order[step], pool, envs, cfg, step, pad_id, eos_id)
            pool = record.pop("_pool")
            run.log(record)
            bar.set_postfix(nll=f"{record['nll']:.3f}", td=f"{record['td_sq']:.3f}")
            done = step + 1
            if evals.due(done):
                final_eval = {"step": done, **evaluate_iqlearn(policy, cfg)}
                run.log(final_eval)
            if saves.due(done):
                save_iqlearn_checkpoint(run, done, policy, optimizer, pool)
    finally:
        for env in envs:
            env.close()
    policy.model.eval()
    history = run.finish(["nll", "td_sq", "reward_mean", "eval_success"], title="IQLearn")
    return IQLearnResult(run.dir, max(start_step, cfg.steps), history, final_eval, policy)


def _step(
    learner: Learner,
    rows: Sequence[TokenRow],
    indices: Sequence[int],
    pool: list[TokenRow],
    envs: Sequence[gymnasium.Env],
    cfg: IQLearnConfig,
    step: int,
    pad_id: int,
    eos_id: int | None,
) -> dict[str, Any]:
    """One optimizer step (0-based ``step``), refreshing the policy-sample pool first when it is due."""
    start = time.perf_counter()
    policy = learner.policy
    record: dict[str, Any] = {"step": step + 1}
    if envs and (step % cfg.online_every == 0 or not pool):
        policy.model.eval()
        fresh, sample_metrics = sample_policy_rows(policy, envs, cfg, step)
        pool = fresh or pool
        record.update(sample_metrics)
    policy.model.train()
    lr = learner.set_lr(step)
    batch_rows = [rows[i] for i in indices]
    expert = None
    if cfg.alpha > 0:
        if not pool:
            raise DataError(f"step {step + 1}: the policy produced no clean turn to mix in (alpha={cfg.alpha})")
        picks = np.random.default_rng([cfg.seed, step, 3]).integers(0, len(pool), size=cfg.policy_rows_per_step)
        batch_rows += [pool[int(i)] for i in picks]
        expert = torch.tensor([True] * len(indices) + [False] * len(picks))
    batch = collate(batch_rows, pad_id=pad_id).to(policy.device)
    loss, metrics = iqlearn_batch_loss(policy.model, batch, cfg, eos_id=eos_id, expert=expert)
    norm = learner.minimize(loss)
    record.update(metrics)
    record.update({"loss": float(loss.detach()), "lr": lr, "grad_norm": norm, "step_s": time.perf_counter() - start})
    record["_pool"] = pool
    return record
