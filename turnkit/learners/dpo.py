"""Direct preference optimisation: standard and conservative (MCTS-DPO) losses, and a small training loop.

For a pair (prompt ``x``, chosen ``y_w``, rejected ``y_l``) with policy ``π`` and reference ``π_ref``:

``h = [log π(y_w|x) − log π_ref(y_w|x)] − [log π(y_l|x) − log π_ref(y_l|x)]``

``L = −(1 − ε) · log σ(β h) − ε · log σ(−β h)``

``ε = 0`` is standard DPO (Rafailov et al.). Conservative DPO (MCTS-DPO) sets ``ε = min(1 − confidence,
max_epsilon)`` per pair, with the visit-count confidence of :func:`turnkit.search.pairs.visit_confidence`,
so pairs the search was unsure about pull less. ``β = 0.1``.

**Only tokens after the two completions diverge count.** Chosen and rejected turns of a search tree often
share a long prefix; the shared tokens have identical log-probs in both sides and cancel in ``h`` in
exact arithmetic, so they are masked explicitly: the common token prefix moves into the prompt
(:func:`split_at_divergence`) and only the two suffixes are scored.

Learners train on the stored token ids (``prompt_token_ids`` + ``chosen_token_ids`` / ``rejected_token_ids``
of each :class:`~turnkit.search.pairs.PreferencePair`), never on re-tokenised text; only pairs from agents
that record no ids (oracles, scripted agents) are tokenised with the policy's chat template.

The reference is the policy with its LoRA adapter disabled (``HFPolicy.reference()``), i.e. the SFT start.

Example:
    >>> import math, torch
    >>> pw, pl = torch.tensor([-1.0]), torch.tensor([-3.0])
    >>> rw, rl = torch.tensor([-2.0]), torch.tensor([-2.0])
    >>> loss, m = dpo_loss(pw, pl, rw, rl, beta=0.1)  # h = 1 - (-1) = 2
    >>> round(loss.item(), 6) == round(math.log1p(math.exp(-0.2)), 6), m["accuracy"]
    (True, 1.0)
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from turnkit.errors import ConfigError, DataError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from turnkit.agents.hf import HFPolicy
    from turnkit.search.pairs import PreferencePair


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

    beta: float = 0.1
    """Inverse temperature ``β`` of the implicit reward."""
    conservative: bool = True
    """Use ``ε = min(1 − confidence, max_epsilon)`` per pair (MCTS-DPO); otherwise ``ε = label_smoothing``."""
    max_epsilon: float = 0.5
    """Cap of the conservative ``ε``."""
    label_smoothing: float = 0.0
    """Fixed ``ε`` when not conservative (``0``: standard DPO)."""
    epochs: int = 2
    """Passes over the pairs."""
    batch_size: int = 8
    """Pairs per optimizer step."""
    lr: float = 5e-4
    """AdamW learning rate (LoRA parameters)."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm."""
    lora_r: int = 8
    """LoRA rank when the policy has no adapter yet."""
    lora_alpha: int = 16
    """LoRA alpha when the policy has no adapter yet."""
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    """Modules the LoRA adapter wraps when the policy has none yet (add the MLP's for more capacity)."""
    nll_weight: float = 0.0
    """Weight of an NLL term on the chosen suffix (RPO, Pang et al. 2024); ``0``: pure DPO (MCTS-DPO)."""
    seed: int = 0
    """Shuffling and LoRA initialisation seed."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "lora_targets", tuple(self.lora_targets))  # lists from JSON configs
        if not (math.isfinite(self.beta) and self.beta > 0):
            raise ConfigError(f"DPOConfig.beta must be a finite number > 0, got {self.beta!r}")
        for name in ("max_epsilon", "label_smoothing"):
            value = getattr(self, name)
            if not 0 <= value <= 0.5:
                raise ConfigError(f"DPOConfig.{name} must be in [0, 0.5], got {value!r}")
        for name in ("epochs", "batch_size", "lora_r", "lora_alpha"):
            if getattr(self, name) < 1:
                raise ConfigError(f"DPOConfig.{name} must be >= 1, got {getattr(self, name)!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"DPOConfig.lr must be a finite number > 0, got {self.lr!r}")
        if not (math.isfinite(self.nll_weight) and self.nll_weight >= 0):
            raise ConfigError(f"DPOConfig.nll_weight must be a finite number >= 0, got {self.nll_weight!r}")
        if not self.lora_targets:
            raise ConfigError("DPOConfig.lora_targets must name at least one module")
        if not self.max_grad_norm > 0:
            raise ConfigError(f"DPOConfig.max_grad_norm must be > 0, got {self.max_grad_norm!r}")

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-ready dict."""
        return asdict(self)


# ---------------------------------------------------------------------------------------------- kernels


def conservative_epsilon(confidence: Tensor, max_epsilon: float = 0.5) -> Tensor:
    """MCTS-DPO's label smoothing ``ε = min(1 − confidence, max_epsilon)``.

    Example:
        >>> conservative_epsilon(torch.tensor([1.0, 0.75, 0.2])).tolist()
        [0.0, 0.25, 0.5]
    """
    return (1.0 - confidence).clamp(min=0.0, max=max_epsilon)


def dpo_loss(
    policy_chosen: Tensor,
    policy_rejected: Tensor,
    ref_chosen: Tensor,
    ref_rejected: Tensor,
    *,
    beta: float = 0.1,
    epsilon: Tensor | float = 0.0,
) -> tuple[Tensor, dict[str, float]]:
    """Mean (conservative) DPO loss over a batch of sequence log-probs.

    Args:
        policy_chosen: ``[B]`` summed log-probs of the chosen completions under the policy.
        policy_rejected: ``[B]`` the same for the rejected completions.
        ref_chosen: ``[B]`` under the reference.
        ref_rejected: ``[B]`` under the reference.
        beta: ``β``.
        epsilon: ``ε`` per pair (``[B]``) or one value; ``0`` is standard DPO.

    Returns:
        ``(loss, metrics)`` with metrics ``loss``, ``accuracy`` (share of ``h > 0``), ``margin`` (mean
        ``β h``), ``chosen_reward`` and ``rejected_reward`` (means of ``β (log π − log π_ref)``), ``epsilon``.

    Example:
        >>> import math
        >>> one = torch.tensor([0.0])
        >>> loss, m = dpo_loss(one, one, one, one, epsilon=0.3)  # h = 0: log 2 whatever ε
        >>> round(loss.item(), 6) == round(math.log(2), 6), m["margin"]
        (True, 0.0)
    """
    shapes = {tuple(t.shape) for t in (policy_chosen, policy_rejected, ref_chosen, ref_rejected)}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"dpo_loss needs four [B] tensors of one shape, got shapes {sorted(shapes)}")
    chosen_logratio = policy_chosen - ref_chosen
    rejected_logratio = policy_rejected - ref_rejected
    logits = beta * (chosen_logratio - rejected_logratio)
    eps = torch.as_tensor(epsilon, dtype=logits.dtype, device=logits.device)
    losses = -(1.0 - eps) * F.logsigmoid(logits) - eps * F.logsigmoid(-logits)
    loss = losses.mean()
    with torch.no_grad():
        metrics = {
            "loss": float(loss),
            "accuracy": float((logits > 0).float().mean()),
            "margin": float(logits.mean()),
            "chosen_reward": float(beta * chosen_logratio.mean()),
            "rejected_reward": float(beta * rejected_logratio.mean()),
            "epsilon": float(eps.float().mean()),
        }
    return loss, metrics


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens two sequences share.

    Example:
        >>> common_prefix_length([1, 2, 3], [1, 2, 4, 5]), common_prefix_length([1], [1, 2])
        (2, 1)
    """
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass(frozen=True)
class DPOExample:
    """One pair in token space, split where chosen and rejected diverge.

    Attributes:
        prompt_ids: The prompt ids followed by the completions' common prefix (context, never loss).
        chosen_ids: The chosen completion after the common prefix (loss tokens).
        rejected_ids: The rejected completion after the common prefix (loss tokens).
        confidence: The pair's confidence.
    """

    prompt_ids: tuple[int, ...]
    chosen_ids: tuple[int, ...]
    rejected_ids: tuple[int, ...]
    confidence: float = 1.0


def split_at_divergence(
    prompt_ids: Sequence[int], chosen_ids: Sequence[int], rejected_ids: Sequence[int], confidence: float = 1.0
) -> DPOExample:
    """Move the completions' common prefix into the prompt, so the loss covers only diverging tokens.

    Raises:
        DataError: The two completions are identical (no preference to learn) or the prompt is empty.

    Example:
        >>> ex = split_at_divergence([1, 2], [7, 8, 9, 3], [7, 8, 4, 3])
        >>> ex.prompt_ids, ex.chosen_ids, ex.rejected_ids
        ((1, 2, 7, 8), (9, 3), (4, 3))
    """
    if not prompt_ids:
        raise DataError("a DPO example needs prompt ids")
    if list(chosen_ids) == list(rejected_ids):
        raise DataError("chosen and rejected completions have identical token ids")
    k = common_prefix_length(chosen_ids, rejected_ids)
    return DPOExample(
        prompt_ids=tuple(prompt_ids) + tuple(chosen_ids[:k]),
        chosen_ids=tuple(chosen_ids[k:]),
        rejected_ids=tuple(rejected_ids[k:]),
        confidence=float(confidence),
    )


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


# ---------------------------------------------------------------------------------------------- loop


def _sequence_sums(policy: HFPolicy, examples: Sequence[DPOExample], *, grad: bool) -> tuple[Tensor, Tensor]:
    """Summed log-probs of chosen and rejected suffixes, both in one forward pass (temperature 1)."""
    prompts = [list(e.prompt_ids) for e in examples] * 2
    completions = [list(e.chosen_ids) for e in examples] + [list(e.rejected_ids) for e in examples]
    logp = policy.sequence_logprobs(prompts, completions, temperature=1.0, grad=grad).sum(dim=-1)
    n = len(examples)
    return logp[:n], logp[n:]


def reference_logprobs(
    policy: HFPolicy, examples: Sequence[DPOExample], *, batch_size: int = 32
) -> tuple[Tensor, Tensor]:
    """``[N]`` reference log-probs of chosen and rejected suffixes (adapter disabled, no gradients)."""
    chosen, rejected = [], []
    with policy.reference() as ref:
        for start in range(0, len(examples), batch_size):
            c, r = _sequence_sums(ref, examples[start : start + batch_size], grad=False)
            chosen.append(c)
            rejected.append(r)
    return torch.cat(chosen), torch.cat(rejected)


def train_dpo(
    policy: HFPolicy,
    pairs: Sequence[PreferencePair],
    config: DPOConfig | None = None,
    *,
    progress: bool = True,
    desc: str = "dpo",
) -> list[dict[str, float]]:
    """Train the policy's LoRA adapter on preference pairs (attaching one if needed); returns per-step metrics.

    One optimizer step::

        idx        = next batch_size pairs of a seeded permutation (new each epoch)
        π_w, π_l   = policy.sequence_logprobs(prompt + common prefix, suffixes).sum(-1)   # one forward
        loss       = dpo_loss(π_w, π_l, ref_w, ref_l, β, ε)    # ref_* precomputed once, adapter disabled
                     + nll_weight · mean(−π_w / |y_w suffix|)    # optional RPO term (default 0)
        AdamW step on the LoRA parameters, gradient norm clipped

    Args:
        policy: An :class:`~turnkit.agents.hf.HFPolicy`; its base weights are the reference and stay frozen.
        pairs: The preference pairs.
        config: Loss and optimiser settings.
        progress: Show a progress bar.
        desc: Progress bar label.

    Returns:
        One metrics dict per optimizer step (``step``, ``epoch``, the :func:`dpo_loss` metrics, ``seconds``).

    Example:
        >>> from turnkit.agents.hf import HFPolicy
        >>> from turnkit.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> from turnkit.search.pairs import PreferencePair
        >>> from turnkit.types import Message
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
        >>> pair = PreferencePair((Message("user", "2+2?"),), "ANSWER: 4", "ANSWER: 5")
        >>> history = train_dpo(policy, [pair] * 4, DPOConfig(epochs=5, batch_size=4, lr=1e-2), progress=False)
        >>> history[-1]["loss"] < history[0]["loss"], history[-1]["accuracy"]
        (True, 1.0)
    """
    from tqdm.auto import tqdm

    config = config or DPOConfig()
    if not pairs:
        raise DataError("train_dpo got no preference pairs")
    examples = [pair_example(p, policy.tokenizer) for p in pairs]
    if not policy.has_adapter:
        policy.attach_lora(
            r=config.lora_r, alpha=config.lora_alpha, target_modules=config.lora_targets, seed=config.seed
        )
    ref_chosen, ref_rejected = reference_logprobs(policy, examples, batch_size=max(config.batch_size, 32))
    confidence = torch.tensor([e.confidence for e in examples], dtype=torch.float32)
    if config.conservative:
        epsilon = conservative_epsilon(confidence, config.max_epsilon)
    else:
        epsilon = torch.full_like(confidence, config.label_smoothing)
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
    rng = np.random.default_rng(config.seed)
    steps_per_epoch = math.ceil(len(examples) / config.batch_size)
    history: list[dict[str, float]] = []
    bar = tqdm(total=config.epochs * steps_per_epoch, desc=desc, disable=not progress, leave=False)
    device = policy.device
    for epoch in range(config.epochs):
        order = rng.permutation(len(examples))
        for start in range(0, len(order), config.batch_size):
            t0 = time.perf_counter()
            idx = torch.as_tensor(order[start : start + config.batch_size], dtype=torch.long)
            pol_w, pol_l = _sequence_sums(policy, [examples[i] for i in idx.tolist()], grad=True)
            loss, metrics = dpo_loss(
                pol_w,
                pol_l,
                ref_chosen[idx].to(device),
                ref_rejected[idx].to(device),
                beta=config.beta,
                epsilon=epsilon[idx].to(device),
            )
            if config.nll_weight > 0:
                lengths = torch.tensor([max(1, len(examples[i].chosen_ids)) for i in idx.tolist()], device=device)
                nll = (-pol_w / lengths).mean()
                loss = loss + config.nll_weight * nll
                metrics = {**metrics, "nll": float(nll.detach()), "loss": float(loss.detach())}
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            optimizer.step()
            history.append(
                {"step": float(len(history)), "epoch": float(epoch), **metrics, "seconds": time.perf_counter() - t0}
            )
            bar.update(1)
            bar.set_postfix(loss=f"{metrics['loss']:.4f}", acc=f"{metrics['accuracy']:.2f}")
    bar.close()
    return history
