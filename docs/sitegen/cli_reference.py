"""The CLI reference page, generated from the ``turnkit`` command's argparse parsers.

Every sub-command (recursively, should one grow its own sub-commands) gets a section with its usage line,
description and a table of its options with their help, defaults expanded as ``--help`` shows them.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="tool")
    >>> sub = parser.add_subparsers(dest="command")
    >>> run = sub.add_parser("run", help="run it", description="Run the thing.")
    >>> _ = run.add_argument("--steps", type=int, default=3, help="how many (default: %(default)s)")
    >>> [name for name, _ in subcommands(parser)]
    ['tool run']
    >>> "| `--steps STEPS` | how many (default: 3) |" in render(parser)
    True
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator


def subcommands(
    parser: argparse.ArgumentParser, prefix: str | None = None
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``(full command name, parser)`` of every sub-command under ``parser``, depth first, in declaration order."""
    prefix = prefix or parser.prog
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from subcommands(sub, f"{prefix} {name}")


def _summaries(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The one-line ``help`` of each direct sub-command (what ``turnkit --help`` lists)."""
    out: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                out[choice.dest] = choice.help or ""
    return out


def _cell(text: str) -> str:
    """Text that is safe inside one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _invocation(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    """``--flag METAVAR`` (every spelling) or the positional's name, as ``--help`` writes it."""
    return formatter._format_action_invocation(action)


WIDTH = 100
"""Columns of the usage lines (fixed, so the page does not depend on the terminal that builds it)."""


def _formatter(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    """``parser``'s own help formatter at :data:`WIDTH` columns."""
    return parser.formatter_class(prog=parser.prog, width=WIDTH)


def _default(action: argparse.Action, help_text: str) -> str:
    """`` (default: `x`)`` when the action has a default that its help does not already state."""
    default = action.default
    if default is None or default is False or default == argparse.SUPPRESS or default in ([], ()):
        return ""
    if "default" in help_text.lower():
        return ""
    return f" (default: `{default}`)"


def options_table(parser: argparse.ArgumentParser) -> str:
    """A Markdown table of ``parser``'s arguments (in declaration order), without ``--help`` and sub-parsers."""
    formatter = _formatter(parser)
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        help_text = formatter._expand_help(action) if action.help else ""
        help_text += _default(action, help_text)
        rows.append(f"| `{_cell(_invocation(action, formatter))}` | {_cell(help_text)} |")
    if not rows:
        return "No options.\n"
    return "| Argument | Help |\n| --- | --- |\n" + "\n".join(rows) + "\n"


def _usage(parser: argparse.ArgumentParser) -> str:
    """The usage line(s) of ``parser``, without the ``usage:`` label."""
    formatter = _formatter(parser)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def render(parser: argparse.ArgumentParser) -> str:
    """The whole CLI reference page for ``parser`` (a top-level command with sub-commands)."""
    parts = [
        f"# `{parser.prog}` command reference\n",
        "Generated from the argument parsers (`turnkit.cli.build_parser()`) on every docs build; "
        f"`{parser.prog} COMMAND --help` prints the same.\n",
        f"{parser.description or ''}\n",
        f"```text\n{_usage(parser)}\n```\n",
        "## Global options\n",
        options_table(parser),
        "## Commands\n",
    ]
    commands = list(subcommands(parser))
    summary_rows = []
    for name, _ in commands:
        parent = name.rsplit(" ", 1)[0]
        parent_parser = parser if parent == parser.prog else dict(commands)[parent]
        summary = _summaries(parent_parser).get(name.rsplit(" ", 1)[1], "")
        summary_rows.append(f"| [`{name}`](#{_anchor(name)}) | {_cell(summary)} |")
    parts.append("| Command | Summary |\n| --- | --- |\n" + "\n".join(summary_rows) + "\n")
    for name, sub in commands:
        level = "#" * min(2 + name.count(" "), 6)
        parts += [
            f"{level} {name}\n",
            f"{sub.description or ''}\n" if sub.description else "",
            f"```text\n{_usage(sub)}\n```\n",
            options_table(sub),
        ]
    return "\n".join(p for p in parts if p)


def _anchor(name: str) -> str:
    """The heading id MkDocs' ``toc`` extension gives ``name`` (lower case, spaces and dashes to ``-``)."""
    return "-".join(name.lower().split())
