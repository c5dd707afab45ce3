"""Find the run, eval and synth folders under a path, and name what is wrong with a file without raising.

A *source* is one folder the viewer can show, with the kinds of data it holds:

=========== =================================================================================================
``run``      ``config.json`` and/or ``metrics.jsonl`` (``turnkit train``, quickstart's ``train/``, synth), or a
             quickstart ``summary.json``
``eval``     ``trajectories.jsonl`` (``turnkit eval``, :class:`~turnkit.rollout.evaluate.EpisodeSink`)
``rollouts``  ``trajectories.jsonl`` in a run's ``rollouts/step-NNNNNN/`` (training episodes as the learner saw
              them, :mod:`turnkit.train.rollout_log`)
``synth``    ``state.json`` with ``iter_NNN/trees/seed_S.json`` (``turnkit synth``)
=========== =================================================================================================

:func:`discover` walks a folder (a few levels deep, skipping checkpoints, adapters and TensorBoard events)
and lists every source with its id: its path relative to the root (``"."`` for the root itself).

Example:
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "train").mkdir(); _ = (root / "train" / "metrics.jsonl").write_text('{"step": 1}\\n')
    >>> (root / "eval").mkdir(); _ = (root / "eval" / "trajectories.jsonl").write_text("")
    >>> [(s.id, s.kinds) for s in discover(root)]
    [('eval', ('eval',)), ('train', ('run',))]
    >>> inside(root, "train/metrics.jsonl").name, inside(root, "../etc/passwd")
    ('metrics.jsonl', None)
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnkit.train.rollout_log import ROLLOUTS_DIR

SKIP = frozenset({"checkpoints", "tb", "adapter", "pictures", "trees", "__pycache__", "node_modules"})
"""Folder names never searched for sources (they hold a source's parts, or nothing the viewer reads)."""

MAX_DEPTH = 4
"""How many folder levels below the root :func:`discover` looks."""


@dataclass(frozen=True)
class Problem:
    """Something wrong with a file, shown on the page instead of raised.

    Attributes:
        file: The file, relative to the viewer's root where possible.
        line: The 1-based line, if the problem is on one line.
        message: What is wrong.

    Example:
        >>> Problem("run/metrics.jsonl", 7, "invalid JSON: Unterminated string").text()
        'run/metrics.jsonl:7: invalid JSON: Unterminated string'
    """

    file: str
    line: int | None
    message: str

    def text(self) -> str:
        """``file:line: message`` (``file: message`` without a line)."""
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The problem as JSON for the page (with :meth:`text`)."""
        return {"file": self.file, "line": self.line, "message": self.message, "text": self.text()}


@dataclass(frozen=True)
class Source:
    """One folder the viewer shows.

    Attributes:
        id: The folder relative to the root (``"."`` for the root), with ``/`` separators.
        path: The folder.
        kinds: What it holds: ``"run"``, ``"eval"``, ``"synth"`` (sorted).
        files: The recognised files present, relative to the folder.
    """

    id: str
    path: Path
    kinds: tuple[str, ...]
    files: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """The source as JSON for the page."""
        return {"id": self.id, "kinds": list(self.kinds), "files": list(self.files)}


RUN_FILES = ("config.json", "metrics.jsonl", "summary.json")
EVAL_FILES = ("trajectories.jsonl",)


def classify(folder: Path) -> Source | None:
    """The :class:`Source` a folder is, or ``None`` when it holds nothing the viewer reads.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> classify(d) is None
        True
        >>> _ = (d / "summary.json").write_text("{}"); _ = (d / "trajectories.jsonl").write_text("")
        >>> classify(d).kinds  # an eval folder: its summary.json belongs to its episodes
        ('eval',)
    """
    files = [name for name in (*RUN_FILES, *EVAL_FILES, "state.json", "curves.png", "quickstart.png")
             if (folder / name).is_file()]  # fmt: skip
    kinds = set()
    if any(name in files for name in EVAL_FILES):
        kinds.add("rollouts" if is_rollouts(folder) else "eval")
    if "config.json" in files or "metrics.jsonl" in files:
        kinds.add("run")
    if "summary.json" in files and "trajectories.jsonl" not in files:
        kinds.add("run")  # a quickstart's before/after summary (an eval folder's summary belongs to its episodes)
    if "state.json" in files and any(folder.glob("iter_*/trees/seed_*.json")):
        kinds.add("synth")
    if (folder / "checkpoints").is_dir():
        files.append("checkpoints/")
        kinds.add("run")
    if not kinds:
        return None
    return Source(id=".", path=folder, kinds=tuple(sorted(kinds)), files=tuple(files))


EPISODE_KINDS = ("eval", "rollouts")
"""The kinds whose folder holds a ``trajectories.jsonl`` (the Episodes view's sources)."""


def is_rollouts(folder: Path) -> bool:
    """Whether ``folder`` is a training step's kept rollouts (``rollouts/step-NNNNNN``), not an evaluation.

    Example:
        >>> is_rollouts(Path("runs/quickstart/train/rollouts/step-000010")), is_rollouts(Path("eval/rl-greedy"))
        (True, False)
    """
    return folder.parent.name == ROLLOUTS_DIR and re.fullmatch(r"step-\d+", folder.name) is not None


def discover(root: str | Path, *, max_depth: int = MAX_DEPTH) -> list[Source]:
    """Every source at or under ``root`` (or ``root`` itself when it is a ``trajectories.jsonl`` file's folder).

    Args:
        root: The folder given to ``turnkit view``.
        max_depth: Folder levels below ``root`` to look at.

    Returns:
        The sources sorted by id; empty when there are none (the page then says what it looked for).
    """
    root = Path(root)
    found: list[Source] = []
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        source = classify(folder)
        if source is not None:
            rel = folder.relative_to(root).as_posix()
            found.append(Source(id=rel or ".", path=folder, kinds=source.kinds, files=source.files))
        if depth >= max_depth:
            continue
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir())
        except OSError:
            continue
        for child in children:
            if child.name in SKIP or child.name.startswith((".", "iter_")):
                continue
            stack.append((child, depth + 1))
    return sorted(found, key=lambda s: s.id)


def inside(root: str | Path, rel: str) -> Path | None:
    """``root / rel`` if it stays inside ``root`` (no ``..`` or absolute path escapes), else ``None``.

    The check is on the path's text: links the user put inside the root (a folder of links to runs) are followed.
    """
    base = Path(os.path.abspath(root))
    if "\x00" in rel:
        return None
    path = Path(os.path.normpath(base / rel))
    return path if path == base or base in path.parents else None


def relative(root: Path, path: Path) -> str:
    """``path`` relative to ``root`` for messages (the path itself when it is elsewhere).

    Example:
        >>> relative(Path("/runs"), Path("/runs/a/metrics.jsonl")), relative(Path("/runs"), Path("/x"))
        ('a/metrics.jsonl', '/x')
    """
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def read_json(path: Path, root: Path) -> tuple[Any, Problem | None]:
    """A JSON file's value, or ``(None, the problem)``; never raises.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp()); _ = (d / "c.json").write_text('{"lr": 0.1,\\n "steps": }')
        >>> read_json(d / "c.json", d)[1].text()
        'c.json:2: invalid JSON: Expecting value (column 11)'
    """
    name = relative(root, path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, Problem(name, None, "missing")
    except (OSError, UnicodeDecodeError) as exc:
        return None, Problem(name, None, f"cannot read: {exc}")
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, Problem(name, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")


def read_jsonl(path: Path, root: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[Problem]]:
    """Every JSON-object line of a JSONL file with its line number, and a :class:`Problem` per bad line.

    Bad lines (a truncated last line, a line that is not JSON or not an object) are skipped, not fatal.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp()); _ = (d / "m.jsonl").write_text('{"step": 1}\\n[2]\\n{"step": 3, "lo')
        >>> rows, problems = read_jsonl(d / "m.jsonl", d)
        >>> rows, [p.text() for p in problems]  # doctest: +NORMALIZE_WHITESPACE
        ([(1, {'step': 1})], ['m.jsonl:2: expected a JSON object, got list',
                              'm.jsonl:3: invalid JSON: Unterminated string starting at (column 13)'])
    """
    name = relative(root, path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], [Problem(name, None, "missing")]
    except OSError as exc:
        return [], [Problem(name, None, f"cannot read: {exc}")]
    rows: list[tuple[int, dict[str, Any]]] = []
    problems: list[Problem] = []
    for number, raw in enumerate(data.splitlines(), start=1):
        value, problem = parse_line(raw)
        if problem:
            problems.append(Problem(name, number, problem))
        elif value is not None:
            rows.append((number, value))
    return rows, problems


def json_message(exc: json.JSONDecodeError) -> str:
    """A whole sentence for a JSON error: where it is, and that the file ends there when it does.

    ``json``'s own messages can stop mid-sentence (``Unterminated string starting at``); the position completes
    them.

    Example:
        >>> try:
        ...     json.loads('{"nodes": [{"text": "ANSW')
        ... except json.JSONDecodeError as exc:
        ...     print(json_message(exc))
        invalid JSON: Unterminated string starting at column 21; the file ends there (cut short, or still being written)
    """
    where = f" column {exc.colno}" if exc.msg.endswith(" at") else f" (column {exc.colno})"
    message = f"invalid JSON: {exc.msg}{where}"
    if not exc.doc[exc.pos :].strip() or exc.msg.startswith("Unterminated"):
        message += "; the file ends there (cut short, or still being written)"
    return message


def parse_line(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """One JSONL line: ``(object, "")``, ``(None, "")`` for a blank line, or ``(None, what is wrong)``.

    Example:
        >>> parse_line(b'{"a": 1}'), parse_line(b"  "), parse_line(b"{")[1]
        (({'a': 1}, ''), (None, ''), 'invalid JSON: Expecting property name enclosed in double quotes (column 2)')
    """
    if not raw.strip():
        return None, ""
    try:
        value = json.loads(raw)
    except UnicodeDecodeError as exc:
        return None, f"not valid UTF-8 ({exc.reason})"
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} (column {exc.colno})"
    if not isinstance(value, dict):
        return None, f"expected a JSON object, got {type(value).__name__}"
    return value, ""
