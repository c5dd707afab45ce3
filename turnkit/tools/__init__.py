"""Agent tools: sandboxed ``python`` and ``shell`` sessions and ``submit``, offered by any env.

Give an env tools with ``tools=...`` (``gymnasium.make("turnkit/MathEpisodes-v0", tools=["python"])``): a
message that calls a tool gets the tool's output as the next observation, and the trajectory records that
reply as a ``tool`` message. See :mod:`turnkit.tools.toolbox` for snapshots and :mod:`turnkit.tools.parse`
for the call formats.

Example:
    >>> import gymnasium, turnkit
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0", tools=["python"])
    >>> _ = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step("<python>6 + 5</python>")
    >>> obs, info["tool"]["status"]
    ('11\\n', 'ok')
    >>> env.close()
"""

from turnkit.tools.base import Tool, ToolResult, ToolSpec, ToolStatus, check_arguments, text_tool, truncate
from turnkit.tools.parse import MalformedCall, ToolCall, format_tool_call, parse_tool_call
from turnkit.tools.sessions import PYTHON_SPEC, SHELL_SPEC, SUBMIT_SPEC, SessionTool, Workspace, python_tool, shell_tool
from turnkit.tools.toolbox import BUILTIN, Toolbox, ToolboxState, ToolsArg, ToolTurn, make_toolbox

__all__ = [
    "BUILTIN",
    "PYTHON_SPEC",
    "SHELL_SPEC",
    "SUBMIT_SPEC",
    "MalformedCall",
    "SessionTool",
    "Tool",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "ToolStatus",
    "ToolTurn",
    "Toolbox",
    "ToolboxState",
    "ToolsArg",
    "Workspace",
    "check_arguments",
    "format_tool_call",
    "make_toolbox",
    "parse_tool_call",
    "python_tool",
    "shell_tool",
    "text_tool",
    "truncate",
]
