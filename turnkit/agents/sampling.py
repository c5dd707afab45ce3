"""Sampling settings and per-context sampling seeds shared by the model-backed agents.

Every model-backed agent (:mod:`~turnkit.agents.hf`, :mod:`~turnkit.agents.vllm`,
:mod:`~turnkit.agents.openai`) draws each context's sample from its own random stream, seeded by
:func:`context_seeds`. The seed of a context mixes:

* the agent's ``seed`` (change it, e.g. per training iteration, for fresh samples on the same episodes),
* ``Context.episode_seed`` and ``Context.turn``,
* a digest of the conversation, and
* the context's rank among *identical* contexts in the same batch (same episode seed, turn and
  conversation), so the members of a same-seed GRPO group get different samples.

So a context's sample does not depend on which other contexts share its batch, batching is invisible, and
the same seed gives the same text in any process. Contexts without an episode seed instead take seeds from
the agent's own ``numpy`` generator, reproducible for a given agent seed and call order.

Example:
    >>> import numpy as np
    >>> from turnkit.agents.base import Context
    >>> from turnkit.types import Message
    >>> ctx = Context(messages=(Message("user", "2+2?"),), episode_seed=7)
    >>> a, b = context_seeds([ctx, ctx], seed=0, rng=np.random.default_rng(0))
    >>> a != b, a == context_seeds([ctx], seed=0, rng=np.random.default_rng(1))[0]
    (True, True)
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from turnkit.agents.base import Context
from turnkit.configs import check_float, check_int

_MASK63 = (1 << 63) - 1


@dataclass(frozen=True)
class SamplingConfig:
    """How a model-backed agent samples.

    Attributes:
        temperature: Softmax temperature; ``0`` means greedy decoding.
        top_p: Nucleus sampling mass in ``(0, 1]``; ``1`` disables it.
        max_new_tokens: Most tokens generated per turn.
        seed: Base seed mixed into every context's sampling seed.

    Example:
        >>> SamplingConfig(temperature=0.7).top_p
        1.0
        >>> SamplingConfig(top_p=0.0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: SamplingConfig.top_p must be a finite number > 0 and <= 1, got 0.0
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        check_float(self, "temperature", low=0.0)
        check_float(self, "top_p", low=0.0, high=1.0, open_low=True)
        check_int(self, "max_new_tokens")


def conversation_digest(ctx: Context) -> int:
    """A stable 63-bit digest of a context's conversation (roles and contents).

    Example:
        >>> from turnkit.types import Message
        >>> conversation_digest(Context(messages=(Message("user", "hi"),)))
        4436847308898230826
    """
    h = hashlib.blake2b(digest_size=8)
    for m in ctx.messages:
        h.update(m.role.encode())
        h.update(b"\x00")
        h.update(m.content.encode("utf-8", "surrogatepass"))
        h.update(b"\x01")
    return int.from_bytes(h.digest(), "little") & _MASK63


def context_seeds(contexts: Sequence[Context], *, seed: int, rng: np.random.Generator) -> list[int]:
    """One 63-bit sampling seed per context (see the module docstring for what it mixes).

    Args:
        contexts: The batch.
        seed: The agent's base seed.
        rng: The agent's generator, used only for contexts without ``episode_seed``.

    Returns:
        Non-negative ints below ``2**63``, usable as ``torch.Generator`` or vLLM/OpenAI ``seed`` values.

    Example:
        >>> from turnkit.types import Message
        >>> ctx = Context(messages=(Message("user", "hi"),), episode_seed=1, turn=0)
        >>> s0 = context_seeds([ctx], seed=0, rng=np.random.default_rng(0))
        >>> s0 == context_seeds([ctx], seed=0, rng=np.random.default_rng(0)), s0 == context_seeds(
        ...     [ctx], seed=1, rng=np.random.default_rng(0))
        (True, False)
    """
    seen: dict[tuple[int, int, int], int] = {}
    out = []
    for ctx in contexts:
        if ctx.episode_seed is None:
            out.append(int(rng.integers(0, _MASK63, dtype=np.int64)))
            continue
        key = (ctx.episode_seed & _MASK63, ctx.turn, conversation_digest(ctx))
        rank = seen.get(key, 0)
        seen[key] = rank + 1
        state = np.random.SeedSequence([seed & _MASK63, *key, rank]).generate_state(2, dtype=np.uint32)
        out.append((int(state[0]) << 31 ^ int(state[1])) & _MASK63)
    return out
