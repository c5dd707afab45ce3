"""HFPolicy on a tiny random-weight model: padding, seeds, log-probs, stopping and loading.

Run: python -m pytest tests/agents/test_hf.py -q
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.agents.conftest import make_context
from turnkit.agents.hf import HFPolicy, chat_prompt_ids, sample_tokens
from turnkit.errors import ConfigError
from turnkit.models.tiny import save_tiny
from turnkit.types import Message

PROMPTS = ["1+1?", "What is 12*(3+4)?", "hi", "Solve x^2 = 49 for positive x, please.", "7-3"]


def _contexts():
    return [make_context(text, seed=10 + i) for i, text in enumerate(PROMPTS)]


def test_batch_gives_the_same_tokens_as_one_by_one(policy):
    batched = policy.act(_contexts())
    single = [policy.act([ctx])[0] for ctx in _contexts()]
    for b, s in zip(batched, single, strict=True):
        assert b.token_ids == s.token_ids
        assert b.prompt_token_ids == s.prompt_token_ids
        assert b.text == s.text
        assert torch.allclose(torch.tensor(b.logprobs), torch.tensor(s.logprobs), atol=1e-5)


def test_splitting_into_small_batches_changes_nothing(policy):
    small = policy.with_sampling()
    small.max_batch_size = 2
    assert [t.token_ids for t in small.act(_contexts())] == [t.token_ids for t in policy.act(_contexts())]


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_returned_logprobs_match_sequence_logprobs(policy, temperature, top_p):
    p = policy.with_sampling(temperature=temperature, top_p=top_p)
    turns = p.act(_contexts())
    recomputed = p.sequence_logprobs([t.prompt_token_ids for t in turns], [t.token_ids for t in turns])
    for row, t in enumerate(turns):
        n = len(t.token_ids)
        assert n > 0
        assert torch.allclose(recomputed[row, :n], torch.tensor(t.logprobs), atol=1e-4)
        assert bool((recomputed[row, n:] == 0).all())


def test_same_seed_gives_same_text(policy):
    ctx = make_context("2+2?", seed=5)
    assert policy.act([ctx]) == policy.act([ctx])


def test_other_episode_seed_or_policy_seed_gives_other_samples(policy):
    base = policy.act([make_context("2+2?", seed=5)])[0].token_ids
    assert policy.act([make_context("2+2?", seed=6)])[0].token_ids != base
    assert policy.with_sampling(seed=1).act([make_context("2+2?", seed=5)])[0].token_ids != base


def test_identical_contexts_in_one_batch_get_different_samples(policy):
    group = policy.act([make_context("2+2?", seed=5)] * 4)
    assert len({t.token_ids for t in group}) == 4
    assert group[0].token_ids == policy.act([make_context("2+2?", seed=5)])[0].token_ids


def test_unseeded_contexts_are_reproducible_per_policy_seed(policy):
    ctx = make_context("2+2?", seed=None)
    first = policy.with_sampling(seed=3).act([ctx, ctx])
    again = policy.with_sampling(seed=3).act([ctx, ctx])
    assert first == again and first[0].token_ids != first[1].token_ids


def test_prompt_token_ids_are_the_chat_template(policy, tokenizer):
    messages = (Message("user", "2+2?"), Message("assistant", "5"), Message("user", "No."))
    turn = policy.act([dataclasses.replace(make_context(""), messages=messages)])[0]
    expected = "<|bos|><|user|>2+2?<|end|><|assistant|>5<|end|><|user|>No.<|end|><|assistant|>"
    assert tokenizer.decode(list(turn.prompt_token_ids)) == expected


def test_a_stop_token_ends_the_turn_and_is_kept_in_token_ids(model, tokenizer):
    greedy = HFPolicy(model, tokenizer, temperature=0.0, max_new_tokens=12).act([make_context("abc")])[0]
    stop = greedy.token_ids[2]
    cut = greedy.token_ids.index(stop) + 1
    stopped = HFPolicy(model, tokenizer, temperature=0.0, max_new_tokens=12, stop_token_ids=[stop])
    turn = stopped.act([make_context("abc")])[0]
    assert turn.finish_reason == "stop"
    assert turn.token_ids == greedy.token_ids[:cut]
    assert turn.text == tokenizer.decode(list(greedy.token_ids[: cut - 1]), skip_special_tokens=True)


def test_max_new_tokens_gives_length_finish(model, tokenizer):
    turn = HFPolicy(model, tokenizer, temperature=0.0, max_new_tokens=3).act([make_context("abc")])[0]
    assert (len(turn.token_ids), turn.finish_reason) == (3, "length")


def test_tiny_top_p_is_greedy(policy):
    greedy = policy.with_sampling(temperature=0.0).act(_contexts())
    nucleus = policy.with_sampling(temperature=1.0, top_p=1e-6).act(_contexts())
    assert [t.token_ids for t in greedy] == [t.token_ids for t in nucleus]


def test_a_prompt_longer_than_the_context_window_gives_an_empty_turn(policy, model, monkeypatch):
    monkeypatch.setattr(model.config, "max_position_embeddings", 10)
    long_turn, short_turn = policy.act([make_context("x" * 20), make_context("ab")])
    assert (long_turn.text, long_turn.token_ids, long_turn.finish_reason) == ("", (), "prompt_too_long")
    assert len(short_turn.prompt_token_ids) + len(short_turn.token_ids) <= 10


def test_sequence_logprobs_carries_gradients_only_when_asked(policy):
    args = ([[1, 4, 60]], [[61, 62]])
    assert not policy.sequence_logprobs(*args).requires_grad
    lp = policy.sequence_logprobs(*args, grad=True)
    lp.sum().backward()
    grad = policy.model.model.embed_tokens.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    policy.model.zero_grad(set_to_none=True)


def test_act_restores_training_mode(policy):
    policy.model.train()
    try:
        policy.act([make_context("hi")])
        assert policy.model.training
    finally:
        policy.model.eval()


def test_from_pretrained_acts_like_the_saved_model(policy, model, tokenizer, tmp_path):
    loaded = HFPolicy.from_pretrained(save_tiny(model, tokenizer, tmp_path), max_new_tokens=24)
    assert loaded.act(_contexts()) == policy.act(_contexts())


def test_from_pretrained_on_a_missing_folder_names_it(tmp_path):
    with pytest.raises(ConfigError, match="no HF model at"):
        HFPolicy.from_pretrained(tmp_path / "nothing")


def test_tokenizer_without_chat_template_is_a_config_error(tokenizer):
    bare = tokenizer.__class__(tokenizer_object=tokenizer.backend_tokenizer)
    with pytest.raises(ConfigError, match="no chat_template"):
        chat_prompt_ids(bare, [Message("user", "hi")])


def test_sampler_frequencies_follow_the_softmax():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    gen = [torch.Generator().manual_seed(0)]
    draws = torch.stack([sample_tokens(logits, gen, temperature=1.0, top_p=1.0)[0] for _ in range(4000)])
    freq = torch.bincount(draws.flatten(), minlength=3) / 4000
    assert torch.allclose(freq, torch.tensor([0.5, 0.3, 0.2]), atol=0.03)


@pytest.mark.parametrize(("top_p", "allowed"), [(0.45, {0}), (0.6, {0, 1}), (0.85, {0, 1, 2})])
def test_top_p_keeps_the_smallest_prefix_reaching_the_mass(top_p, allowed):
    logits = torch.log(torch.tensor([[0.2, 0.5, 0.3]]))[:, [1, 2, 0]]  # probs 0.5, 0.3, 0.2
    gen = [torch.Generator().manual_seed(1)]
    seen = {int(sample_tokens(logits, gen, temperature=1.0, top_p=top_p)[0]) for _ in range(300)}
    assert seen == allowed


def test_sampler_reports_temperature_scaled_logprobs():
    logits = torch.tensor([[2.0, 0.0]])
    tokens, lp = sample_tokens(logits, [torch.Generator().manual_seed(0)], temperature=0.5, top_p=1.0)
    # softmax([4, 0]) by hand: log(e^4 / (e^4 + 1)) = -0.018149, log(1 / (e^4 + 1)) = -4.018149
    expected = {0: -0.018149, 1: -4.018149}[int(tokens)]
    assert float(lp) == pytest.approx(expected, abs=1e-5)


# ---------------------------------------------------------------------------------------------- partial turns

LINED = "one plus\ntwo is\n\nANSWER: 3"
LINED_PROMPT = (Message("user", "Add 1 and 2."),)


@pytest.fixture(scope="module")
def lined_policy(tokenizer):
    """A tiny model overfit (60 Adam steps, ~1 s) to answer LINED_PROMPT with the three-line LINED text."""
    from tests.agents.conftest import TEST_CONFIG
    from turnkit.models.tiny import build_tiny_model

    torch.manual_seed(0)
    model = build_tiny_model(tokenizer, TEST_CONFIG, seed=0)
    prompt = chat_prompt_ids(tokenizer, LINED_PROMPT)
    completion = tokenizer(LINED, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    ids = torch.tensor([prompt + completion])
    labels = torch.tensor([[-100] * len(prompt) + completion])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(60):
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return HFPolicy(model, tokenizer, temperature=0.0, max_new_tokens=40)


def _lined_context(**fields):
    return dataclasses.replace(make_context(""), messages=LINED_PROMPT, episode_seed=3, **fields)


def test_step_by_step_generation_equals_one_generation_split_at_the_delimiter(lined_policy):
    whole = lined_policy.act([_lined_context()])[0]
    assert whole.text == LINED and whole.finish_reason == "stop"  # the fixture learned its text
    steps, ids, logprobs = [], (), ()
    while not steps or steps[-1].finish_reason == "stop_string":
        text = "".join(s.text for s in steps)
        steps.append(lined_policy.act([_lined_context(prefix_text=text, prefix_token_ids=ids, stop=("\n",))])[0])
        assert steps[-1].prompt_token_ids == whole.prompt_token_ids + ids  # the prefix ids, as given
        ids, logprobs = ids + steps[-1].token_ids, logprobs + steps[-1].logprobs
    assert [s.text for s in steps] == ["one plus\n", "two is\n", "\n", "ANSWER: 3"]
    assert [s.finish_reason for s in steps] == ["stop_string"] * 3 + ["stop"]
    assert ids == whole.token_ids
    assert torch.allclose(torch.tensor(logprobs), torch.tensor(whole.logprobs), atol=1e-5)


def test_prefix_text_alone_is_tokenised(lined_policy, tokenizer):
    by_text = lined_policy.act([_lined_context(prefix_text="one plus\n", stop=("\n",))])[0]
    ids = tuple(tokenizer("one plus\n", add_special_tokens=False)["input_ids"])
    by_ids = lined_policy.act([_lined_context(prefix_text="one plus\n", prefix_token_ids=ids, stop=("\n",))])[0]
    assert by_text == by_ids and by_text.text == "two is\n"


def test_a_stop_string_inside_a_line_ends_the_step_at_its_token(lined_policy):
    turn = lined_policy.act([_lined_context(stop=("us",))])[0]
    assert turn.finish_reason == "stop_string" and turn.text == "one plus"


def test_sampled_step_logprobs_match_sequence_logprobs_after_the_prefix(lined_policy):
    sampled = lined_policy.with_sampling(temperature=1.0)
    first = sampled.act([_lined_context(stop=("\n",))])[0]
    ctx = _lined_context(prefix_text=first.text, prefix_token_ids=first.token_ids, stop=("\n",))
    second = sampled.act([ctx])[0]
    recomputed = sampled.sequence_logprobs([second.prompt_token_ids], [second.token_ids])[0]
    assert torch.allclose(recomputed, torch.tensor(second.logprobs), atol=1e-4)


def test_the_prefix_counts_against_max_new_tokens(lined_policy):
    short = lined_policy.with_sampling(max_new_tokens=10)
    first = short.act([_lined_context(stop=("\n",))])[0]
    rest = short.act([_lined_context(prefix_text=first.text, prefix_token_ids=first.token_ids)])[0]
    assert len(first.token_ids) + len(rest.token_ids) == 10 and rest.finish_reason == "length"
    full = short.act([_lined_context(prefix_token_ids=tuple(range(5, 15)))])[0]
    assert (full.token_ids, full.finish_reason) == ((), "length")


def test_different_prefixes_in_one_batch_sample_as_they_would_alone(lined_policy):
    sampled = lined_policy.with_sampling(temperature=1.0)
    contexts = [_lined_context(prefix_text=p, stop=("\n",)) for p in ("one plus\n", "two\n", "one plus\n")]
    batched = sampled.act(contexts)
    alone = [sampled.act([c])[0] for c in contexts[:2]]
    for b, a in zip(batched, alone, strict=False):
        assert (b.token_ids, b.text, b.prompt_token_ids) == (a.token_ids, a.text, a.prompt_token_ids)
        assert torch.allclose(torch.tensor(b.logprobs), torch.tensor(a.logprobs), atol=1e-5)


def test_generation_raises_no_deprecation_warning(policy):
    """The KV cache goes in under the name this transformers version declares (no FutureWarning on the old one)."""
    import logging
    import warnings

    class Records(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.messages: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.messages.append(record.getMessage())

    records, hf_logger = Records(), logging.getLogger("transformers")
    logging.Logger.warning_once.cache_clear()  # transformers logs each deprecation once per process
    hf_logger.addHandler(records)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            warnings.simplefilter("error", DeprecationWarning)
            [turn] = policy.act([make_context("What is 2+2?")])
    finally:
        hf_logger.removeHandler(records)
    assert turn.token_ids
    assert not [m for m in records.messages if "deprecated" in m], records.messages
