"""``turnkit view PATH``: serve a local web page over run, eval and synth folders until Ctrl-C.

The page (Runs, Episodes, Search) reads the folders under ``PATH`` as they are, also while a run still writes
them; it is served on a loopback address only and needs no network (see :mod:`turnkit.view`, docs/viewer.md).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="turnkit")
    >>> add_commands(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["view", "runs/quickstart", "--port", "0"])
    >>> args.path, args.host, args.port
    ('runs/quickstart', '127.0.0.1', 0)
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from turnkit.errors import ConfigError


def cmd_view(args: argparse.Namespace) -> int:
    """Serve ``args.path`` until interrupted; prints the URL once the port is bound.

    Raises:
        ConfigError: The path is not a folder, the host is not a loopback address, or the port is taken.
    """
    from turnkit.view import make_server

    root = Path(args.path)
    if root.is_file() and root.name in ("trajectories.jsonl", "metrics.jsonl", "config.json", "summary.json"):
        root = root.parent  # the folder the file belongs to
    if not root.is_dir():
        raise ConfigError(f"{root} is not a folder (give a run, eval or synth folder, or a folder of them)")
    try:
        server = make_server(root, host=args.host, port=args.port, quiet=not args.log)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    print(f"turnkit view: {root.resolve()} at {server.url}   (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


def add_commands(sub: Any) -> None:
    """Add ``view`` to the ``turnkit`` sub-command parser."""
    p = sub.add_parser("view", help="a local web page over run, eval and synth folders (runs, episodes, trees)")
    p.add_argument(
        "path", help="a run, eval or synth folder, or a folder of them (e.g. runs/quickstart), or a trajectories.jsonl"
    )
    p.add_argument("--host", default="127.0.0.1", help="loopback address to listen on (127.0.0.1, ::1, localhost)")
    p.add_argument("--port", type=int, default=8765, help="TCP port; 0 picks a free one (printed)")
    p.add_argument("--log", action="store_true", help="log every request to stderr")
    p.set_defaults(func=cmd_view)
