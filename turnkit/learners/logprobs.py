"""Log-probs of chosen tokens without the full ``[B, T, V]`` logits: hidden states once, the vocabulary in chunks.

A causal LM's ``model(ids).logits`` is ``[B, T, V]`` float32: for SmolLM2 (``V = 49152``) and 46 rows of 110
tokens that is 1 GB, and its gradient another. A policy-gradient loss only needs ``log π(y_t)`` at the loss
tokens, so :func:`model_token_logprobs` runs the model's decoder for the hidden states, keeps the ``N`` rows that
predict loss tokens, and projects them through the output layer ``chunk_rows`` at a time
(:func:`chunked_logprobs`). With gradients each chunk is checkpointed: its ``[chunk_rows, V]`` logits are
recomputed in the backward pass instead of being kept, so at most one chunk's logits exist at any moment.

The maths is that of :func:`gather_token_logprobs` (float32 ``log_softmax(logits / T)``
at the taken token); only the matrix shapes differ, so values and gradients agree to float rounding.

Example:
    >>> import torch
    >>> head = torch.nn.Linear(4, 10, bias=False)
    >>> hidden, targets = torch.randn(5, 4), torch.tensor([1, 2, 3, 4, 5])
    >>> plain = torch.log_softmax(head(hidden), -1).gather(-1, targets[:, None]).squeeze(-1)
    >>> bool(torch.allclose(chunked_logprobs(hidden, targets, head, chunk_rows=2), plain, atol=1e-6))
    True
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

CHUNK_ROWS = 256
"""Loss tokens projected onto the vocabulary at a time (SmolLM2: a ``[256, 49152]`` float32 chunk is 50 MB)."""
PLAIN_LOGITS_BYTES = 64 << 20
"""Below this size of a batch's whole float32 ``[B, T, V]`` logits, scoring and updating the plain way (one pass,
full logits) costs no memory worth saving, and keeps the exact floats of runs made before the chunked path (the
tiny models' vocabulary of a few hundred ids never comes near it; SmolLM2's 49k does at 350 tokens)."""


def logits_fit(model: torch.nn.Module, shape: tuple[int, ...] | torch.Size) -> bool:
    """Whether ``model``'s float32 logits for ``[B, T]`` ids ``shape`` stay within :data:`PLAIN_LOGITS_BYTES`.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> model = build_tiny_model(build_tiny_tokenizer(), TinyModelConfig(hidden_size=32, num_heads=2))
        >>> logits_fit(model, (64, 512)), logits_fit(torch.nn.Linear(2, 2), (64, 512))
        (True, True)
    """
    vocab = int(getattr(getattr(model, "config", None), "vocab_size", 0) or 0)
    return shape[0] * shape[1] * vocab * 4 <= PLAIN_LOGITS_BYTES


def token_q_values(
    logits: Tensor, input_ids: Tensor, loss_mask: Tensor, *, temperature: float = 1.0
) -> tuple[Tensor, Tensor]:
    """Soft Q-value of each taken token and the state value, in token coordinates.

    ``q[b, t] = logits[b, t − 1, input_ids[b, t]] / T`` and ``v[b, t] = logsumexp(logits[b, t − 1] / T)`` at
    loss tokens, ``0`` elsewhere; ``q − v`` is then bit-for-bit :func:`gather_token_logprobs`. Only the logit
    rows that predict loss tokens are touched, in float32. IQLearn (:mod:`turnkit.learners.irl`) reads these as
    its soft Q-values.

    Args:
        logits: ``[B, T, V]`` causal-LM logits for ``input_ids``.
        input_ids: ``[B, T]`` token ids.
        loss_mask: ``[B, T]`` bool mask of the transitions (the agent's tokens).
        temperature: Divide the logits by this first.

    Returns:
        ``(q, v)``, both ``[B, T]`` float32 with gradients.

    Raises:
        ValueError: Mismatched shapes, a non-positive temperature, or a loss token at position 0.

    Example:
        >>> import torch
        >>> q, v = token_q_values(torch.zeros(1, 2, 4), torch.tensor([[0, 3]]), torch.tensor([[False, True]]))
        >>> q.tolist(), [round(x, 4) for x in v[0].tolist()]  # V = log 4
        ([[0.0, 0.0]], [0.0, 1.3863])
    """
    if logits.dim() != 3 or logits.shape[:2] != input_ids.shape or loss_mask.shape != input_ids.shape:
        raise ValueError(
            f"need logits [B, T, V], input_ids [B, T] and loss_mask [B, T]; got {tuple(logits.shape)}, "
            f"{tuple(input_ids.shape)}, {tuple(loss_mask.shape)}"
        )
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    mask = loss_mask.bool()
    if bool(mask[:, 0].any()):
        raise ValueError("loss_mask[:, 0] must be False: no logit predicts the first token")
    targets = mask[:, 1:]
    picked = logits[:, :-1][targets].float() / temperature  # [N, V]
    token_ids = input_ids[:, 1:][targets]
    q_taken = picked.gather(-1, token_ids[:, None]).squeeze(-1)
    v_state = torch.logsumexp(picked, dim=-1)
    zeros = torch.zeros(input_ids.shape, dtype=torch.float32, device=logits.device)
    return zeros.masked_scatter(mask, q_taken), zeros.masked_scatter(mask, v_state)


def gather_token_logprobs(logits: Tensor, input_ids: Tensor, loss_mask: Tensor, *, temperature: float = 1.0) -> Tensor:
    """Log-prob of each loss token under ``logits``, in token coordinates.

    ``out[b, t] = log_softmax(logits[b, t − 1])[input_ids[b, t]]`` where ``loss_mask[b, t]``, else ``0``
    (position 0 is always ``0``): ``Q − V`` of :func:`token_q_values`, the taken token's
    logit minus the logsumexp. Only the ``N`` logit rows that predict loss tokens are normalised, in float32
    (an ``[N, V]`` temporary rather than ``[B, T, V]``); gradients reach ``logits[b, t − 1]`` only for loss
    tokens ``t``.

    Args:
        logits: ``[B, T, V]`` causal-LM logits for ``input_ids`` (``model(input_ids).logits``).
        input_ids: ``[B, T]`` token ids.
        loss_mask: ``[B, T]`` bool mask of the tokens to score.
        temperature: Divide the logits by this first, to match log-probs recorded at a sampling temperature
            (``HFPolicy`` records ``log_softmax(logits / T)``; PPO/GRPO usually samples at ``T = 1``).

    Returns:
        ``[B, T]`` float32 log-probs.

    Example:
        >>> import torch
        >>> logits = torch.zeros(1, 3, 4)  # uniform over 4 ids: log(1/4) = -1.3863
        >>> gather_token_logprobs(logits, torch.tensor([[0, 1, 2]]), torch.tensor([[False, True, True]]))
        tensor([[ 0.0000, -1.3863, -1.3863]])
    """
    q, v = token_q_values(logits, input_ids, loss_mask, temperature=temperature)
    return q - v


def _chunk(hidden: Tensor, targets: Tensor, head: Callable[[Tensor], Tensor], temperature: float) -> Tensor:
    logits = head(hidden).float() / temperature
    return logits.gather(-1, targets[:, None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def chunked_logprobs(
    hidden: Tensor,
    targets: Tensor,
    head: Callable[[Tensor], Tensor],
    *,
    temperature: float = 1.0,
    chunk_rows: int = CHUNK_ROWS,
) -> Tensor:
    """``log_softmax(head(hidden) / T)[targets]`` row by row, ``chunk_rows`` rows of logits at a time.

    Under gradients each chunk is checkpointed (its logits are recomputed in the backward pass), so neither
    pass holds more than one ``[chunk_rows, V]`` block.

    Args:
        hidden: ``[N, H]`` hidden states, one per scored token (the position *before* it).
        targets: ``[N]`` token ids to score.
        head: The output layer (``model.get_output_embeddings()``), ``[.., H] -> [.., V]``.
        temperature: Divide the logits by this first.
        chunk_rows: Rows per chunk (positive).

    Returns:
        ``[N]`` float32 log-probs (with gradients to ``hidden`` and the head's trainable weights).

    Raises:
        ValueError: Mismatched shapes, a non-positive temperature or chunk size.

    Example:
        >>> head = torch.nn.Linear(2, 3, bias=False)
        >>> with torch.no_grad():
        ...     _ = head.weight.zero_()  # uniform over 3 ids: log(1/3)
        >>> [round(x, 4) for x in chunked_logprobs(torch.ones(2, 2), torch.tensor([0, 2]), head, chunk_rows=1).tolist()]
        [-1.0986, -1.0986]
    """
    if hidden.dim() != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(f"need hidden [N, H] and targets [N]; got {tuple(hidden.shape)}, {tuple(targets.shape)}")
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
    parts = []
    for start in range(0, hidden.shape[0], chunk_rows):
        h, y = hidden[start : start + chunk_rows], targets[start : start + chunk_rows]
        if torch.is_grad_enabled() and h.requires_grad:
            parts.append(checkpoint(_chunk, h, y, head, temperature, use_reentrant=False))
        else:
            parts.append(_chunk(h, y, head, temperature))
    return torch.cat(parts) if parts else hidden.new_zeros(0, dtype=torch.float32)


def supports_hidden_path(model: torch.nn.Module) -> bool:
    """Whether :func:`model_token_logprobs` can split ``model`` into decoder + output layer.

    True for decoder-only ``transformers`` models (and ``peft`` wrappers of them) whose logits are the output
    layer applied to the decoder's last hidden state; models that post-process logits (soft-capping, a logit
    scale) take the plain path.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> supports_hidden_path(build_tiny_model(build_tiny_tokenizer(), TinyModelConfig(hidden_size=32, num_heads=2)))
        True
        >>> supports_hidden_path(torch.nn.Linear(2, 2))
        False
    """
    config = getattr(model, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False):
        return False
    if getattr(config, "final_logit_softcapping", None) or getattr(config, "logit_scale", None):
        return False
    try:
        decoder, head = model.get_decoder(), model.get_output_embeddings()  # type: ignore[operator]
    except (AttributeError, ValueError, NotImplementedError):
        return False
    return decoder is not None and head is not None and decoder is not model


def model_token_logprobs(
    model: torch.nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    loss_mask: Tensor,
    *,
    temperature: float = 1.0,
    chunk_rows: int = CHUNK_ROWS,
) -> Tensor:
    """:func:`gather_token_logprobs` of ``model``'s logits, without materialising them.

    The decoder runs once; only the hidden states that predict loss tokens go through the output layer, in
    :func:`chunked_logprobs` chunks. Models :func:`supports_hidden_path` rejects, and batches whose whole logits
    fit :data:`PLAIN_LOGITS_BYTES`, are scored the plain way.
    Runs with or without gradients, as the caller's mode says (wrap it in ``torch.no_grad()`` for old or
    reference log-probs).

    Args:
        model: A causal LM (or a ``peft`` wrapper); with its adapter disabled it scores the reference.
        input_ids: ``[B, T]`` token ids.
        attention_mask: ``[B, T]`` 1 on real tokens.
        loss_mask: ``[B, T]`` bool mask of the tokens to score (never position 0).
        temperature: Divide the logits by this first.
        chunk_rows: Loss tokens per output-layer chunk.

    Returns:
        ``[B, T]`` float32 log-probs in token coordinates (``0`` off the loss mask).

    Raises:
        ValueError: Mismatched shapes or a loss token at position 0.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> model = build_tiny_model(build_tiny_tokenizer(), TinyModelConfig(hidden_size=32, num_heads=2)).eval()
        >>> ids, mask = torch.tensor([[1, 5, 6, 7]]), torch.tensor([[False, False, True, True]])
        >>> lp = model_token_logprobs(model, ids, torch.ones_like(ids), mask, chunk_rows=1)
        >>> plain = gather_token_logprobs(model(input_ids=ids).logits, ids, mask)
        >>> bool(torch.allclose(lp, plain, atol=1e-5)), lp[0, :2].tolist()
        (True, [0.0, 0.0])
    """
    if input_ids.dim() != 2 or attention_mask.shape != input_ids.shape or loss_mask.shape != input_ids.shape:
        raise ValueError(
            f"need input_ids, attention_mask and loss_mask all [B, T]; got {tuple(input_ids.shape)}, "
            f"{tuple(attention_mask.shape)}, {tuple(loss_mask.shape)}"
        )
    mask = loss_mask.bool()
    if bool(mask[:, 0].any()):
        raise ValueError("loss_mask[:, 0] must be False: no logit predicts the first token")
    if not supports_hidden_path(model) or logits_fit(model, input_ids.shape):
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        return gather_token_logprobs(logits, input_ids, mask, temperature=temperature)
    decoder, head = model.get_decoder(), model.get_output_embeddings()  # type: ignore[operator]
    hidden = decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    targets = mask[:, 1:]
    picked = chunked_logprobs(
        hidden[:, :-1][targets], input_ids[:, 1:][targets], head, temperature=temperature, chunk_rows=chunk_rows
    )
    zeros = torch.zeros(input_ids.shape, dtype=torch.float32, device=input_ids.device)
    return zeros.masked_scatter(mask, picked)
