"""``turnkit serve AGENT``: serve any agent over the OpenAI API until Ctrl-C.

``AGENT`` is any spec ``turnkit eval --agent`` takes (``tiny``, ``smollm2``, ``hf:PATH``, ``scripted:TEXT``,
``openai:URL#MODEL``, ...; :func:`turnkit.cli.agents.make_agent` builds it), served by
:class:`~turnkit.agents.serve.AgentServer` (chat and token-id completions, tools, streaming, runtime LoRA
routes). It serves the agent under one model name, the spec's (``tiny``, ``smollm2``; a ``hf:PATH`` folder's own
name) or ``--model-name``: ``/v1/models`` lists it (with any LoRA adapters loaded at runtime), and a request
naming another model gets OpenAI's 404 ``model_not_found``, which lists the served names. ``--temperature``,
``--top-p`` and ``--max-new-tokens`` set the served agent's defaults; a request's own ``temperature``,
``top_p`` and ``max_tokens`` still win. Any OpenAI client, or turnkit's
:class:`~turnkit.agents.openai.OpenAIAgent` (``turnkit eval --agent openai:URL#NAME``), can then talk to it.

Nothing authenticates callers, so the server listens on ``127.0.0.1`` unless ``--host`` names another
interface, and then it says so on stderr.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="turnkit")
    >>> add_commands(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["serve", "tiny", "--port", "0", "--temperature", "0", "--threads", "1"])
    >>> args.agent, listen_host(args.host), args.port, args.threads, served_name(args.agent, args.model_name)
    ('tiny', '127.0.0.1', 0, 1, 'tiny')
    >>> served_name("hf:runs/quickstart/final", None), is_loopback("::1"), is_loopback("0.0.0.0")
    ('final', True, False)
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
import threading
from pathlib import Path
from typing import Any

from turnkit.cli.agents import add_sampling_args
from turnkit.errors import ConfigError

DEFAULT_HOST = "127.0.0.1"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def listen_host(host: str | None) -> str:
    """The interface to listen on: loopback unless ``--host`` was given; a non-loopback one is warned about.

    Args:
        host: ``--host`` as given, ``None`` when it was left out.

    Example:
        >>> listen_host(None), listen_host("localhost")
        ('127.0.0.1', 'localhost')
    """
    if host is None:
        return DEFAULT_HOST
    if not is_loopback(host):
        print(
            f"turnkit serve: warning: listening on {host}, not a loopback address; nothing authenticates callers, "
            "so anyone who can reach this port can use the model",
            file=sys.stderr,
            flush=True,
        )
    return host


def served_name(spec: str, model_name: str | None) -> str:
    """The served model name (requests must use it): ``--model-name``, else the spec (a ``hf:PATH`` folder's name)."""
    if model_name:
        return model_name
    kind, _, arg = spec.partition(":")
    if kind == "hf" and arg:
        return Path(arg).name or spec
    return spec


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve ``args.agent`` until interrupted; prints the API root and the model name once the port is bound.

    Returns:
        0, also after Ctrl-C (the server shuts down cleanly first).

    Raises:
        ConfigError: An unknown agent spec, sampling flags for an agent that does not sample, or a port that
            cannot be bound.
    """
    from turnkit.agents.serve import AgentServer
    from turnkit.cli.agents import make_agent, sampling_changes
    from turnkit.models.threads import torch_threads

    host = listen_host(args.host)
    name = served_name(args.agent, args.model_name)
    with torch_threads(args.threads):
        agent = make_agent(args.agent, sampling=sampling_changes(args))
        try:
            server = AgentServer(agent, model_name=name, host=host, port=args.port)
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{args.port}: {exc.strerror or exc}") from None
        with server:
            print(f"turnkit serve: {args.agent} at {server.base_url} as model {name!r}   (Ctrl-C stops)", flush=True)
            print(f"  in Python: turnkit.agents.openai.OpenAIAgent({server.base_url!r}, {name!r})", flush=True)
            try:
                threading.Event().wait()
            except KeyboardInterrupt:
                print("turnkit serve: stopped", flush=True)
    return 0


def add_commands(sub: Any) -> None:
    """Add ``serve`` to the ``turnkit`` sub-command parser."""
    p = sub.add_parser("serve", help="serve an agent over the OpenAI API (chat and completions) until Ctrl-C")
    p.add_argument(
        "agent", help="an agent spec, as `turnkit eval --agent` takes: tiny | smollm2 | hf:PATH | scripted:TEXT | ..."
    )
    p.add_argument(
        "--host",
        default=None,
        help=f"interface to listen on (default {DEFAULT_HOST}; another is served with a warning: no authentication)",
    )
    p.add_argument("--port", type=int, default=8000, help="TCP port; 0 picks a free one (printed)")
    p.add_argument(
        "--model-name",
        default=None,
        help="the served model name, which requests must use (default: the agent spec; hf:PATH: the folder's name)",
    )
    add_sampling_args(p)
    p.set_defaults(func=cmd_serve)
