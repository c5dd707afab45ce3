"""Fixtures shared across test packages."""

import pytest


@pytest.fixture(scope="module")
def policy_factory():
    """Builds fresh, identical micro HF policies (1 layer, 32 wide, seed 0) on the default byte tokenizer."""
    from turnkit.agents.hf import HFPolicy
    from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()

    def make():
        cfg = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
        return HFPolicy(build_tiny_model(tok, cfg, seed=0), tok)

    return make
