"""Load ColBench backend-programming JSONL files as collaborative-coding tasks.

One JSON object per line with:

* ``problem_description`` (str): the vague request, ending with ``The signature of the function is: def ...``;
* ``ground_truth`` (str): the reference Python code;
* ``hidden_information`` (str, optional): what the simulated human knows (ColBench's test rows repeat the
  ground truth here; defaults to ``ground_truth``);
* ``test_cases`` (object): ``{"test1": "f(1)", ...}`` call expressions (expected values come from running
  the reference), ordered by the number in the key;
* ``facts`` (optional, a turnkit extension): ``[{"keywords": [...], "text": "..."}]`` so that the
  rule-based human can answer; without it only an :class:`~turnkit.envs.collab_code.llm_human.LLMHuman`
  can say anything useful about a loaded task.

Blank lines are skipped. A malformed line raises :class:`~turnkit.errors.DataError` naming the file and the
1-based line. Task ids are stable: ``colbench-<first 12 hex of sha1(problem + ground truth)>``.

Example:
    >>> import json, pathlib, tempfile
    >>> row = {"problem_description": "Add things.\\nThe signature of the function is: def add(a, b)",
    ...        "ground_truth": "def add(a, b):\\n    return a + b", "hidden_information": "def add(a, b): ...",
    ...        "test_cases": {"test2": "add(2, 3)", "test1": "add(1, 1)"}}
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "colbench.jsonl"
    >>> _ = path.write_text(json.dumps(row) + "\\n")
    >>> [task] = load_colbench(path)
    >>> task.privileged["tests"], task.family, task.split
    (('add(1, 1)', 'add(2, 3)'), 'collab_code', 'colbench')
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from turnkit.envs.collab_code.generator import FAMILY
from turnkit.errors import DataError
from turnkit.jsonl import json_lines
from turnkit.types import Task

_KEY_NUMBER = re.compile(r"(\d+)\s*$")


def load_colbench(path: str | Path, *, split: str = "colbench", limit: int | None = None) -> list[Task]:
    """Read a ColBench backend JSONL file (see the module docstring).

    Args:
        path: The file.
        split: The split name recorded on every task.
        limit: Read at most this many tasks.

    Returns:
        One task per non-blank line, in file order.

    Raises:
        DataError: A missing or empty file, or a malformed line (with file and line).
    """
    path = Path(path)
    if limit is not None and limit < 1:
        raise DataError(f"limit must be >= 1, got {limit}", path=path)
    tasks = []
    for number, row in json_lines(path):
        tasks.append(_task(row, split, path, number))
        if limit is not None and len(tasks) >= limit:
            break
    if not tasks:
        raise DataError("no tasks in the file", path=path)
    return tasks


def _text_field(row: dict[str, Any], name: str, path: Path, line: int, *, required: bool = True) -> str | None:
    value = row.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"field {name!r} must be a non-empty string, got {_short(value)}", path=path, line=line)
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _tests(row: dict[str, Any], path: Path, line: int) -> tuple[str, ...]:
    cases = row.get("test_cases")
    if not isinstance(cases, dict) or not cases:
        raise DataError(f"field 'test_cases' must be a non-empty object, got {_short(cases)}", path=path, line=line)
    for key, call in cases.items():
        if not isinstance(call, str) or not call.strip():
            raise DataError(f"test case {key!r} must be a non-empty string, got {_short(call)}", path=path, line=line)
        try:
            compile(call, f"<{key}>", "eval")
        except SyntaxError as exc:
            raise DataError(f"test case {key!r} is not a Python expression: {exc.msg}", path=path, line=line) from exc

    def order(key: str) -> tuple[int, str]:
        m = _KEY_NUMBER.search(key)
        return (int(m.group(1)) if m else 1 << 30, key)

    return tuple(cases[k].strip() for k in sorted(cases, key=order))


def _facts(row: dict[str, Any], path: Path, line: int) -> tuple[dict[str, Any], ...]:
    facts = row.get("facts", [])
    if not isinstance(facts, list):
        raise DataError(f"field 'facts' must be a list, got {_short(facts)}", path=path, line=line)
    out = []
    for i, fact in enumerate(facts):
        ok = (
            isinstance(fact, dict)
            and isinstance(fact.get("text"), str)
            and isinstance(fact.get("keywords"), list)
            and all(isinstance(k, str) and k.strip() for k in fact["keywords"])
        )
        if not ok:
            raise DataError(f"fact {i} must be {{'keywords': [str, ...], 'text': str}}", path=path, line=line)
        out.append({"keywords": tuple(fact["keywords"]), "text": fact["text"]})
    return tuple(out)


def _task(row: Any, split: str, path: Path, line: int) -> Task:
    if not isinstance(row, dict):
        raise DataError(f"expected a JSON object, got {type(row).__name__}", path=path, line=line)
    problem = _text_field(row, "problem_description", path, line)
    reference = _text_field(row, "ground_truth", path, line)
    hidden = _text_field(row, "hidden_information", path, line, required=False) or reference
    assert problem is not None and reference is not None
    try:
        compile(reference, "<ground_truth>", "exec")
    except SyntaxError as exc:
        raise DataError(
            f"ground_truth is not valid Python: {exc.msg} (line {exc.lineno})", path=path, line=line
        ) from exc
    digest = hashlib.sha1((problem + "\0" + reference).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return Task(
        task_id=f"colbench-{digest}",
        prompt=problem.strip(),
        privileged={
            "reference": reference,
            "hidden_information": hidden,
            "tests": _tests(row, path, line),
            "facts": _facts(row, path, line),
        },
        family=FAMILY,
        split=split,
        metadata={"source": str(path.name), "line": line, "kind": "colbench"},
    )
