"""``turnkit models``: the built-in models, whether each is built, where and how big; ``models build NAME``.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="turnkit")
    >>> add_commands(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["models", "build", "smollm2", "--rebuild"])
    >>> args.name, args.rebuild, parser.parse_args(["models"]).func.__name__
    ('smollm2', True, 'cmd_models')
    >>> size_text(542_000_000), size_text(2_300_000), size_text(0)
    ('542 MB', '2.3 MB', '-')
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnkit.errors import ConfigError
from turnkit.models.names import MODELS, model_names


@dataclass(frozen=True)
class ModelStatus:
    """One row of ``turnkit models``: a built-in model and the state of its cache folder.

    Attributes:
        name: The model's name.
        summary: What it is.
        folder: Where it is (or will be) cached; ``None`` when its recipe cannot be made (a package is missing).
        built: Whether ``folder`` holds a model.
        size: Bytes in ``folder`` (0 when not built).
        problem: Why the recipe cannot be made (e.g. the install command), else ``""``.
    """

    name: str
    summary: str
    folder: Path | None
    built: bool
    size: int
    problem: str = ""


def model_status(name: str, *, cache: str | Path | None = None) -> ModelStatus:
    """The state of built-in model ``name`` in the cache (nothing is built).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     status = model_status("tiny", cache=d)
        >>> status.built, status.folder.parent.name, status.size
        (False, 'tiny', 0)
    """
    from turnkit.models.recipe import model_folder

    entry = MODELS[name]
    try:
        recipe = entry.recipe()
    except ConfigError as exc:
        return ModelStatus(name, entry.summary, None, False, 0, problem=str(exc))
    folder = model_folder(recipe, cache)
    built = (folder / "config.json").is_file()
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if built else 0
    return ModelStatus(name, entry.summary, folder, built, size)


def size_text(size: int) -> str:
    """Bytes as ``542 MB`` (two significant digits under 10 MB); ``-`` for nothing."""
    if size <= 0:
        return "-"
    mb = size / 1e6
    return f"{mb:.1f} MB" if mb < 10 else f"{mb:.0f} MB"


def cmd_models(args: argparse.Namespace) -> int:
    """List the built-in models: name, built or not, size, folder, what it is."""
    rows = [model_status(name) for name in model_names()]
    width = max(len(r.name) for r in rows)
    for r in rows:
        state = "built" if r.built else ("missing" if r.problem else "not built")
        where = str(r.folder) if r.folder is not None else r.problem
        print(f"{r.name:<{width}}  {state:<9}  {size_text(r.size):>7}  {where}")
        print(f"{'':<{width}}  {r.summary}")
    print("build one with: turnkit models build NAME (verbs also build a model on first use)")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    """Build (or rebuild) a built-in model and print its folder (the last line: usable as ``$(...)``)."""
    from turnkit.models.names import resolve_model

    if args.name not in MODELS:
        raise ConfigError(f"unknown model {args.name!r}; built-in models: {', '.join(model_names())}")
    folder = resolve_model(args.name, rebuild=args.rebuild, progress=not args.quiet)
    status = model_status(args.name)
    if not args.quiet:
        print(f"{args.name}: {size_text(status.size)} in", flush=True)
    print(folder)
    return 0


def add_commands(sub: Any) -> None:
    """Add ``models`` (and ``models build NAME``) to the ``turnkit`` sub-command parser (no heavy imports here)."""
    models = sub.add_parser("models", help="list the built-in models (tiny, smollm2, ...): built or not, where, size")
    models.set_defaults(func=cmd_models)
    actions = models.add_subparsers(dest="models_command")
    actions.add_parser("list", help="the same as plain `turnkit models`").set_defaults(func=cmd_models)
    build = actions.add_parser("build", help="build (convert, or train) a built-in model now and print its folder")
    build.add_argument("name", help=" | ".join(model_names()))
    build.add_argument("--rebuild", action="store_true", help="build again even if it is cached, and replace it")
    build.add_argument("--quiet", action="store_true", help="no progress bars; print only the folder")
    build.set_defaults(func=cmd_build)
