"""The text space used for observations and actions of every turnkit env.

Gymnasium's :class:`gymnasium.spaces.Text` only admits characters from a fixed charset; LLM text is
arbitrary Unicode. :class:`TextSpace` admits any ``str`` up to a length, and samples printable text.

Example:
    >>> space = TextSpace(max_length=20, seed=0)
    >>> s = space.sample()
    >>> isinstance(s, str) and len(s) <= 20 and space.contains(s)
    True
    >>> space.contains("héllo wörld ✓"), space.contains(b"bytes")
    (True, False)
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Space

_SAMPLE_CHARS = np.array(list(string.ascii_letters + string.digits + string.punctuation + "     \n"))


class TextSpace(Space[str]):
    """Any Python ``str`` of at most ``max_length`` characters.

    Args:
        max_length: Largest admitted length in characters.
        min_length: Smallest length produced by :meth:`sample`.
        seed: Seed for :meth:`sample`.
    """

    def __init__(self, max_length: int = 1 << 20, *, min_length: int = 1, seed: int | None = None) -> None:
        if not 0 <= min_length <= max_length:
            raise ValueError(f"TextSpace needs 0 <= min_length <= max_length, got {min_length}, {max_length}")
        self.max_length = max_length
        self.min_length = min_length
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """Text cannot be flattened to a fixed-size array."""
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random printable string (at most 64 characters, so that samples stay readable)."""
        hi = min(self.max_length, 64)
        n = int(self.np_random.integers(self.min_length, max(self.min_length, hi) + 1))
        return "".join(self.np_random.choice(_SAMPLE_CHARS, size=n))

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a ``str`` no longer than ``max_length``."""
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextSpace) and other.max_length == self.max_length
