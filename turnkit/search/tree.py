"""`SearchTree`: a search tree over env states, kept in a ``networkx.DiGraph``.

A node is an env state reached by a sequence of agent turns; an edge is one whole agent turn, or one
reasoning step of a turn in step-level search (see *Steps* below). Node 0 is the state after ``reset``.
Every node has exactly one incoming edge, so the statistics of an action (visits ``N``, value ``Q``) live
on the child node it leads to.

Node attributes (all JSON values):

============== =======================================================================================
``depth``      edges from the root (turns; steps in step-level search)
``turn``       completed turns from the root (= ``depth`` without steps)
``partial``    a mid-turn node: the turn so far is its steps since the last non-partial ancestor
``observation`` the env's message at this node (the reset observation at the root)
``env_reward`` the env reward of the step into this node (0 at the root)
``terminal``   the episode ended here (terminated or truncated)
``truncated``  the time limit ended it
``success``    ``info["success"]`` at a terminal node, else ``None``
``evaluation`` the node's static value: outcome (±1 at terminals) and/or critic
``reward``     edge reward ``r`` into this node (see :mod:`turnkit.search.mcts`)
``q``          ``Q`` of the action into this node
``value``      ``V`` of this node (visit-weighted mean of its children's ``Q``)
``visits``     ``N``
``committed``  on the committed (played) path
``info``       the policy-visible ``info`` of the step into this node
============== =======================================================================================

Edge attributes: ``text``, ``token_ids``, ``logprobs``, ``prompt_token_ids``, ``finish_reason`` (the exact
:class:`~turnkit.types.AgentTurn` of the turn, or of the step) and ``prior``.

**Steps.** In step-level search an edge holds one reasoning step (a line or paragraph of a turn, with its
exact ids). A step that does not finish the turn leads to a ``partial`` node: same env state (it shares its
turn-start node's snapshot), reward 0, no observation. A step that finishes it leads to an ordinary node,
reached by the whole turn. :meth:`SearchTree.action` is the turn into a node (at a partial node, the turn
so far: the steps since the turn began, concatenated, exact ids included) and :meth:`SearchTree.step_action`
the edge's own step; so two sibling steps compare as one shared prefix followed by different steps, and
:mod:`turnkit.search.pairs` exports them as step-level pairs unchanged (the prompt is the conversation where
the turn began; a DPO loss on the tokens after chosen and rejected diverge sees only the steps).
:meth:`SearchTree.messages` and :meth:`SearchTree.trajectory` show whole turns; at a partial node the
trajectory ends with the turn so far as a last :class:`~turnkit.types.Step` with ``info={"partial": True}``.

Env snapshots (:class:`~turnkit.envs.core.EnvSnapshot`) and the privileged :class:`~turnkit.types.Task` live
in side tables (``tree.snapshots``, ``tree.task``) and are never written to disk.

**File format** (:meth:`SearchTree.save`): one JSON object ``{"format": "turnkit.search_tree", "version": 1,
"graph": G}`` where ``G`` is ``networkx.node_link_data(graph, edges="edges")``: ``G["graph"]`` holds
``env_id``, ``seed``, ``task_id``, ``root`` and search metadata; ``G["nodes"]`` the node attributes above plus
``id``; ``G["edges"]`` the edge attributes plus ``source`` and ``target``. Load with :meth:`SearchTree.load`
or with ``networkx.node_link_graph(doc["graph"], edges="edges")``.

Example:
    >>> from turnkit.types import AgentTurn
    >>> tree = SearchTree(env_id="demo", seed=1, observation="2+2?")
    >>> a = tree.add_child(0, AgentTurn("ANSWER: 4"), observation="Correct.", env_reward=1.0, terminal=True,
    ...                    info={"success": True})
    >>> tree.node(a)["success"], tree.depth(a), [m.role for m in tree.messages(a)]
    (True, 1, ['user', 'assistant', 'user'])
    >>> tree.trajectory(a).success
    True
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from turnkit.envs.core import EnvSnapshot
from turnkit.errors import DataError
from turnkit.types import AgentTurn, Message, Step, Task, Trajectory

FORMAT = "turnkit.search_tree"
VERSION = 1


def jsonable(value: Any) -> Any:
    """A JSON-safe copy of ``value``: containers recursively, numpy scalars as Python numbers, rest as ``repr``.

    Non-finite floats become ``None`` so that files stay strict JSON.

    Example:
        >>> import numpy as np
        >>> jsonable({"a": (1, np.float64(2.5)), "b": float("nan"), 3: object}) == {
        ...     "a": [1, 2.5], "b": None, "3": "<class 'object'>"}
        True
    """
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item"):
        return jsonable(value.item())
    return repr(value)


class SearchTree:
    """A tree of env states (nodes) and agent turns (edges); see the module docstring for the attributes.

    Args:
        env_id: The env id (recorded on exported pairs).
        seed: The reset seed of the episode the tree searches.
        observation: The reset observation (the root's message).
        task: The episode's task (privileged; kept in memory only).
        root_snapshot: The env snapshot after reset.
        meta: Extra JSON metadata stored in ``graph.graph``.

    Attributes:
        graph: The ``networkx.DiGraph``.
        snapshots: Node id -> env snapshot (side table, not saved).
        task: The task, if known (side table, not saved).
    """

    def __init__(
        self,
        *,
        env_id: str,
        seed: int | None,
        observation: str,
        task: Task | None = None,
        root_snapshot: EnvSnapshot | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.graph: nx.DiGraph = nx.DiGraph()
        self.graph.graph.update(
            env_id=env_id,
            seed=seed,
            task_id=task.task_id if task is not None else None,
            root=0,
            **jsonable(dict(meta or {})),
        )
        self.snapshots: dict[int, EnvSnapshot] = {}
        self.task = task
        self.graph.add_node(0, **_node_attrs(0, observation, 0.0, False, False, None, {}))
        if root_snapshot is not None:
            self.snapshots[0] = root_snapshot

    # ------------------------------------------------------------------ building
    def add_child(
        self,
        parent: int,
        turn: AgentTurn,
        *,
        observation: str,
        env_reward: float = 0.0,
        terminal: bool = False,
        truncated: bool = False,
        info: Mapping[str, Any] | None = None,
        prior: float = 1.0,
        snapshot: EnvSnapshot | None = None,
        partial: bool = False,
    ) -> int:
        """Add the state reached from ``parent`` by ``turn`` and return its node id.

        With ``partial``, ``turn`` is a reasoning step that does not finish the turn (see *Steps* in the
        module docstring): the new node is mid-turn and cannot be terminal.

        Example:
            >>> from turnkit.types import AgentTurn
            >>> tree = SearchTree(env_id="demo", seed=0, observation="hi")
            >>> tree.add_child(0, AgentTurn("a"), observation="o"), tree.add_child(0, AgentTurn("b"), observation="o")
            (1, 2)
        """
        if parent not in self.graph:
            raise KeyError(f"no node {parent} in the tree")
        child = self.graph.number_of_nodes()
        info = dict(info or {})
        success = bool(info["success"]) if (terminal or truncated) and "success" in info else None
        if (terminal or truncated) and success is None:
            success = False if truncated else float(env_reward) > 0
        if partial and (terminal or truncated):
            raise ValueError("a partial (mid-turn) node cannot be terminal")
        depth = int(self.graph.nodes[parent]["depth"]) + 1
        attrs = _node_attrs(depth, observation, env_reward, terminal or truncated, truncated, success, info)
        attrs["turn"] = self.turn(parent) + (0 if partial else 1)
        attrs["partial"] = bool(partial)
        self.graph.add_node(child, **attrs)
        self.graph.add_edge(
            parent,
            child,
            text=turn.text,
            token_ids=list(turn.token_ids),
            logprobs=[float(x) for x in turn.logprobs],
            prompt_token_ids=list(turn.prompt_token_ids),
            finish_reason=turn.finish_reason,
            prior=float(prior),
        )
        if snapshot is not None:
            self.snapshots[child] = snapshot
        return child

    # ------------------------------------------------------------------ reading
    @property
    def root(self) -> int:
        """The root node id (always 0)."""
        return 0

    @property
    def env_id(self) -> str:
        """The env id."""
        return str(self.graph.graph["env_id"])

    @property
    def seed(self) -> int | None:
        """The reset seed."""
        seed = self.graph.graph.get("seed")
        return None if seed is None else int(seed)

    def __len__(self) -> int:
        return int(self.graph.number_of_nodes())

    def node(self, n: int) -> dict[str, Any]:
        """The (mutable) attribute dict of node ``n``."""
        return self.graph.nodes[n]

    def edge(self, n: int) -> dict[str, Any]:
        """The (mutable) attribute dict of the edge into node ``n`` (not the root)."""
        return self.graph.edges[self.parent(n), n]

    def children(self, n: int) -> list[int]:
        """Children of ``n`` in creation order."""
        return sorted(self.graph.successors(n))

    def parent(self, n: int) -> int:
        """The parent of ``n`` (``KeyError`` for the root)."""
        preds = list(self.graph.predecessors(n))
        if not preds:
            raise KeyError(f"node {n} has no parent")
        return int(preds[0])

    def depth(self, n: int) -> int:
        """Edges from the root to ``n`` (turns, or steps in step-level search)."""
        return int(self.graph.nodes[n]["depth"])

    def turn(self, n: int) -> int:
        """Completed turns from the root to ``n`` (equals :meth:`depth` in a tree without steps)."""
        attrs = self.graph.nodes[n]
        return int(attrs.get("turn", attrs["depth"]))

    def is_partial(self, n: int) -> bool:
        """Whether ``n`` is mid-turn (reached by a step that did not finish the turn)."""
        return bool(self.graph.nodes[n].get("partial", False))

    def turn_start(self, n: int) -> int:
        """The non-partial node where the turn into ``n`` (or in progress at ``n``) began.

        Example:
            >>> from turnkit.types import AgentTurn
            >>> tree = SearchTree(env_id="demo", seed=0, observation="q")
            >>> a = tree.add_child(0, AgentTurn("x\\n"), observation="", partial=True)
            >>> b = tree.add_child(a, AgentTurn("y"), observation="o")
            >>> tree.turn_start(a), tree.turn_start(b), tree.turn(a), tree.turn(b), tree.depth(b)
            (0, 0, 0, 1, 2)
        """
        node = self.parent(n)
        while self.is_partial(node):
            node = self.parent(node)
        return node

    def is_terminal(self, n: int) -> bool:
        """Whether the episode ended at ``n``."""
        return bool(self.graph.nodes[n]["terminal"])

    def path(self, n: int) -> list[int]:
        """Node ids from the root to ``n`` inclusive."""
        out = [n]
        while out[-1] != 0:
            out.append(self.parent(out[-1]))
        return out[::-1]

    def step_action(self, n: int) -> AgentTurn:
        """The exact agent output on the edge into ``n``: a whole turn, or one step in step-level search.

        Example:
            >>> from turnkit.types import AgentTurn
            >>> tree = SearchTree(env_id="demo", seed=0, observation="hi")
            >>> tree.step_action(tree.add_child(0, AgentTurn("a", (5,), (-0.5,)), observation="o")).logprobs
            (-0.5,)
        """
        e = self.edge(n)
        return AgentTurn(
            text=e["text"],
            token_ids=tuple(e["token_ids"]),
            logprobs=tuple(e["logprobs"]),
            prompt_token_ids=tuple(e["prompt_token_ids"]),
            finish_reason=e.get("finish_reason"),
        )

    def action(self, n: int) -> AgentTurn:
        """The exact agent turn into ``n``; in step-level search, the turn so far (its steps concatenated).

        Without steps this is the edge's turn. With steps, text, ids and log-probs of the steps since the
        turn began are concatenated (log-probs only when every step has them); ``prompt_token_ids`` are the
        first step's (the turn's prompt) and ``finish_reason`` the last step's. So two siblings compare as
        the same prefix followed by different steps (a preference pair's shared tokens cancel).

        Example:
            >>> from turnkit.types import AgentTurn
            >>> tree = SearchTree(env_id="demo", seed=0, observation="q")
            >>> a = tree.add_child(0, AgentTurn("x\\n", (5,), (-0.5,), (1, 2)), observation="", partial=True)
            >>> b = tree.add_child(a, AgentTurn("y", (6,), (-0.25,), (1, 2, 5)), observation="o")
            >>> turn = tree.action(b)
            >>> turn.text, turn.token_ids, turn.logprobs, turn.prompt_token_ids
            ('x\\ny', (5, 6), (-0.5, -0.25), (1, 2))
            >>> tree.step_action(b).text, tree.action(a).text
            ('y', 'x\\n')
        """
        if not self.is_partial(self.parent(n)):
            return self.step_action(n)
        steps = [self.step_action(c) for c in self.path(n)[len(self.path(self.turn_start(n))) :]]
        with_logprobs = all(len(s.logprobs) == len(s.token_ids) for s in steps)
        return AgentTurn(
            text="".join(s.text for s in steps),
            token_ids=tuple(t for s in steps for t in s.token_ids),
            logprobs=tuple(x for s in steps for x in s.logprobs) if with_logprobs else (),
            prompt_token_ids=steps[0].prompt_token_ids,
            finish_reason=steps[-1].finish_reason,
        )

    def messages(self, n: int) -> tuple[Message, ...]:
        """The conversation at ``n``: observations as ``user``, turns as ``assistant``, ending with ``user``.

        At a partial node it is the conversation where the turn began (the turn so far is :meth:`action`).
        """
        out = [Message("user", self.graph.nodes[0]["observation"])]
        for child in self.path(n)[1:]:
            if not self.is_partial(child):
                out.append(Message("assistant", self.action(child).text))
                out.append(Message("user", self.graph.nodes[child]["observation"]))
        return tuple(out)

    def trajectory(self, n: int) -> Trajectory:
        """The episode prefix from the root to ``n`` as a :class:`~turnkit.types.Trajectory` (task included).

        Example:
            >>> from turnkit.types import AgentTurn
            >>> tree = SearchTree(env_id="demo", seed=0, observation="q")
            >>> c = tree.add_child(0, AgentTurn("a"), observation="o", env_reward=0.5)
            >>> t = tree.trajectory(c)
            >>> (t.initial_observation, t.steps[0].observation, t.final_observation, t.total_reward)
            ('q', 'q', 'o', 0.5)
        """
        steps = []
        for child in self.path(n)[1:]:
            if self.is_partial(child):
                continue
            attrs = self.graph.nodes[child]
            steps.append(
                Step(
                    observation=self.graph.nodes[self.turn_start(child)]["observation"],
                    action=self.action(child),
                    reward=float(attrs["env_reward"]),
                    terminated=bool(attrs["terminal"] and not attrs["truncated"]),
                    truncated=bool(attrs["truncated"]),
                    info=dict(attrs["info"]),
                )
            )
        final = self.graph.nodes[n]["observation"] if n != 0 else ""
        if n != 0 and self.is_partial(n):
            start = self.turn_start(n)
            turn = self.action(n)
            steps.append(Step(self.graph.nodes[start]["observation"], turn, 0.0, info={"partial": True}))
            final = ""
        return Trajectory(
            env_id=self.env_id,
            seed=self.seed,
            steps=tuple(steps),
            initial_observation=self.graph.nodes[0]["observation"],
            final_observation=final,
            task=self.task,
        )

    def committed_path(self) -> list[int]:
        """The root followed by the committed nodes, in order (``[0]`` if nothing was committed)."""
        path, n = [0], 0
        while True:
            nxt = [c for c in self.children(n) if self.graph.nodes[c]["committed"]]
            if not nxt:
                return path
            n = nxt[0]
            path.append(n)

    def commit(self, n: int) -> None:
        """Mark the path from the root to ``n`` as committed (played)."""
        for node in self.path(n)[1:]:
            self.graph.nodes[node]["committed"] = True

    def leaves(self) -> Iterable[int]:
        """Nodes without children."""
        return (n for n in self.graph.nodes if self.graph.out_degree(n) == 0)

    # ------------------------------------------------------------------ files
    def to_dict(self) -> dict[str, Any]:
        """The tree as a JSON-ready document (see the module docstring for the format)."""
        data = nx.node_link_data(self.graph, edges="edges")
        return {"format": FORMAT, "version": VERSION, "graph": jsonable(data)}

    def save(self, path: str | Path) -> Path:
        """Write the tree as JSON (snapshots and the privileged task are not written).

        Example:
            >>> import tempfile, os
            >>> from turnkit.types import AgentTurn
            >>> tree = SearchTree(env_id="demo", seed=0, observation="q")
            >>> _ = tree.add_child(0, AgentTurn("a", (3, 4)), observation="o")
            >>> with tempfile.TemporaryDirectory() as d:
            ...     back = SearchTree.load(tree.save(os.path.join(d, "t.json")))
            >>> back.action(1).token_ids, back.messages(1) == tree.messages(1)
            ((3, 4), True)
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), ensure_ascii=False), encoding="utf-8")
        tmp.replace(path)
        return path

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], *, source: str | Path | None = None) -> SearchTree:
        """Rebuild a tree from :meth:`to_dict` output (no snapshots: it can be read and exported, not searched)."""
        if doc.get("format") != FORMAT:
            raise DataError(f"not a turnkit search tree (format={doc.get('format')!r})", path=source)
        if doc.get("version") != VERSION:
            raise DataError(f"unsupported search tree version {doc.get('version')!r} (expected {VERSION})", path=source)
        try:
            graph = nx.node_link_graph(doc["graph"], directed=True, edges="edges")
        except (KeyError, TypeError, nx.NetworkXError) as exc:
            raise DataError(f"malformed tree graph: {type(exc).__name__}: {exc}", path=source) from exc
        missing = [n for n in graph.nodes if "observation" not in graph.nodes[n]]
        if 0 not in graph or missing:
            raise DataError(f"tree has no root node 0 or nodes without attributes: {missing[:3]}", path=source)
        tree = object.__new__(cls)
        tree.graph = nx.DiGraph(graph)
        tree.snapshots = {}
        tree.task = None
        return tree

    @classmethod
    def load(cls, path: str | Path) -> SearchTree:
        """Read a tree written by :meth:`save`."""
        path = Path(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DataError(f"invalid JSON: {exc.msg}", path=path, line=exc.lineno) from exc
        return cls.from_dict(doc, source=path)


def _node_attrs(
    depth: int,
    observation: str,
    env_reward: float,
    terminal: bool,
    truncated: bool,
    success: bool | None,
    info: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "depth": depth,
        "observation": observation,
        "env_reward": float(env_reward),
        "terminal": bool(terminal),
        "truncated": bool(truncated),
        "success": success,
        "evaluation": 0.0,
        "reward": 0.0,
        "q": 0.0,
        "value": 0.0,
        "visits": 0,
        "committed": False,
        "info": jsonable(dict(info)),
    }
