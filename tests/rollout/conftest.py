"""Fixtures of the rollout tests, shared with the training tests (the byte-level tiny tokenizer)."""

from tests.train.conftest import tokenizer  # noqa: F401  (a fixture)
