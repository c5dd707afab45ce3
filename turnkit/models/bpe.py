"""A byte-level BPE tokenizer with a ChatML chat template, trained locally (a stand-in for Qwen-style tokenizers).

The byte-level tiny tokenizer (:mod:`turnkit.models.tiny`) maps every byte to one id, so decoding and
re-encoding a completion gives back the same ids. Real chat models use byte-level BPE, where it often does
not: the ids a policy sampled (say ``"AN" "SW" "ER"``) decode to a text that re-encodes canonically
(``"ANSWER"``). :func:`build_bpe_tokenizer` builds such a tokenizer in well under a second, with the ChatML
format of Qwen and others, so tests and studies can exercise token-exact multi-turn contexts
(:class:`~turnkit.rollout.chat.ChatDelta`) on the kind of tokenizer where they matter.

Special tokens, in id order: ``<|endoftext|>`` (padding), ``<|im_start|>``, ``<|im_end|>`` (EOS, so a policy
stops at the end of its message). There is no BOS token, as in Qwen. A conversation renders as
``<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n...<|im_end|>\\n``.

:func:`~turnkit.models.tiny.build_tiny_model` sizes a randomly initialised Llama model for this tokenizer
as for any other.

Example:
    >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model
    >>> tok = build_bpe_tokenizer()
    >>> tok.apply_chat_template([{"role": "user", "content": "2+2?"}], add_generation_prompt=True, tokenize=False)
    '<|im_start|>user\\n2+2?<|im_end|>\\n<|im_start|>assistant\\n'
    >>> model = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2,
    ...                                               intermediate_size=64), seed=0)
    >>> model.config.vocab_size == len(tok), model.config.eos_token_id == tok.eos_token_id
    (True, True)
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from turnkit.errors import ConfigError

PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (PAD, IM_START, IM_END)
"""Special tokens, in id order (``<|endoftext|>`` is 0)."""

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""Jinja ChatML chat template (HF ``apply_chat_template`` format); no default system message."""

DEFAULT_CORPUS = (
    "What is 6 plus 5?\nReply with ANSWER: <value>.",
    "Compute 12 - 7.\nReply with ANSWER: <value>.",
    "Solve for x: 3x + 4 = 19.\nReply with ANSWER: <value>.",
    "Simplify 3/4 + 1/8.\nReply with ANSWER: <value>.",
    "Tom has 14 apples and gives away 5. How many apples are left?\nReply with ANSWER: <value>.",
    "No answer yet. Reply with ANSWER: <value>. 508 words left.",
    "Incorrect. 2 attempts left.",
    "Correct.",
    "Let me add them. 6 plus 5 is 11.\nANSWER: 11",
    "You are helping a person write a Python function. They know what they need but not how to code it, "
    "and they only answer briefly. Ask them questions to find out the details.",
    "The signature of the function is: def grade_outcome(score)",
    "What is the cutoff score for passing, and does a score exactly at the cutoff pass?",
    "The passing cutoff is 65 points. A score exactly at the cutoff counts as a pass.",
    "I don't know.",
    "I WANT TO ANSWER:\n```python\ndef grade_outcome(score):\n    return score >= 65\n```",
    "Your function passed 7 of 10 hidden tests.",
)
"""Short texts in the style of the built-in envs (math problems and feedback, CollabCode dialogue and code)."""


def build_bpe_tokenizer(
    corpus: Iterable[str] = DEFAULT_CORPUS, *, vocab_size: int = 512, min_frequency: int = 2
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer with ChatML special tokens and chat template (deterministic, local).

    Args:
        corpus: Texts to learn merges from (default :data:`DEFAULT_CORPUS`). Training stops early when no
            pair occurs ``min_frequency`` times, so a small corpus gives fewer than ``vocab_size`` ids.
        vocab_size: Largest vocabulary: the 256 byte tokens, the special tokens and the merges.
        min_frequency: Fewest occurrences for a pair to be merged.

    Returns:
        A ``PreTrainedTokenizerFast``: EOS ``<|im_end|>``, pad ``<|endoftext|>``, no BOS, ``<|im_start|>`` as an
        additional special token, :data:`CHATML_TEMPLATE`, padding on the left (for batched generation).

    Raises:
        ConfigError: ``vocab_size`` below the byte alphabet plus the special tokens, or ``min_frequency < 1``.

    Example:
        >>> tok = build_bpe_tokenizer()
        >>> tok.eos_token, tok.pad_token_id, tok.bos_token is None
        ('<|im_end|>', 0, True)
        >>> ids = tok("ANSWER: 11")["input_ids"]
        >>> tok.decode(ids), len(ids) < len("ANSWER: 11")  # merges learnt from the corpus
        ('ANSWER: 11', True)
        >>> build_bpe_tokenizer(vocab_size=100)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: vocab_size=100 is below the byte alphabet plus special tokens (259)
    """
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    base = len(alphabet) + len(SPECIAL_TOKENS)
    if vocab_size < base:
        raise ConfigError(f"vocab_size={vocab_size} is below the byte alphabet plus special tokens ({base})")
    if min_frequency < 1:
        raise ConfigError(f"min_frequency must be >= 1, got {min_frequency}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=PAD,
        additional_special_tokens=[IM_START],
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast
