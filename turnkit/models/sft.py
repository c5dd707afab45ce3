"""A readable supervised fine-tuning loop over token rows (demonstrations, or RFT's kept episodes).

One optimizer step::

    rows  = next batch_size rows of a seeded permutation (a new permutation every epoch)
    batch = collate(rows)                                   # right-padded, loss on completion ids only
    logp  = gather_token_logprobs(model(batch).logits, batch.input_ids, batch.loss_mask)
    loss  = sft_loss(logp, batch.loss_mask)                 # masked token-mean NLL
    AdamW step with gradient clipping and a warmup + cosine learning-rate schedule

Example:
    >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    >>> from turnkit.rollout.batch import TokenRow
    >>> tok = build_tiny_tokenizer()
    >>> model = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2,
    ...                                               intermediate_size=64))
    >>> rows = [TokenRow.from_prompt_completion([1, 5], [9, 9, 2])] * 4
    >>> cfg = SFTConfig(steps=20, batch_size=4, optim={"lr": 1e-2})
    >>> history = train_sft(model, rows, cfg, pad_id=0, progress=False)
    >>> history[-1]["loss"] < history[0]["loss"]
    True
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from tqdm.auto import tqdm

from turnkit.configs import check_int, flat_dict, table_field
from turnkit.errors import ConfigError
from turnkit.learners.config import flat_keys
from turnkit.learners.learner import Learner, OptimConfig
from turnkit.learners.logprobs import gather_token_logprobs
from turnkit.learners.sft import sft_loss
from turnkit.rollout.batch import TokenRow, collate

SFT_OPTIM = OptimConfig(lr=3e-3, warmup_steps=20, schedule="cosine", min_lr_ratio=0.1)
"""Default :attr:`SFTConfig.optim`: peak 3e-3 after 20 warmup steps, cosine to a tenth, clipped at norm 1."""


@dataclass(frozen=True)
class SFTConfig:
    """Hyper-parameters of :func:`train_sft`. Validated on construction.

    Example:
        >>> SFTConfig(optim={"lr": 1e-2}).optim.schedule, SFTConfig().optim.warmup_steps
        ('cosine', 20)
        >>> SFTConfig(steps=0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: SFTConfig.steps must be an int >= 1, got 0
    """

    FLAT_KEYS: ClassVar[dict[str, tuple[str, str]]] = flat_keys(
        "lr", "weight_decay", "warmup_steps", "min_lr_ratio", "max_grad_norm"
    )
    """Keys written flat before the ``optim`` table; they move into it with a ``FutureWarning``."""
    FLAT_ORDER: ClassVar[tuple[str, ...]] = (
        "steps", "batch_size", "lr", "weight_decay", "warmup_steps", "min_lr_ratio", "max_grad_norm", "seed",
    )  # fmt: skip
    """The fields before the ``optim`` table, in order: recipe cache keys hash this shape (:meth:`cache_dict`)."""

    steps: int = 300
    """Optimizer steps."""
    batch_size: int = 32
    """Rows per step."""
    optim: OptimConfig = field(default_factory=lambda: SFT_OPTIM)
    """AdamW and its schedule (:class:`~turnkit.learners.learner.OptimConfig`): peak ``lr``, ``warmup_steps``
    from 0 to it, then (``schedule="cosine"``) decay to ``min_lr_ratio * lr``; ``max_grad_norm`` clips."""
    seed: int = 0
    """Seed of the row permutation."""

    def __post_init__(self) -> None:
        check_int(self, "steps", "batch_size")
        check_int(self, "seed", low=0)
        table_field(self, "optim", SFT_OPTIM)

    def optim_config(self) -> OptimConfig:
        """The learner's AdamW and schedule (``optim``)."""
        return self.optim

    def cache_dict(self) -> dict[str, Any]:
        """The config as cache keys hash it: the flat fields of before the ``optim`` table (:func:`flat_dict`).

        Example:
            >>> SFTConfig(steps=5).cache_dict()
            {'steps': 5, 'batch_size': 32, 'lr': 0.003, 'weight_decay': 0.0, 'warmup_steps': 20, \
'min_lr_ratio': 0.1, 'max_grad_norm': 1.0, 'seed': 0}
        """
        return flat_dict(self)


def batch_order(num_rows: int, batch_size: int, steps: int, rng: np.random.Generator) -> list[list[int]]:
    """Row indices of each step: consecutive slices of fresh permutations (no row repeats within an epoch).

    Example:
        >>> order = batch_order(5, 2, 4, np.random.default_rng(0))
        >>> [len(b) for b in order], sorted(order[0] + order[1] + order[2][:1])
        ([2, 2, 2, 2], [0, 1, 2, 3, 4])
    """
    out: list[list[int]] = []
    pool: list[int] = []
    while len(out) < steps:
        if len(pool) < batch_size:
            pool.extend(rng.permutation(num_rows).tolist())
        out.append(pool[:batch_size])
        pool = pool[batch_size:]
    return out


def train_sft(
    model: torch.nn.Module | Learner,
    rows: Sequence[TokenRow],
    cfg: SFTConfig,
    *,
    pad_id: int,
    progress: bool = True,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    desc: str = "sft",
) -> list[dict[str, Any]]:
    """Fine-tune ``model`` in place on ``rows`` (loss on each row's ``loss_mask``) and return per-step metrics.

    Args:
        model: A causal LM (``model(input_ids=..., attention_mask=...).logits``); only parameters with
            ``requires_grad`` are trained (so a ``peft`` model trains its adapter). Or a
            :class:`~turnkit.learners.learner.Learner` (e.g. one that attached an adapter): its optimizer and
            schedule are used, ``cfg`` still gives the steps, batches and row order.
        rows: Training rows, e.g. :func:`turnkit.rollout.demos.demo_rows`.
        cfg: Hyper-parameters.
        pad_id: Padding id.
        progress: Show a progress bar.
        on_step: Called with every step's record (e.g. ``MetricsLog(path).write``).
        desc: Progress-bar label.

    Returns:
        One record per step: ``step``, ``loss`` (token-mean NLL), ``lr``, ``grad_norm``, ``tokens``,
        ``tokens_per_s``. The model is left in eval mode.

    Raises:
        ConfigError: No rows, or no trainable parameters.
    """
    if not rows:
        raise ConfigError("train_sft got no rows")
    if not any(p.requires_grad for p in (model.model if isinstance(model, Learner) else model).parameters()):
        raise ConfigError("train_sft: the model has no trainable parameters")
    learner = model if isinstance(model, Learner) else Learner(model, cfg.optim_config(), total_steps=cfg.steps)
    model = learner.model
    device = next(model.parameters()).device
    order = batch_order(len(rows), cfg.batch_size, cfg.steps, np.random.default_rng(cfg.seed))
    history: list[dict[str, Any]] = []
    model.train()
    bar = tqdm(order, desc=desc, disable=not progress, unit="step")
    for step, indices in enumerate(bar):
        start = time.perf_counter()
        lr = learner.set_lr(step)
        batch = collate([rows[i] for i in indices], pad_id=pad_id).to(device)
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        logp = gather_token_logprobs(logits, batch.input_ids, batch.loss_mask)
        loss, metrics = sft_loss(logp, batch.loss_mask)
        norm = learner.minimize(loss)
        tokens = int(batch.attention_mask.sum())
        record = {
            "step": step + 1,
            "loss": metrics["nll"],
            "lr": lr,
            "grad_norm": norm,
            "tokens": tokens,
            "tokens_per_s": tokens / max(time.perf_counter() - start, 1e-9),
        }
        history.append(record)
        if on_step is not None:
            on_step(record)
        bar.set_postfix(loss=f"{metrics['nll']:.3f}")
    model.eval()
    return history
