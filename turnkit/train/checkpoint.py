"""Atomic checkpoints: a training run can be killed at any moment and resumed exactly.

Layout of a run directory::

    run/
      checkpoints/step-000040/   adapter/ (peft format), optimizer.pt, rng.pt, state.json
      checkpoints/LATEST         name of the newest complete checkpoint

A checkpoint is written to a temporary sibling directory and renamed into place, and ``LATEST`` is
replaced atomically, so a reader never sees a half-written checkpoint.

Example:
    >>> import tempfile, torch
    >>> from pathlib import Path
    >>> run = Path(tempfile.mkdtemp())
    >>> with stage_checkpoint(run, step=3) as tmp:
    ...     torch.save({"w": torch.ones(2)}, tmp / "optimizer.pt")
    ...     write_json(tmp / "state.json", {"step": 3})
    >>> latest_checkpoint(run).name
    'step-000003'
    >>> read_json(latest_checkpoint(run) / "state.json")["step"]
    3
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from turnkit.errors import ConfigError


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (temporary file + rename)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """Read a JSON file, naming the file in the error if it is malformed."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from exc


@contextlib.contextmanager
def stage_checkpoint(run_dir: Path, step: int, keep: int = 2) -> Iterator[Path]:
    """Yield a temporary directory to fill; on success it becomes ``checkpoints/step-NNNNNN``.

    Args:
        run_dir: The run directory.
        step: The training step the checkpoint captures.
        keep: How many complete checkpoints to keep (older ones are deleted).
    """
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    name = f"step-{step:06d}"
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}."))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    final = root / name
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    pointer_tmp = root / ".LATEST.tmp"
    pointer_tmp.write_text(name + "\n", encoding="utf-8")
    os.replace(pointer_tmp, root / "LATEST")
    complete = sorted(p for p in root.glob("step-*") if p.is_dir())
    for old in complete[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint of a run, or ``None``."""
    pointer = Path(run_dir) / "checkpoints" / "LATEST"
    if not pointer.exists():
        return None
    path = pointer.parent / pointer.read_text(encoding="utf-8").strip()
    return path if path.is_dir() else None
