r"""`Toolbox`: the tools one env offers, the calls of the current episode, and their snapshots.

A :class:`~turnkit.TextEnv` built with ``tools=...`` owns a toolbox. For each valid action it asks
:meth:`Toolbox.take_turn` whether the message calls a tool; if so the toolbox runs it and the tool's output is
the next observation (a ``tool`` message in the conversation), otherwise the env handles the message as usual.

**Snapshots.** What a session holds (variables, files, the shell's directory) cannot be copied, so a toolbox
snapshot is the episode's log of stateful calls. Restoring it is lazy: nothing runs until the next tool call,
which first replays the log into a fresh sandbox (or only the missing tail, when the live sandbox ran a prefix
of it). A replayed call runs again: code that reads the clock or unseeded randomness, or that ran into its time
limit, can leave a different state than the first time; deterministic code leaves the same.

Example:
    >>> box = Toolbox(["python", "submit"])
    >>> turn = box.take_turn("<python>n = 6 * 7\nn</python>")
    >>> turn.observation, turn.info
    ('42\n', {'name': 'python', 'status': 'ok', 'exit_code': 0, 'truncated': False})
    >>> saved = box.snapshot()
    >>> _ = box.take_turn("<python>n = 0</python>")
    >>> box.restore(saved)
    >>> box.take_turn("<python>n</python>").observation  # replayed into a fresh session
    '42\n'
    >>> box.take_turn('<tool_call>{"name": "submit", "arguments": {"answer": "42"}}</tool_call>').submission
    '42'
    >>> box.close()
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from turnkit.errors import ConfigError
from turnkit.tools.base import Tool, ToolSpec, ToolStatus, check_arguments, shorten
from turnkit.tools.parse import MalformedCall, ToolCall, format_tool_call, parse_tool_call
from turnkit.tools.sessions import SUBMIT_SPEC, SandboxFactory, Workspace, python_tool, shell_tool

BUILTIN = ("python", "shell", "submit")
"""Names of the built-in tools."""


@dataclass(frozen=True)
class ToolTurn:
    """The outcome of a message that calls a tool.

    Attributes:
        observation: What the agent reads next (the tool's output or what was wrong with the call).
        info: ``info["tool"]`` for the step (name, status, ...); ``None`` for a malformed call, which is
            answered as an ordinary (``user``) message.
        invalid: The call counts against the env's invalid-action allowance (malformed, unknown tool,
            bad arguments, over the call limit).
        submission: For ``submit``: the answer, which the env judges as if the agent had sent it.
    """

    observation: str
    info: dict[str, Any] | None = None
    invalid: bool = False
    submission: str | None = None


@dataclass(frozen=True)
class ToolboxState:
    """A toolbox snapshot: the episode's stateful calls ``(name, arguments JSON, timeout)`` and its call count."""

    log: tuple[tuple[str, str, float], ...] = ()
    calls: int = 0


class Toolbox:
    """The tools of one env and the bookkeeping of one episode's calls.

    Args:
        tools: Built-in names (``"python"``, ``"shell"``, ``"submit"``) or :class:`~turnkit.tools.Tool` objects.
        sandbox: Builds the sandbox the session tools share (default: bubblewrap with
            :data:`~turnkit.tools.sessions.DEFAULT_LIMITS`; e.g. ``lambda: DockerSandbox(limits)``).
        timeout_s: Seconds per call before Ctrl-C.
        output_chars: Characters of output per call the agent reads.
        max_calls: Tool calls per episode; later ones are refused (and count as invalid actions).
        announce: Append a description of the tools and the call formats to the first observation.

    Raises:
        ConfigError: An unknown built-in name, a duplicate name, or a non-positive limit.
    """

    def __init__(
        self,
        tools: Sequence[str | Tool] = ("python",),
        *,
        sandbox: SandboxFactory | None = None,
        timeout_s: float = 5.0,
        output_chars: int = 4000,
        max_calls: int = 32,
        announce: bool = True,
    ) -> None:
        if isinstance(tools, str):
            tools = [tools]
        for name, value in (("timeout_s", timeout_s), ("output_chars", output_chars), ("max_calls", max_calls)):
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"Toolbox {name} must be positive, got {value!r}")
        self.timeout_s = float(timeout_s)
        self.max_calls = int(max_calls)
        self.announce = announce
        self.workspace = Workspace(sandbox)
        self.tools: dict[str, Tool] = {}
        self.has_submit = False
        for item in tools:
            if item == "submit":
                self.has_submit = True
                continue
            tool = self._builtin(item, output_chars) if isinstance(item, str) else item
            if not isinstance(tool, Tool):
                raise ConfigError(f"a tool must be a name from {list(BUILTIN)} or a turnkit.tools.Tool, got {item!r}")
            if tool.spec.name in self.tools or tool.spec.name == "submit":
                raise ConfigError(f"two tools are named {tool.spec.name!r}")
            self.tools[tool.spec.name] = tool
        if not self.tools and not self.has_submit:
            raise ConfigError("a Toolbox needs at least one tool")
        self._log: list[tuple[str, str, float]] = []
        self._calls = 0
        self._executed: list[tuple[str, str, float]] = []  # the stateful calls the live workspace has run

    def _builtin(self, name: str, output_chars: int) -> Tool:
        if name == "python":
            return python_tool(self.workspace, output_chars=output_chars)
        if name == "shell":
            return shell_tool(self.workspace, output_chars=output_chars)
        raise ConfigError(f"unknown built-in tool {name!r}; choose from {list(BUILTIN)} or pass a Tool")

    # ------------------------------------------------------------------ what the agent is told
    @property
    def specs(self) -> list[ToolSpec]:
        """Every tool's spec, ``submit`` last."""
        return [t.spec for t in self.tools.values()] + ([SUBMIT_SPEC] if self.has_submit else [])

    def schemas(self) -> tuple[dict[str, Any], ...]:
        """The tools in OpenAI ``tools=[...]`` form (for servers and chat templates)."""
        return tuple(s.openai_schema() for s in self.specs)

    def instructions(self) -> str:
        """A short text that lists the tools and shows both call formats.

        Example:
            >>> print(Toolbox(["python", "submit"]).instructions())
            Tools (one call per message; the result comes back as the next message):
            - python(code): Run Python code in a persistent session (variables and imports stay between calls). The value of a final expression is printed. No network; files go in the current directory.
            - submit(answer): Submit your final answer; the task judges it and replies.
            Call one as <python>...</python> or as <tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call>.
        """  # noqa: E501
        lines = ["Tools (one call per message; the result comes back as the next message):"]
        lines += [f"- {s.name}({', '.join(s.parameters.get('properties', {}))}): {s.description}" for s in self.specs]
        first = self.specs[0]
        example = json.dumps({"name": first.name, "arguments": {first.primary or "...": "..."}})
        tag = f"<{first.name}>...</{first.name}> or as " if first.primary else ""
        lines.append(f"Call one as {tag}<tool_call>{example}</tool_call>.")
        return "\n".join(lines)

    # ------------------------------------------------------------------ one turn
    def take_turn(self, text: str, *, execute: bool = True) -> ToolTurn | None:
        """Handle a message if it calls a tool.

        Example:
            >>> box = Toolbox(["shell"])
            >>> box.take_turn("no call here") is None, box.take_turn("<shell>echo hi</shell>").observation
            (True, 'hi\\n')
            >>> box.take_turn('<tool_call>{"name": "ruby"}</tool_call>').invalid
            True
            >>> box.close()

        Args:
            text: The agent's (already validated) message.
            execute: ``False`` records a stateful call without running it (an env replaying its history).

        Returns:
            ``None`` if the message calls no tool, else the :class:`ToolTurn`.
        """
        tag_tools = {s.name: s.primary for s in self.specs if s.primary}
        call = parse_tool_call(text, tag_tools)
        if call is None:
            return None
        if isinstance(call, MalformedCall):
            return ToolTurn(f"Your tool call was not understood: {call.problem}.", invalid=True)
        self._calls += 1
        return self._checked(call, execute)

    def _checked(self, call: ToolCall, execute: bool) -> ToolTurn:
        names = ", ".join(s.name for s in self.specs)
        if self._calls > self.max_calls:
            return _refused(call.name, ToolStatus.LIMIT, f"The tool-call limit ({self.max_calls}) is used up.")
        spec = SUBMIT_SPEC if call.name == "submit" and self.has_submit else None
        tool = self.tools.get(call.name)
        spec = tool.spec if tool is not None else spec
        if spec is None:
            message = f"There is no tool named {shorten(call.name)!r} (tools: {names})."
            return _refused(call.name, ToolStatus.UNKNOWN_TOOL, message)
        if call.form == "tag":
            call = _typed_tag_body(spec, call)
        problem = check_arguments(spec, call.arguments)
        if problem is not None:
            return _refused(call.name, ToolStatus.BAD_ARGUMENTS, f"Bad arguments for {call.name}: {problem}.")
        if tool is None:  # submit
            submitted = {"name": "submit", "status": ToolStatus.OK.value}
            return ToolTurn("", submitted, submission=str(call.arguments["answer"]))
        entry = (call.name, json.dumps(call.arguments, sort_keys=True), self.timeout_s)
        if tool.stateful:
            self._log.append(entry)
        if not execute:
            return ToolTurn("", {"name": call.name, "status": ToolStatus.OK.value})
        if tool.stateful:
            self._catch_up(upto=len(self._log) - 1)
        result = tool.call(call.arguments, timeout=self.timeout_s)
        if tool.stateful:
            self._executed.append(entry)
        info: dict[str, Any] = {"name": call.name, "status": result.status.value, "exit_code": result.exit_code}
        info["truncated"] = result.truncated
        return ToolTurn(result.text, info)

    def _catch_up(self, upto: int) -> None:
        """Make the live workspace hold the effect of ``self._log[:upto]`` (replaying as needed)."""
        want = self._log[:upto]
        if self._executed != want[: len(self._executed)]:
            self._fresh_workspace()
        for name, arguments, timeout in want[len(self._executed) :]:
            self.tools[name].call(json.loads(arguments), timeout=timeout)
            self._executed.append((name, arguments, timeout))

    def _fresh_workspace(self) -> None:
        for tool in self.tools.values():
            tool.close()
        self.workspace.close()
        self._executed = []

    # ------------------------------------------------------------------ episodes and snapshots
    def reset(self) -> None:
        """Start a new episode: forget the calls; the next call gets a fresh sandbox."""
        self._log = []
        self._calls = 0
        if self._executed:
            self._fresh_workspace()

    def snapshot(self) -> ToolboxState:
        """The episode's calls so far (see the module docstring for what a snapshot means)."""
        return ToolboxState(tuple(self._log), self._calls)

    def restore(self, state: ToolboxState) -> None:
        """Return to a snapshot; the sessions catch up at the next call."""
        self._log = list(state.log)
        self._calls = state.calls

    def close(self) -> None:
        """Stop every session and the sandbox (idempotent)."""
        self._fresh_workspace()


def _typed_tag_body(spec: ToolSpec, call: ToolCall) -> ToolCall:
    """A tag body is text; for a primary argument of another JSON type, read the body as JSON (if it is)."""
    kind = spec.parameters.get("properties", {}).get(spec.primary, {}).get("type", "string")
    if kind == "string":
        return call
    try:
        value = json.loads(call.arguments[spec.primary])
    except (json.JSONDecodeError, RecursionError):
        return call  # the schema check reports the type
    return ToolCall(call.name, {spec.primary: value}, call.form)


def _refused(name: str, status: ToolStatus, message: str) -> ToolTurn:
    return ToolTurn(message, {"name": shorten(name), "status": status.value}, invalid=True)


ToolsArg = Toolbox | Sequence[str | Tool] | Mapping[str, Any] | str | None
"""What an env's ``tools=`` accepts: tool names or objects, a dict of :class:`Toolbox` arguments, a toolbox."""


def make_toolbox(tools: ToolsArg) -> Toolbox | None:
    """The toolbox for an env's ``tools=`` argument.

    Names and dicts are plain data, so they survive ``gymnasium.make`` specs, env clones and other processes
    (each env builds its own toolbox); a :class:`Toolbox` object belongs to the one env it is given to.

    Example:
        >>> make_toolbox(None) is None, [s.name for s in make_toolbox(("python", "submit")).specs]
        (True, ['python', 'submit'])
        >>> make_toolbox({"tools": ["shell"], "timeout_s": 2}).timeout_s
        2.0
    """
    if tools is None or isinstance(tools, Toolbox):
        return tools
    if isinstance(tools, Mapping):
        return Toolbox(**tools)
    if isinstance(tools, str | Tool):
        tools = [tools]
    if len(tools) == 0:
        return None
    return Toolbox(tools)


__all__ = ["BUILTIN", "ToolTurn", "Toolbox", "ToolboxState", "ToolsArg", "format_tool_call", "make_toolbox"]
