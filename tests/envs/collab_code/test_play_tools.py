"""``turnkit play`` with tools: calls and replies are shown readably; tools come from ``--env-kwarg``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from turnkit import cli

ENV_ID = "turnkit/CollabCode-v0"
GAME = ["play", ENV_ID, "--seed", "12", "--env-kwarg", 'kinds=["grade"]']


def play(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], lines: list[str]) -> str:
    """Run ``turnkit play`` on scripted input lines (Ctrl-D after the last) and return what it printed."""
    feed: Iterator[str] = iter(lines)

    def read(prompt: str = "") -> str:
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr("builtins.input", read)
    assert cli.main(argv) == 0
    return capsys.readouterr().out


def test_play_shows_tool_calls_and_replies(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [
        "<python>def grade_outcome(score):\\",
        "    return score >= 65\\",
        "\\",
        "print(grade_outcome(65), grade_outcome(64))</python>",
        '<tool_call>{"name": "python", "arguments": {"code": "grade_outcome(70)"}}</tool_call>',
        "<python>import os; os._exit(3)</python>",
        "What is the cutoff score for passing?",
        "I WANT TO ANSWER:\\",
        "```python\\",
        "def grade_outcome(score):\\",
        "    return score >= 65\\",
        "```",
    ]
    out = play(monkeypatch, capsys, [*GAME, "--env-kwarg", 'tools=["python"]'], lines)
    assert "Tools (one call per message" in out  # the tools are announced in the first [env] message
    assert (
        "[tool call] python:\n"
        "    def grade_outcome(score):\n"
        "        return score >= 65\n"
        "\n"
        "    print(grade_outcome(65), grade_outcome(64))\n"
        "[reward +0.000, total +0.000]\n"
        "\n"
        "[tool python · ok]\n"
        "    True False\n"
    ) in out
    json_call = "[tool call] python:\n    grade_outcome(70)\n[reward +0.000, total +0.000]\n\n"
    json_call += "[tool python · ok]\n    True\n"
    assert json_call in out
    assert "[tool python · crashed]\n    [exit status 3; the session ended and its state is gone]\n" in out
    # Messages to the human and its replies look as they always did.
    assert "[reward +0.000, total +0.000]\n\n[env] The passing cutoff is 65 points." in out
    assert out.count("[tool call]") == 3
    assert out.rstrip().endswith("== episode over (terminated): success, return 1.000")


def test_play_takes_toolbox_arguments_and_shows_timeouts_and_bad_calls(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = 'tools={"tools": ["python", "submit"], "timeout_s": 1, "output_chars": 50}'
    lines = [
        "<python>while True: pass</python>",
        "<python>print('x' * 80)</python>",
        "<python>print(1)",  # never closed: feedback from the env, not a tool reply
        "<submit>def grade_outcome(score): return score >= 65</submit>",
    ]
    out = play(monkeypatch, capsys, [*GAME, "--env-kwarg", tools], lines)
    assert "[tool python · timeout]\n    [timed out after 1 s and was interrupted]\n" in out
    assert "[tool python · ok, output cut]\n    xxxxx" in out
    assert "invalid=bad_tool_call\n\n[env] Your tool call was not understood" in out
    assert "[tool call] submit:\n    def grade_outcome(score): return score >= 65\n" in out
    assert "[tool submit · ok]\n    Your function passed 10 of 10 hidden tests.\n" in out
    assert "episode over (terminated): success" in out


def test_play_without_tools_is_unchanged(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = play(monkeypatch, capsys, GAME, ["<python>print(1)</python>"])
    assert "[tool" not in out and "Tools (" not in out
    assert "[env] I don't know." in out and out.rstrip().endswith("bye")
