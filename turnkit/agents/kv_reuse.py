"""Carry a conversation's KV cache from one turn to the next (``HFPolicy(reuse_kv=True)``).

With token-exact contexts (:class:`~turnkit.rollout.chat.ChatDelta`) an episode's next prompt is its last
prompt, the ids the policy generated and the env's reply: the keys and values of everything but the reply are
already computed. Without reuse every turn encodes the whole conversation again, so a ten-turn episode encodes
its opening ten times. :class:`PrefixKV` keeps each generated sequence's keys and values per layer; the next
call takes the longest kept sequence that starts its prompt and feeds the model only the rest.

* **Same maths, other rounding.** Attention over kept keys is attention over recomputed ones; the numbers
  differ in the last bits (other matrix shapes), so a sampled run with reuse is not bit-identical to one
  without. A turn without a kept prefix (every first turn) is computed exactly as before.
* **Never stale.** An entry holds only for the weights it was computed with: :meth:`PrefixKV.check_weights`
  drops everything when the fingerprint of the model's parameters changes (an optimizer step, a loaded
  adapter), and :class:`~turnkit.agents.hf.HFPolicy` clears it when it switches its adapter off.
* **Bounded.** Entries are kept up to ``max_bytes`` (least recently used go first); a used entry is replaced
  by the longer sequence that continued it.

Example:
    >>> import torch
    >>> kv = PrefixKV(max_bytes=1 << 20)
    >>> layer = (torch.zeros(2, 3, 4), torch.ones(2, 3, 4))  # one layer: [kv heads, tokens, head size]
    >>> kv.put([5, 6, 7], [layer])
    >>> used, layers = kv.take([5, 6, 7, 8, 9])  # the kept ids start the prompt
    >>> used, layers[0][0].shape[1], len(kv)
    (3, 3, 0)
    >>> kv.take([1, 2])
    (0, None)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any

import torch

Layers = list[tuple[torch.Tensor, torch.Tensor]]
"""Per layer, the keys and values of one sequence: ``[kv heads, tokens, head size]`` each."""


class PrefixKV:
    """Kept keys and values of generated sequences, found again by the prompt they start.

    Thread-safe (rollout threads may share one policy). Pickles empty (a copy in another process starts
    without entries).

    Args:
        max_bytes: Most bytes of keys and values kept; the least recently used entries go first.
    """

    def __init__(self, max_bytes: int = 1 << 30) -> None:
        if max_bytes < 0:
            raise ValueError(f"PrefixKV.max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[int, ...], Layers] = OrderedDict()
        self._lengths: dict[int, int] = {}  # length -> entries of that length
        self._bytes = 0
        self._weights: Hashable = None
        self._lock = threading.Lock()
        self.reused_tokens = 0
        """Prompt tokens served from kept entries so far (not fed to the model again)."""

    def __len__(self) -> int:
        return len(self._entries)

    def __getstate__(self) -> dict[str, Any]:
        return {"max_bytes": self.max_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["max_bytes"])  # type: ignore[misc]

    @property
    def nbytes(self) -> int:
        """Bytes of keys and values kept now."""
        return self._bytes

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self._lengths.clear()
            self._bytes = 0

    def check_weights(self, fingerprint: Hashable) -> None:
        """Drop every entry if the weights' fingerprint differs from the one the entries were made with.

        Example:
            >>> kv = PrefixKV()
            >>> kv.put([1, 2], [(torch.zeros(1, 2, 1), torch.zeros(1, 2, 1))])
            >>> kv.check_weights("a"), len(kv)  # the first fingerprint keeps what is there
            (None, 1)
            >>> kv.check_weights("b"), len(kv)
            (None, 0)
        """
        with self._lock:
            if self._weights is not None and fingerprint != self._weights:
                self._entries.clear()
                self._lengths.clear()
                self._bytes = 0
            self._weights = fingerprint

    def take(self, prompt: Sequence[int]) -> tuple[int, Layers | None]:
        """The longest kept sequence that starts ``prompt``, removed from the store, as ``(tokens used, layers)``.

        At least the prompt's last token is left to feed (the model needs an input to give next-token logits),
        so an entry as long as the prompt is used up to its second-to-last token. ``(0, None)`` if none fits.
        """
        ids = tuple(int(t) for t in prompt)
        with self._lock:
            for length in sorted((n for n in self._lengths if n <= len(ids)), reverse=True):
                key = ids[:length]
                layers = self._entries.get(key)
                if layers is None:
                    continue
                self._remove(key)
                used = min(length, len(ids) - 1)
                if used < length:
                    layers = [(k[:, :used], v[:, :used]) for k, v in layers]
                self.reused_tokens += used
                return used, layers
        return 0, None

    def put(self, ids: Sequence[int], layers: Layers) -> None:
        """Keep ``layers`` (the keys and values of ``ids``), evicting the least recently used beyond the budget."""
        key = tuple(int(t) for t in ids)
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        if not key or size > self.max_bytes:
            return
        with self._lock:
            if key in self._entries:
                self._remove(key)
            self._entries[key] = layers
            self._lengths[len(key)] = self._lengths.get(len(key), 0) + 1
            self._bytes += size
            while self._bytes > self.max_bytes:
                self._remove(next(iter(self._entries)))

    def _remove(self, key: tuple[int, ...]) -> None:
        layers = self._entries.pop(key)
        self._bytes -= sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        left = self._lengths[len(key)] - 1
        if left:
            self._lengths[len(key)] = left
        else:
            del self._lengths[len(key)]


def weights_fingerprint(model: torch.nn.Module) -> Hashable:
    """What changes whenever the model's weights may have: its parameters' identities and in-place versions.

    An optimizer step, ``load_state_dict`` and ``copy_`` bump a parameter's version; attaching an adapter adds
    parameters.

    Example:
        >>> layer = torch.nn.Linear(2, 2)
        >>> before = weights_fingerprint(layer)
        >>> with torch.no_grad():
        ...     _ = layer.weight.add_(1.0)
        >>> weights_fingerprint(layer) == before
        False
    """
    params = list(model.parameters())
    return (len(params), sum(id(p) for p in params), sum(p._version for p in params))


def shared_prompts(prompts: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """The distinct prompts of a batch, to prefill each once (``HFPolicy(share_prefill=True)``).

    A group of GRPO samples, or an MRT/PAV prover's ``K`` branches from one point, repeat one prompt: its keys
    and values are the same for every copy, so the batch computes them once per distinct prompt and copies them
    to the repeats before sampling.

    Args:
        prompts: Per row its prompt token ids.

    Returns:
        ``(firsts, rows)``: the row index of each distinct prompt's first occurrence, in order, and per row the
        position in ``firsts`` of its prompt.

    Example:
        >>> shared_prompts([[1, 2], [3], [1, 2], [1, 2]])
        ([0, 1], [0, 1, 0, 0])
    """
    position: dict[tuple[int, ...], int] = {}
    firsts: list[int] = []
    rows: list[int] = []
    for i, prompt in enumerate(prompts):
        key = tuple(prompt)
        if key not in position:
            position[key] = len(firsts)
            firsts.append(i)
        rows.append(position[key])
    return firsts, rows


def batch_cache(rows: Sequence[Layers | None], lengths: Sequence[int]) -> tuple[Layers, torch.Tensor]:
    """Stack per-row kept layers into left-padded batch tensors and their attention mask.

    Args:
        rows: Per row its kept layers, or ``None`` for a row without a kept prefix.
        lengths: Per row the tokens kept (``0`` for ``None`` rows).

    Returns:
        ``(layers, mask)``: per layer ``(keys, values)`` of shape ``[rows, kv heads, width, head size]`` with
        each row's entry right-aligned (zeros before it), and the ``[rows, width]`` mask (``1`` on kept tokens).

    Example:
        >>> a = [(torch.ones(1, 2, 1), torch.ones(1, 2, 1))]
        >>> layers, mask = batch_cache([a, None], [2, 0])
        >>> layers[0][0][:, 0, :, 0].tolist(), mask.tolist()
        ([[1.0, 1.0], [0.0, 0.0]], [[1, 1], [0, 0]])
    """
    width = max(lengths)
    template = next(r for r in rows if r is not None)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    out = []
    for layer, (k0, v0) in enumerate(template):
        keys = k0.new_zeros((len(rows), k0.shape[0], width, k0.shape[2]))
        values = v0.new_zeros((len(rows), v0.shape[0], width, v0.shape[2]))
        for i, (row, n) in enumerate(zip(rows, lengths, strict=True)):
            if row is not None and n:
                keys[i, :, width - n :] = row[layer][0]
                values[i, :, width - n :] = row[layer][1]
        out.append((keys, values))
    for i, n in enumerate(lengths):
        if n:
            mask[i, width - n :] = 1
    return out, mask


def cache_layers(cache: Any) -> Layers | None:
    """Per layer ``(keys, values)`` ``[batch, kv heads, tokens, head size]`` of a transformers cache.

    ``None`` where it is not a plain dynamic cache (sliding-window or recurrent layers keep other state), so such
    a model generates without reuse.
    """
    layers = getattr(cache, "layers", None)
    if layers is None or any(type(layer).__name__ != "DynamicLayer" for layer in layers):
        return None
    return [(layer.keys, layer.values) for layer in layers]


def row_layers(layers: Layers, row: int, positions: torch.Tensor) -> Layers:
    """One row's keys and values at ``positions`` (a copy: the batch's tensors can be freed).

    Example:
        >>> keys = torch.arange(8.0).reshape(2, 1, 4, 1)
        >>> row_layers([(keys, keys)], 1, torch.tensor([1, 3]))[0][0][0, :, 0].tolist()
        [5.0, 7.0]
    """
    return [(k[row][:, positions].clone(), v[row][:, positions].clone()) for k, v in layers]
