"""The ``turnkit`` command: ``list play eval bench train quickstart iqlearn afd synth serve serve-env view models``.

One module per command group: :mod:`.envs`, :mod:`.train`, :mod:`.iqlearn`, :mod:`.afd`, :mod:`.synth`,
:mod:`.serve` (an agent over the OpenAI API), :mod:`.serve_env` (an env over OpenEnv), :mod:`.view`,
:mod:`.models`.

Example:
    >>> main(["list"])  # doctest: +ELLIPSIS
    turnkit/CollabCode-v0 ...
    turnkit/MathEpisodes-v0 ...
    0
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence

import gymnasium

from turnkit.cli import envs, models
from turnkit.errors import TurnkitError


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``turnkit`` command."""
    parser = argparse.ArgumentParser(
        prog="turnkit", description="Text environments, sandboxes and learners for multi-turn LLM agents."
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE before the sub-command runs, for the envs it registers (repeatable; installed "
        "packages' turnkit.envs entry points load without it)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    envs.add_commands(sub)
    models.add_commands(sub)
    # Training and synthesis commands; torch is imported only when one of them runs.
    from turnkit.cli import afd, iqlearn, serve, serve_env, synth, train, view

    train.add_commands(sub)
    iqlearn.add_commands(sub)
    afd.add_commands(sub)
    synth.add_commands(sub)
    serve.add_commands(sub)
    serve_env.add_commands(sub)
    view.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``turnkit`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        envs.load_env_modules(args.imports, env_id=getattr(args, "env_id", None))
        with _library_progress_bars(enabled=not getattr(args, "quiet", False)):
            return int(args.func(args))
    except (TurnkitError, gymnasium.error.Error) as exc:
        print(f"turnkit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


@contextlib.contextmanager
def _library_progress_bars(*, enabled: bool) -> Iterator[None]:
    """Silence the Hugging Face libraries' own progress bars while a ``--quiet`` command runs.

    They show when the tiny models are built, saved and loaded. The environment variable covers libraries
    imported later; the previous state comes back after the command.
    """
    if enabled:
        yield
        return
    key = "HF_HUB_DISABLE_PROGRESS_BARS"
    before = os.environ.get(key)
    os.environ[key] = "1"  # read when huggingface_hub / transformers are first imported
    hf_logging = sys.modules.get("transformers.utils.logging")
    was_enabled = hf_logging is not None and hf_logging.is_progress_bar_enabled()
    if hf_logging is not None:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before
        # Only what was imported before the command is restored: a library first imported under the variable
        # keeps it for the process (huggingface_hub reads it once, and warns if asked to enable bars after).
        if hf_logging is not None and was_enabled:
            hf_logging.enable_progress_bar()
