"""Pin torch's intra-op thread count for a block of code.

Two reasons to pin it for the embedded tiny model (0.56M parameters):

* **Bits.** A CPU matmul splits its reductions by thread, so the same SFT run with 1 and 2 threads ends
  with weights that differ in the 6th decimal, and a cached policy would depend on the machine that
  built it. Built with one thread, it is the same on every machine with the same instruction set.
* **Speed.** The model's matrices are too small to gain from threads; on a busy 2-core machine two
  threads were 4-12× *slower* than one (BENCHMARKS.md, "Training").

Example:
    >>> import torch
    >>> before = torch.get_num_threads()
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from turnkit.errors import ConfigError


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(n)`` and restore the previous count after.

    Args:
        n: Threads to use; ``None`` leaves torch's setting alone.

    Raises:
        ConfigError: if ``n`` is not ``None`` or an int >= 1.

    Example:
        >>> with torch_threads(0):
        ...     pass
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: threads must be None or an int >= 1, got 0
    """
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ConfigError(f"threads must be None or an int >= 1, got {n!r}")
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
