"""The Toolbox: sessions that keep state, limits, refusals, and snapshots that replay lazily."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from turnkit.errors import ConfigError
from turnkit.tools import Toolbox, ToolResult, ToolSpec, ToolStatus, make_toolbox


@pytest.fixture
def box() -> Iterator[Toolbox]:
    b = Toolbox(["python", "shell", "submit"], timeout_s=3, output_chars=200, max_calls=8)
    yield b
    b.close()


def _run(box: Toolbox, text: str) -> tuple[str, dict | None]:
    turn = box.take_turn(text)
    assert turn is not None
    return turn.observation, turn.info


class CountingTool:
    """A stateful tool that counts how often it really ran (to see lazy replay)."""

    stateful = True
    spec = ToolSpec(
        "add",
        "Add to a running total.",
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        primary="n",
    )

    def __init__(self) -> None:
        self.total = 0
        self.runs = 0

    def call(self, arguments: Mapping[str, Any], *, timeout: float) -> ToolResult:
        self.runs += 1
        self.total += arguments["n"]
        return ToolResult(str(self.total))

    def close(self) -> None:
        self.total = 0


def test_python_and_shell_keep_state_and_share_the_work_dir(box: Toolbox) -> None:
    assert _run(box, "<python>x = 41\nopen('note.txt', 'w').write('hi')</python>")[0] == "2\n"
    assert _run(box, "<python>x + 1</python>") == (
        "42\n",
        {"name": "python", "status": "ok", "exit_code": 0, "truncated": False},
    )
    assert _run(box, "<shell>cd /tmp; cat /work/note.txt</shell>")[0] == "hi"
    assert _run(box, "<shell>pwd</shell>")[0] == "/tmp\n"


def test_errors_timeouts_crashes_and_floods_are_typed_results(box: Toolbox) -> None:
    text, info = _run(box, "<python>1 / 0</python>")
    assert info["status"] == "error" and "ZeroDivisionError" in text and text.endswith("[exit status 1]")
    _run(box, "<python>kept = 7</python>")
    text, info = _run(box, "<python>while True: pass</python>")
    assert info["status"] == "timeout" and "timed out after 3 s" in text
    assert _run(box, "<python>kept</python>")[0] == "7\n"  # Ctrl-C kept the session's state
    text, info = _run(box, "<python>print('y' * 100_000)</python>")
    assert info["truncated"] and "more characters truncated]" in text and len(text) < 400
    text, info = _run(box, "<python>import os; os._exit(3)</python>")
    assert info["status"] == "crashed" and "its state is gone" in text
    text, info = _run(box, "<python>kept</python>")
    assert "NameError" in text and info["status"] == "error"  # a fresh session, and this call did not crash


def test_refusals_are_invalid_and_say_why(box: Toolbox) -> None:
    for text, status, words in [
        ('<tool_call>{"name": "rm", "arguments": {}}</tool_call>', "unknown_tool", "no tool named 'rm'"),
        ('<tool_call>{"name": "python", "arguments": {"code": 3}}</tool_call>', "bad_arguments", "must be a string"),
        ('<tool_call>{"name": "python", "arguments": {}}</tool_call>', "bad_arguments", "missing argument 'code'"),
        ('<tool_call>{"name": "python", "arguments": [1]}</tool_call>', "bad_arguments", "JSON object"),
    ]:
        turn = box.take_turn(text)
        assert turn is not None and turn.invalid and turn.info["status"] == status and words in turn.observation
    malformed = box.take_turn("<tool_call>{</tool_call>")
    assert malformed is not None and malformed.invalid and malformed.info is None


def test_the_call_limit(box: Toolbox) -> None:
    for _ in range(8):
        assert not box.take_turn("<python>1</python>").invalid
    over = box.take_turn("<python>1</python>")
    assert over.invalid and over.info["status"] == ToolStatus.LIMIT.value and "(8)" in over.observation
    box.reset()
    assert not box.take_turn("<python>1</python>").invalid


def test_submit_carries_the_answer_and_runs_nothing(box: Toolbox) -> None:
    turn = box.take_turn("<submit>3/4</submit>")
    assert turn.submission == "3/4" and not turn.invalid and not box.workspace.started
    assert Toolbox(["python"]).take_turn("<submit>1</submit>") is None  # not offered: not a tag


def test_reset_gives_a_fresh_sandbox(box: Toolbox) -> None:
    _run(box, "<shell>echo left > /work/f; X=1</shell>")
    box.reset()
    assert "No such file" in _run(box, "<shell>cat /work/f; echo ${X:-unset}</shell>")[0]
    assert _run(box, "<shell>echo ${X:-unset}</shell>")[0] == "unset\n"


def test_restore_replays_lazily_and_only_what_is_missing() -> None:
    tool = CountingTool()
    box = Toolbox([tool])
    box.take_turn("<add>1</add>")
    early = box.snapshot()
    box.take_turn("<add>10</add>")
    late = box.snapshot()
    assert tool.runs == 2
    box.restore(early)
    assert tool.runs == 2  # nothing runs until the next call
    assert box.take_turn("<add>100</add>").observation == "101"  # replayed [1] into a fresh session, then 100
    assert tool.runs == 4
    box.restore(early)
    box.restore(late)  # the live session ran [1, 100]: not a prefix of [1, 10] -> fresh, replay both
    assert box.take_turn("<add>0</add>").observation == "11"
    runs = tool.runs
    box.restore(box.snapshot())
    box.take_turn("<add>0</add>")
    assert tool.runs == runs + 1  # the live session already holds the snapshot: nothing replayed


def test_snapshot_restores_python_state(box: Toolbox) -> None:
    _run(box, "<python>a = [1]</python>")
    snap = box.snapshot()
    _run(box, "<python>a.append(2)</python>")
    box.restore(snap)
    assert _run(box, "<python>a</python>")[0] == "[1]\n"
    box.restore(snap)
    assert _run(box, "<python>a.append(3); a</python>")[0] == "[1, 3]\n"


def test_bad_configuration_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown built-in tool 'ruby'"):
        Toolbox(["ruby"])
    with pytest.raises(ConfigError, match="two tools are named 'python'"):
        Toolbox(["python", "python"])
    with pytest.raises(ConfigError, match="timeout_s must be positive"):
        Toolbox(["python"], timeout_s=0)
    with pytest.raises(ConfigError, match="at least one tool"):
        Toolbox([])
    with pytest.raises(ConfigError, match=r"turnkit\.tools\.Tool"):
        Toolbox([42])  # type: ignore[list-item]
    assert make_toolbox([]) is None and make_toolbox("shell").specs[0].name == "shell"


def test_instructions_list_every_tool_and_both_formats(box: Toolbox) -> None:
    text = box.instructions()
    assert "- python(code):" in text and "- shell(command):" in text and "- submit(answer):" in text
    assert "<python>...</python>" in text and '<tool_call>{"name": "python"' in text
    assert [s["function"]["name"] for s in box.schemas()] == ["python", "shell", "submit"]
