"""The built-in tools: ``python`` and ``shell`` over persistent sandboxed sessions, and ``submit``.

Both session tools of one env share a :class:`Workspace`: one sandbox (bubblewrap by default) created at the
first call, so a file the Python session writes is there for the shell. Each tool keeps its own pexpect
session (:mod:`turnkit.sandbox.repl`), so variables, imports and the shell's directory persist between calls
of an episode. Every call has a time limit (Ctrl-C when it runs out; the state survives if the program comes
back) and an output limit (cut with a marker). As with :meth:`Sandbox.run`, processes a call leaves running
(background jobs, forked children, a fork bomb, daemons in sessions of their own) are stopped when it returns
(:meth:`~turnkit.sandbox.repl.PexpectSession.stop_background` kills every descendant of the session's program,
a child subreaper): what persists is the session's variables, its directory and the files. A session that dies
is restarted at the next call, and the agent is told that its state is gone.

Example:
    >>> ws = Workspace()
    >>> py = python_tool(ws)
    >>> _ = py.call({"code": "x = 6"}, timeout=5)
    >>> py.call({"code": "x * 7"}, timeout=5)
    ToolResult(text='42\\n', status=<ToolStatus.OK: 'ok'>, exit_code=0, truncated=False)
    >>> ws.close()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from turnkit.sandbox import Limits, LocalSandbox, PythonSession, ShellSession
from turnkit.sandbox.repl import PexpectSession
from turnkit.tools.base import ToolResult, ToolSpec, ToolStatus, text_tool, truncate

SandboxFactory = Callable[[], Any]
"""A zero-argument callable returning a sandbox that can host interactive sessions (Local or Docker)."""

DEFAULT_LIMITS = Limits(wall_time_s=10.0, memory_mb=512, pids=64, output_bytes=1_000_000)
"""Limits of the default tool sandbox (time and output per call are the toolbox's own, tighter limits)."""

PYTHON_SPEC = text_tool(
    "python",
    "Run Python code in a persistent session (variables and imports stay between calls). The value of a final "
    "expression is printed. No network; files go in the current directory.",
    "code",
    "Python source to run.",
)
SHELL_SPEC = text_tool(
    "shell",
    "Run a bash command in a persistent shell (the directory and variables stay between calls). No network.",
    "command",
    "The bash command line.",
)
SUBMIT_SPEC = text_tool(
    "submit", "Submit your final answer; the task judges it and replies.", "answer", "Your final answer."
)


class Workspace:
    """One sandbox shared by an env's session tools, created on first use and replaced by :meth:`close`.

    Args:
        make_sandbox: Builds the sandbox; default a :class:`~turnkit.sandbox.LocalSandbox` with
            :data:`DEFAULT_LIMITS`.

    Example:
        >>> ws = Workspace()
        >>> ws.generation, ws.sandbox.cwd, ws.generation
        (0, '/work', 1)
        >>> ws.close()
    """

    def __init__(self, make_sandbox: SandboxFactory | None = None) -> None:
        self._make = make_sandbox or (lambda: LocalSandbox(DEFAULT_LIMITS))
        self._sandbox: Any = None
        self.generation = 0
        """Counts the sandboxes made so far; sessions of an older generation are stale."""

    @property
    def sandbox(self) -> Any:
        """The live sandbox (started now if there is none)."""
        if self._sandbox is None:
            self._sandbox = self._make()
            self.generation += 1
        return self._sandbox

    @property
    def started(self) -> bool:
        """Whether a sandbox is live."""
        return self._sandbox is not None

    def close(self) -> None:
        """Close the sandbox (and with it every session in it). Idempotent; the next use starts a fresh one."""
        if self._sandbox is not None:
            sandbox, self._sandbox = self._sandbox, None
            sandbox.close()


class SessionTool:
    """A tool that runs its primary argument in a persistent pexpect session of a :class:`Workspace`.

    Args:
        spec: What the agent is told (``spec.primary`` is the code or command argument).
        session_class: :class:`~turnkit.sandbox.PythonSession` or :class:`~turnkit.sandbox.ShellSession`.
        workspace: The shared sandbox.
        output_chars: Characters of output the agent reads per call (cut with a marker beyond).

    Example:
        >>> ws = Workspace()
        >>> sh = shell_tool(ws)
        >>> sh.call({"command": "cd /tmp && X=3"}, timeout=5).status.value
        'ok'
        >>> sh.call({"command": "pwd; echo $X; false"}, timeout=5).text
        '/tmp\\n3\\n[exit status 1]'
        >>> sh.call({"command": "exit 4"}, timeout=5).text
        '[exit status 4; the session ended and its state is gone]'
        >>> ws.close()
    """

    stateful = True

    def __init__(
        self,
        spec: ToolSpec,
        session_class: type[PexpectSession],
        workspace: Workspace,
        *,
        output_chars: int = 4000,
    ) -> None:
        self.spec = spec
        self.session_class = session_class
        self.workspace = workspace
        self.output_chars = output_chars
        self._session: PexpectSession | None = None
        self._generation = -1

    def call(self, arguments: Mapping[str, Any], *, timeout: float) -> ToolResult:
        """Run ``arguments[spec.primary]`` in the session; see the module docstring for limits."""
        session = self._live_session()
        if not session.alive:  # died in an earlier call (already reported): restart before counting this one
            session.restart()
        before = session.restarts
        result = session.run(str(arguments[self.spec.primary]), timeout=timeout)
        stopped: int | None = 0
        if session.alive and session.restarts == before:
            stopped = session.stop_background()  # jobs, forked children, daemons, a fork bomb: gone with the call
        lost = not session.alive or session.restarts != before
        notes: list[str] = []
        if result.timed_out:
            status = ToolStatus.TIMEOUT
            notes.append(f"timed out after {timeout:g} s and was interrupted")

        elif lost:
            status = ToolStatus.CRASHED
            code = result.exit_code
            notes.append(f"exit status {code}" if code >= 0 else f"killed by signal {-code}")
        elif result.exit_code != 0:
            status = ToolStatus.ERROR
            notes.append(f"exit status {result.exit_code}")
        else:
            status = ToolStatus.OK
        if stopped:
            notes.append(f"{stopped} leftover process{'es' if stopped != 1 else ''} stopped")
        if result.truncated:
            notes.append("output flood cut off")
        if lost:
            notes.append("the session ended and its state is gone")
        text, cut = truncate(result.stdout, self.output_chars)
        if notes:
            text = f"{text}{'' if not text or text.endswith(chr(10)) else chr(10)}[{'; '.join(notes)}]"
        elif not text:
            text = "(no output)"
        return ToolResult(text, status, result.exit_code, truncated=cut or result.truncated)

    def close(self) -> None:
        """Stop the session (idempotent); the next call starts a fresh one."""
        if self._session is not None:
            session, self._session = self._session, None
            session.close()

    def _live_session(self) -> PexpectSession:
        sandbox = self.workspace.sandbox
        if self._session is None or self._generation != self.workspace.generation:
            self.close()
            output_bytes = max(4 * self.output_chars + 1024, 4096)
            self._session = self.session_class(sandbox, output_bytes=output_bytes)
            self._generation = self.workspace.generation
        return self._session


def python_tool(workspace: Workspace, *, output_chars: int = 4000) -> SessionTool:
    """The ``python`` tool: a persistent Python REPL session in ``workspace``.

    Example:
        >>> ws = Workspace()
        >>> python_tool(ws).call({"code": "import math; math.factorial(5)"}, timeout=5).text
        '120\\n'
        >>> ws.close()
    """
    return SessionTool(PYTHON_SPEC, PythonSession, workspace, output_chars=output_chars)


def shell_tool(workspace: Workspace, *, output_chars: int = 4000) -> SessionTool:
    """The ``shell`` tool: a persistent bash session in ``workspace``.

    Example:
        >>> ws = Workspace()
        >>> shell_tool(ws).call({"command": "echo $((6 * 7))"}, timeout=5).text
        '42\\n'
        >>> ws.close()
    """
    return SessionTool(SHELL_SPEC, ShellSession, workspace, output_chars=output_chars)
