r"""Tool calls between conversation text and the OpenAI chat-completions wire format.

In a turnkit conversation a tool call is *text*: the agent's message holds ``<tool_call>{...}</tool_call>``
(or a tag such as ``<python>...</python>``, see :mod:`turnkit.tools.parse`) and the env's reply is a ``tool``
message. The OpenAI API carries calls as structure instead: an assistant message with ``tool_calls`` and a
``tool`` message with the ``tool_call_id`` it answers. These helpers convert both ways, for
:class:`~turnkit.agents.openai.OpenAIAgent` (text -> wire for the request, wire -> text for the reply) and
:class:`~turnkit.agents.serve.AgentServer` (the reverse, like vLLM's ``--tool-call-parser hermes``).

The canonical text of a call is :func:`turnkit.tools.format_tool_call`, and a message with text before its
call becomes ``content`` (the text before, right-stripped) plus ``tool_calls``, so a call that went over the
wire comes back as ``content + "\n" + format_tool_call(name, arguments)``: a canonical message survives the
round trip unchanged. Text after a call is not carried (the env acts on the first call only).

Example:
    >>> from turnkit.tools import PYTHON_SPEC, format_tool_call
    >>> from turnkit.types import Message
    >>> tools = [PYTHON_SPEC.openai_schema()]
    >>> wire = messages_to_wire([Message("user", "6*7?"), Message("assistant", "Let me run it. <python>6*7</python>"),
    ...                          Message("tool", "42\n")], tools)
    >>> wire[1]["content"], wire[1]["tool_calls"][0]["function"], wire[2]
    ('Let me run it.', {'name': 'python', 'arguments': '{"code": "6*7"}'}, {'role': 'tool', 'tool_call_id': 'call_0', 'content': '42\n'})
    >>> message_from_wire(wire[1]).content == "Let me run it.\n" + format_tool_call("python", {"code": "6*7"})
    True
"""  # noqa: E501

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from turnkit.tools import MalformedCall, ToolCall, format_tool_call, parse_tool_call
from turnkit.types import Message

ROLES = ("system", "user", "assistant", "tool")
"""Message roles a conversation may hold."""


def tag_arguments(schemas: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Tool name -> the argument the tag form fills (``<python>code</python>``), read from OpenAI schemas.

    A tool's tag argument is its one required argument, or its only argument; tools with several and no single
    required one have no tag form (they are called with ``<tool_call>`` JSON only).

    Example:
        >>> from turnkit.tools import PYTHON_SPEC, SUBMIT_SPEC
        >>> tag_arguments([PYTHON_SPEC.openai_schema(), SUBMIT_SPEC.openai_schema()])
        {'python': 'code', 'submit': 'answer'}
    """
    tags: dict[str, str] = {}
    for schema in schemas:
        function = schema.get("function") if isinstance(schema, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        parameters = function.get("parameters")
        parameters = parameters if isinstance(parameters, Mapping) else {}
        properties = parameters.get("properties")
        required = parameters.get("required")
        names = list(properties) if isinstance(properties, Mapping) else []
        if isinstance(required, list) and len(required) == 1 and isinstance(required[0], str):
            tags[function["name"]] = required[0]
        elif len(names) == 1:
            tags[function["name"]] = names[0]
    return tags


def tool_names(schemas: Sequence[Mapping[str, Any]]) -> set[str]:
    """The names of the tools in OpenAI schemas.

    Example:
        >>> from turnkit.tools import PYTHON_SPEC, SUBMIT_SPEC
        >>> sorted(tool_names([PYTHON_SPEC.openai_schema(), SUBMIT_SPEC.openai_schema(), {"type": "bad"}]))
        ['python', 'submit']
    """
    functions = [s.get("function") for s in schemas if isinstance(s, Mapping)]
    return {f["name"] for f in functions if isinstance(f, Mapping) and isinstance(f.get("name"), str)}


def check_tool_schemas(raw: Any) -> tuple[dict[str, Any], ...]:
    """Validate a request's ``tools`` field (``None``: no tools).

    Raises:
        ValueError: What is wrong, for an HTTP 400.

    Example:
        >>> check_tool_schemas([{"type": "function", "function": {"name": "python"}}])[0]["function"]["name"]
        'python'
        >>> check_tool_schemas([{"type": "function", "function": {"description": "no name"}}])
        Traceback (most recent call last):
        ...
        ValueError: tools[0].function.name must be a non-empty string
    """
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError(f"tools must be a list of function tools, got {type(raw).__name__}")
    seen: set[str] = set()
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise ValueError(f'{where} must be an object with "type": "function"')
        function = tool.get("function")
        if not isinstance(function, dict):
            raise ValueError(f"{where}.function must be an object with a name")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.function.name must be a non-empty string")
        if name in seen:
            raise ValueError(f"{where}: two tools are named {name!r}")
        seen.add(name)
        if not isinstance(function.get("description", ""), str):
            raise ValueError(f"{where}.function.description must be a string")
        if not isinstance(function.get("parameters", {}), dict):
            raise ValueError(f"{where}.function.parameters must be a JSON-schema object")
    return tuple(raw)


def find_call(text: str, tag_tools: Mapping[str, str]) -> tuple[ToolCall | MalformedCall | None, int]:
    """The first tool call in ``text`` (:func:`turnkit.tools.parse_tool_call`) and where it starts.

    The start is 0 for a message that is one JSON object and -1 when there is no call.

    Example:
        >>> find_call("Run it: <python>1</python>", {"python": "code"})
        (ToolCall(name='python', arguments={'code': '1'}, form='tag'), 8)
    """
    call = parse_tool_call(text, tag_tools)
    if call is None:
        return None, -1
    starts = [text.find("<tool_call>"), *(text.find(f"<{name}>") for name in tag_tools)]
    return call, min((s for s in starts if s >= 0), default=0)


def wire_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """One entry of an OpenAI ``tool_calls`` list (``arguments`` JSON-encoded, as on the wire).

    Example:
        >>> wire_call("call_0", "python", {"code": "1"})
        {'id': 'call_0', 'type': 'function', 'function': {'name': 'python', 'arguments': '{"code": "1"}'}}
    """
    encoded = json.dumps(arguments, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": encoded}}


def messages_to_wire(messages: Sequence[Message], schemas: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as chat-completions ``messages`` with structured tool calls.

    An assistant message that calls a tool and is answered by a ``tool`` message becomes ``content`` (the text
    before the call, or ``None``) plus ``tool_calls`` with id ``call_<k>`` (``k`` counts the conversation's
    calls), and the answer gets that ``tool_call_id``. A ``tool`` message that answers no call it can be paired
    with is sent as a ``user`` message, and a call nobody answered stays text, so every ``tool_calls`` entry is
    answered and every ``tool`` message answers one (what OpenAI's API requires).

    Example:
        >>> from turnkit.tools import SUBMIT_SPEC
        >>> wire = messages_to_wire([Message("user", "q"), Message("tool", "stray")], [SUBMIT_SPEC.openai_schema()])
        >>> wire[1]
        {'role': 'user', 'content': 'stray'}
    """
    tags = tag_arguments(schemas)
    out: list[dict[str, Any]] = []
    answered: str | None = None  # the id of the call the next tool message answers
    calls = 0
    for i, message in enumerate(messages):
        if message.role == "tool":
            if answered is None:
                out.append({"role": "user", "content": message.content})
            else:
                out.append({"role": "tool", "tool_call_id": answered, "content": message.content})
            answered = None
            continue
        answered = None
        call, start = find_call(message.content, tags) if message.role == "assistant" else (None, -1)
        if isinstance(call, ToolCall) and i + 1 < len(messages) and messages[i + 1].role == "tool":
            answered = f"call_{calls}"
            calls += 1
            before = message.content[:start].rstrip()
            entry = wire_call(answered, call.name, call.arguments)
            out.append({"role": "assistant", "content": before or None, "tool_calls": [entry]})
            continue
        out.append({"role": message.role, "content": message.content})
    return out


def text_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation for a server that takes no tools: calls stay text, tool replies become user messages.

    Example:
        >>> text_messages([Message("assistant", "<python>1</python>"), Message("tool", "1")])
        [{'role': 'assistant', 'content': '<python>1</python>'}, {'role': 'user', 'content': '1'}]
    """
    return [{"role": "user" if m.role == "tool" else m.role, "content": m.content} for m in messages]


def call_text(entry: Any) -> str:
    r"""The conversation text of one ``tool_calls`` entry of a reply, whatever its shape.

    A well-formed call is :func:`~turnkit.tools.format_tool_call` of its decoded arguments. Anything else is
    kept inside a ``<tool_call>`` block as it came (arguments that are not a JSON object stay the raw string),
    so the env answers it as a bad call (feedback for the agent), never as an exception here.

    Example:
        >>> call_text({"type": "function", "function": {"name": "python", "arguments": '{"code": "1"}'}})
        '<tool_call>\n{"name": "python", "arguments": {"code": "1"}}\n</tool_call>'
        >>> call_text({"type": "function", "function": {"name": "python", "arguments": '{"code": '}})
        '<tool_call>\n{"name": "python", "arguments": "{\\"code\\": "}\n</tool_call>'
    """
    function = entry.get("function") if isinstance(entry, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not name:
        return _block(entry)
    assert isinstance(function, dict)
    raw = function.get("arguments", {})
    arguments = raw
    if isinstance(raw, str):
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except ValueError:
            arguments = None
    if isinstance(arguments, dict):
        return format_tool_call(name, arguments)
    return _block({"name": name, "arguments": raw})


def reply_text(content: str | None, tool_calls: Any) -> str:
    r"""An assistant reply with ``tool_calls`` as conversation text: the content, a newline, the first call.

    Example:
        >>> reply_text("Checking.", [{"function": {"name": "submit", "arguments": '{"answer": "4"}'}}])
        'Checking.\n<tool_call>\n{"name": "submit", "arguments": {"answer": "4"}}\n</tool_call>'
    """
    first = tool_calls[0] if isinstance(tool_calls, list) and tool_calls else tool_calls
    head = content.rstrip() + "\n" if isinstance(content, str) and content.strip() else ""
    return head + call_text(first)


def message_from_wire(raw: Any, index: int = 0) -> Message:
    """One request message as a conversation :class:`~turnkit.types.Message` (a server reading a request).

    Content may be a string or a list of text parts. An assistant message's ``tool_calls`` are rendered as
    their canonical text after its content (see the module docstring); a ``tool`` message keeps its role.

    Raises:
        ValueError: A message the server cannot read (for an HTTP 400).
    """
    if not isinstance(raw, dict) or raw.get("role") not in ROLES:
        raise ValueError(f"messages[{index}] needs a role in {list(ROLES)}")
    content = raw.get("content")
    if isinstance(content, list):  # OpenAI content parts: keep the text parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    tool_calls = raw.get("tool_calls") if raw["role"] == "assistant" else None
    if content is None and tool_calls:
        content = ""
    if not isinstance(content, str):
        raise ValueError(f"messages[{index}].content must be a string or a list of text parts")
    if not tool_calls:
        return Message(raw["role"], content)
    if not isinstance(tool_calls, list):
        raise ValueError(f"messages[{index}].tool_calls must be a list")
    texts = []
    for k, entry in enumerate(tool_calls):
        where = f"messages[{index}].tool_calls[{k}]"
        function = entry.get("function") if isinstance(entry, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            raise ValueError(f"{where} needs a function with a name")
        arguments = function.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError as exc:
                raise ValueError(f"{where}.function.arguments is not valid JSON ({exc})") from exc
        if not isinstance(arguments, dict):
            raise ValueError(f"{where}.function.arguments must encode a JSON object")
        texts.append(format_tool_call(function["name"], arguments))
    head = content.rstrip() + "\n" if content.strip() else ""
    return Message("assistant", head + "\n".join(texts))


def reply_tool_call(text: str, schemas: Sequence[Mapping[str, Any]]) -> tuple[str | None, dict[str, Any]] | None:
    r"""A generated text's first call to an offered tool, as a server replies it (vLLM's hermes parser).

    Returns:
        ``(content, tool_call)``: the text before the call (``None`` if blank) and the ``tool_calls`` entry; or
        ``None`` when the text holds no well-formed call (no call, a malformed one, a tool not offered,
        arguments that are not an object): the text is then the reply's content as it is.

    Example:
        >>> from turnkit.tools import PYTHON_SPEC
        >>> content, call = reply_tool_call("Let me see.\n<python>6*7</python>", [PYTHON_SPEC.openai_schema()])
        >>> content, call["function"]
        ('Let me see.', {'name': 'python', 'arguments': '{"code": "6*7"}'})
        >>> reply_tool_call("<shell>ls</shell>", [PYTHON_SPEC.openai_schema()]) is None
        True
    """
    call, start = find_call(text, tag_arguments(schemas))
    if not isinstance(call, ToolCall) or call.name not in tool_names(schemas) or not isinstance(call.arguments, dict):
        return None
    before = text[:start].rstrip()
    return before or None, wire_call(f"call_{uuid.uuid4().hex[:24]}", call.name, call.arguments)


def _block(value: Any) -> str:
    return f"<tool_call>\n{json.dumps(value, ensure_ascii=False, default=str)}\n</tool_call>"
