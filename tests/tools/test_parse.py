"""Tool-call parsing: the three call forms, what wins when several appear, and malformed calls as feedback."""

from __future__ import annotations

import json

import pytest

from turnkit.tools import MalformedCall, ToolCall, format_tool_call, parse_tool_call

TAGS = {"python": "code", "shell": "command", "submit": "answer"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('<tool_call>{"name": "python", "arguments": {"code": "x = 1"}}</tool_call>', ("python", {"code": "x = 1"})),
        (
            '<tool_call>\n{"name": "shell", "arguments": "{\\"command\\": \\"ls\\"}"}\n</tool_call>',
            ("shell", {"command": "ls"}),
        ),
        ('<tool_call>{"name": "submit", "parameters": {"answer": "4"}}</tool_call>', ("submit", {"answer": "4"})),
        (
            '<tool_call>{"type": "function", "function": {"name": "python", "arguments": "{}"}}</tool_call>',
            ("python", {}),
        ),
        ('{"name": "python", "arguments": {"code": "1"}}', ("python", {"code": "1"})),
        ('  {"name": "python", "parameters": {"code": "1"}}\n', ("python", {"code": "1"})),
        ('<tool_call>{"name": "python", "arguments": ""}</tool_call>', ("python", {})),
        ("<python>print(1)</python>", ("python", {"code": "print(1)"})),
        ("<python>\nprint(1)\n</python>", ("python", {"code": "print(1)\n"})),
        ("<python>```python\nprint(1)\n```</python>", ("python", {"code": "print(1)"})),
        ("<shell>ls -l | wc -l</shell>", ("shell", {"command": "ls -l | wc -l"})),
        ("Let me think. <submit>42</submit> Done.", ("submit", {"answer": "42"})),
    ],
)
def test_each_form_is_read(text: str, expected: tuple[str, dict]) -> None:
    call = parse_tool_call(text, TAGS)
    assert isinstance(call, ToolCall)
    assert (call.name, call.arguments) == expected


def test_the_first_call_in_the_text_wins() -> None:
    json_call = '<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>'
    text = f"<shell>ls</shell> then {json_call} <python>2</python>"
    assert parse_tool_call(text, TAGS) == ToolCall("shell", {"command": "ls"}, "tag")
    later = '<python>2</python> <tool_call>{"name": "shell", "arguments": {}}</tool_call>'
    assert parse_tool_call(later, TAGS) == ToolCall("python", {"code": "2"}, "tag")


@pytest.mark.parametrize(
    "text",
    [
        "ANSWER: 42",
        "",
        "<p>html is not a call</p>",
        "<foo>unknown tags are prose</foo>",
        '{"answer": 42}',  # JSON without a name is not a call
        "{not json}",
        "python(print(1))",
        "I will use the <python tool next.",
    ],
)
def test_messages_without_a_call(text: str) -> None:
    assert parse_tool_call(text, TAGS) is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("<tool_call>{oops</tool_call>", "not valid JSON"),
        ('<tool_call>{"name": "python"', "not closed"),
        ("<tool_call>[1, 2]</tool_call>", '"name" string'),
        ('<tool_call>{"name": 3}</tool_call>', '"name" string'),
        ('<tool_call>{"name": "python", "arguments": "{bad"}</tool_call>', '"arguments" string is not valid JSON'),
        ("<python>print(1)", "not closed with </python>"),
    ],
)
def test_malformed_calls_say_what_is_wrong(text: str, problem: str) -> None:
    call = parse_tool_call(text, TAGS)
    assert isinstance(call, MalformedCall) and problem in call.problem


def test_tag_form_reads_only_offered_names() -> None:
    assert parse_tool_call("<shell>ls</shell>", {"python": "code"}) is None


def test_format_round_trips_any_text() -> None:
    code = 'print("</tool_call> <python> \\u00e9 \\n")\n\x07'
    call = parse_tool_call(format_tool_call("python", {"code": code}), TAGS)
    assert call == ToolCall("python", {"code": code}, "json")
    assert json.loads(format_tool_call("python", {"code": "é"}).split("\n")[1])["arguments"]["code"] == "é"


def test_huge_messages_parse_without_error() -> None:
    body = "x" * 1_000_000
    assert parse_tool_call(f"<python>{body}</python>", TAGS) == ToolCall("python", {"code": body}, "tag")
    assert isinstance(parse_tool_call("<tool_call>" + "[" * 100_000, TAGS), MalformedCall)
    deep = "<tool_call>" + "[" * 100_000 + "]" * 100_000 + "</tool_call>"
    assert isinstance(parse_tool_call(deep, TAGS), MalformedCall)


def test_a_closing_tag_inside_a_json_string_does_not_end_the_block() -> None:
    text = '<tool_call>{"name": "python", "arguments": {"code": "s = \'</tool_call>\'"}}</tool_call>'
    assert parse_tool_call(text, TAGS) == ToolCall("python", {"code": "s = '</tool_call>'"}, "json")
