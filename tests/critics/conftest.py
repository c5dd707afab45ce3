"""Shared fixtures of the critic tests."""

import pytest
import torch

from turnkit.models.tiny import build_tiny_tokenizer


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models run fastest on one thread; on a busy shared box more threads are several times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tok():
    """The byte-level tiny tokenizer."""
    return build_tiny_tokenizer()
