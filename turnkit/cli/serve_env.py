"""``turnkit serve-env``: serve a registered env over OpenEnv's HTTP/WebSocket protocol until Ctrl-C.

Any OpenEnv client (openenv-core's ``GenericEnvClient``, or turnkit's own
:func:`turnkit.integrations.openenv.make_remote_env`) can then play it. Privileged task data stays in this
process; see :mod:`turnkit.integrations.openenv` and docs/integrations.md.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="turnkit")
    >>> add_commands(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["serve-env", "turnkit/MathEpisodes-v0", "--port", "0", "--env-kwarg", "split=ood"])
    >>> args.env_id, args.host, args.port, args.env_kwarg, args.max_sessions
    ('turnkit/MathEpisodes-v0', '127.0.0.1', 0, ['split=ood'], 64)
"""

from __future__ import annotations

import argparse
from typing import Any

from turnkit.cli.envs import parse_env_kwargs
from turnkit.integrations.openenv import SPEC_PATH, serve


def cmd_serve_env(args: argparse.Namespace) -> int:
    """Serve ``args.env_id`` until interrupted; prints the URL once the port is bound."""

    def ready(url: str) -> None:
        print(f"serving {args.env_id} over OpenEnv at {url}", flush=True)
        print(f"  WebSocket sessions: {url.replace('http', 'ws', 1)}/ws   spec: {url}{SPEC_PATH}", flush=True)
        print(f"  in Python: turnkit.integrations.openenv.make_remote_env({url!r})   (Ctrl-C stops)", flush=True)

    kwargs = parse_env_kwargs(args.env_kwarg)
    serve(
        args.env_id,
        env_kwargs=kwargs,
        host=args.host,
        port=args.port,
        max_sessions=args.max_sessions,
        on_ready=ready,
    )
    return 0


def add_commands(sub: Any) -> None:
    """Add ``serve-env`` to the ``turnkit`` sub-command parser."""
    p = sub.add_parser("serve-env", help="serve a registered env over OpenEnv (HTTP + WebSocket)")
    p.add_argument("env_id", help="a registered env id, e.g. turnkit/MathEpisodes-v0")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (the protocol has no authentication)")
    p.add_argument("--port", type=int, default=8000, help="TCP port; 0 picks a free one (printed)")
    p.add_argument(
        "--env-kwarg", action="append", default=[], metavar="KEY=VALUE", help="gymnasium.make argument (JSON value)"
    )
    p.add_argument(
        "--max-sessions",
        type=int,
        default=64,
        help="most concurrent WebSocket sessions (one env each); one more is answered CAPACITY_REACHED",
    )
    p.set_defaults(func=cmd_serve_env)
