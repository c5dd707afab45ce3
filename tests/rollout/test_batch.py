"""Token batches from trajectories: masks, padding, errors, prefix property, shift alignment.

Run: python -m pytest tests/rollout/test_batch.py
"""

from __future__ import annotations

import math

import pytest
import torch

from turnkit.errors import DataError
from turnkit.learners.advantages import trajectory_advantages
from turnkit.rollout.batch import (
    TokenRow,
    build_episode_batch,
    build_turn_batch,
    collate,
    find_prefix_mismatch,
    gather_token_logprobs,
    pack_loss_tokens,
)
from turnkit.types import AgentTurn, ErrorCause, Step, Trajectory, TrajectoryError

PAD = 99


def _turn(prompt, gen, logprobs=None) -> AgentTurn:
    lp = tuple(logprobs) if logprobs is not None else tuple(-0.1 * (j + 1) for j in range(len(gen)))
    return AgentTurn("text", token_ids=tuple(gen), logprobs=lp, prompt_token_ids=tuple(prompt))


def _traj(*turns: AgentTurn, rewards=None, group=0, error=False) -> Trajectory:
    rewards = rewards or [0.0] * len(turns)
    steps = tuple(Step("obs", t, r) for t, r in zip(turns, rewards, strict=True))
    err = TrajectoryError(ErrorCause.ENV, "step: RuntimeError: boom", 1) if error else None
    return Trajectory("demo", seed=0, steps=steps, group=group, error=err)


# A: two turns; turn 1's prompt = turn 0's prompt + completion + env tokens (4, 5): the prefix property holds.
A = _traj(
    _turn((1, 2, 3), (10, 11), (-0.1, -0.2)),
    _turn((1, 2, 3, 10, 11, 4, 5), (12,), (-0.3,)),
    rewards=[0.0, 1.0],
)
# B: one turn with a longer completion.
B = _traj(_turn((1, 6), (13, 14, 15), (-0.4, -0.5, -0.6)), rewards=[0.5])
# C: errored after one turn.
C = _traj(_turn((1, 7), (16,), (-0.7,)), rewards=[3.0], error=True)


def test_multi_turn_loss_mask_covers_exactly_the_generated_tokens() -> None:
    batch = build_turn_batch([A, B], pad_id=PAD)
    generated = [t.action.token_ids for traj in (A, B) for t in traj.steps]
    for b, gen in enumerate(generated):
        assert tuple(batch.input_ids[b][batch.loss_mask[b]].tolist()) == gen
    assert batch.num_loss_tokens == A.num_generated_tokens + B.num_generated_tokens  # 3 + 3


def test_turn_rows_are_right_padded_to_the_longest_turn() -> None:
    batch = build_turn_batch([A, B], pad_id=PAD)
    P = PAD
    assert batch.input_ids.tolist() == [
        [1, 2, 3, 10, 11, P, P, P],  # A turn 0
        [1, 2, 3, 10, 11, 4, 5, 12],  # A turn 1: its earlier completion is context here, not loss
        [1, 6, 13, 14, 15, P, P, P],  # B turn 0
    ]
    assert batch.attention_mask.tolist() == [[1] * 5 + [0] * 3, [1] * 8, [1] * 5 + [0] * 3]
    assert batch.loss_mask.int().tolist() == [
        [0, 0, 0, 1, 1, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 1],
        [0, 0, 1, 1, 1, 0, 0, 0],
    ]
    assert batch.traj_index.tolist() == [0, 0, 1]
    assert batch.turn_index.tolist() == [0, 1, 0]
    assert batch.rewards.tolist() == [0.0, 1.0, 0.5]


def test_old_logprobs_sit_on_the_loss_positions() -> None:
    batch = build_turn_batch([A, B], pad_id=PAD)
    assert batch.old_logprobs is not None
    expected = [
        [0, 0, 0, -0.1, -0.2, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, -0.3],
        [0, 0, -0.4, -0.5, -0.6, 0, 0, 0],
    ]
    assert batch.old_logprobs.tolist() == [pytest.approx(row) for row in expected]


def test_errored_trajectories_are_excluded_and_counted() -> None:
    batch = build_turn_batch([C, A, B], pad_id=PAD)
    assert batch.num_masked_errors == 1
    assert batch.errored == (0,)
    assert 0 not in batch.traj_index.tolist()  # no row of C at all, not a row with reward 0
    assert 16 not in batch.input_ids[batch.loss_mask].tolist()


def test_advantages_broadcast_per_turn() -> None:
    # group of A and B with C errored: totals A = 1, B = 0.5 (C excluded), mean 0.75 -> A +0.25, B -0.25
    adv = trajectory_advantages([A, B, C], estimator="dr_grpo")
    assert adv == [(0.25, 0.25), (-0.25,), None]
    batch = build_turn_batch([A, B, C], pad_id=PAD, advantages=adv)
    assert batch.advantages.tolist() == [
        [0, 0, 0, 0.25, 0.25, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 0.25],
        [0, 0, -0.25, -0.25, -0.25, 0, 0, 0],
    ]


def test_advantage_none_for_a_clean_trajectory_is_an_error() -> None:
    with pytest.raises(DataError, match="trajectory 0 has no advantage"):
        build_turn_batch([A], pad_id=PAD, advantages=[None])


def test_advantage_count_must_match_turns() -> None:
    with pytest.raises(DataError, match="3 advantages for 2 turns"):
        build_turn_batch([A], pad_id=PAD, advantages=[[1.0, 2.0, 3.0]])


def test_turn_without_token_ids_is_rejected() -> None:
    text_only = _traj(AgentTurn("ANSWER: 4"))
    with pytest.raises(DataError, match="never re-tokenise"):
        build_turn_batch([text_only], pad_id=PAD)


def test_logprobs_on_only_some_turns_is_rejected() -> None:
    no_lp = _traj(AgentTurn("x", token_ids=(5,), prompt_token_ids=(1,)))
    with pytest.raises(DataError, match="sampling logprobs"):
        build_turn_batch([A, no_lp], pad_id=PAD)


def test_no_logprobs_anywhere_gives_none() -> None:
    no_lp = _traj(AgentTurn("x", token_ids=(5,), prompt_token_ids=(1,)))
    assert build_turn_batch([no_lp], pad_id=PAD).old_logprobs is None


def test_episode_row_masks_env_tokens_between_turns() -> None:
    batch = build_episode_batch([A, B], pad_id=PAD, advantages=[[0.5, 2.0], 1.0])
    P = PAD
    assert batch.input_ids.tolist() == [[1, 2, 3, 10, 11, 4, 5, 12], [1, 6, 13, 14, 15, P, P, P]]
    # loss on A's spans (10, 11) and (12); env tokens 4, 5 and the prompt are context only
    assert batch.loss_mask.int().tolist() == [[0, 0, 0, 1, 1, 0, 0, 1], [0, 0, 1, 1, 1, 0, 0, 0]]
    assert batch.advantages.tolist() == [[0, 0, 0, 0.5, 0.5, 0, 0, 2.0], [0, 0, 1, 1, 1, 0, 0, 0]]
    assert batch.old_logprobs is not None
    assert batch.old_logprobs[0].tolist() == pytest.approx([0, 0, 0, -0.1, -0.2, 0, 0, -0.3])
    assert batch.turn_index.tolist() == [-1, -1]
    assert batch.rewards.tolist() == [1.0, 0.5]  # episode returns


def test_episode_and_turn_batches_cover_the_same_tokens() -> None:
    turns = build_turn_batch([A, B, C], pad_id=PAD)
    episodes = build_episode_batch([A, B, C], pad_id=PAD)
    assert episodes.num_loss_tokens == turns.num_loss_tokens == 6
    assert episodes.num_masked_errors == turns.num_masked_errors == 1


# D: the template dropped turn 0's completion token 11 from turn 1's prompt (like stripping <think> content).
D = _traj(_turn((1, 2), (10, 11)), _turn((1, 2, 10, 4), (12,)))


def test_prefix_mismatch_is_located() -> None:
    mismatch = find_prefix_mismatch(D)
    assert mismatch is not None
    # expected (1, 2, 10, 11) but the prompt has 4 at position 3
    assert (mismatch.turn, mismatch.position, mismatch.expected, mismatch.found) == (1, 3, 11, 4)


def test_prefix_mismatch_short_prompt() -> None:
    short = _traj(_turn((1, 2), (10,)), _turn((1, 2), (12,)))
    mismatch = find_prefix_mismatch(short)
    assert mismatch is not None
    assert (mismatch.position, mismatch.found) == (2, None)


def test_episode_batch_raises_on_prefix_mismatch() -> None:
    with pytest.raises(DataError, match="trajectory 1: turn 1 prompt is not an extension"):
        build_episode_batch([A, D], pad_id=PAD)


def test_episode_batch_falls_back_to_turn_rows() -> None:
    batch = build_episode_batch([A, D], pad_id=PAD, on_mismatch="turns")
    assert batch.num_prefix_fallbacks == 1
    assert batch.traj_index.tolist() == [0, 1, 1]
    assert batch.turn_index.tolist() == [-1, 0, 1]
    assert batch.num_loss_tokens == A.num_generated_tokens + D.num_generated_tokens


def test_gather_token_logprobs_hand_computed() -> None:
    # logits at position 0 = [0, ln 3] -> p(token 1) = 3/4; at position 1 = [0, 0] -> p(token 0) = 1/2
    logits = torch.tensor([[[0.0, math.log(3.0)], [0.0, 0.0], [5.0, -5.0]]])
    out = gather_token_logprobs(logits, torch.tensor([[0, 1, 0]]), torch.tensor([[False, True, True]]))
    assert out.tolist() == [pytest.approx([0.0, math.log(0.75), math.log(0.5)])]


def test_gather_token_logprobs_temperature() -> None:
    # logits [0, ln 9] / T=2 -> [0, ln 3]: p(token 1) = 3/4
    logits = torch.tensor([[[0.0, math.log(9.0)], [0.0, 0.0]]])
    out = gather_token_logprobs(logits, torch.tensor([[0, 1]]), torch.tensor([[False, True]]), temperature=2.0)
    assert out.tolist() == [pytest.approx([0.0, math.log(0.75)])]


def test_gather_rejects_loss_at_position_zero() -> None:
    with pytest.raises(ValueError, match="first token"):
        gather_token_logprobs(torch.zeros(1, 2, 3), torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 2).bool())


def test_stored_logprobs_match_recomputed_ones_under_the_shift_convention() -> None:
    # A bigram "model": the logits at a position depend only on that position's token, table[token].
    # Sampling-time logprobs are computed from the same table, so a correctly aligned batch gives ratio 1.
    gen = torch.Generator().manual_seed(3)
    table = torch.randn(20, 20, generator=gen)

    def lp(prev: int, tok: int) -> float:
        return float(torch.log_softmax(table[prev], -1)[tok])

    def turn(prompt: tuple[int, ...], completion: tuple[int, ...]) -> AgentTurn:
        ctx = prompt + completion
        logprobs = tuple(lp(ctx[len(prompt) + j - 1], tok) for j, tok in enumerate(completion))
        return AgentTurn("t", token_ids=completion, logprobs=logprobs, prompt_token_ids=prompt)

    trajs = [
        _traj(turn((1, 2, 3), (4, 5)), turn((1, 2, 3, 4, 5, 6), (7, 8, 9))),
        _traj(turn((11,), (12,))),
    ]
    for batch in (build_turn_batch(trajs, pad_id=0), build_episode_batch(trajs, pad_id=0)):
        logits = table[batch.input_ids]  # [B, T, V]
        recomputed = gather_token_logprobs(logits, batch.input_ids, batch.loss_mask)
        assert batch.old_logprobs is not None
        assert torch.allclose(recomputed, batch.old_logprobs, atol=1e-6)


def test_collate_empty() -> None:
    batch = collate([], pad_id=PAD)
    assert len(batch) == 0 and batch.num_loss_tokens == 0 and batch.old_logprobs is None


def test_all_errored_gives_empty_batch_with_count() -> None:
    batch = build_turn_batch([C, C], pad_id=PAD)
    assert len(batch) == 0 and batch.num_masked_errors == 2


def test_token_row_rejects_loss_on_first_token() -> None:
    with pytest.raises(ValueError, match="loss_mask"):
        TokenRow(input_ids=(1,), loss_mask=(True,), advantages=(0.0,))


def test_minibatches_trim_padding_and_keep_rows() -> None:
    batch = build_turn_batch([A, B], pad_id=PAD)
    parts = list(batch.minibatches(2))
    assert [tuple(p.input_ids.shape) for p in parts] == [(2, 8), (1, 5)]  # B's row needs only 5 columns
    assert parts[1].input_ids.tolist() == [[1, 6, 13, 14, 15]]
    assert sum(p.num_loss_tokens for p in parts) == batch.num_loss_tokens


@pytest.mark.parametrize(("max_tokens", "max_rows"), [(1, 0), (8, 0), (10, 0), (16, 0), (0, 2), (16, 1), (0, 0)])
def test_token_slices_respect_the_budget_and_keep_every_row(max_tokens: int, max_rows: int) -> None:
    """Rows in order, each once; a slice of two or more rows fits the budget; a longer row runs alone."""
    batch = build_turn_batch([A, B], pad_id=PAD)  # rows of 5, 8 and 5 tokens
    parts = list(batch.token_slices(max_tokens, max_rows))
    assert torch.cat([p.input_ids[:, :1] for p in parts]).flatten().tolist() == batch.input_ids[:, 0].tolist()
    assert sum(len(p) for p in parts) == len(batch)
    assert sum(p.num_loss_tokens for p in parts) == batch.num_loss_tokens
    for p in parts:
        assert len(p) == 1 or not max_tokens or p.input_ids.numel() <= max_tokens
        assert not max_rows or len(p) <= max_rows
        assert int(p.attention_mask[:, -1].max()) == 1  # trimmed to the slice's longest row
    shapes = {10: [(1, 5), (1, 8), (1, 5)], 16: [(2, 8), (1, 5)]}  # 5 + 8 padded to 2 x 8 = 16 tokens
    if max_tokens in shapes and not max_rows:
        assert [tuple(p.input_ids.shape) for p in parts] == shapes[max_tokens]


def test_token_slices_reject_negative_caps() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        list(build_turn_batch([A], pad_id=PAD).token_slices(-1))


def test_pack_loss_tokens_left_aligns_each_row() -> None:
    batch = build_turn_batch([A, B], pad_id=PAD)
    assert batch.old_logprobs is not None
    packed, packed_mask = pack_loss_tokens(batch.old_logprobs, batch.loss_mask)
    # rows' completions: A0 (-0.1, -0.2), A1 (-0.3,), B0 (-0.4, -0.5, -0.6); C = 3
    assert packed.tolist() == [pytest.approx(r) for r in ([-0.1, -0.2, 0], [-0.3, 0, 0], [-0.4, -0.5, -0.6])]
    assert packed_mask.int().tolist() == [[1, 1, 0], [1, 0, 0], [1, 1, 1]]


def test_prompts_and_completions_recover_the_turns() -> None:
    prompts, completions = build_turn_batch([A, B], pad_id=PAD).prompts_and_completions()
    turns = [s.action for traj in (A, B) for s in traj.steps]
    assert prompts == [list(t.prompt_token_ids) for t in turns]
    assert completions == [list(t.token_ids) for t in turns]


def test_prompts_and_completions_refuse_episode_rows() -> None:
    with pytest.raises(ValueError, match="not prompt \\+ one completion span"):
        build_episode_batch([A], pad_id=PAD).prompts_and_completions()


@pytest.fixture(scope="module")
def tiny_rollout():
    """Real trajectories: a tiny random Llama policy playing two 3-turn math episodes of one group."""
    pytest.importorskip("transformers")  # the [train] extra
    import gymnasium

    import turnkit
    from turnkit.agents.hf import HFPolicy
    from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    cfg = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    model = build_tiny_model(tok, cfg, seed=0).eval()
    policy = HFPolicy(model, tok, max_new_tokens=8)
    env = gymnasium.make("turnkit/MathEpisodes-v0")
    trajs = turnkit.collect_group(env, policy, seed=1, group_size=2, max_turns=3)
    assert all(t.error is None and len(t.steps) == 3 for t in trajs)
    return policy, tok, trajs


def test_real_policy_logprobs_recomputed_from_turn_batch(tiny_rollout) -> None:
    policy, tok, trajs = tiny_rollout
    batch = build_turn_batch(trajs, pad_id=tok.pad_token_id)
    with torch.no_grad():
        logits = policy.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    recomputed = gather_token_logprobs(logits, batch.input_ids, batch.loss_mask)
    assert batch.old_logprobs is not None
    assert torch.allclose(recomputed, batch.old_logprobs, atol=1e-5)  # right padding changes nothing


def test_real_policy_sequence_logprobs_match_packed_old_logprobs(tiny_rollout) -> None:
    policy, tok, trajs = tiny_rollout
    batch = build_turn_batch(trajs, pad_id=tok.pad_token_id)
    assert batch.old_logprobs is not None
    scored = policy.sequence_logprobs(*batch.prompts_and_completions())  # completion coordinates [B, C]
    packed, packed_mask = pack_loss_tokens(batch.old_logprobs, batch.loss_mask)
    assert scored.shape == packed.shape
    assert torch.allclose(scored * packed_mask, packed, atol=1e-5)


def test_real_episode_batch_covers_every_generated_token(tiny_rollout) -> None:
    policy, tok, trajs = tiny_rollout
    # A random byte-level policy emits invalid UTF-8, so decoded text re-encodes differently and the prefix
    # property may break; either way the fallback keeps every generated token exactly once.
    batch = build_episode_batch(trajs, pad_id=tok.pad_token_id, on_mismatch="turns")
    assert batch.num_loss_tokens == sum(t.num_generated_tokens for t in trajs)
    with torch.no_grad():
        logits = policy.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    assert batch.old_logprobs is not None
    recomputed = gather_token_logprobs(logits, batch.input_ids, batch.loss_mask)
    assert torch.allclose(recomputed, batch.old_logprobs, atol=1e-5)
