"""The locally built tokenizer and tiny Llama model.

Run: python -m pytest tests/models/test_tiny.py -q
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.agents.conftest import TEST_CONFIG
from turnkit.errors import ConfigError
from turnkit.models.tiny import (
    SPECIAL_TOKENS,
    TinyModelConfig,
    build_tiny_model,
    build_tiny_tokenizer,
    cache_dir,
    load_tiny,
    save_tiny,
)

TEXTS = ["ANSWER: 3.14", "  two  spaces\nand a newline\ttab", "unicode: é, ∑, 数学, 🙂", "<|end|> is special"]


@pytest.mark.parametrize("text", TEXTS)
def test_any_text_round_trips(tokenizer, text):
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


def test_byte_level_retokenising_is_the_identity(tokenizer):
    ids = tokenizer("x = 12 * (3 + 4)")["input_ids"]
    assert tokenizer(tokenizer.decode(ids))["input_ids"] == ids


def test_special_tokens_are_single_ids_in_order(tokenizer):
    assert [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == list(range(len(SPECIAL_TOKENS)))
    assert (tokenizer.pad_token, tokenizer.bos_token, tokenizer.eos_token) == ("<|pad|>", "<|bos|>", "<|end|>")


def test_chat_template_renders_every_role(tokenizer):
    messages = [{"role": r, "content": r[0]} for r in ("system", "user", "assistant", "tool")]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == "<|bos|><|system|>s<|end|><|user|>u<|end|><|assistant|>a<|end|><|tool|>t<|end|><|assistant|>"


def test_chat_template_rejects_unknown_roles(tokenizer):
    with pytest.raises(Exception, match="unknown chat role: robot"):
        tokenizer.apply_chat_template([{"role": "robot", "content": "x"}], tokenize=False)


def test_trained_bpe_is_deterministic_and_shorter():
    corpus = [f"{a}+{b}={a + b}" for a in range(30) for b in range(30)]
    first, second = build_tiny_tokenizer(corpus, vocab_size=300), build_tiny_tokenizer(corpus, vocab_size=300)
    assert first.get_vocab() == second.get_vocab() and len(first) == 300
    text = "12+13=25"
    assert len(first(text)["input_ids"]) < len(text)
    assert first.decode(first(text)["input_ids"]) == text


def test_bpe_vocab_below_the_alphabet_is_a_config_error():
    with pytest.raises(ConfigError, match="vocab_size=100"):
        build_tiny_tokenizer(["abc"], vocab_size=100)


def test_same_seed_same_weights_other_seed_other_weights(tokenizer):
    a, b, c = (build_tiny_model(tokenizer, TEST_CONFIG, seed=s) for s in (0, 0, 1))
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)


def test_building_leaves_the_global_rng_alone(tokenizer):
    state = torch.random.get_rng_state()
    build_tiny_model(tokenizer, TEST_CONFIG, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_default_size_is_a_few_million_parameters(tokenizer):
    n = sum(p.numel() for p in build_tiny_model(tokenizer, TinyModelConfig()).parameters())
    assert 2_000_000 <= n <= 5_000_000


def test_model_special_ids_come_from_the_tokenizer(model, tokenizer):
    cfg = model.config
    assert (cfg.vocab_size, cfg.eos_token_id, cfg.pad_token_id) == (len(tokenizer), 2, 0)


def test_save_and_load_with_the_standard_auto_classes(model, tokenizer, tmp_path):
    save_tiny(model, tokenizer, tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    ids = torch.tensor([tok("<|bos|><|user|>1+1<|end|><|assistant|>")["input_ids"]])
    assert torch.equal(loaded(ids).logits, model(ids).logits)
    assert tok.chat_template == tokenizer.chat_template and tok.padding_side == "left"


def test_load_tiny_round_trip(model, tokenizer, tmp_path):
    m2, t2 = load_tiny(save_tiny(model, tokenizer, tmp_path / "m"))
    assert all(torch.equal(x, y) for x, y in zip(m2.parameters(), model.parameters(), strict=True))
    assert t2.get_vocab() == tokenizer.get_vocab()


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TURNKIT_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path


@pytest.mark.parametrize("field", ["hidden_size", "num_layers", "max_position_embeddings"])
def test_non_positive_sizes_are_config_errors(field):
    with pytest.raises(ConfigError, match=field):
        TinyModelConfig(**{field: 0})
