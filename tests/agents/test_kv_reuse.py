"""KV reuse across turns (``HFPolicy(reuse_kv=True)``): the same log-probs with fewer tokens fed."""

from __future__ import annotations

import pickle

import gymnasium
import pytest
import torch

import turnkit  # noqa: F401  (registers the envs)
from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy
from turnkit.agents.kv_reuse import PrefixKV
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect_batch
from turnkit.types import Message


def _reusing(policy_factory, **kwargs) -> HFPolicy:
    base = policy_factory()
    return HFPolicy(base.model, base.tokenizer, max_new_tokens=6, reuse_kv=True, **kwargs)


def _play(policy: HFPolicy, seeds: list[int], max_turns: int = 4):
    envs = [gymnasium.make("turnkit/MathEpisodes-v0") for _ in seeds]
    trajs = collect_batch(envs, policy, seeds, chat=ChatDelta(policy.tokenizer), max_turns=max_turns)
    return [step.action for traj in trajs for step in traj.steps]


def _teacher_forced_error(policy: HFPolicy, turns) -> float:
    """Largest gap between the log-probs sampled with reuse and those of one full forward pass."""
    lp = policy.sequence_logprobs([t.prompt_token_ids for t in turns], [t.token_ids for t in turns])
    return max(float((lp[i, : len(t.logprobs)] - torch.tensor(t.logprobs)).abs().max()) for i, t in enumerate(turns))


def test_later_turns_feed_only_the_new_tokens_and_keep_the_log_probs(policy_factory):
    policy = _reusing(policy_factory)
    turns = _play(policy, [0, 1, 2, 3, 4])
    later = [t for t in turns if len(t.prompt_token_ids) > len(turns[0].prompt_token_ids)]
    assert later, "the random tiny model should not finish every episode in one turn"
    # every later turn reused at least its previous prompt (the conversation it already encoded)
    assert policy.kv is not None
    assert policy.kv.reused_tokens >= sum(len(t.prompt_token_ids) for t in later) // 2
    assert _teacher_forced_error(policy, turns) < 1e-4


def test_greedy_turns_match_the_policy_without_reuse(policy_factory):
    plain = policy_factory().with_sampling(temperature=0.0, max_new_tokens=6)
    reuse = _reusing(policy_factory, temperature=0.0)
    ours, theirs = _play(reuse, [5, 6, 7]), _play(plain, [5, 6, 7])
    assert reuse.kv.reused_tokens > 0
    # the log-probs of the same greedy prefix agree; the tokens too unless a near-tie flips (float rounding)
    for a, b in zip(ours, theirs, strict=False):
        if a.token_ids != b.token_ids:
            break
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_repeated_prompts_are_prefilled_once_and_keep_the_log_probs(policy_factory):
    base = policy_factory()
    policy = HFPolicy(base.model, base.tokenizer, max_new_tokens=6, share_prefill=True)
    questions = ["2+2?", "what is 3*7?", "2+2?", "name a prime", "what is 3*7?", "2+2?"]
    contexts = [Context(messages=(Message("user", q),), episode_seed=i) for i, q in enumerate(questions)]
    fed: list[tuple[int, ...]] = []
    hook = policy.model.register_forward_pre_hook(
        lambda _module, _args, kwargs: fed.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    try:
        turns = policy.act(contexts)
    finally:
        hook.remove()
    assert fed[0][0] == 3 and all(rows == 6 for rows, _ in fed[1:])  # 3 distinct prompts, then all 6 sample
    assert _teacher_forced_error(policy, turns) < 1e-4
    copies = {turns[i].token_ids for i in (0, 2, 5)}  # one prompt, three episode seeds: their own samples
    assert len(copies) > 1


def test_shared_prefill_and_kept_caches_together_keep_the_log_probs(policy_factory):
    policy = _reusing(policy_factory, share_prefill=True)
    turns = _play(policy, [0, 0, 0, 1])  # a group of three repeats every first prompt
    assert policy.kv is not None and policy.kv.reused_tokens > 0
    assert _teacher_forced_error(policy, turns) < 1e-4


def test_changed_weights_drop_the_kept_caches(policy_factory):
    policy = _reusing(policy_factory)
    _play(policy, [0, 1], max_turns=2)
    assert len(policy.kv) > 0
    with torch.no_grad():
        next(policy.model.parameters()).add_(0.05)  # what an optimizer step does: an in-place update
    before = policy.kv.reused_tokens
    turns = _play(policy, [0, 1], max_turns=1)  # the same first prompts: nothing may come from the old weights
    assert policy.kv.reused_tokens == before
    assert _teacher_forced_error(policy, turns) < 1e-4


def test_reference_view_starts_without_the_adapters_caches(policy_factory):
    policy = _reusing(policy_factory)
    policy.attach_lora(r=2, target_modules=("q_proj", "v_proj"))
    _play(policy, [0], max_turns=2)
    assert len(policy.kv) > 0
    with policy.reference():
        assert len(policy.kv) == 0


def test_prefix_store_takes_the_longest_kept_start_and_evicts_by_bytes():
    def layers(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(torch.full((1, n, 2), float(n)), torch.full((1, n, 2), float(n)))]  # 16 n bytes

    kv = PrefixKV(max_bytes=16 * 7)
    kv.put([1, 2], layers(2))
    kv.put([1, 2, 3, 4], layers(4))
    assert kv.nbytes == 16 * 6
    used, got = kv.take([1, 2, 3, 4, 5])
    assert used == 4 and got[0][0][0, 0, 0] == 4.0 and len(kv) == 1  # taken entries leave the store
    used, got = kv.take([1, 2])  # as long as the prompt: the last token is left to feed
    assert used == 1 and got[0][0].shape[1] == 1
    kv.put([7, 7, 7], layers(3))
    kv.put([8] * 5, layers(5))  # 7 tokens kept at most: the older entry goes
    assert kv.take([7, 7, 7, 7]) == (0, None) and len(kv) == 1
    kv.put([9] * 8, layers(8))  # larger than the whole budget: not kept
    assert kv.take([9] * 9) == (0, None)


def test_prefix_store_pickles_empty():
    kv = PrefixKV(max_bytes=1000)
    kv.put([1], [(torch.zeros(1, 1, 1), torch.zeros(1, 1, 1))])
    copy = pickle.loads(pickle.dumps(kv))
    assert copy.max_bytes == 1000 and len(copy) == 0 and copy.take([1, 2]) == (0, None)
