r"""Find a tool call in an agent's message, in the formats models write.

Three forms are read, and the first call in the text wins (one call per turn):

* ``<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>``: the JSON that chat
  templates emit (Hermes, Qwen); ``arguments`` may also be a JSON-encoded string (OpenAI's wire format).
* A message that *is* one JSON object ``{"name": ..., "arguments"|"parameters": {...}}`` (Llama 3.1 style), or
  OpenAI's ``{"type": "function", "function": {"name": ..., "arguments": "..."}}``.
* The tag form ``<python>print(1)</python>``: the tag is a tool's name and the body its primary argument; a
  Markdown code fence around the body is dropped.

Text around a call (reasoning) is allowed. Text that starts a call but does not finish one (a ``<tool_call>``
block with broken JSON, an unclosed ``<python>`` tag) is a :class:`MalformedCall`: feedback for the agent,
never an exception.

Example:
    >>> parse_tool_call('Let me check. <python>print(6 * 7)</python>', {"python": "code"})
    ToolCall(name='python', arguments={'code': 'print(6 * 7)'}, form='tag')
    >>> parse_tool_call('<tool_call>{"name": "shell", "arguments": "{\\"command\\": \\"ls\\"}"}</tool_call>', {})
    ToolCall(name='shell', arguments={'command': 'ls'}, form='json')
    >>> parse_tool_call("ANSWER: 42", {"python": "code"}) is None
    True
    >>> parse_tool_call("<tool_call>{oops</tool_call>", {}).problem
    'the <tool_call> block is not valid JSON (Expecting property name enclosed in double quotes, column 2)'
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_BLOCK_OPEN, _BLOCK_CLOSE = "<tool_call>", "</tool_call>"
_FENCE = re.compile(r"^\s*```[\w+-]*[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One parsed call.

    Attributes:
        name: The tool's name (not yet checked against the tools on offer).
        arguments: The decoded arguments (not yet checked against the schema).
        form: ``"json"`` or ``"tag"``.
    """

    name: str
    arguments: Any
    form: str = "json"


@dataclass(frozen=True)
class MalformedCall:
    """Text that starts a tool call but is not one.

    Attributes:
        problem: What is wrong, for the agent.
    """

    problem: str


def parse_tool_call(text: str, tag_tools: Mapping[str, str]) -> ToolCall | MalformedCall | None:
    """The first tool call in ``text``.

    Args:
        text: The agent's message.
        tag_tools: Tool name -> primary argument, for the tag form (only these names are read as tags).

    Returns:
        The call, a :class:`MalformedCall`, or ``None`` when the message makes no call.
    """
    candidates: list[tuple[int, ToolCall | MalformedCall]] = []
    block = text.find(_BLOCK_OPEN)
    if block >= 0:
        candidates.append((block, _json_block(text, block)))
    for name, primary in tag_tools.items():
        at = text.find(f"<{name}>")
        if at >= 0:
            candidates.append((at, _tag(text, at, name, primary)))
    if candidates:
        return min(candidates, key=lambda c: c[0])[1]
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        whole, problem = _loads(stripped)
        if problem:
            return None  # a message that merely looks like JSON is not a call
        call = _from_object(whole)
        return call if isinstance(call, ToolCall) else None
    return None


def format_tool_call(name: str, arguments: Mapping[str, Any]) -> str:
    """The canonical text of a call (the ``<tool_call>`` JSON form), e.g. for a server's ``tool_calls``.

    Example:
        >>> format_tool_call("python", {"code": "print(1)"})
        '<tool_call>\\n{"name": "python", "arguments": {"code": "print(1)"}}\\n</tool_call>'
        >>> parse_tool_call(format_tool_call("python", {"code": "x"}), {})
        ToolCall(name='python', arguments={'code': 'x'}, form='json')
    """
    body = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False).replace("</", "<\\/")
    return f"{_BLOCK_OPEN}\n{body}\n{_BLOCK_CLOSE}"


def _json_block(text: str, start: int) -> ToolCall | MalformedCall:
    end = text.find(_BLOCK_CLOSE, start)
    if end < 0:
        return MalformedCall("the <tool_call> block is not closed with </tool_call>")
    first_problem = ""
    while end >= 0:  # a string inside the JSON may itself contain "</tool_call>": try each closing tag
        value, problem = _loads(text[start + len(_BLOCK_OPEN) : end])
        if not problem:
            return _from_object(value)
        first_problem = first_problem or problem
        end = text.find(_BLOCK_CLOSE, end + len(_BLOCK_CLOSE))
    return MalformedCall(f"the <tool_call> block is not valid JSON ({first_problem})")


def _loads(body: str) -> tuple[Any, str]:
    """``(value, "")`` or ``(None, what is wrong)``."""
    try:
        return json.loads(body), ""
    except json.JSONDecodeError as exc:
        return None, f"{exc.msg}, column {exc.colno}"
    except RecursionError:
        return None, "nested too deeply"


def _from_object(value: Any) -> ToolCall | MalformedCall:
    if isinstance(value, dict) and isinstance(value.get("function"), dict):
        value = value["function"]  # OpenAI's {"type": "function", "function": {...}}
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return MalformedCall('a tool call must be a JSON object with a "name" string and "arguments"')
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):  # OpenAI sends arguments as a JSON-encoded string
        arguments, problem = _loads(arguments) if arguments.strip() else ({}, "")
        if problem:
            return MalformedCall(f'the "arguments" string is not valid JSON ({problem})')
    return ToolCall(value["name"], arguments, "json")


def _tag(text: str, start: int, name: str, primary: str) -> ToolCall | MalformedCall:
    open_tag, close_tag = f"<{name}>", f"</{name}>"
    end = text.find(close_tag, start)
    if end < 0:
        return MalformedCall(f"the {open_tag} tag is not closed with {close_tag}")
    body = text[start + len(open_tag) : end]
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    elif body.startswith("\n"):
        body = body[1:]
    return ToolCall(name, {primary: body}, "tag")
