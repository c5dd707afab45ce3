"""VLLMPolicy: the CPU-runnable missing-extra error, and GPU tests (skipped without CUDA and vLLM).

Run: python -m pytest tests/agents/test_vllm.py -q          (GPU tests: add -m gpu on a CUDA machine)
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from tests.agents.conftest import make_context
from turnkit.agents.hf import HFPolicy
from turnkit.agents.vllm import VLLMPolicy
from turnkit.errors import AgentError, ConfigError
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer, save_tiny


def needs_vllm_gpu(test):
    """Mark a test gpu and skip it without CUDA or without vLLM."""
    test = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs the turnkit[vllm] extra")(test)
    test = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")(test)
    return pytest.mark.gpu(test)


# vLLM's attention kernels want a head size of 64: hidden 128 over 2 heads.
GPU_CONFIG = TinyModelConfig(hidden_size=128, num_layers=2, num_heads=2, intermediate_size=256)


def test_constructing_without_vllm_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` fail even where it is installed
    with pytest.raises(AgentError, match=r"pip install 'turnkit\[vllm\]'"):
        VLLMPolicy("/nonexistent/model")


def test_bad_sampling_settings_fail_before_importing_vllm(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ConfigError, match="top_p"):
        VLLMPolicy("/nonexistent/model", top_p=2.0)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    tok = build_tiny_tokenizer()
    return save_tiny(build_tiny_model(tok, GPU_CONFIG, seed=0), tok, tmp_path_factory.mktemp("tiny"))


def _vllm(path, **kwargs) -> VLLMPolicy:
    return VLLMPolicy(path, dtype="float32", gpu_memory_utilization=0.2, enforce_eager=True, **kwargs)


@needs_vllm_gpu
def test_vllm_ids_and_logprobs_match_hf(tiny_dir):
    policy = _vllm(tiny_dir, max_new_tokens=12)
    contexts = [make_context(t, seed=i) for i, t in enumerate(["1+1?", "What is 6*7?"])]
    turns = policy.act(contexts)
    hf = HFPolicy.from_pretrained(tiny_dir)
    for turn, ctx in zip(turns, contexts, strict=True):
        assert len(turn.token_ids) == len(turn.logprobs) > 0
        assert turn.prompt_token_ids == tuple(hf.act([ctx])[0].prompt_token_ids)
        expected = hf.sequence_logprobs([turn.prompt_token_ids], [turn.token_ids])[0]
        assert torch.allclose(torch.tensor(turn.logprobs), expected, atol=1e-3)
    assert policy.act(contexts) == turns  # same seeds, same turns


@needs_vllm_gpu
def test_lora_hot_swap_changes_outputs_and_bumps_the_id(tiny_dir, tmp_path):
    hf = HFPolicy.from_pretrained(tiny_dir)
    hf.attach_lora(r=4)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in hf.model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen))
    hf.save_adapter(tmp_path / "a1")
    policy = _vllm(tiny_dir, temperature=0.0, max_new_tokens=12, enable_lora=True, max_lora_rank=8)
    contexts = [make_context("1+1?", seed=0)]
    base = policy.act(contexts)[0].token_ids
    policy.load_adapter(tmp_path / "a1")
    assert policy.adapter_id == 1
    adapted = policy.act(contexts)[0].token_ids
    assert adapted == hf.with_sampling(temperature=0.0, max_new_tokens=12).act(contexts)[0].token_ids
    assert adapted != base
    with policy.reference():
        assert policy.act(contexts)[0].token_ids == base
    policy.load_adapter(tmp_path / "a1")
    assert policy.adapter_id == 2 and policy.act(contexts)[0].token_ids == adapted
