"""The study tests reuse the training tests' tiny tokenizer fixture (and, by import, their micro recipe)."""

from tests.train.conftest import tokenizer  # noqa: F401  (the session fixture)
