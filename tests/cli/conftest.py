"""Shared fixtures of the command-line tests: the byte-level tiny tokenizer."""

from __future__ import annotations

import pytest
from transformers import PreTrainedTokenizerFast

from turnkit.models.tiny import build_tiny_tokenizer


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerFast:
    """The byte-level tiny tokenizer."""
    return build_tiny_tokenizer()
