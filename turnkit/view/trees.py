"""What the Search view shows of a synth folder: its trees, each node's visits and Q, and the pairs linked to nodes.

A synth folder (:mod:`turnkit.train.synth`) keeps every searched tree as ``iter_NNN/trees/seed_S.json`` and
the pairs extracted from them in ``iter_NNN/pairs.jsonl`` (best-of-N runs also keep
``trees/seed_S.pairs.jsonl``). A pair record names its episode (``seed``) and turn (``step``) but not the
nodes, so :func:`link_pairs` finds them again: the node at depth ``step`` whose children's turns are the
pair's ``chosen`` and ``rejected`` texts (the committed one first, as :func:`~turnkit.search.pairs.tree_pairs`
picks there).

Example:
    >>> from turnkit.search.pairs import tree_pairs
    >>> from turnkit.search.tree import SearchTree
    >>> from turnkit.types import AgentTurn
    >>> tree = SearchTree(env_id="demo", seed=3, observation="2+2?")
    >>> good = tree.add_child(0, AgentTurn("ANSWER: 4"), observation="Correct.", terminal=True,
    ...                       info={"success": True})
    >>> bad = tree.add_child(0, AgentTurn("ANSWER: 5"), observation="Wrong.", terminal=True)
    >>> tree.node(good).update(q=1.0, visits=3); tree.node(bad).update(q=-1.0, visits=1); tree.commit(good)
    >>> [link] = link_pairs(tree, [p.to_record() for p in tree_pairs(tree)])
    >>> link["parent"], link["chosen_node"], link["rejected_node"]
    (0, 1, 2)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from turnkit.errors import DataError
from turnkit.search.tree import SearchTree
from turnkit.view.folders import Problem, json_message, read_jsonl, relative

MAX_TEXT = 4000
"""Characters of an observation or turn sent to the page per node (the rest is cut, and says so)."""

_TREE = re.compile(r"^(iter_\d+)/trees/seed_(-?\d+)\.json$")


def list_trees(folder: Path) -> list[dict[str, Any]]:
    """The synth folder's trees, by iteration and seed: ``[{"tree", "iteration", "seed", "picture"}, ...]``.

    ``tree`` is the id the page asks for (``iter_000/seed_5``); ``picture`` the PNG the run drew, if any.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp()); (d / "iter_000" / "trees").mkdir(parents=True)
        >>> for s in (10, 2): _ = (d / "iter_000" / "trees" / f"seed_{s}.json").write_text("{}")
        >>> [t["tree"] for t in list_trees(d)]
        ['iter_000/seed_2', 'iter_000/seed_10']
    """
    out = []
    for path in folder.glob("iter_*/trees/seed_*.json"):
        match = _TREE.match(path.relative_to(folder).as_posix())
        if match is None:
            continue
        iteration, seed = match.group(1), int(match.group(2))
        picture = folder / iteration / "pictures" / f"seed_{seed}.png"
        out.append(
            {
                "tree": f"{iteration}/seed_{seed}",
                "iteration": iteration,
                "seed": seed,
                "picture": picture.relative_to(folder).as_posix() if picture.is_file() else None,
            }
        )
    return sorted(out, key=lambda t: (t["iteration"], t["seed"]))


def read_tree(folder: Path, tree_id: str, root: Path) -> dict[str, Any]:
    """One tree for the page: nodes (visits, Q, V, rewards, the turn into them), edges, and its linked pairs.

    Args:
        folder: The synth folder.
        tree_id: ``iter_NNN/seed_S`` (from :func:`list_trees`).
        root: The viewer's root (for file names in problems).

    Returns:
        ``{"tree", "meta", "nodes", "pairs", "problems"}``.

    Raises:
        KeyError: ``tree_id`` is not a tree id.
        FileNotFoundError: No such tree (the message names the file and the trees there are).
        DataError: The tree file is malformed (the message names it).
    """
    match = re.fullmatch(r"(iter_\d+)/seed_(-?\d+)", tree_id)
    if match is None:
        raise KeyError(f"not a tree id: {tree_id!r} (expected iter_NNN/seed_S)")
    iteration, seed = match.group(1), int(match.group(2))
    path = folder / iteration / "trees" / f"seed_{seed}.json"
    if not path.is_file():
        known = ", ".join(t["tree"] for t in list_trees(folder)) or "none"
        raise FileNotFoundError(f"{relative(root, path)}: missing (this folder's trees: {known})")
    name = relative(root, path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(json_message(exc), path=name, line=exc.lineno) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read tree: {exc}", path=name) from exc
    if not isinstance(doc, dict):
        raise DataError(f"not a turnkit search tree (a JSON {type(doc).__name__}, not an object)", path=name)
    try:
        tree = SearchTree.from_dict(doc, source=name)
    except (TypeError, ValueError, AttributeError) as exc:
        raise DataError(f"malformed tree: {type(exc).__name__}: {exc}", path=name) from exc
    records, problems = _pair_records(folder / iteration, seed, root)
    meta = {k: v for k, v in tree.graph.graph.items() if k in ("env_id", "seed", "task_id", "search")}
    return {
        "tree": tree_id,
        "meta": meta,
        "nodes": nodes(tree),
        "pairs": link_pairs(tree, records),
        "problems": [p.to_dict() for p in problems],
    }


def nodes(tree: SearchTree) -> list[dict[str, Any]]:
    """Every node as the page draws it: id, parent, depth, visits, Q, V, rewards, flags and the turn into it."""
    out = []
    for n in sorted(tree.graph.nodes):
        a = tree.node(n)
        out.append(
            {
                "id": n,
                "parent": None if n == 0 else tree.parent(n),
                "depth": a.get("depth", 0),
                "turn": a.get("turn", a.get("depth", 0)),
                "partial": bool(a.get("partial", False)),
                "visits": a.get("visits", 0),
                "q": a.get("q", 0.0),
                "value": a.get("value", 0.0),
                "reward": a.get("reward", 0.0),
                "env_reward": a.get("env_reward", 0.0),
                "evaluation": a.get("evaluation", 0.0),
                "terminal": bool(a.get("terminal", False)),
                "success": a.get("success"),
                "committed": bool(a.get("committed", False)),
                "text": _cut(tree.step_action(n).text) if n != 0 else "",
                "observation": _cut(str(a.get("observation", ""))),
                "info": a.get("info", {}),
            }
        )
    return out


def link_pairs(tree: SearchTree, records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The pairs of ``tree``'s episode, each with the ids of its parent, chosen and rejected nodes (or ``None``).

    Args:
        tree: The tree.
        records: Pair records (:meth:`~turnkit.search.pairs.PreferencePair.to_record` rows); those of other
            seeds are left out.
    """
    seed = tree.seed
    out = []
    for rec in records:
        if rec.get("seed") is not None and seed is not None and rec.get("seed") != seed:
            continue
        chosen, rejected = _completion(rec.get("chosen")), _completion(rec.get("rejected"))
        parent, c, r = _find(tree, rec.get("step"), chosen, rejected)
        out.append(
            {
                "step": rec.get("step"),
                "chosen": _cut(chosen),
                "rejected": _cut(rejected),
                "q_chosen": rec.get("q_chosen"),
                "q_rejected": rec.get("q_rejected"),
                "n_chosen": rec.get("n_chosen"),
                "n_rejected": rec.get("n_rejected"),
                "confidence": rec.get("confidence"),
                "source": rec.get("source"),
                "parent": parent,
                "chosen_node": c,
                "rejected_node": r,
            }
        )
    return out


def _find(tree: SearchTree, step: Any, chosen: str, rejected: str) -> tuple[int | None, int | None, int | None]:
    candidates = [n for n in tree.graph.nodes if not isinstance(step, int) or tree.depth(n) == step]
    candidates.sort(key=lambda n: (not tree.node(n).get("committed", n == 0), n))
    for parent in candidates:
        kids = tree.children(parent)
        if len(kids) < 2:
            continue
        texts = {c: tree.action(c).text for c in kids}
        c = next((k for k in kids if texts[k] == chosen), None)
        r = next((k for k in kids if texts[k] == rejected and k != c), None)
        if c is not None and r is not None:
            return parent, c, r
    return None, None, None


def _pair_records(iteration: Path, seed: int, root: Path) -> tuple[list[dict[str, Any]], list[Problem]]:
    own = iteration / "trees" / f"seed_{seed}.pairs.jsonl"
    path = own if own.is_file() else iteration / "pairs.jsonl"
    if not path.is_file():
        return [], []
    rows, problems = read_jsonl(path, root)
    return [r for _, r in rows], problems


def _completion(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[0], Mapping):
        return str(value[0].get("content", ""))
    return "" if value is None else str(value)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"\n… ({len(text) - MAX_TEXT} more characters)"
