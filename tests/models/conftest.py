"""Fixtures of the tiny-model tests, shared with the agent and training tests (byte tokenizer, models, recipe)."""

from tests.agents.conftest import model  # noqa: F401  (a fixture: the hidden-64 random model)
from tests.train.conftest import MICRO_RECIPE, make_policy, tokenizer  # noqa: F401  (tokenizer is a fixture)
