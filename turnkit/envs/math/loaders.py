r"""Load GSM8K-style and MATH-style JSONL files as math tasks.

* GSM8K: one JSON object per line with ``question`` and ``answer``; the answer's final line is
  ``#### <number>`` (thousands separators allowed).
* MATH: one JSON object per line with ``problem`` and ``solution``; the final answer is the last
  ``\boxed{...}`` of the solution. Optional ``level`` (``"Level 3"`` or ``3``) becomes the difficulty
  (0 when absent or unreadable, e.g. ``"Level ?"``) and optional ``type`` becomes ``metadata["kind"]``.

Blank lines are skipped. A malformed line (bad JSON, a missing or non-string field, no extractable final
answer) raises :class:`~turnkit.errors.DataError` naming the file and the 1-based line.

Tasks keep the question as the public prompt and ``{"answer": final answer, "solution": full text}`` as
privileged data. Their ids are stable: ``<split>-<first 12 hex of sha1(prompt + answer)>``.

Example:
    >>> import json, pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "gsm8k.jsonl"
    >>> _ = path.write_text(json.dumps({"question": "Ann has 2 cats and 3 dogs. Pets?", "answer": "2+3=5\n#### 5"}))
    >>> [task] = load_gsm8k(path)
    >>> task.prompt, task.privileged["answer"], task.split, task.difficulty
    ('Ann has 2 cats and 3 dogs. Pets?', '5', 'gsm8k', 1.0)
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from turnkit.envs.math.answers import extract_boxed, parse_answer
from turnkit.errors import DataError
from turnkit.jsonl import json_objects
from turnkit.types import Task

_FINAL = re.compile(r"####\s*(.+?)\s*$")
_LEVEL = re.compile(r"^\s*(?:level\s*)?(\d+)\s*$", re.IGNORECASE)


def load_gsm8k(path: str | Path, *, split: str = "gsm8k") -> list[Task]:
    """Read a GSM8K-style JSONL file.

    Args:
        path: The file.
        split: The split name recorded on every task.

    Returns:
        One task per non-blank line; difficulty is the number of solution lines before ``####``.

    Raises:
        DataError: For a missing file, an empty file or a malformed line (with file and line).
    """
    return _load(Path(path), split, _gsm8k_task)


def load_math(path: str | Path, *, split: str = "math") -> list[Task]:
    r"""Read a MATH-style JSONL file (see the module docstring).

    Example:
        >>> import json, pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "math.jsonl"
        >>> row = {"problem": "Half of 1?", "solution": "$\\boxed{\\frac12}$", "level": "Level 2", "type": "Algebra"}
        >>> _ = path.write_text(json.dumps(row))
        >>> [task] = load_math(path)
        >>> task.privileged["answer"], task.difficulty, task.metadata["kind"]
        ('\\frac12', 2.0, 'Algebra')
    """
    return _load(Path(path), split, _math_task)


Row = dict[str, Any]


def _load(path: Path, split: str, make: Callable[[Row, str, Path, int], Task]) -> list[Task]:
    tasks = [make(row, split, path, line) for line, row in json_objects(path)]
    if not tasks:
        raise DataError("the file contains no tasks", path=path)
    return tasks


def _field(row: Row, name: str, path: Path, line: int) -> str:
    if name not in row:
        raise DataError(f"missing field {name!r}", path=path, line=line)
    value = row[name]
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"field {name!r} must be a non-empty string, got {value!r:.60}", path=path, line=line)
    return value


def _task_id(split: str, prompt: str, answer: str) -> str:
    digest = hashlib.sha1(f"{prompt}\x1f{answer}".encode()).hexdigest()[:12]
    return f"{split}-{digest}"


def _gsm8k_task(row: Row, split: str, path: Path, line: int) -> Task:
    question, solution = _field(row, "question", path, line), _field(row, "answer", path, line)
    lines = [s for s in solution.strip().splitlines() if s.strip()]
    m = _FINAL.match(lines[-1].strip()) if lines else None
    if m is None:
        raise DataError("the answer has no final '#### <number>' line", path=path, line=line)
    final = m.group(1).replace(",", "").rstrip(".")
    if parse_answer(final) is None:
        raise DataError(f"the final answer {final!r} is not a number", path=path, line=line)
    return Task(
        task_id=_task_id(split, question, final),
        prompt=question.strip(),
        privileged={"answer": final, "solution": solution},
        family="math",
        split=split,
        difficulty=float(len(lines) - 1),
        metadata={"kind": "gsm8k", "source": path.name, "line": line},
    )


def _math_task(row: Row, split: str, path: Path, line: int) -> Task:
    problem, solution = _field(row, "problem", path, line), _field(row, "solution", path, line)
    final = extract_boxed(solution)
    if not final:
        raise DataError("the solution has no final \\boxed{...} answer", path=path, line=line)
    level = row.get("level")
    match = _LEVEL.match(str(level)) if isinstance(level, (str, int)) and not isinstance(level, bool) else None
    kind = row.get("type")
    return Task(
        task_id=_task_id(split, problem, final),
        prompt=problem.strip(),
        privileged={"answer": final, "solution": solution},
        family="math",
        split=split,
        difficulty=float(match.group(1)) if match else 0.0,
        metadata={"kind": kind if isinstance(kind, str) and kind else "math", "source": path.name, "line": line},
    )
