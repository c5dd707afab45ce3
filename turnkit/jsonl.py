"""Reading JSON Lines files with errors that name the file and the line.

Every reader of user data in turnkit (math and ColBench task files, chat demonstrations, preference pairs)
goes through :func:`json_lines`, so a bad line reads the same everywhere: ``file:line: what is wrong``.

Example:
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "rows.jsonl"
    >>> _ = path.write_text('{"a": 1}\\n\\n[2]\\n')
    >>> list(json_lines(path))  # blank lines are skipped; numbers are 1-based
    [(1, {'a': 1}), (3, [2])]
    >>> list(json_objects(path))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    turnkit.errors.DataError: .../rows.jsonl:3: expected a JSON object, got list
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from turnkit.errors import DataError


def json_lines(path: str | Path, *, what: str = "the file") -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of a JSONL file, in order.

    Args:
        path: The file.
        what: How to name the file when it cannot be read (``"cannot read <what>: ..."``).

    Raises:
        DataError: The file cannot be read, or a line is not UTF-8 or not JSON (naming the file and line).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {what}: {exc.strerror or exc}", path=path) from exc
    for number, raw in enumerate(data.splitlines(), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(f"not valid UTF-8 ({exc.reason})", path=path, line=number) from exc
        if not text.strip():
            continue
        try:
            yield number, json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"invalid JSON: {exc.msg} (column {exc.colno})", path=path, line=number) from exc


def json_objects(path: str | Path, *, what: str = "the file") -> Iterator[tuple[int, dict[str, Any]]]:
    """Like :func:`json_lines`, but every line must be a JSON object (a :class:`DataError` names one that is not)."""
    for number, value in json_lines(path, what=what):
        if not isinstance(value, dict):
            raise DataError(f"expected a JSON object, got {type(value).__name__}", path=path, line=number)
        yield number, value
