"""A byte-offset index over a ``trajectories.jsonl`` file: pages, filters and sorts without holding the episodes.

Opening a run of 10,000 episodes must not mean sending (or even keeping) 10,000 transcripts. The index reads
the file once, keeps for every episode its byte offset and a few summary fields (seed, return, turns, error,
success), and reads one episode's line again only when the page asks for it. It is built lazily, on the first
request, and grows with the file: an evaluation that is still appending (``EpisodeSink``) is read up to its
last complete line, and the next request reads what was appended since. A file that shrank or was replaced is
indexed again.

A bad line (a truncated last line, a line that is not a JSON object) becomes a
:class:`~turnkit.view.folders.Problem` naming the file and line; the other episodes stay readable.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from turnkit.rollout.evaluate import EpisodeSink
    >>> from turnkit.types import AgentTurn, Step, Trajectory
    >>> out = Path(tempfile.mkdtemp())
    >>> sink = EpisodeSink(out)
    >>> sink([Trajectory("e", s, (Step("q", AgentTurn("a"), float(s % 3)),)) for s in range(5)])
    >>> index = EpisodeIndex(out / "trajectories.jsonl")
    >>> page = index.page(sort="return", descending=True, limit=2)
    >>> page["total"], [(e["seed"], e["return"]) for e in page["items"]]
    (5, [(2, 2.0), (1, 1.0)])
    >>> index.episode(page["items"][0]["index"])["seed"]
    2
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from turnkit.view.folders import Problem, parse_line, relative

SORT_KEYS = ("index", "return", "turns", "seed", "error")
"""What :meth:`EpisodeIndex.page` sorts by."""

PRIVILEGED_KEYS = ("privileged",)
"""Record keys that only the page's explicit privileged toggle shows (what the agent did not see)."""

_CHUNK = 1 << 22


class EpisodeIndex:
    """The lazily built, growing index of one JSONL file of trajectory records (see the module docstring).

    Args:
        path: The ``trajectories.jsonl`` file.
        root: The viewer's root, for the file names in problems (default: the file's folder).

    Thread-safe: the server's request threads share one index per file.
    """

    def __init__(self, path: str | Path, *, root: str | Path | None = None) -> None:
        self.path = Path(path)
        self.root = Path(root) if root is not None else self.path.parent
        self._lock = threading.Lock()
        self._offsets: list[int] = []
        self._lines: list[int] = []
        self._rows: list[dict[str, Any]] = []
        self._problems: list[Problem] = []
        self._tail: Problem | None = None  # an incomplete last line, re-read when the file grows
        self._scanned = 0  # bytes read so far (always at a line start)
        self._line = 0  # lines read so far
        self._identity: tuple[int, int] | None = None

    # ------------------------------------------------------------------ building
    def refresh(self) -> None:
        """Bring the index up to date with the file (index what was appended; start over if it was replaced)."""
        with self._lock:
            try:
                st = os.stat(self.path)
            except OSError as exc:
                self._reset()
                self._problems = [Problem(self._name, None, f"cannot read: {exc.strerror or exc}")]
                return
            identity = (st.st_dev, st.st_ino)
            if identity != self._identity or st.st_size < self._scanned:
                self._reset()
                self._identity = identity
            if st.st_size != self._scanned or self._tail is not None:
                self._scan()

    def _reset(self) -> None:
        self._offsets, self._lines, self._rows, self._problems = [], [], [], []
        self._tail, self._scanned, self._line, self._identity = None, 0, 0, None

    @property
    def _name(self) -> str:
        return relative(self.root, self.path)

    def _scan(self) -> None:
        self._tail = None
        with open(self.path, "rb") as f:
            f.seek(self._scanned)
            offset, carry = self._scanned, b""
            while True:
                chunk = f.read(_CHUNK)
                if not chunk:
                    break
                data = carry + chunk
                start = 0
                while True:
                    end = data.find(b"\n", start)
                    if end < 0:
                        break
                    self._line += 1
                    self._add(data[start:end], offset + start, self._line)
                    start = end + 1
                offset += start
                carry = data[start:]
            self._scanned = offset
            if carry.strip():  # no newline at the end: a complete record, or truncated / still being written
                value, why = parse_line(carry)
                if value is not None:
                    self._line += 1
                    self._add(carry, offset, self._line)
                    self._scanned = offset + len(carry)
                else:
                    self._tail = Problem(self._name, self._line + 1, f"{why} (truncated, or still being written)")

    def _add(self, raw: bytes, offset: int, line: int) -> None:
        value, why = parse_line(raw)
        if why:
            self._problems.append(Problem(self._name, line, why))
        elif value is not None:
            self._offsets.append(offset)
            self._lines.append(line)
            self._rows.append(summarize(value, index=len(self._rows), line=line))

    # ------------------------------------------------------------------ reading
    @property
    def problems(self) -> list[Problem]:
        """The bad lines found so far (an incomplete last line included)."""
        return [*self._problems, *([self._tail] if self._tail is not None else [])]

    def __len__(self) -> int:
        self.refresh()
        return len(self._rows)

    def page(
        self,
        *,
        offset: int = 0,
        limit: int = 50,
        sort: str = "index",
        descending: bool = False,
        error: str = "",
        success: str = "",
        seed: int | None = None,
        text: str = "",
    ) -> dict[str, Any]:
        """One page of episode summaries after filtering and sorting.

        Args:
            offset: Summaries to skip.
            limit: Most summaries returned (1..500).
            sort: One of :data:`SORT_KEYS` (``"return"`` is the total reward, ``"turns"`` the length); episodes
                that tie keep their file order, ascending or descending.
            descending: Largest first.
            error: ``""`` any; ``"none"`` only clean episodes; ``"any"`` only errored ones; or an error cause
                (``"timeout"``, ``"agent"``...).
            success: ``""`` any; ``"yes"`` or ``"no"``.
            seed: Only this seed.
            text: Only episodes whose env id, task id or first observation contains it (case-insensitive).

        Returns:
            ``{"total", "matched", "offset", "items", "problems", "causes"}``: every episode's count, the
            filtered count, the page's summaries, the file's problems, and the error causes present.

        Raises:
            ValueError: An unknown sort key.
        """
        if sort not in SORT_KEYS:
            raise ValueError(f"unknown sort {sort!r}; one of {list(SORT_KEYS)}")
        self.refresh()
        rows = self._rows
        needle = text.strip().lower()
        if error or success or seed is not None or needle:
            rows = [r for r in rows if _keep(r, error=error, success=success, seed=seed, needle=needle)]
        if sort != "index" or descending:
            rows = sorted(rows, key=_SORTERS[sort], reverse=descending)
        limit = max(1, min(int(limit), 500))
        offset = max(0, int(offset))
        return {
            "total": len(self._rows),
            "matched": len(rows),
            "offset": offset,
            "items": rows[offset : offset + limit],
            "problems": [p.to_dict() for p in self.problems],
            "causes": self._causes(),
        }

    def causes(self) -> list[str]:
        """The error causes of the file's episodes, sorted (``[]`` when none errored)."""
        self.refresh()
        return self._causes()

    def _causes(self) -> list[str]:
        return sorted({r["error"] for r in self._rows if r["error"]})

    def episode(self, index: int, *, privileged: bool = False) -> dict[str, Any]:
        """The full record of episode ``index`` (0-based, in file order), read from its byte offset.

        Args:
            index: The episode's position among the file's good lines.
            privileged: Keep :data:`PRIVILEGED_KEYS` (hidden reference, hidden tests); left out by default.

        Raises:
            IndexError: No such episode.
        """
        self.refresh()
        if not 0 <= index < len(self._offsets):
            raise IndexError(f"no episode {index} in {self._name} ({len(self._offsets)} episodes)")
        with open(self.path, "rb") as f:
            f.seek(self._offsets[index])
            value, why = parse_line(f.readline())
        if value is None:
            raise IndexError(f"{self._name}:{self._lines[index]}: changed since it was indexed ({why})")
        record = dict(value)
        hidden = [k for k in PRIVILEGED_KEYS if k in record]
        if not privileged:
            for key in hidden:
                del record[key]
        record["_view"] = {"index": index, "line": self._lines[index], "file": self._name, "privileged": hidden}
        return record


def summarize(record: Mapping[str, Any], *, index: int, line: int) -> dict[str, Any]:
    """The few fields of a trajectory record that the episode list shows, filters and sorts by.

    Example:
        >>> rec = {"seed": 4, "steps": [{"reward": 0.5}, {"reward": 0.5}], "success": True,
        ...        "error": {"cause": "timeout", "message": "episode wall-clock budget"}}
        >>> s = summarize(rec, index=0, line=1)
        >>> s["return"], s["turns"], s["error"], s["success"]
        (1.0, 2, 'timeout', True)
    """
    steps = record.get("steps")
    steps = steps if isinstance(steps, list) else []
    total = record.get("total_reward")
    if not isinstance(total, (int, float)):
        total = sum(float(s.get("reward") or 0.0) for s in steps if isinstance(s, dict))
    error = record.get("error")
    cause = ""
    message = ""
    if isinstance(error, dict):
        cause, message = str(error.get("cause") or "error"), str(error.get("message") or "")
    elif error:
        cause, message = "error", str(error)
    first = record.get("initial_observation") or (
        steps[0].get("observation") if steps and isinstance(steps[0], dict) else ""
    )
    seed = record.get("seed")
    return {
        "index": index,
        "line": line,
        "seed": seed if isinstance(seed, int) else None,
        "env_id": str(record.get("env_id") or ""),
        "task_id": str(record.get("task_id") or ""),
        "group": record.get("group"),
        "turns": len(steps),
        "return": float(total),
        "success": bool(record.get("success")),
        "error": cause,
        "error_message": message[:200],
        "prompt": str(first or "")[:160],
    }


def _keep(row: Mapping[str, Any], *, error: str, success: str, seed: int | None, needle: str) -> bool:
    if error == "none" and row["error"]:
        return False
    if error == "any" and not row["error"]:
        return False
    if error not in ("", "none", "any") and row["error"] != error:
        return False
    if success and row["success"] != (success == "yes"):
        return False
    if seed is not None and row["seed"] != seed:
        return False
    return not needle or any(needle in str(row[k]).lower() for k in ("env_id", "task_id", "prompt"))


_SORTERS = {  # the sort is stable (reverse=True too), so ties stay in file order
    "index": lambda r: r["index"],
    "return": lambda r: r["return"],
    "turns": lambda r: r["turns"],
    "seed": lambda r: (r["seed"] is None, r["seed"] or 0),
    "error": lambda r: r["error"],
}
