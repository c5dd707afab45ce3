"""The tool protocol: a named function with a JSON-schema of its arguments that returns text.

A :class:`Tool` is what an env offers the agent besides its own task: run Python, run a shell command, submit
an answer. Calls never raise for anything the agent can cause: bad arguments, crashing code, an endless loop
and a flood of output all come back as a :class:`ToolResult` whose :class:`ToolStatus` says what happened.
:class:`~turnkit.errors.SandboxError` is left for the infrastructure (no bubblewrap, a sandbox that cannot
start), which the rollout layer records on the trajectory with a typed cause.

Example:
    >>> spec = ToolSpec("echo", "Repeat the text.", {"type": "object", "properties": {"text": {"type": "string"}},
    ...                                               "required": ["text"]})
    >>> check_arguments(spec, {"text": "hi"}) is None, check_arguments(spec, {})
    (True, "missing argument 'text'")
    >>> spec.openai_schema()["function"]["name"]
    'echo'
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

_JSON_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


class ToolStatus(str, enum.Enum):
    """How a tool call ended; the value goes into ``info["tool"]["status"]``."""

    OK = "ok"
    """The call ran and succeeded (exit status 0)."""
    ERROR = "error"
    """The call ran and failed: an exception in the code, a non-zero exit status."""
    TIMEOUT = "timeout"
    """The call ran past its time limit and was interrupted."""
    CRASHED = "crashed"
    """The session died (or stopped answering) and was restarted: its state is gone."""
    UNKNOWN_TOOL = "unknown_tool"
    """No tool of that name is offered."""
    BAD_ARGUMENTS = "bad_arguments"
    """The arguments do not match the tool's schema."""
    LIMIT = "limit"
    """The episode's tool-call allowance is used up."""


@dataclass(frozen=True)
class ToolSpec:
    """What the agent is told about a tool.

    Attributes:
        name: The name the agent calls it by (also the tag of the tag form, ``<name>...</name>``).
        description: One or two sentences for the agent.
        parameters: JSON schema of the arguments (an ``object`` schema).
        primary: The argument that the body of the tag form fills (``<python>code</python>``).
    """

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    primary: str = ""

    def openai_schema(self) -> dict[str, Any]:
        """The tool in the OpenAI ``tools=[...]`` format that chat templates and servers read."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


@dataclass(frozen=True)
class ToolResult:
    """What one tool call returned.

    Attributes:
        text: What the agent reads (already truncated, with a marker where output was cut).
        status: How the call ended.
        exit_code: The program's exit status, where there is one.
        truncated: Output was cut at the tool's limit.
    """

    text: str
    status: ToolStatus = ToolStatus.OK
    exit_code: int | None = None
    truncated: bool = False


@runtime_checkable
class Tool(Protocol):
    """A tool an env can offer. ``stateful`` tools are replayed into a fresh session on restore."""

    spec: ToolSpec
    stateful: bool

    def call(self, arguments: Mapping[str, Any], *, timeout: float) -> ToolResult:
        """Run once with arguments already checked against ``spec.parameters``."""
        ...

    def close(self) -> None:
        """Release the tool's session (idempotent); the next call starts a fresh one."""
        ...


def text_tool(name: str, description: str, argument: str, argument_description: str) -> ToolSpec:
    """The spec of a tool with one required string argument, which the tag form fills.

    Example:
        >>> spec = text_tool("echo", "Repeat the text.", "text", "What to repeat.")
        >>> spec.primary, spec.parameters["required"], check_arguments(spec, {"text": "hi", "x": 1})
        ('text', ['text'], "unexpected argument 'x'")
    """
    parameters = {
        "type": "object",
        "properties": {argument: {"type": "string", "description": argument_description}},
        "required": [argument],
        "additionalProperties": False,
    }
    return ToolSpec(name, description, parameters, primary=argument)


def check_arguments(spec: ToolSpec, arguments: Any) -> str | None:
    """Check arguments against the top level of a tool's schema.

    Args:
        spec: The tool.
        arguments: The decoded arguments of a call.

    Returns:
        ``None`` when they fit, otherwise what is wrong, in words the agent can act on.

    Example:
        >>> spec = ToolSpec("python", "", {"type": "object", "properties": {"code": {"type": "string"}},
        ...                                "required": ["code"], "additionalProperties": False})
        >>> check_arguments(spec, {"code": 1}), check_arguments(spec, {"code": "", "x": 2})
        ("argument 'code' must be a string, got int", "unexpected argument 'x'")
    """
    if not isinstance(arguments, dict):
        return f"arguments must be a JSON object, got {type(arguments).__name__}"
    properties = spec.parameters.get("properties", {})
    for name in spec.parameters.get("required", ()):
        if name not in arguments:
            return f"missing argument {name!r}"
    for name, value in arguments.items():
        if name not in properties:
            if spec.parameters.get("additionalProperties", True) is False:
                return f"unexpected argument {shorten(str(name))!r}"
            continue
        kind = properties[name].get("type")
        allowed = _JSON_TYPES.get(kind, (object,))
        if not isinstance(value, allowed) or (kind in ("integer", "number") and isinstance(value, bool)):
            article = "an" if kind in ("integer", "object", "array") else "a"
            return f"argument {name!r} must be {article} {kind}, got {type(value).__name__}"
    return None


def shorten(name: str, limit: int = 64) -> str:
    """An agent-chosen name cut to ``limit`` characters for a message (a 1 MB name must not come back whole).

    Example:
        >>> shorten("p" * 100, 5), shorten("python")
        ('ppppp...', 'python')
    """
    return name if len(name) <= limit else name[:limit] + "..."


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """Cut ``text`` to ``limit`` characters with a marker that says how much was dropped.

    Example:
        >>> truncate("abcdef", 4)
        ('abcd\\n[... 2 more characters truncated]', True)
        >>> truncate("abc", 4)
        ('abc', False)
    """
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}\n[... {len(text) - limit} more characters truncated]", True
