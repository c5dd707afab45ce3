"""A tiny Llama-style model and a tokenizer built locally, with no downloads.

This is the embedded default policy: the same ``transformers`` classes (``LlamaForCausalLM``,
``PreTrainedTokenizerFast``) and the same ``save_pretrained``/``from_pretrained`` paths as any HF model, so
code written against it runs unchanged on a real checkpoint.

The tokenizer is byte-level: every UTF-8 byte is a token (256 ids) plus special tokens for the chat roles,
so any text round-trips exactly and re-tokenising a decoded completion gives back the same ids. Given a
corpus, :func:`build_tiny_tokenizer` also learns byte-level BPE merges (shorter sequences, faster
generation); re-tokenising is then no longer guaranteed to be the identity, which is why learners train on
the stored ids (token-in/token-out).

The chat format is ``<|bos|><|user|>text<|end|><|assistant|>text<|end|>...``; ``<|end|>`` is the EOS token,
so a policy stops at the end of its message.

Example:
    >>> tok = build_tiny_tokenizer()
    >>> ids = tok.apply_chat_template([{"role": "user", "content": "1+1?"}], add_generation_prompt=True,
    ...                               tokenize=False)
    >>> ids
    '<|bos|><|user|>1+1?<|end|><|assistant|>'
    >>> model = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2,
    ...                                               intermediate_size=64), seed=0)
    >>> model.config.vocab_size == len(tok), model.config.eos_token_id == tok.eos_token_id
    (True, True)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from turnkit.configs import check_bool, check_int
from turnkit.errors import ConfigError

PAD, BOS, END = "<|pad|>", "<|bos|>", "<|end|>"
ROLE_TOKENS = {role: f"<|{role}|>" for role in ("system", "user", "assistant", "tool")}
SPECIAL_TOKENS = (PAD, BOS, END, *ROLE_TOKENS.values())
"""Special tokens, in id order (``<|pad|>`` is 0)."""

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant', 'tool'] %}"
    "{{ raise_exception('unknown chat role: ' + message['role']) }}"
    "{% endif %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)
"""Jinja chat template of the tiny tokenizer (HF ``apply_chat_template`` format)."""


@dataclass(frozen=True)
class TinyModelConfig:
    """Size of the tiny Llama-style model. The defaults give about 3.3M parameters.

    Attributes:
        hidden_size: Residual width.
        num_layers: Transformer blocks.
        num_heads: Attention heads (``hidden_size`` must be divisible by it).
        intermediate_size: MLP width.
        max_position_embeddings: Longest sequence (prompt + completion) in tokens.
        tie_word_embeddings: Share the input embedding and the LM head.

    Example:
        >>> TinyModelConfig(hidden_size=64, num_layers=2).num_heads
        4
        >>> TinyModelConfig(hidden_size=30, num_heads=4)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: TinyModelConfig.hidden_size=30 is not divisible by num_heads=4
    """

    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 704
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = True

    def __post_init__(self) -> None:
        check_int(self, "hidden_size", "num_layers", "num_heads", "intermediate_size", "max_position_embeddings")
        check_bool(self, "tie_word_embeddings")
        if self.hidden_size % self.num_heads:
            raise ConfigError(
                f"TinyModelConfig.hidden_size={self.hidden_size} is not divisible by num_heads={self.num_heads}"
            )


def cache_dir() -> Path:
    """The turnkit cache folder: ``$TURNKIT_CACHE`` or ``~/.cache/turnkit`` (not created here).

    Example:
        >>> import os
        >>> from unittest import mock
        >>> with mock.patch.dict(os.environ, {"TURNKIT_CACHE": "/srv/tk-cache"}):
        ...     str(cache_dir())
        '/srv/tk-cache'
        >>> with mock.patch.dict(os.environ, {"TURNKIT_CACHE": ""}):
        ...     cache_dir().parts[-2:]
        ('.cache', 'turnkit')
    """
    env = os.environ.get("TURNKIT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "turnkit"


def build_tiny_tokenizer(corpus: Iterable[str] | None = None, *, vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """Build the byte-level chat tokenizer locally.

    Args:
        corpus: Optional texts to learn BPE merges from. Without it there are no merges: one token per byte
            (``256 + len(SPECIAL_TOKENS)`` ids). Training is deterministic for a given corpus.
        vocab_size: Total vocabulary size when training on ``corpus`` (at least the byte alphabet plus the
            special tokens).

    Returns:
        A ``PreTrainedTokenizerFast`` with ``<|bos|>``, ``<|end|>`` (EOS), ``<|pad|>``, role tokens and the
        chat template, padding on the left (for batched generation).

    Example:
        >>> tok = build_tiny_tokenizer()
        >>> len(tok), tok.pad_token_id, tok.eos_token
        (263, 0, '<|end|>')
        >>> tok.decode(tok("héllo 42")["input_ids"])
        'héllo 42'
        >>> bpe = build_tiny_tokenizer(["12+34=46"] * 20, vocab_size=270)
        >>> len(bpe("12+34=46")["input_ids"]) < len(tok("12+34=46")["input_ids"])
        True
    """
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    base = len(alphabet) + len(SPECIAL_TOKENS)
    if corpus is None:
        vocab = {t: i for i, t in enumerate([*SPECIAL_TOKENS, *alphabet])}
        tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        if vocab_size < base:
            raise ConfigError(f"vocab_size={vocab_size} is below the byte alphabet plus special tokens ({base})")
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=alphabet,
            show_progress=False,
        )
        tok.train_from_iterator(corpus, trainer=trainer)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=END,
        pad_token=PAD,
        additional_special_tokens=list(ROLE_TOKENS.values()),
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(
    tokenizer: PreTrainedTokenizerFast, config: TinyModelConfig | None = None, *, seed: int = 0
) -> LlamaForCausalLM:
    """A randomly initialised Llama-style causal LM sized for ``tokenizer``.

    Initialisation uses a forked torch RNG seeded with ``seed``: the same seed gives the same weights, and
    the caller's global torch RNG state is left untouched.

    Args:
        tokenizer: The tokenizer (vocabulary size and special-token ids are read from it).
        config: Model size; defaults to :class:`TinyModelConfig`.
        seed: Initialisation seed.

    Returns:
        The model in eval mode, float32, on CPU.

    Example:
        >>> tok = build_tiny_tokenizer()
        >>> cfg = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
        >>> a, b = build_tiny_model(tok, cfg, seed=1), build_tiny_model(tok, cfg, seed=1)
        >>> all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
        True
    """
    config = config or TinyModelConfig()
    hf_config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_heads,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=config.tie_word_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(hf_config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model.eval()


def save_tiny(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, path: str | Path) -> Path:
    """Save model and tokenizer side by side with ``save_pretrained`` (a standard HF model folder).

    Args:
        model: The model.
        tokenizer: Its tokenizer.
        path: Target folder (created).

    Returns:
        The folder, loadable with :func:`load_tiny` or ``AutoModelForCausalLM.from_pretrained``.

    Example:
        >>> import tempfile
        >>> tok = build_tiny_tokenizer()
        >>> cfg = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
        >>> model = build_tiny_model(tok, cfg)
        >>> with tempfile.TemporaryDirectory() as d:
        ...     m2, t2 = load_tiny(save_tiny(model, tok, d))
        >>> torch.equal(m2.lm_head.weight, model.lm_head.weight), t2.chat_template == tok.chat_template
        (True, True)
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def load_tiny(path: str | Path) -> tuple[LlamaForCausalLM, PreTrainedTokenizerFast]:
    """Load a folder written by :func:`save_tiny` (local files only; never the hub).

    Raises:
        ConfigError: ``path`` is not a folder with a model config.

    Example:
        >>> load_tiny("/nonexistent/model")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: no model at /nonexistent/model: expected /nonexistent/model/config.json
    """
    path = Path(path)
    if not (path / "config.json").is_file():
        raise ConfigError(f"no model at {path}: expected {path / 'config.json'}")
    model = LlamaForCausalLM.from_pretrained(path, local_files_only=True)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    return model.eval(), tokenizer
