"""Silence the Hugging Face progress bars around a block when a caller asked for no progress.

``transformers`` draws its own bars when it loads (``Loading weights``), saves (``Writing model shards``) and
de-quantises a GGUF file; a library call with ``progress=False`` should print none of them.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator


@contextlib.contextmanager
def hf_progress_bars(enabled: bool) -> Iterator[None]:
    """Switch the transformers progress bars off for the block unless ``enabled``.

    Bars already switched off (a ``--quiet`` command) stay off either way, and their state before the block comes
    back after it. The GGUF de-quantisation bar is a plain ``tqdm`` that transformers' switch does not reach
    (5.24), so the GGUF reader's ``tqdm`` is swapped for a silent one for the block.

    Example:
        >>> from transformers.utils import logging as hf_logging
        >>> before = hf_logging.is_progress_bar_enabled()
        >>> with hf_progress_bars(False):
        ...     inside = hf_logging.is_progress_bar_enabled()
        >>> inside, hf_logging.is_progress_bar_enabled() == before
        (False, True)
    """
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    was, bar = hf_logging.is_progress_bar_enabled(), getattr(gguf_utils, "tqdm", None)
    if not enabled or not was:
        hf_logging.disable_progress_bar()
        if bar is not None:
            gguf_utils.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        if bar is not None:
            gguf_utils.tqdm = bar
        if was and not enabled:
            hf_logging.enable_progress_bar()
