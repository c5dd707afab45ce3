"""LoRA on HFPolicy: save/load round trip, in-place loading, and the adapter-disabled reference policy.

Run: python -m pytest tests/agents/test_lora.py -q
"""

from __future__ import annotations

import pytest
import torch

from tests.agents.conftest import TEST_CONFIG, make_context
from turnkit.agents.hf import HFPolicy
from turnkit.errors import ConfigError
from turnkit.models.tiny import build_tiny_model

PROMPT, COMPLETION = [[1, 4, 60, 61, 62, 2, 5]], [[70, 71, 72, 73]]


def _policy(tokenizer) -> HFPolicy:
    # A fresh base model per test: peft injects its layers into the model object it wraps.
    return HFPolicy(build_tiny_model(tokenizer, TEST_CONFIG, seed=0), tokenizer, max_new_tokens=16)


def _perturb_lora(policy: HFPolicy, seed: int) -> None:
    """Give lora_B non-zero weights, as training would (a fresh adapter is the identity)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.5)


def test_a_fresh_adapter_leaves_outputs_unchanged(tokenizer):
    policy = _policy(tokenizer)
    before = policy.sequence_logprobs(PROMPT, COMPLETION)
    policy.attach_lora(r=4)
    assert torch.allclose(policy.sequence_logprobs(PROMPT, COMPLETION), before, atol=1e-6)


def test_only_lora_weights_are_trainable(tokenizer):
    policy = _policy(tokenizer)
    policy.attach_lora(r=4)
    trainable = [n for n, p in policy.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)


def test_save_then_load_gives_identical_outputs(tokenizer, tmp_path):
    trained = _policy(tokenizer)
    trained.attach_lora(r=4)
    _perturb_lora(trained, seed=1)
    trained.save_adapter(tmp_path / "adapter")
    fresh = _policy(tokenizer)
    fresh.load_adapter(tmp_path / "adapter")
    contexts = [make_context("2+2?", seed=s) for s in range(3)]
    assert fresh.act(contexts) == trained.act(contexts)
    assert torch.equal(fresh.sequence_logprobs(PROMPT, COMPLETION), trained.sequence_logprobs(PROMPT, COMPLETION))


def test_loading_into_an_attached_adapter_keeps_the_parameter_objects(tokenizer, tmp_path):
    source = _policy(tokenizer)
    source.attach_lora(r=4)
    _perturb_lora(source, seed=2)
    source.save_adapter(tmp_path)
    target = _policy(tokenizer)
    target.attach_lora(r=4)
    params_before = {n: p for n, p in target.model.named_parameters() if p.requires_grad}
    target.load_adapter(tmp_path)
    params_after = {n: p for n, p in target.model.named_parameters() if p.requires_grad}
    assert all(params_after[n] is p for n, p in params_before.items())
    assert torch.equal(target.sequence_logprobs(PROMPT, COMPLETION), source.sequence_logprobs(PROMPT, COMPLETION))


def test_loading_an_adapter_of_another_rank_is_a_config_error(tokenizer, tmp_path):
    source = _policy(tokenizer)
    source.attach_lora(r=8)
    source.save_adapter(tmp_path)
    target = _policy(tokenizer)
    target.attach_lora(r=4)
    with pytest.raises(ConfigError, match="r=8"):
        target.load_adapter(tmp_path)


def test_reference_equals_the_base_model(tokenizer):
    base = _policy(tokenizer).sequence_logprobs(PROMPT, COMPLETION)
    policy = _policy(tokenizer)
    policy.attach_lora(r=4)
    _perturb_lora(policy, seed=3)
    adapted = policy.sequence_logprobs(PROMPT, COMPLETION)
    with policy.reference() as ref:
        reference = ref.sequence_logprobs(PROMPT, COMPLETION)
    assert not torch.allclose(adapted, base, atol=1e-3)
    assert torch.allclose(reference, base, atol=1e-6)
    assert torch.equal(policy.sequence_logprobs(PROMPT, COMPLETION), adapted)  # adapter back on after the block


def test_reference_acts_like_the_base_model(tokenizer):
    contexts = [make_context("2+2?", seed=s) for s in range(3)]
    base_turns = _policy(tokenizer).act(contexts)
    policy = _policy(tokenizer)
    policy.attach_lora(r=4)
    _perturb_lora(policy, seed=3)
    with policy.reference():
        assert [t.token_ids for t in policy.act(contexts)] == [t.token_ids for t in base_turns]


def test_reference_without_an_adapter_is_a_config_error(tokenizer):
    with pytest.raises(ConfigError, match="needs a LoRA adapter"), _policy(tokenizer).reference():
        pass


def test_attaching_twice_is_a_config_error(tokenizer):
    policy = _policy(tokenizer)
    policy.attach_lora(r=4)
    with pytest.raises(ConfigError, match="already attached"):
        policy.attach_lora(r=4)


def test_attach_is_deterministic_and_leaves_the_global_rng_alone(tokenizer):
    a, b = _policy(tokenizer), _policy(tokenizer)
    state = torch.random.get_rng_state()
    a.attach_lora(r=4, seed=7)
    b.attach_lora(r=4, seed=7)
    assert torch.equal(torch.random.get_rng_state(), state)
    for (_, pa), (_, pb) in zip(a.model.named_parameters(), b.model.named_parameters(), strict=True):
        assert torch.equal(pa, pb)


def test_attaching_an_adapter_raises_no_deprecation_warning(model, tokenizer):
    import copy
    import warnings

    from turnkit.agents.hf import HFPolicy

    policy = HFPolicy(copy.deepcopy(model), tokenizer)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        policy.attach_lora(r=4)
    assert policy.has_adapter


def test_loading_an_adapter_raises_no_deprecation_warning(model, tokenizer, tmp_path):
    import copy
    import warnings

    from turnkit.agents.hf import HFPolicy

    saved = HFPolicy(copy.deepcopy(model), tokenizer)
    saved.attach_lora(r=4)
    path = saved.save_adapter(tmp_path / "adapter")
    fresh = HFPolicy(copy.deepcopy(model), tokenizer)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        fresh.load_adapter(path)
    assert fresh.has_adapter
