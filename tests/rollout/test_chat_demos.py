from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerFast

from turnkit.agents.hf import chat_prompt_ids
from turnkit.errors import DataError
from turnkit.rollout.batch import collate
from turnkit.rollout.chat_demos import ChatDemo, chat_demo_rows, parse_chat_record, read_chat_demos
from turnkit.rollout.demos import demo_rows
from turnkit.types import AgentTurn, Message, Step, Trajectory

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "chat_demos"
MULTI_TURN = FIXTURES / "multi_turn.jsonl"
GOOD_LINE = {"messages": [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "ANSWER: 2"}]}


def learned_text(tokenizer: PreTrainedTokenizerFast, row) -> str:
    return str(tokenizer.decode([i for i, m in zip(row.input_ids, row.loss_mask, strict=True) if m]))


def prompt_ids(row) -> list[int]:
    return list(row.input_ids[: row.loss_mask.index(True)])


def test_read_keeps_every_conversation_with_its_line_and_ignores_extra_keys() -> None:
    demos = read_chat_demos(MULTI_TURN)
    assert [d.line for d in demos] == [1, 3]  # line 2 is blank
    assert [d.num_turns for d in demos] == [2, 2]
    assert demos[0].messages[0] == Message("system", "You solve arithmetic. Reply with ANSWER: <number>.")
    assert [m.role for m in demos[1].messages] == ["user", "assistant", "tool", "assistant"]
    assert all(d.path == str(MULTI_TURN) for d in demos)


def test_one_row_per_assistant_message_learning_exactly_its_text_and_eos(tokenizer: PreTrainedTokenizerFast) -> None:
    rows = chat_demo_rows(MULTI_TURN, tokenizer)
    assert len(rows) == 4
    assert [(r.traj_index, r.turn_index) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    expected = ["ANSWER: 5", "ANSWER: 4", "<python>print(12 * 3)</python>", "ANSWER: 36"]
    assert [learned_text(tokenizer, r) for r in rows] == [t + "<|end|>" for t in expected]
    for row in rows:
        learned = [i for i, m in zip(row.input_ids, row.loss_mask, strict=True) if m]
        assert learned[-1] == tokenizer.eos_token_id
        assert row.loss_mask[: len(prompt_ids(row))] == (False,) * len(prompt_ids(row))  # one span ending the row


def test_prompt_is_the_chat_template_of_everything_before_the_turn(tokenizer: PreTrainedTokenizerFast) -> None:
    rows = chat_demo_rows(MULTI_TURN, tokenizer)
    demos = read_chat_demos(MULTI_TURN)
    assert prompt_ids(rows[1]) == chat_prompt_ids(tokenizer, demos[0].messages[:4])
    assert prompt_ids(rows[3]) == chat_prompt_ids(tokenizer, demos[1].messages[:3])
    # The system prompt is context of every turn; the first answer is context of the second turn.
    system = str(tokenizer.decode(prompt_ids(rows[1])))
    assert system.startswith("<|bos|><|system|>You solve arithmetic.")
    assert "<|assistant|>ANSWER: 5<|end|><|user|>Incorrect. 2 attempts left.<|end|><|assistant|>" in system
    assert "ANSWER: 5" not in tokenizer.decode(prompt_ids(rows[0]))
    assert "<|tool|>36<|end|><|assistant|>" in tokenizer.decode(prompt_ids(rows[3]))


def test_rows_are_token_identical_to_env_demo_rows_of_the_same_conversation(
    tokenizer: PreTrainedTokenizerFast,
) -> None:
    steps = (
        Step("What is 2 plus 2?", AgentTurn("ANSWER: 5"), 0.0),
        Step("Incorrect. 2 attempts left.", AgentTurn("ANSWER: 4"), 1.0, terminated=True),
    )
    env_rows = demo_rows([Trajectory("demo", 0, steps)], tokenizer)
    chat = Trajectory("demo", 0, steps).messages()
    records = [{"messages": [{"role": m.role, "content": m.content} for m in chat]}]
    assert [r.input_ids for r in chat_demo_rows(records, tokenizer)] == [r.input_ids for r in env_rows]
    assert [r.loss_mask for r in chat_demo_rows(records, tokenizer)] == [r.loss_mask for r in env_rows]


def test_rows_collate_into_a_batch_whose_loss_covers_only_assistant_tokens(tokenizer: PreTrainedTokenizerFast) -> None:
    rows = chat_demo_rows(MULTI_TURN, tokenizer)
    batch = collate(rows, pad_id=tokenizer.pad_token_id)
    answers = [m.content for d in read_chat_demos(MULTI_TURN) for m in d.messages if m.role == "assistant"]
    assert batch.num_loss_tokens == sum(len(tokenizer(a, add_special_tokens=False)["input_ids"]) + 1 for a in answers)
    assert batch.prompts_and_completions()[0] == [prompt_ids(r) for r in rows]


def test_records_and_chat_demos_are_accepted_in_memory(tokenizer: PreTrainedTokenizerFast) -> None:
    demos = read_chat_demos(MULTI_TURN)
    from_file = chat_demo_rows(MULTI_TURN, tokenizer)
    assert chat_demo_rows(demos, tokenizer) == from_file
    records = [json.loads(line) for line in MULTI_TURN.read_text().splitlines() if line.strip()]
    assert chat_demo_rows(records, tokenizer) == from_file


def test_trailing_messages_after_the_last_answer_add_no_row(tokenizer: PreTrainedTokenizerFast) -> None:
    demo = read_chat_demos(MULTI_TURN)[0]
    assert demo.messages[-1].role == "user"
    assert len(chat_demo_rows([demo], tokenizer)) == 2


# ------------------------------------------------------------------------------------------------ bad input


def test_first_bad_line_stops_reading_and_names_file_and_line() -> None:
    with pytest.raises(DataError) as info:
        read_chat_demos(FIXTURES / "bad_line.jsonl")
    assert str(info.value).startswith(f"{FIXTURES / 'bad_line.jsonl'}:4: invalid JSON")
    assert info.value.path == str(FIXTURES / "bad_line.jsonl") and info.value.line == 4


BAD_LINES = {
    "not json": ("{'messages': []}", "invalid JSON"),
    "top level array": ("[1, 2]", "expected a JSON object with a 'messages' list, got an array"),
    "top level string": ('"hi"', "got a string"),
    "no messages": ('{"id": 3}', "missing field 'messages' (keys: 'id')"),
    "messages not a list": ('{"messages": {"role": "user"}}', "must be a list of messages, got an object"),
    "empty messages": ('{"messages": []}', "field 'messages' is empty"),
    "message not an object": ('{"messages": ["hi"]}', "message 1 must be an object"),
    "no role": ('{"messages": [{"content": "hi"}]}', "message 1 needs a string 'role', got null"),
    "role not a string": ('{"messages": [{"role": 1, "content": "hi"}]}', "needs a string 'role', got a number"),
    "unknown role": (
        '{"messages": [{"role": "user", "content": "q"}, {"role": "developer", "content": "x"}]}',
        "message 2: unknown role 'developer'",
    ),
    "no content": ('{"messages": [{"role": "user"}]}', "message 1 (user) needs a string 'content', got null"),
    "content not a string": (
        '{"messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}]}',
        "needs a string 'content', got an array",
    ),
    "tool calls": (
        '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", '
        '"tool_calls": [{"id": "1", "type": "function"}]}]}',
        "message 2 (assistant) has structured tool_calls",
    ),
    "empty answer": (
        '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": " "}]}',
        "message 2 is an empty assistant message",
    ),
    "no assistant": (
        '{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]}',
        "no assistant message",
    ),
    "assistant first": (
        '{"messages": [{"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}]}',
        "starts with an assistant message",
    ),
}


@pytest.mark.parametrize("bad, message", list(BAD_LINES.values()), ids=list(BAD_LINES))
def test_every_bad_line_is_a_data_error_naming_file_and_line(tmp_path: Path, bad: str, message: str) -> None:
    path = tmp_path / "chats.jsonl"
    path.write_text(json.dumps(GOOD_LINE) + "\n\n" + bad + "\n" + json.dumps(GOOD_LINE) + "\n")
    with pytest.raises(DataError) as info:
        read_chat_demos(path)
    assert str(info.value).startswith(f"{path}:3: ")
    assert message in str(info.value)
    assert (info.value.path, info.value.line) == (str(path), 3)


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    path.write_bytes(json.dumps(GOOD_LINE).encode() + b"\n\xff\xfe\n")
    with pytest.raises(DataError, match=r"chats\.jsonl:2: not valid UTF-8"):
        read_chat_demos(path)


def test_a_missing_file_is_a_clear_error_naming_it(tmp_path: Path, tokenizer: PreTrainedTokenizerFast) -> None:
    path = tmp_path / "nowhere.jsonl"
    with pytest.raises(DataError, match=r"nowhere\.jsonl: cannot read the demonstrations file: No such file") as info:
        chat_demo_rows(path, tokenizer)
    assert info.value.path == str(path) and info.value.line is None


def test_an_empty_file_has_no_demonstrations() -> None:
    path = FIXTURES / "empty.jsonl"
    with pytest.raises(DataError, match=r"empty\.jsonl: the file holds no conversations \(no demonstrations\)"):
        read_chat_demos(path)


def test_in_memory_records_name_their_position(tokenizer: PreTrainedTokenizerFast) -> None:
    with pytest.raises(DataError, match=r"^record 2: field 'messages' is empty$"):
        chat_demo_rows([GOOD_LINE, {"messages": []}], tokenizer)


def test_a_conversation_the_chat_template_rejects_names_file_and_line(tokenizer: PreTrainedTokenizerFast) -> None:
    strict = copy.deepcopy(tokenizer)
    strict.chat_template = (
        "{% for m in messages %}{% if m['role'] == 'tool' %}{{ raise_exception('no tool role') }}{% endif %}"
        "{{ m['content'] }}{% endfor %}"
    )
    with pytest.raises(DataError, match=r"multi_turn\.jsonl:3: the tokenizer's chat template rejects messages 1-3"):
        chat_demo_rows(MULTI_TURN, strict)


def test_parse_chat_record_returns_frozen_messages() -> None:
    demo = parse_chat_record(GOOD_LINE, path="x.jsonl", line=9)
    assert demo == ChatDemo((Message("user", "1+1?"), Message("assistant", "ANSWER: 2")), path="x.jsonl", line=9)
