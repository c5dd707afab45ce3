"""The viewer's JSON API: one method per route, over the folders under one root.

=====================  ===========================================================================================
``sources``            every run, eval, rollouts and synth folder under the root
                       (:func:`~turnkit.view.folders.discover`)
``run?id=``            a folder's config, metric series, evaluation rows, checkpoints (:mod:`turnkit.view.runs`)
``episodes?id=``       a page of episode summaries: ``offset`` (0 or more), ``limit`` (1 to 500), ``sort`` (index,
                       return, turns, seed, error; ties keep file order), ``order`` (asc, desc), ``error`` (none,
                       any, a cause), ``success`` (yes, no), ``seed``, ``q`` (text)
                       (:class:`~turnkit.view.index.EpisodeIndex`)
``episode?id=&i=``     one whole episode; ``privileged=1`` keeps the hidden reference and tests
``trees?id=``          a synth folder's trees
``tree?id=&tree=``     one tree with its nodes and linked pairs (:mod:`turnkit.view.trees`)
=====================  ===========================================================================================

Every answer is ``(HTTP status, JSON-ready dict)``. A request that names something that does not exist is a
404, a bad parameter a 400 and a malformed file a 422, each with an ``error`` message naming the file and line;
nothing raises out of :meth:`ViewerApi.answer`.

Example:
    >>> import tempfile
    >>> from turnkit.rollout.evaluate import EpisodeSink
    >>> from turnkit.types import Trajectory
    >>> root = Path(tempfile.mkdtemp())
    >>> EpisodeSink(root / "eval")([Trajectory("e", s) for s in range(3)])
    >>> api = ViewerApi(root)
    >>> status, body = api.answer("episodes", {"id": "eval", "sort": "seed", "order": "desc", "limit": "2"})
    >>> status, body["total"], [e["seed"] for e in body["items"]]
    (200, 3, [2, 1])
    >>> api.answer("episode", {"id": "eval", "i": "9"})
    (404, {'error': 'no episode 9 in eval/trajectories.jsonl (3 episodes)'})
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from turnkit.errors import DataError
from turnkit.types import ErrorCause
from turnkit.view.folders import EPISODE_KINDS, Source, classify, discover, inside
from turnkit.view.index import SORT_KEYS, EpisodeIndex
from turnkit.view.runs import read_run
from turnkit.view.trees import list_trees, read_tree

Answer = tuple[int, dict[str, Any]]

MAX_LIMIT = 500
"""The most episode summaries one ``episodes`` page holds."""

CAUSES = (*(c.value for c in ErrorCause), "error")
"""The error causes ``error=`` always accepts (a file's own causes too): the typed ones, and ``error`` for an
untyped error."""


class ApiError(Exception):
    """A request the API refuses: ``status`` (400, 404, 422) and a message for the page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ViewerApi:
    """Answers the API routes (see the module docstring) for the folders under ``root``.

    Args:
        root: The folder given to ``turnkit view``.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(os.path.abspath(root))
        self._indexes: dict[Path, EpisodeIndex] = {}
        self._lock = threading.Lock()
        self._routes: dict[str, Callable[[Mapping[str, str]], dict[str, Any]]] = {
            "sources": self.sources,
            "run": self.run,
            "episodes": self.episodes,
            "episode": self.episode,
            "trees": self.trees,
            "tree": self.tree,
        }

    def answer(self, route: str, params: Mapping[str, str]) -> Answer:
        """``(status, body)`` for one API request; a refused or failed request has an ``error`` message."""
        handler = self._routes.get(route)
        if handler is None:
            return 404, {"error": f"no API route {route!r}; routes: {sorted(self._routes)}"}
        try:
            return 200, handler(params)
        except ApiError as exc:
            return exc.status, {"error": str(exc)}
        except DataError as exc:
            return 422, {"error": str(exc)}
        except OSError as exc:
            return 422, {"error": f"cannot read {exc.filename or 'a file'}: {exc.strerror or exc}"}

    # ------------------------------------------------------------------ routes
    def sources(self, params: Mapping[str, str]) -> dict[str, Any]:
        """Every source under the root; an explanation when there is none."""
        found = discover(self.root)
        note = ""
        if not found:
            note = (
                f"{self.root} holds no run, eval or synth folder: looked for config.json, metrics.jsonl, "
                "summary.json, trajectories.jsonl, or state.json with iter_*/trees/seed_*.json "
                "(up to 4 folders deep)"
            )
        return {"root": str(self.root), "sources": [s.to_dict() for s in found], "note": note}

    def run(self, params: Mapping[str, str]) -> dict[str, Any]:
        """The Runs view's data for one source."""
        source = self._source(params)
        return {"id": source.id, "kinds": list(source.kinds), **read_run(source.path, self.root)}

    def episodes(self, params: Mapping[str, str]) -> dict[str, Any]:
        """A page of episode summaries (see the module docstring for the parameters)."""
        index = self._index(params)
        sort = params.get("sort", "index") or "index"
        if sort not in SORT_KEYS:
            raise ApiError(400, f"sort must be one of {list(SORT_KEYS)}, got {sort!r}")
        order = params.get("order", "asc") or "asc"
        if order not in ("asc", "desc"):
            raise ApiError(400, f"order must be asc or desc, got {order!r}")
        success = params.get("success", "")
        if success not in ("", "yes", "no"):
            raise ApiError(400, f"success must be yes or no, got {success!r}")
        error = params.get("error", "")
        causes = sorted({*CAUSES, *index.causes()})
        if error not in ("", "none", "any", *causes):
            raise ApiError(400, f"error must be none, any or an error cause ({', '.join(causes)}), got {error!r}")
        offset = _int(params, "offset", 0)
        if offset < 0:
            raise ApiError(400, f"offset must be 0 or more, got {offset}")
        limit = _int(params, "limit", 50)
        if not 1 <= limit <= MAX_LIMIT:
            raise ApiError(400, f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
        page = index.page(
            offset=offset,
            limit=limit,
            sort=sort,
            descending=order == "desc",
            error=error,
            success=success,
            seed=_int(params, "seed", None) if params.get("seed", "") != "" else None,
            text=params.get("q", ""),
        )
        return {"id": params["id"], **page}

    def episode(self, params: Mapping[str, str]) -> dict[str, Any]:
        """One whole episode record; ``privileged=1`` keeps the privileged keys."""
        index = self._index(params)
        i = _int(params, "i", None)
        if i is None:
            raise ApiError(400, "episode needs i (the episode's index)")
        try:
            return index.episode(i, privileged=params.get("privileged", "") in ("1", "true", "yes"))
        except IndexError as exc:
            raise ApiError(404, str(exc)) from None

    def trees(self, params: Mapping[str, str]) -> dict[str, Any]:
        """A synth source's trees."""
        source = self._source(params, kind="synth")
        return {"id": source.id, "trees": list_trees(source.path)}

    def tree(self, params: Mapping[str, str]) -> dict[str, Any]:
        """One tree with nodes and linked pairs."""
        source = self._source(params, kind="synth")
        try:
            return {"id": source.id, **read_tree(source.path, params.get("tree", ""), self.root)}
        except KeyError as exc:
            raise ApiError(400, str(exc.args[0])) from None
        except FileNotFoundError as exc:
            raise ApiError(404, str(exc)) from None

    # ------------------------------------------------------------------ helpers
    def _source(self, params: Mapping[str, str], kind: str | tuple[str, ...] | None = None) -> Source:
        rel = params.get("id", "")
        if not rel:
            raise ApiError(400, "missing id (a folder under the root, '.' for the root itself)")
        folder = inside(self.root, rel)
        if folder is None:
            raise ApiError(404, f"{rel!r} is outside {self.root}")
        found = classify(folder) if folder.is_dir() else None
        if found is None:
            raise ApiError(404, f"{rel!r} is not a run, eval or synth folder under {self.root}")
        wanted = (kind,) if isinstance(kind, str) else kind
        if wanted is not None and not set(wanted) & set(found.kinds):
            what = " or ".join(wanted)
            raise ApiError(404, f"{rel!r} holds no {what} data (it holds: {', '.join(found.kinds)})")
        return Source(id=rel, path=folder, kinds=found.kinds, files=found.files)

    def _index(self, params: Mapping[str, str]) -> EpisodeIndex:
        source = self._source(params, kind=EPISODE_KINDS)
        path = source.path / "trajectories.jsonl"
        with self._lock:
            if path not in self._indexes:
                self._indexes[path] = EpisodeIndex(path, root=self.root)
            return self._indexes[path]


def _int(params: Mapping[str, str], key: str, default: int | None) -> Any:
    value = params.get(key, "")
    if value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ApiError(400, f"{key} must be an integer, got {value!r}") from None
