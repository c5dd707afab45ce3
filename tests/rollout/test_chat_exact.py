"""Token-exact multi-turn contexts in the shared rollout loop (``collect_batch(chat=...)``), on a BPE tokenizer.

A tiny random Llama over a locally trained byte-level BPE tokenizer with a ChatML template plays 5-turn
episodes of MathEpisodes and CollabCode. With ``chat=ChatDelta(tok)`` every turn's context extends the
previous turn's prompt and sampled ids token for token; without it the conversation is re-rendered from text
and the ids drift (shown both on the random policy and on a deterministic scripted token agent).

Run: python -m pytest tests/rollout/test_chat_exact.py
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium
import pytest
import torch
from transformers import PreTrainedTokenizerFast

import turnkit  # noqa: F401  (registers the envs)
from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.agents.scripted import ScriptedAgent
from turnkit.errors import ConfigError, DataError
from turnkit.models.bpe import CHATML_TEMPLATE, DEFAULT_CORPUS, IM_END, IM_START, build_bpe_tokenizer
from turnkit.models.tiny import TinyModelConfig, build_tiny_model
from turnkit.rollout.batch import build_episode_batch, find_prefix_mismatch
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect, collect_batch, collect_group
from turnkit.types import AgentTurn, Message, Trajectory

TURNS = 5
SEEDS = (0, 1, 2, 3)
ENVS = {
    # a random policy rarely answers: allow enough wrong answers and empty (invalid) turns to play 5 turns
    "math": ("turnkit/MathEpisodes-v0", {"max_attempts": TURNS, "max_invalid_actions": TURNS}),
    # the env forces an answer (graded in the sandbox) only on its 10th message; max_turns=5 stops before
    "collab_code": ("turnkit/CollabCode-v0", {}),
}
SMALL = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_position_embeddings=1024)


@pytest.fixture(scope="module")
def tok() -> PreTrainedTokenizerFast:
    return build_bpe_tokenizer()


@pytest.fixture(scope="module")
def policy(tok: PreTrainedTokenizerFast) -> HFPolicy:
    return HFPolicy(build_tiny_model(tok, SMALL, seed=0), tok, temperature=1.0, max_new_tokens=12, seed=0)


class Recorder:
    """Wraps an agent; records, per (episode seed, turn), the context it was handed and the turn it returned."""

    def __init__(self, agent: object) -> None:
        self.agent = agent
        self.seen: dict[tuple[int | None, int], tuple[Context, AgentTurn]] = {}

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        turns = self.agent.act(contexts)  # type: ignore[attr-defined]
        for ctx, turn in zip(contexts, turns, strict=True):
            self.seen[(ctx.episode_seed, ctx.turn)] = (ctx, turn)
        return turns


class CharTokenAgent:
    """A deterministic token-level agent: replies ``text`` spelled one byte token per character, then EOS.

    Like ``HFPolicy`` it conditions on ``Context.prompt_token_ids`` when given, else renders the messages. The
    spelling is valid but not what the BPE tokenizer would produce, so re-encoding the reply changes its ids.
    """

    def __init__(self, tok: PreTrainedTokenizerFast, text: str = "ANSWER:-999") -> None:
        self.tok = tok
        self.ids = (*(tok.convert_tokens_to_ids(ch) for ch in text), tok.eos_token_id)
        self.text = text

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        return [
            AgentTurn(
                self.text,
                token_ids=self.ids,
                logprobs=(-1.0,) * len(self.ids),
                prompt_token_ids=ctx.prompt_token_ids or tuple(chat_prompt_ids(self.tok, ctx.messages)),
                finish_reason="stop",
            )
            for ctx in contexts
        ]


def _play(env: str, agent: object, chat: ChatDelta | None) -> list[Trajectory]:
    env_id, kwargs = ENVS[env]
    envs = [gymnasium.make(env_id, **kwargs) for _ in SEEDS]
    try:
        return collect_batch(envs, agent, list(SEEDS), max_turns=TURNS, chat=chat)  # type: ignore[arg-type]
    finally:
        for e in envs:
            e.close()


# ------------------------------------------------------------------ the BPE tokenizer


def test_bpe_round_trips_and_merges(tok: PreTrainedTokenizerFast) -> None:
    for text in ("héllo ✓ 42", "def f(x):\n\treturn x  # ok\n", "", "ANSWER: -3/4", "\u0000\uffff 🙂"):
        assert tok.decode(tok(text)["input_ids"]) == text
    assert len(tok) > 256 + 3  # merges were learnt
    assert tok.convert_ids_to_tokens(tok("ANSWER")["input_ids"]) == ["ANSWER"]


def test_bpe_special_tokens_are_single_ids(tok: PreTrainedTokenizerFast) -> None:
    assert tok.convert_ids_to_tokens([0, 1, 2]) == ["<|endoftext|>", IM_START, IM_END]
    assert (tok.pad_token_id, tok.eos_token, tok.bos_token) == (0, IM_END, None)
    assert tok(f"{IM_START}user\nhi{IM_END}")["input_ids"][0] == 1
    assert tok.decode(tok(f"{IM_START}x{IM_END}")["input_ids"], skip_special_tokens=True) == "x"


def test_bpe_is_deterministic() -> None:
    a, b = build_bpe_tokenizer(), build_bpe_tokenizer(list(DEFAULT_CORPUS))
    assert a.backend_tokenizer.to_str() == b.backend_tokenizer.to_str()
    bigger = build_bpe_tokenizer([*DEFAULT_CORPUS] * 3, vocab_size=300)
    assert len(bigger) == 300


def test_bpe_bad_arguments() -> None:
    with pytest.raises(ConfigError, match="vocab_size=10 is below"):
        build_bpe_tokenizer(vocab_size=10)
    with pytest.raises(ConfigError, match="min_frequency must be >= 1"):
        build_bpe_tokenizer(min_frequency=0)


def test_bpe_chat_template_renders_chatml(tok: PreTrainedTokenizerFast) -> None:
    assert tok.chat_template == CHATML_TEMPLATE
    conversation = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "ANSWER: 4"}]
    text = tok.apply_chat_template(conversation, add_generation_prompt=False, tokenize=False)
    assert text == "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\nANSWER: 4<|im_end|>\n"
    prompt = tok.apply_chat_template(conversation[:1], add_generation_prompt=True, tokenize=False)
    assert prompt == "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"


def test_chat_delta_accepts_bpe(tok: PreTrainedTokenizerFast) -> None:
    delta = ChatDelta(tok)
    assert delta.close_text == "<|im_end|>\n"
    after_stop = delta.between_turns((tok.eos_token_id,), "Correct.")
    assert tok.decode(after_stop) == "\n<|im_start|>user\nCorrect.<|im_end|>\n<|im_start|>assistant\n"
    cut = delta.between_turns(tuple(tok("ANSWER")["input_ids"]), "Correct.")  # cut by the budget: close it
    assert tok.decode(cut) == "<|im_end|>\n<|im_start|>user\nCorrect.<|im_end|>\n<|im_start|>assistant\n"


def test_exact_context_of_canonical_ids_equals_the_rendered_one(tok: PreTrainedTokenizerFast) -> None:
    """For ids the tokenizer itself would produce, the exact context is the re-rendered conversation."""
    first = [Message("user", "What is 6 plus 5?")]
    prompt = chat_prompt_ids(tok, first)
    generated = [*tok("ANSWER: 11")["input_ids"], tok.eos_token_id]
    context = [*prompt, *generated, *ChatDelta(tok).between_turns(generated, "Correct.")]
    rendered = chat_prompt_ids(tok, [*first, Message("assistant", "ANSWER: 11"), Message("user", "Correct.")])
    assert context == rendered


def test_tiny_model_fits_the_bpe_tokenizer(tok: PreTrainedTokenizerFast) -> None:
    model = build_tiny_model(tok, SMALL, seed=0)
    assert model.config.vocab_size == len(tok)
    assert model.generation_config.eos_token_id == tok.eos_token_id == 2


# ------------------------------------------------------------------ token-exact episodes


@pytest.mark.parametrize("env", sorted(ENVS))
def test_exact_contexts_have_no_drift(env: str, tok: PreTrainedTokenizerFast, policy: HFPolicy) -> None:
    trajs = _play(env, policy, ChatDelta(tok))
    assert [(t.error, len(t.steps)) for t in trajs] == [(None, TURNS)] * len(SEEDS)  # several turns each
    assert [find_prefix_mismatch(t) for t in trajs] == [None] * len(SEEDS)
    batch = build_episode_batch(trajs, pad_id=tok.pad_token_id)
    assert batch.num_prefix_fallbacks == 0 and len(batch) == len(SEEDS)
    for row, traj in zip(batch.input_ids, trajs, strict=True):
        last = traj.steps[-1].action
        assert row[: len(last.prompt_token_ids) + len(last.token_ids)].tolist() == [
            *last.prompt_token_ids,
            *last.token_ids,
        ]


@pytest.mark.parametrize("env", sorted(ENVS))
def test_stored_prompts_are_what_the_policy_saw(env: str, tok: PreTrainedTokenizerFast, policy: HFPolicy) -> None:
    chat = ChatDelta(tok)
    recorder = Recorder(policy)
    trajs = _play(env, recorder, chat)
    for traj in trajs:
        for k, step in enumerate(traj.steps):
            ctx, reported = recorder.seen[(traj.seed, k)]
            assert step.action == reported  # the trajectory stores the turn the policy returned
            assert len(ctx.messages) == 2 * k + 1 and ctx.messages[-1] == Message("user", step.observation)
            if k == 0:  # the policy renders the first prompt itself
                assert ctx.prompt_token_ids == ()
                assert reported.prompt_token_ids == tuple(chat_prompt_ids(tok, ctx.messages))
            else:  # it was handed the exact context, and reports conditioning on it
                prev = traj.steps[k - 1]
                want = (*prev.action.prompt_token_ids, *prev.action.token_ids)
                assert ctx.prompt_token_ids[: len(want)] == want
                assert ctx.prompt_token_ids[len(want) :] == tuple(
                    chat.between_turns(prev.action.token_ids, step.observation)
                )
                assert reported.prompt_token_ids == ctx.prompt_token_ids
    # the sampling log-probs are those of the stored prompt: the policy really conditioned on these ids
    turns = [s.action for t in trajs for s in t.steps]
    scored = policy.sequence_logprobs([t.prompt_token_ids for t in turns], [t.token_ids for t in turns])
    for row, turn in zip(scored, turns, strict=True):
        torch.testing.assert_close(row[: len(turn.logprobs)], torch.tensor(turn.logprobs), atol=1e-4, rtol=1e-4)


def test_collect_and_collect_group_pass_chat_through(tok: PreTrainedTokenizerFast, policy: HFPolicy) -> None:
    env = gymnasium.make(*ENVS["math"][:1], **ENVS["math"][1])
    group = collect_group(env, policy, seed=5, group_size=2, max_turns=3, chat=ChatDelta(tok))
    one = collect(env, policy, seed=6, max_turns=3, chat=ChatDelta(tok))
    assert [len(t.steps) for t in [*group, one]] == [3, 3, 3]
    assert [find_prefix_mismatch(t) for t in [*group, one]] == [None, None, None]
    env.close()


def test_text_agents_keep_rendered_contexts(tok: PreTrainedTokenizerFast) -> None:
    """A turn without token ids leaves the next context without stored ids; the episode is unchanged."""
    with_chat, without = Recorder(ScriptedAgent(["ANSWER: 1"])), Recorder(ScriptedAgent(["ANSWER: 1"]))
    a, b = _play("math", with_chat, ChatDelta(tok)), _play("math", without, None)
    assert a == b
    assert {ctx.prompt_token_ids for ctx, _ in [*with_chat.seen.values(), *without.seen.values()]} == {()}


# ------------------------------------------------------------------ controls: without chat=, ids drift


def test_control_random_policy_drifts_without_chat(tok: PreTrainedTokenizerFast, policy: HFPolicy) -> None:
    for env in sorted(ENVS):
        recorder = Recorder(policy)
        trajs = _play(env, recorder, None)
        assert {ctx.prompt_token_ids for ctx, _ in recorder.seen.values()} == {()}  # default: messages only
        assert [t.steps[0].action for t in trajs] == [t.steps[0].action for t in _play(env, policy, ChatDelta(tok))]
        mismatches = [find_prefix_mismatch(t) for t in trajs]
        assert any(m is not None for m in mismatches), f"{env}: no drift without chat=, the control is void"
        with pytest.raises(DataError, match="is not an extension of turn"):
            build_episode_batch(trajs, pad_id=tok.pad_token_id)


def test_control_scripted_token_agent(tok: PreTrainedTokenizerFast) -> None:
    """Deterministic: a reply spelled byte by byte re-encodes to merged ids, unless the context is kept."""
    agent = CharTokenAgent(tok)
    assert tuple(tok(agent.text)["input_ids"]) != agent.ids[:-1]  # the spelling is not the canonical one
    drifted = _play("math", agent, None)
    for traj in drifted:
        first = traj.steps[0].action
        mismatch = find_prefix_mismatch(traj)
        assert mismatch is not None and (mismatch.turn, mismatch.position) == (1, len(first.prompt_token_ids))
    exact = _play("math", agent, ChatDelta(tok))
    assert [len(t.steps) for t in exact] == [TURNS] * len(SEEDS)
    assert [find_prefix_mismatch(t) for t in exact] == [None] * len(SEEDS)
    build_episode_batch(exact, pad_id=tok.pad_token_id)


def test_a_template_that_trims_content_is_rendered_every_time(tok: PreTrainedTokenizerFast) -> None:
    """The verbatim shortcut (before + reply + after) is taken only when the template writes text as it is."""
    assert ChatDelta(tok)._reply_around["user"] is not None  # ChatML writes a message's text verbatim
    trimming = build_bpe_tokenizer()
    trimming.chat_template = CHATML_TEMPLATE.replace("message['content']", "message['content'] | trim")
    assert trimming.chat_template != CHATML_TEMPLATE, "the test's template edit did not apply"
    delta = ChatDelta(trimming)
    assert delta._reply_around["user"] is None
    text = trimming.decode(delta.between_turns((), "  Try again.  "))
    assert f"user\nTry again.{IM_END}" in text and "  Try again.  " not in text  # trimmed, as the template says
