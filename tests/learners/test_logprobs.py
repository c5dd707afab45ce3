"""Chunked log-probs against the plain full-logits computation: values, gradients and the logits' size."""

from __future__ import annotations

import math

import pytest
import torch

from turnkit.learners import logprobs
from turnkit.learners.logprobs import chunked_logprobs, logits_fit, model_token_logprobs
from turnkit.rollout.batch import TokenRow, collate, gather_token_logprobs


@pytest.fixture(autouse=True)
def chunked_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny models' logits are small enough for the plain path: force the chunked one under test."""
    monkeypatch.setattr(logprobs, "PLAIN_LOGITS_BYTES", 0)


def test_chunked_logprobs_hand_values() -> None:
    """Vocabulary 2, head = identity: log_softmax([1, 0])[0] = 1 - log(e + 1); [0, 2][1] = 2 - log(1 + e^2)."""
    head = torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.eye(2))
    out = chunked_logprobs(torch.tensor([[1.0, 0.0], [0.0, 2.0]]), torch.tensor([0, 1]), head, chunk_rows=1)
    assert out.tolist() == pytest.approx([1 - math.log(math.e + 1), 2 - math.log(1 + math.e**2)], abs=1e-6)
    half = chunked_logprobs(torch.tensor([[1.0, 0.0]]), torch.tensor([0]), head, temperature=2.0)
    assert half.item() == pytest.approx(0.5 - math.log(math.exp(0.5) + 1), abs=1e-6)


@pytest.mark.parametrize("chunk_rows", [1, 3, 7, 100])
def test_chunked_logprobs_match_plain_values_and_gradients(chunk_rows: int) -> None:
    torch.manual_seed(0)
    head = torch.nn.Linear(8, 50)
    hidden = torch.randn(7, 8, requires_grad=True)
    targets = torch.randint(0, 50, (7,))
    weights = torch.randn(7)  # a loss that weighs each token differently
    plain = torch.log_softmax(head(hidden) / 0.7, -1).gather(-1, targets[:, None]).squeeze(-1)
    plain_grads = torch.autograd.grad((plain * weights).sum(), [hidden, head.weight, head.bias])
    chunked = chunked_logprobs(hidden, targets, head, temperature=0.7, chunk_rows=chunk_rows)
    grads = torch.autograd.grad((chunked * weights).sum(), [hidden, head.weight, head.bias])
    torch.testing.assert_close(chunked, plain, atol=1e-5, rtol=0)
    for g, p in zip(grads, plain_grads, strict=True):
        torch.testing.assert_close(g, p, atol=1e-5, rtol=0)


def test_chunked_logprobs_rejects_bad_input() -> None:
    head = torch.nn.Linear(2, 3)
    with pytest.raises(ValueError, match="hidden"):
        chunked_logprobs(torch.zeros(2, 2), torch.zeros(3, dtype=torch.long), head)
    with pytest.raises(ValueError, match="temperature"):
        chunked_logprobs(torch.zeros(2, 2), torch.zeros(2, dtype=torch.long), head, temperature=0.0)
    with pytest.raises(ValueError, match="chunk_rows"):
        chunked_logprobs(torch.zeros(2, 2), torch.zeros(2, dtype=torch.long), head, chunk_rows=0)


def _batch():
    """Three right-padded rows of different lengths, loss on each row's completion."""
    rows = [
        TokenRow.from_prompt_completion([1, 40, 41, 42], [50, 51, 52]),
        TokenRow.from_prompt_completion([1, 43], [53]),
        TokenRow.from_prompt_completion([1, 44, 45], [54, 55, 56, 57, 58]),
    ]
    return collate(rows, pad_id=0)


@pytest.mark.parametrize("lora", [False, True])
def test_model_token_logprobs_match_the_plain_logits(policy_factory, lora: bool) -> None:
    """Values and gradients of the trainable weights equal ``gather_token_logprobs(model(...).logits)``'s."""
    policy = policy_factory()
    if lora:
        policy.attach_lora(r=4)
        with torch.no_grad():  # B = 0 at attachment: move it so the adapter changes the logits
            for name, p in policy.model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.1, generator=torch.Generator().manual_seed(1))
    b = _batch()
    params = [p for p in policy.model.parameters() if p.requires_grad]
    weights = torch.linspace(-1.0, 2.0, b.input_ids.numel()).view_as(b.input_ids)
    logits = policy.model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits
    plain = gather_token_logprobs(logits, b.input_ids, b.loss_mask, temperature=0.9)
    plain_grads = torch.autograd.grad((plain * weights).sum(), params)
    ours = model_token_logprobs(policy.model, b.input_ids, b.attention_mask, b.loss_mask, temperature=0.9, chunk_rows=2)
    grads = torch.autograd.grad((ours * weights).sum(), params)
    torch.testing.assert_close(ours, plain, atol=1e-5, rtol=0)
    assert bool((ours[~b.loss_mask] == 0).all()) and bool((ours[b.loss_mask] < 0).all())
    assert max(g.abs().max().item() for g in plain_grads) > 1e-3  # the comparison is not of zeros
    for g, p in zip(grads, plain_grads, strict=True):
        torch.testing.assert_close(g, p, atol=1e-5, rtol=0)


def test_reference_pass_scores_the_base_without_a_copy(policy_factory) -> None:
    """With the adapter disabled the chunked pass scores the base model (the KL reference)."""
    base = policy_factory()
    policy = policy_factory()
    policy.attach_lora(r=4)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.05)
    b = _batch()
    with torch.no_grad():
        expected = gather_token_logprobs(base.model(input_ids=b.input_ids).logits, b.input_ids, b.loss_mask)
        with policy.model.disable_adapter():
            ref = model_token_logprobs(policy.model, b.input_ids, b.attention_mask, b.loss_mask)
        live = model_token_logprobs(policy.model, b.input_ids, b.attention_mask, b.loss_mask)
    torch.testing.assert_close(ref, expected, atol=1e-5, rtol=0)
    assert (live - ref).abs().max() > 1e-3  # the adapter does change the scores


def test_only_chunks_of_logits_are_ever_built(policy_factory) -> None:
    """The output layer only ever sees ``chunk_rows`` hidden states, forward and backward (no ``[B, T, V]``)."""
    policy = policy_factory()
    seen: list[int] = []
    head = policy.model.get_output_embeddings()
    handle = head.register_forward_hook(lambda _m, _i, out: seen.append(out.shape[:-1].numel()))
    b = _batch()
    try:
        lp = model_token_logprobs(policy.model, b.input_ids, b.attention_mask, b.loss_mask, chunk_rows=3)
        lp.sum().backward()
    finally:
        handle.remove()
    assert b.num_loss_tokens == 9 and b.input_ids.numel() == 24
    assert seen and max(seen) <= 3
    assert sum(seen) == 2 * b.num_loss_tokens  # forward, then the checkpointed recomputation in backward


def test_model_token_logprobs_rejects_bad_masks(policy_factory) -> None:
    policy = policy_factory()
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="first token"):
        model_token_logprobs(policy.model, ids, torch.ones_like(ids), torch.tensor([[True, False, False]]))
    with pytest.raises(ValueError, match="loss_mask"):
        model_token_logprobs(policy.model, ids, torch.ones_like(ids), torch.tensor([[False, True]]))


def test_small_batches_keep_the_plain_path(policy_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under PLAIN_LOGITS_BYTES the scores are the plain full-logits ones bit for bit (runs made before keep theirs)."""
    monkeypatch.setattr(logprobs, "PLAIN_LOGITS_BYTES", 64 << 20)
    policy = policy_factory()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    mask = torch.tensor([[False, True, True, False, True]])
    assert logits_fit(policy.model, ids.shape)
    plain = gather_token_logprobs(policy.model(input_ids=ids).logits, ids, mask)
    assert torch.equal(model_token_logprobs(policy.model, ids, torch.ones_like(ids), mask), plain)
    monkeypatch.setattr(logprobs, "PLAIN_LOGITS_BYTES", 0)
    assert not logits_fit(policy.model, ids.shape)
