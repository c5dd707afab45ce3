"""The DPO training loop: (conservative) DPO on step-level or multi-turn preference pairs, LoRA on an HFPolicy.

The losses live in :mod:`turnkit.learners.dpo` (:func:`~turnkit.learners.dpo.dpo_loss`,
:func:`~turnkit.learners.dpo.conservative_epsilon`, :func:`~turnkit.learners.dpo.split_at_divergence`); this
module only feeds them. It is what ``turnkit synth`` runs after each search, and what the SWEET-RL study uses
for its step-level and multi-turn DPO baselines.

**Pairs** are :class:`~turnkit.search.pairs.PreferencePair` rows (one turn each side; the loss covers only
the tokens after the two turns diverge), :class:`~turnkit.learners.dpo.DPOExample` rows, or
:class:`SegmentedPair` rows whose sides are several ``(prompt_ids, completion_ids)`` segments, e.g. all turns of
an episode (multi-turn trajectory DPO: a side's log-prob is the sum over its segments).

**Schedule**: ``epochs`` passes over a fresh seeded permutation each (the last batch of an epoch may be short),
or, with ``steps`` set, exactly that many full batches drawn from a stream of seeded permutations.

The reference is the policy with its LoRA adapter disabled (``HFPolicy.reference()``), i.e. the SFT start;
its log-probs are computed once before training.

Example:
    >>> DPOConfig(steps=5).steps, DPOConfig().epochs
    (5, 2)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Union

import numpy as np
import torch
from torch import Tensor

from turnkit.configs import check_choice, check_float, check_int, table_field, to_dict, upgrade_tables
from turnkit.errors import DataError
from turnkit.learners.config import check_rank, flat_keys
from turnkit.learners.dpo import DPOExample, conservative_epsilon, dpo_loss, split_at_divergence
from turnkit.learners.learner import Learner, LoraConfig, OptimConfig

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from turnkit.agents.hf import HFPolicy
    from turnkit.search.pairs import PreferencePair
    from turnkit.train.run import Run

Segment = tuple[tuple[int, ...], tuple[int, ...]]
"""``(prompt_ids, completion_ids)``: the completion's tokens are scored given the prompt's."""


DPO_OPTIM = OptimConfig(lr=5e-4)
"""Default :attr:`DPOConfig.optim`: constant 5e-4, no weight decay, clipped at norm 1."""


@dataclass(frozen=True)
class DPOConfig:
    """Loss and training settings of :func:`train_dpo`. Validated on construction.

    Example:
        >>> DPOConfig().beta, DPOConfig().conservative, DPOConfig().max_epsilon
        (0.1, True, 0.5)
        >>> DPOConfig(beta=0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: DPOConfig.beta must be a finite number > 0, got 0
    """

    FLAT_KEYS: ClassVar[dict[str, tuple[str, str]]] = flat_keys(
        "lr", "max_grad_norm", "lora_r", "lora_alpha", "lora_targets"
    )
    """Keys written flat before the ``optim`` and ``lora`` tables (``config.json`` of older runs, ``synth``
    configs); they move into them with a ``FutureWarning``."""

    beta: float = 0.1
    """Inverse temperature ``β`` of the implicit reward."""
    conservative: bool = True
    """Use ``ε = min(1 − confidence, max_epsilon)`` per pair (MCTS-DPO); otherwise ``ε = label_smoothing``."""
    max_epsilon: float = 0.5
    """Cap of the conservative ``ε``."""
    label_smoothing: float = 0.0
    """Fixed ``ε`` when not conservative (``0``: standard DPO)."""
    epochs: int = 2
    """Passes over the pairs (ignored when ``steps`` is set)."""
    steps: int | None = None
    """Exactly this many optimizer steps of full batches from a stream of permutations (``None``: ``epochs``)."""
    batch_size: int = 8
    """Pairs per optimizer step."""
    optim: OptimConfig = field(default_factory=lambda: DPO_OPTIM)
    """AdamW of the LoRA parameters (:class:`~turnkit.learners.learner.OptimConfig`): constant ``lr`` 5e-4, no
    weight decay, gradient norm clipped at ``max_grad_norm`` 1."""
    lora: LoraConfig = field(default_factory=LoraConfig)
    """The adapter attached when the policy has none yet (:class:`~turnkit.learners.learner.LoraConfig`: rank
    ``r`` 8, ``alpha`` 16, ``targets`` q/k/v/o; add the MLP's for more capacity)."""
    nll_weight: float = 0.0
    """Weight of an NLL term on the chosen side, per token (RPO, Pang et al. 2024); ``0``: pure DPO (MCTS-DPO)."""
    nll_scope: str = "turn"
    """``"turn"``: the NLL covers the whole chosen turn, the prefix it shares with the rejected turn included
    (RPO's choice); ``"suffix"``: only the chosen tokens after the divergence (what the DPO term scores). The
    shared prefix is often the answer format (``ANSWER: ``), which no other term sees: with ``"suffix"`` its
    probability is unanchored, and in MCTS-DPO runs on MathEpisodes it dropped far enough to break the format
    on some seeds; ``"turn"`` held it on every run (docs/synth.md, "The answer format under DPO")."""
    seed: int = 0
    """Shuffling and LoRA initialisation seed."""

    def __post_init__(self) -> None:
        check_float(self, "beta", low=0, open_low=True)
        check_float(self, "max_epsilon", "label_smoothing", low=0, high=0.5)
        check_float(self, "nll_weight", low=0)
        check_int(self, "epochs", "batch_size")
        check_int(self, "steps", optional=True)
        check_choice(self, "nll_scope", ("suffix", "turn"))
        table_field(self, "optim", DPO_OPTIM)
        table_field(self, "lora", LoraConfig())
        check_rank(self)

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-ready dict (tables as dicts)."""
        return to_dict(self)

    def optim_config(self) -> OptimConfig:
        """The learner's AdamW (``optim``)."""
        return self.optim

    def lora_config(self) -> LoraConfig:
        """The adapter attached to a policy that has none yet (``lora``)."""
        return self.lora


@dataclass(frozen=True)
class SegmentedPair:
    """A preference whose sides are one or more scored segments (e.g. every turn of two episodes).

    Attributes:
        chosen: The preferred side's segments.
        rejected: The other side's segments.
        confidence: The pair's confidence (conservative DPO's ``ε = min(1 − confidence, max_epsilon)``).
        anchor: The segments the ``nll_scope="turn"`` NLL term scores (``()``: the chosen side).

    Example:
        >>> p = SegmentedPair.from_example(DPOExample((1, 2), (3,), (4,)))
        >>> p.chosen, p.rejected
        ((((1, 2), (3,)),), (((1, 2), (4,)),))
    """

    chosen: tuple[Segment, ...]
    rejected: tuple[Segment, ...]
    confidence: float = 1.0
    anchor: tuple[Segment, ...] = ()

    def __post_init__(self) -> None:
        for name in ("chosen", "rejected"):
            side = getattr(self, name)
            if not side or any(not prompt or not completion for prompt, completion in side):
                raise DataError(f"SegmentedPair.{name} needs >= 1 segment, each with prompt and completion ids")
        if self.chosen == self.rejected:
            raise DataError("SegmentedPair has identical chosen and rejected sides")

    @classmethod
    def from_example(cls, example: DPOExample) -> SegmentedPair:
        """The one-segment-per-side form of a :class:`~turnkit.learners.dpo.DPOExample` (anchor: whole chosen turn)."""
        k = example.shared
        anchor = ((example.prompt_ids[:-k], example.prompt_ids[-k:] + example.chosen_ids),) if k else ()
        return cls(
            ((example.prompt_ids, example.chosen_ids),),
            ((example.prompt_ids, example.rejected_ids),),
            example.confidence,
            anchor,
        )

    def chosen_tokens(self) -> int:
        """Tokens scored on the chosen side (the RPO term's normaliser)."""
        return sum(len(c) for _, c in self.chosen)

    def anchor_segments(self) -> tuple[Segment, ...]:
        """What the ``nll_scope="turn"`` term scores: :attr:`anchor`, or the chosen side when there is none."""
        return self.anchor or self.chosen


def pair_example(pair: PreferencePair, tokenizer: PreTrainedTokenizerBase | None = None) -> DPOExample:
    """A :class:`DPOExample` from a stored pair: its exact ids, or (no ids stored) the tokenizer's rendering.

    Raises:
        DataError: The pair has no token ids and no tokenizer was given.
    """
    prompt, chosen, rejected = pair.prompt_token_ids, pair.chosen_token_ids, pair.rejected_token_ids
    if not (prompt and chosen and rejected):
        if tokenizer is None:
            raise DataError(
                f"pair (env {pair.env_id}, seed {pair.seed}, step {pair.step}) has no token ids; pass the policy's "
                "tokenizer to render it, or synthesise with a token-recording policy"
            )
        from turnkit.agents.hf import chat_prompt_ids

        eos = [] if tokenizer.eos_token_id is None else [int(tokenizer.eos_token_id)]
        prompt = tuple(chat_prompt_ids(tokenizer, pair.prompt))
        chosen = tuple(tokenizer(pair.chosen, add_special_tokens=False)["input_ids"]) + tuple(eos)
        rejected = tuple(tokenizer(pair.rejected, add_special_tokens=False)["input_ids"]) + tuple(eos)
    return split_at_divergence(prompt, chosen, rejected, pair.confidence)


PairLike = Union["PreferencePair", DPOExample, SegmentedPair]


def as_segmented(pair: PairLike, tokenizer: Any = None) -> SegmentedPair:
    """Normalise any supported pair row to a :class:`SegmentedPair` (step pairs split at their divergence).

    Example:
        >>> as_segmented(DPOExample((1,), (2, 3), (4,))).chosen
        (((1,), (2, 3)),)
    """
    if isinstance(pair, SegmentedPair):
        return pair
    if isinstance(pair, DPOExample):
        return SegmentedPair.from_example(pair)
    return SegmentedPair.from_example(pair_example(pair, tokenizer))


def side_logprobs(policy: HFPolicy, pairs: Sequence[SegmentedPair], *, grad: bool) -> tuple[Tensor, Tensor]:
    """``[B]`` summed log-probs (temperature 1) of the chosen and rejected sides, all segments in one forward.

    Example:
        >>> from turnkit.agents.hf import HFPolicy
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> cfg = TinyModelConfig(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
        >>> policy = HFPolicy(build_tiny_model(tok, cfg), tok)
        >>> two_turns = SegmentedPair((((5, 6), (7,)), ((8,), (9, 10))), (((5, 6), (11,)),))
        >>> chosen, rejected = side_logprobs(policy, [two_turns], grad=False)
        >>> chosen.shape, bool(chosen < 0), bool(rejected < 0)  # sums over 3 and 1 completion tokens
        (torch.Size([1]), True, True)
    """
    prompts: list[list[int]] = []
    completions: list[list[int]] = []
    owner: list[int] = []
    for k, pair in enumerate(pairs):
        for side, segments in ((0, pair.chosen), (1, pair.rejected)):
            for prompt, completion in segments:
                prompts.append(list(prompt))
                completions.append(list(completion))
                owner.append(2 * k + side)
    logp = policy.sequence_logprobs(prompts, completions, temperature=1.0, grad=grad).sum(dim=-1)
    sums = torch.zeros(2 * len(pairs), dtype=logp.dtype, device=logp.device)
    sums = sums.index_add(0, torch.as_tensor(owner, device=logp.device), logp)
    return sums[0::2], sums[1::2]


def reference_logprobs(policy: HFPolicy, pairs: Sequence[PairLike], *, batch_size: int = 32) -> tuple[Tensor, Tensor]:
    """``[N]`` reference log-probs of the chosen and rejected sides (adapter disabled, no gradients).

    Example:
        >>> from turnkit.agents.hf import HFPolicy
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> cfg = TinyModelConfig(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
        >>> policy = HFPolicy(build_tiny_model(tok, cfg), tok)
        >>> policy.attach_lora()  # the reference is the model with this adapter switched off
        >>> pairs = [DPOExample((5, 6), (7,), (8,))] * 3
        >>> chosen, rejected = reference_logprobs(policy, pairs, batch_size=2)
        >>> chosen.shape, bool(torch.allclose(chosen, reference_logprobs(policy, pairs[:1])[0].expand(3)))
        (torch.Size([3]), True)
    """
    rows = [as_segmented(p, policy.tokenizer) for p in pairs]
    chosen, rejected = [], []
    with torch.no_grad(), policy.reference() as ref:
        for start in range(0, len(rows), batch_size):
            c, r = side_logprobs(ref, rows[start : start + batch_size], grad=False)
            chosen.append(c)
            rejected.append(r)
    return torch.cat(chosen), torch.cat(rejected)


def batch_schedule(n: int, config: DPOConfig) -> Iterator[tuple[int, list[int]]]:
    """``(epoch, indices)`` of every optimizer step (see the module docstring).

    Example:
        >>> [(e, len(i)) for e, i in batch_schedule(5, DPOConfig(epochs=2, batch_size=4))]
        [(0, 4), (0, 1), (1, 4), (1, 1)]
        >>> [len(i) for _, i in batch_schedule(5, DPOConfig(steps=3, batch_size=4))]
        [4, 4, 4]
    """
    rng = np.random.default_rng(config.seed)
    if config.steps is None:
        for epoch in range(config.epochs):
            perm = rng.permutation(n).tolist()
            for start in range(0, n, config.batch_size):
                yield epoch, perm[start : start + config.batch_size]
        return
    order: list[int] = []
    drawn = 0
    for _ in range(config.steps):
        while len(order) < config.batch_size:
            order += rng.permutation(n).tolist()
            drawn += 1
        idx, order = order[: config.batch_size], order[config.batch_size :]
        yield drawn - 1, idx


RESUMABLE_CHANGES = frozenset({"epochs", "steps"})
"""DPOConfig fields a resumed :func:`train_dpo` run may change (its schedule grows by whole steps)."""


def upgrade_dpo_config(saved: dict[str, Any]) -> dict[str, Any]:
    """A run folder's saved config in the current shape (flat ``lr``, ``lora_r`` ... moved quietly, tables in full).

    Example:
        >>> upgrade_dpo_config({"lr": 0.01, "lora_targets": ["q_proj"], "pairs": 4})["lora"]
        {'r': 8, 'alpha': 16, 'dropout': 0.0, 'targets': ['q_proj']}
    """
    return upgrade_tables(DPOConfig, saved)


def train_dpo(
    policy: HFPolicy,
    pairs: Sequence[PairLike],
    config: DPOConfig | None = None,
    *,
    progress: bool = True,
    desc: str = "dpo",
    run_dir: str | Path | None = None,
    resume: bool = False,
    checkpoint_every: int = 0,
) -> list[dict[str, float]]:
    """Train the policy's LoRA adapter on preference pairs (attaching one if needed); returns per-step metrics.

    One optimizer step::

        idx        = next batch of pair indices (batch_schedule)
        π_w, π_l   = Σ over each side's segments of policy.sequence_logprobs(...).sum(-1)   # one forward
        loss       = dpo_loss(π_w, π_l, ref_w, ref_l, β, ε)    # ref_* precomputed once, adapter disabled
                     + nll_weight · mean(−π_w / |chosen tokens|)    # optional RPO term (default 0)
        AdamW step (no weight decay) on the trainable parameters, gradient norm clipped

    Without ``run_dir`` everything stays in memory. With it, the run is a run folder
    (:class:`~turnkit.train.run.Run`: locked, ``config.json`` with the pair count, ``metrics.jsonl`` with
    1-based steps, checkpoints of the adapter, optimizer and torch RNG every ``checkpoint_every`` steps and
    after the last), and ``resume`` continues from its newest intact checkpoint exactly.

    Args:
        policy: An :class:`~turnkit.agents.hf.HFPolicy`; its base weights are the reference and stay frozen.
        pairs: :class:`~turnkit.search.pairs.PreferencePair`, :class:`~turnkit.learners.dpo.DPOExample` or
            :class:`SegmentedPair` rows (mixed is fine).
        config: Loss and optimiser settings.
        progress: Show a progress bar.
        desc: Progress bar label.
        run_dir: A run folder to log and checkpoint into (``None``: in memory only).
        resume: With ``run_dir``: continue from its newest intact checkpoint (a fresh start if none).
        checkpoint_every: With ``run_dir``: checkpoint every this many steps (``0``: after the last only).

    Returns:
        One metrics dict per optimizer step (``step``, ``epoch``, the :func:`~turnkit.learners.dpo.dpo_loss`
        metrics, ``seconds``); with ``nll_weight > 0`` also ``nll`` and ``dpo_loss`` (the loss without the
        NLL term; ``loss`` is then the total). A resumed run's list starts with the steps before the resume.

    Raises:
        DataError: No pairs, or a pair without token ids when the policy has no tokenizer to render it.
        ConfigError: ``resume`` found a checkpoint of another config or another number of pairs.
        RunLockedError: Another process uses ``run_dir``.

    Example:
        >>> from turnkit.agents.hf import HFPolicy
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> from turnkit.search.pairs import PreferencePair
        >>> from turnkit.types import Message
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
        >>> pair = PreferencePair((Message("user", "2+2?"),), "ANSWER: 4", "ANSWER: 5")
        >>> cfg = DPOConfig(epochs=5, batch_size=4, optim={"lr": 1e-2})
        >>> history = train_dpo(policy, [pair] * 4, cfg, progress=False)
        >>> len(history), history[-1]["loss"] < history[0]["loss"]
        (5, True)
    """
    config = config or DPOConfig()
    if not pairs:
        raise DataError("train_dpo got no preference pairs")
    if run_dir is None:
        return _train_dpo(policy, pairs, config, progress=progress, desc=desc)
    from turnkit.train.run import Run

    saved = {**config.to_dict(), "pairs": len(pairs)}
    defaults = DPOConfig().to_dict()
    with Run(run_dir, saved, resumable=RESUMABLE_CHANGES, defaults=defaults, upgrade=upgrade_dpo_config) as run:
        return _train_dpo(
            policy,
            pairs,
            config,
            progress=progress,
            desc=desc,
            run=run,
            resume=resume,
            checkpoint_every=checkpoint_every,
        )


def _train_dpo(
    policy: HFPolicy,
    pairs: Sequence[PairLike],
    config: DPOConfig,
    *,
    progress: bool,
    desc: str,
    run: Run | None = None,
    resume: bool = False,
    checkpoint_every: int = 0,
) -> list[dict[str, float]]:
    from tqdm.auto import tqdm

    rows = [as_segmented(p, policy.tokenizer) for p in pairs]
    learner = Learner(policy, config.optim_config(), lora=config.lora_config(), seed=config.seed)
    optimizer = learner.optimizer
    ref_chosen, ref_rejected = reference_logprobs(policy, rows, batch_size=max(config.batch_size, 32))
    confidence = torch.tensor([r.confidence for r in rows], dtype=torch.float32)
    if config.conservative:
        epsilon = conservative_epsilon(confidence, config.max_epsilon)
    else:
        epsilon = torch.full_like(confidence, config.label_smoothing)
    schedule = list(batch_schedule(len(rows), config))
    start, history = _start(run, policy, optimizer, resume=resume)
    saves = _saves(run, policy, optimizer, checkpoint_every, len(schedule))
    bar = tqdm(total=len(schedule), initial=start, desc=desc, disable=not progress, leave=False)
    device = policy.device
    was_training = policy.model.training
    policy.model.train()  # dropout (if any) on while training, as in every torch loop
    for k in range(start, len(schedule)):
        epoch, order = schedule[k]
        t0 = time.perf_counter()
        idx = torch.as_tensor(order, dtype=torch.long)
        batch = [rows[i] for i in order]
        ref = (ref_chosen[idx].to(device), ref_rejected[idx].to(device))
        loss, metrics = dpo_batch_loss(policy, batch, ref, epsilon[idx].to(device), config)
        learner.minimize(loss)
        history.append({"step": float(k), "epoch": float(epoch), **metrics, "seconds": time.perf_counter() - t0})
        saves(history[-1])
        bar.update(1)
        bar.set_postfix(loss=f"{metrics['loss']:.4f}", acc=f"{metrics['accuracy']:.2f}")
    bar.close()
    policy.model.train(was_training)
    return history


def dpo_batch_loss(
    policy: HFPolicy,
    batch: Sequence[SegmentedPair],
    ref: tuple[Tensor, Tensor],
    epsilon: Tensor,
    config: DPOConfig,
) -> tuple[Tensor, dict[str, float]]:
    """The loss of one batch (see :func:`train_dpo`): DPO against the reference, plus the optional RPO term.

    Args:
        policy: The trained policy (gradients flow).
        batch: The batch's pairs.
        ref: The reference log-probs of their chosen and rejected sides.
        epsilon: Their label-smoothing ``ε``.
        config: The loss settings.

    Returns:
        The loss and its metrics (with ``nll_weight > 0`` also ``nll`` and ``dpo_loss``).
    """
    pol_w, pol_l = side_logprobs(policy, batch, grad=True)
    loss, metrics = dpo_loss(pol_w, pol_l, ref[0], ref[1], beta=config.beta, epsilon=epsilon)
    if config.nll_weight > 0:
        if config.nll_scope == "turn":
            anchors = [SegmentedPair(r.anchor_segments(), r.rejected) for r in batch]
            anchor_logp, _ = side_logprobs(policy, anchors, grad=True)  # rejected side recomputed: small
            counts = [sum(len(c) for _, c in r.anchor_segments()) for r in batch]
        else:
            anchor_logp, counts = pol_w, [r.chosen_tokens() for r in batch]
        lengths = torch.tensor([max(1, n) for n in counts], dtype=pol_w.dtype, device=pol_w.device)
        nll = (-anchor_logp / lengths).mean()
        loss = loss + config.nll_weight * nll
        metrics = {**metrics, "dpo_loss": metrics["loss"], "nll": float(nll.detach()), "loss": float(loss.detach())}
    return loss, metrics


def _start(
    run: Run | None, policy: HFPolicy, optimizer: torch.optim.Optimizer, *, resume: bool
) -> tuple[int, list[dict[str, float]]]:
    """The first step and the history so far: ``(0, [])`` in memory, else from the run's newest checkpoint."""
    if run is None:
        return 0, []
    from turnkit.train.policy_state import read_policy_state

    start, _ = run.start(lambda ckpt, state: read_policy_state(ckpt, policy).apply(policy, optimizer), resume=resume)
    return start, [{**r, "step": float(r["step"] - 1)} for r in run.history()]  # the log counts steps from 1


def _saves(
    run: Run | None, policy: HFPolicy, optimizer: torch.optim.Optimizer, every: int, last: int
) -> Callable[[dict[str, float]], None]:
    """What happens after each step: nothing in memory; in a run folder, log it and checkpoint when due."""
    if run is None:
        return lambda record: None
    from turnkit.train.policy_state import save_policy_state
    from turnkit.train.run import Cadence

    cadence = Cadence(every, last)

    def after(record: dict[str, float]) -> None:
        step = int(record["step"]) + 1
        run.log({**record, "step": step})
        if cadence.due(step):
            run.save(step, lambda tmp: save_policy_state(tmp, policy, optimizer))

    return after
