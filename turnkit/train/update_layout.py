"""The update's row layout: rows sorted by length inside a minibatch, so its micro-batches carry little padding.

A minibatch that does not fit one forward pass is cut into consecutive micro-batches of at most
``micro_batch_tokens`` padded tokens (:meth:`~turnkit.rollout.batch.TurnBatch.token_slices`), each padded to its
longest row. In rollout order a short turn row often shares a micro-batch with a long one and is padded to it; the
decoder runs on those pad tokens all the same. Sorted by length (longest first), neighbours have near-equal
lengths: fewer padded tokens, fewer passes, and the pad-free micro-batches take SDPA's causal path without a mask.

The loss is a sum over rows (each micro-batch weighted by its share of the minibatch's loss tokens), so the order
of the rows changes the update only by float rounding: same loss, same gradients to float tolerance
(tests/train/test_update_layout.py). A minibatch that runs in one pass is left in its order: its floats stay
exactly those of runs made before this layout (the tiny models always take one pass).

Example:
    >>> from turnkit.rollout.batch import TokenRow, collate
    >>> rows = [TokenRow.from_prompt_completion([1], [2] * n, reward=n) for n in (1, 6, 2, 5)]
    >>> batch = collate(rows, pad_id=0)
    >>> [tuple(mb.input_ids.shape) for mb in batch.token_slices(14)]
    [(2, 7), (2, 6)]
    >>> [tuple(mb.input_ids.shape) for mb in length_sorted(batch).token_slices(14)]
    [(2, 7), (2, 3)]
    >>> length_sorted(batch).rewards.tolist()
    [6.0, 5.0, 2.0, 1.0]
"""

from __future__ import annotations

import dataclasses

import torch

from turnkit.rollout.batch import TurnBatch


def length_sorted(batch: TurnBatch) -> TurnBatch:
    """``batch`` with its rows ordered longest first (a stable sort: equal lengths keep their order).

    Every per-row tensor moves with its row; the counters (errors, fallbacks) stay, and the batch is trimmed to
    its longest row as before. A batch already in that order is returned as it is.
    """
    lengths = batch.attention_mask.sum(dim=1)
    order = torch.sort(lengths, descending=True, stable=True).indices
    if bool((order == torch.arange(len(batch), device=order.device)).all()):
        return batch
    moved = {
        f.name: value.index_select(0, order)
        for f in dataclasses.fields(batch)
        if isinstance(value := getattr(batch, f.name), torch.Tensor)
    }
    return dataclasses.replace(batch, **moved)
