from __future__ import annotations

from transformers import PreTrainedTokenizerFast

from turnkit.agents.hf import chat_prompt_ids
from turnkit.rollout.demos import collect_demos, completion_ids, demo_rows, turn_messages
from turnkit.types import AgentTurn, Message, Step, Trajectory


def two_turn_demo() -> Trajectory:
    return Trajectory(
        "demo",
        seed=0,
        steps=(
            Step("What is 2 plus 2?", AgentTurn("ANSWER: 5"), 0.0),
            Step("Incorrect. 2 attempts left.", AgentTurn("ANSWER: 4"), 1.0, terminated=True),
        ),
    )


def test_demo_prompt_is_the_policy_chat_template_of_the_conversation(tokenizer: PreTrainedTokenizerFast) -> None:
    rows = demo_rows([two_turn_demo()], tokenizer)
    expected = chat_prompt_ids(
        tokenizer,
        [
            Message("user", "What is 2 plus 2?"),
            Message("assistant", "ANSWER: 5"),
            Message("user", "Incorrect. 2 attempts left."),
        ],
    )
    second = rows[1]
    n_prompt = second.loss_mask.index(True)
    assert list(second.input_ids[:n_prompt]) == expected


def test_demo_loss_covers_exactly_the_answer_and_the_end_token(tokenizer: PreTrainedTokenizerFast) -> None:
    row = demo_rows([two_turn_demo()], tokenizer)[0]
    learned = [i for i, m in zip(row.input_ids, row.loss_mask, strict=True) if m]
    assert tokenizer.decode(learned) == "ANSWER: 5<|end|>"
    assert learned[-1] == tokenizer.eos_token_id
    assert learned == completion_ids(tokenizer, "ANSWER: 5")


def test_turn_messages_alternate_user_and_assistant() -> None:
    roles = [m.role for m in turn_messages(two_turn_demo(), 1)]
    assert roles == ["user", "assistant", "user"]


def test_collect_demos_keeps_only_solved_episodes_and_is_seeded() -> None:
    a = collect_demos("turnkit/MathEpisodes-v0", episodes=6, seed=3, env_kwargs={"difficulty": 1})
    b = collect_demos("turnkit/MathEpisodes-v0", episodes=6, seed=3, env_kwargs={"difficulty": 1}, batch_size=4)
    assert [t.success for t in a.trajectories] == [True] * 6
    assert [t.initial_observation for t in a.trajectories] == [t.initial_observation for t in b.trajectories]
    assert [t.seed for t in a.trajectories] == list(range(3, 9))
