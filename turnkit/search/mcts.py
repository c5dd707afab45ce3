"""MCTS over any :class:`~turnkit.TextEnv` through snapshot/restore, after MCTS-DPO (arXiv 2405.00451).

An action is one whole agent turn (one assistant message); a node is the env state after it. With
``step_delimiter`` set (``"\n"``: lines, MCTS-DPO's steps; ``"\n\n"``: paragraphs) an action is instead
one reasoning step inside a turn: mid-turn nodes hold the turn so far, and a turn reaches the env only once
a step finishes it (see :mod:`turnkit.search.expand` and "Reasoning steps inside a turn" in ``docs/synth.md``).
Depths, ``depth_limit`` and commits then count steps; ``max_turns`` still counts turns. The search is the
MCTS-DPO scheme adapted to multi-turn envs:

* **Selection** (PUCT): ``argmax_c Q(c) + w_exp · p(c) · sqrt(N(parent)) / (1 + N(c))`` with the
  length-normalised policy prior ``p(c) = exp(Σ_t log π(a_t) / |a|^1.25)`` (the agent's log-probs at its
  sampling temperature; uniform ``1/n`` for agents without log-probs). Ties go to the higher prior.
* **Expansion**: at a leaf, sample ``n_actions`` turns (``root_n_actions`` at the search root), drop exact
  duplicates, keep at most ``breadth_limit`` children. There is no separate rollout policy: a simulation
  keeps selecting and expanding until a terminal node or ``depth_limit`` turns below the search root.
* **Evaluation**: ``e(n) = outcome_weight · o(n) + critic_weight · critic(trajectory to n)`` where ``o`` is
  ``+1``/``-1`` for a successful/failed terminal node and ``0`` otherwise (the critic term only when a
  critic is given). Edge reward ``r(c) = reward_weight · env_reward(c) + e(c) − e(parent)``.
* **Values**: a fresh child has ``N = 0``, ``V = 0`` and ``Q(c) = V(parent) + r(c)`` (first-play value).
  Backup along the simulation path: the last node gets ``Q = r + γ·V``; then for each ancestor up to the
  search root ``V = Σ_c max(1, N_c)·Q_c / Σ_c max(1, N_c)`` over its children (a visit-weighted mean, not a
  max), ``N += 1``, ``Q = r + γ·V``.
* **Commit and reuse**: after ``iterations`` simulations (``iterations · root_multiplier`` for the first
  turn), commit to the most visited child of the search root (ties: higher ``Q``) and search again from
  it, keeping its subtree, until the committed node is terminal.

**Batching.** Each round selects ``parallel`` simulations at once; a node on a pending simulation's path
carries a virtual loss (``Q`` pulled towards ``-virtual_loss`` and ``N`` raised by the pending count), so
the simulations spread out. All leaves the round must expand are sampled with ONE ``agent.act`` call; a
round takes at most ``depth_limit`` such calls. The policy, not the search, dominates wall time.

**Not implemented** (future work): near-duplicate filtering (only exact duplicates are dropped); the
self-evaluation critic is left to the caller (pass any ``Trajectory -> float`` as ``critic``).

Example:
    >>> import gymnasium, turnkit
    >>> from turnkit.agents.scripted import ScriptedAgent
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0", kinds=("arithmetic",))
    >>> agent = ScriptedAgent(lambda ctx: "ANSWER: 1")
    >>> result = MCTS(MCTSConfig(iterations=2, root_multiplier=1)).search(env, agent, seed=0)
    >>> result.trajectory.success, len(result.trajectory.steps)  # three wrong answers, then the end
    (False, 3)
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium

from turnkit.agents.base import Agent
from turnkit.configs import check_bool, check_float, check_int, to_dict
from turnkit.errors import ConfigError
from turnkit.search.expand import Expander, SearchStats, check_step_options, expand_many
from turnkit.search.tree import SearchTree
from turnkit.search.values import ValueFn
from turnkit.types import Trajectory


@dataclass(frozen=True)
class MCTSConfig:
    """Knobs of :class:`MCTS`, with MCTS-DPO's defaults. Validated on construction.

    Example:
        >>> MCTSConfig().iterations, MCTSConfig().w_exp, MCTSConfig().breadth_limit
        (64, 1.0, 4)
        >>> MCTSConfig(n_actions=5, breadth_limit=4)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: MCTSConfig.n_actions=5 exceeds breadth_limit=4
    """

    iterations: int = 64
    """Simulations per committed turn."""
    root_multiplier: int = 4
    """The first committed turn gets ``iterations * root_multiplier`` simulations (MCTS-DPO: 4)."""
    n_actions: int = 2
    """Turns sampled when expanding a node (MCTS-DPO: 2 for math)."""
    root_n_actions: int | None = None
    """Turns sampled at the search root (MCTS-DPO: 4 for commonsense); ``None`` = ``n_actions``."""
    breadth_limit: int = 4
    """Most children per node."""
    depth_limit: int = 4
    """Most turns a simulation goes below the search root."""
    w_exp: float = 1.0
    """PUCT exploration weight."""
    prior_exponent: float = 1.25
    """Length exponent of the prior ``exp(Σ log π / |a|^prior_exponent)``."""
    gamma: float = 1.0
    """Discount in ``Q = r + γV``."""
    outcome_weight: float = 1.0
    """Weight of the terminal outcome ``±1`` in a node's evaluation."""
    critic_weight: float = 1.0
    """Weight of the critic in a node's evaluation (used only with a critic; MCTS-DPO weighs 1:1)."""
    reward_weight: float = 0.0
    """Weight of the env's step reward in the edge reward (``0``: MCTS-DPO; ``1`` for dense-reward envs)."""
    parallel: int = 4
    """Simulations per batched round (virtual loss spreads them)."""
    virtual_loss: float = 1.0
    """Value a pending simulation assumes for the nodes on its path."""
    max_turns: int | None = None
    """Stop committing after this many turns (``None``: until the episode ends or the env truncates)."""
    dedupe: bool = True
    """Drop sampled turns identical to an existing sibling."""
    seed: int = 0
    """Mixed into every sampling seed (vary it to get fresh samples on the same tasks)."""
    step_delimiter: str | None = None
    """Search over reasoning steps that end at this string (``"\n"`` lines, ``"\n\n"`` paragraphs) instead
    of whole turns; needs an agent with ``supports_prefix`` (e.g. ``HFPolicy``). ``None``: whole turns."""
    final_markers: tuple[str, ...] | None = None
    """With steps: a step containing one of these finishes the turn (e.g. ``("ANSWER:",)``); ``None``: the
    env's ``final_answer_markers`` attribute, if it has one."""
    max_turn_steps: int = 32
    """With steps: most steps in one turn (the step reaching it finishes the turn)."""

    def __post_init__(self) -> None:
        check_int(self, "iterations", "root_multiplier", "n_actions", "breadth_limit", "depth_limit", "parallel")
        check_int(self, "root_n_actions", "max_turns", optional=True)
        for name in ("n_actions", "root_n_actions"):
            value = getattr(self, name)
            if value is not None and value > self.breadth_limit:
                raise ConfigError(f"MCTSConfig.{name}={value} exceeds breadth_limit={self.breadth_limit}")
        weights = ("w_exp", "prior_exponent", "virtual_loss", "outcome_weight", "critic_weight", "reward_weight")
        check_float(self, *weights, low=0.0)
        check_float(self, "gamma", low=0.0, high=1.0, open_low=True)
        check_bool(self, "dedupe")
        check_int(self, "seed", low=0)
        check_step_options(self.step_delimiter, self.final_markers, self.max_turn_steps, owner="MCTSConfig")
        if self.final_markers is not None:
            object.__setattr__(self, "final_markers", tuple(self.final_markers))

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-ready dict (:func:`turnkit.configs.to_dict`)."""
        return to_dict(self)


@dataclass
class SearchResult:
    """What a search returns.

    Attributes:
        tree: The search tree (committed path marked).
        trajectory: The committed (played) episode.
        stats: Policy/env/critic counters and timers.
    """

    tree: SearchTree
    trajectory: Trajectory
    stats: SearchStats = field(default_factory=SearchStats)

    @property
    def success(self) -> bool:
        """Whether the committed episode succeeded."""
        return self.trajectory.success


@dataclass
class _Run:
    """Mutable state of one task's search inside :meth:`MCTS.search_many`."""

    tree: SearchTree
    expander: Expander
    root: int = 0
    budget: int = 0
    done: bool = False
    paths: list[list[int]] = field(default_factory=list)
    pending: dict[int, int] = field(default_factory=dict)


class MCTS:
    """Monte Carlo tree search over agent turns (see the module docstring for the algorithm).

    Args:
        config: The knobs.
        critic: Optional value function ``Trajectory -> float`` of the episode prefix at a node.
    """

    def __init__(self, config: MCTSConfig | None = None, *, critic: ValueFn | None = None) -> None:
        self.config = config or MCTSConfig()
        self.critic = critic

    # ------------------------------------------------------------------ public API
    def search(
        self, env: gymnasium.Env, agent: Agent, *, seed: int | None, env_id: str | None = None, salt: int = 0
    ) -> SearchResult:
        """Play one episode of ``env`` (reset with ``seed``), choosing each turn by tree search.

        Args:
            env: The env; it is reset, then restored to tree nodes as needed.
            agent: The policy that proposes turns.
            seed: The reset seed.
            env_id: Recorded on the tree; defaults to ``env.spec.id``.
            salt: Mixed into sampling seeds along with ``config.seed``.

        Returns:
            The tree, the committed trajectory and the stats.
        """
        return self.search_many([env], agent, seeds=[seed], env_id=env_id, salt=salt)[0]

    def search_many(
        self,
        envs: Sequence[gymnasium.Env],
        agent: Agent,
        *,
        seeds: Sequence[int | None],
        env_id: str | None = None,
        salt: int = 0,
    ) -> list[SearchResult]:
        """Search several tasks in lockstep, so each policy call batches the leaves of every tree.

        Each task needs its own env instance. The result of each task is what :meth:`search` would give
        for it alone (sampling seeds depend on the conversation, not on the batch); ``stats`` is one
        object shared by all results and counts the whole batch.

        Example:
            >>> import gymnasium, turnkit
            >>> from turnkit.agents.scripted import RandomAgent
            >>> envs = [gymnasium.make("turnkit/MathEpisodes-v0") for _ in range(3)]
            >>> results = MCTS(MCTSConfig(iterations=2, root_multiplier=1, max_turns=1)).search_many(
            ...     envs, RandomAgent(), seeds=[0, 1, 2])
            >>> [len(r.trajectory.steps) for r in results], results[0].stats.policy_calls  # one call per round
            ([1, 1, 1], 1)
        """
        if len(envs) != len(seeds):
            raise ValueError(f"got {len(envs)} envs but {len(seeds)} seeds")
        if len({id(e) for e in envs}) != len(envs):
            raise ValueError("search_many needs distinct env instances (one per task)")
        cfg = self.config
        start = time.perf_counter()
        stats = SearchStats()
        runs = []
        for env, seed in zip(envs, seeds, strict=True):
            expander = self.expander(env, agent, env_id=env_id, salt=salt, stats=stats)
            tree = expander.new_tree(seed, meta={"search": "mcts", "config": cfg.to_dict()})
            tree.node(0)["evaluation"] = self._evaluate(tree, 0, stats)
            run = _Run(tree, expander, budget=cfg.iterations * cfg.root_multiplier)
            self._check_done(run)
            runs.append(run)
        while live := [r for r in runs if not r.done]:
            self._round(live)
            for run in live:
                if run.budget <= 0:
                    self._commit(run)
        stats.wall_seconds += time.perf_counter() - start
        results = []
        for run in runs:
            tree = run.tree
            tree.graph.graph["committed_success"] = tree.trajectory(run.root).success if run.root else False
            tree.graph.graph["stats"] = stats.to_dict()
            results.append(SearchResult(tree=tree, trajectory=tree.trajectory(run.root), stats=stats))
        return results

    def expander(
        self,
        env: gymnasium.Env,
        agent: Agent,
        *,
        env_id: str | None = None,
        salt: int = 0,
        stats: SearchStats | None = None,
    ) -> Expander:
        """The :class:`~turnkit.search.expand.Expander` this search uses (exposed for custom loops)."""
        cfg = self.config
        return Expander(
            env,
            agent,
            env_id=env_id,
            salt=salt * 1_000_003 + cfg.seed,
            breadth_limit=cfg.breadth_limit,
            dedupe=cfg.dedupe,
            prior_exponent=cfg.prior_exponent,
            max_turns=cfg.max_turns,
            stats=stats,
            step_delimiter=cfg.step_delimiter,
            final_markers=cfg.final_markers,
            max_turn_steps=cfg.max_turn_steps,
        )

    def run(self, tree: SearchTree, expander: Expander, root: int, simulations: int) -> None:
        """Run ``simulations`` simulations from ``root`` without committing (for custom loops)."""
        run = _Run(tree, expander, root=root, budget=simulations)
        while run.budget > 0:
            self._round([run])

    # ------------------------------------------------------------------ commit
    def _check_done(self, run: _Run) -> None:
        max_turns = self.config.max_turns
        if run.tree.is_terminal(run.root) or (max_turns is not None and run.tree.turn(run.root) >= max_turns):
            run.done = True

    def _commit(self, run: _Run) -> None:
        tree = run.tree
        children = tree.children(run.root)
        if not children:
            run.done = True
            return
        run.root = max(children, key=lambda c: (tree.node(c)["visits"], tree.node(c)["q"], -c))
        tree.commit(run.root)
        run.budget = self.config.iterations
        self._check_done(run)

    # ------------------------------------------------------------------ one batched round
    def _round(self, runs: Sequence[_Run]) -> None:
        """``parallel`` simulations per run; every expansion of every run shares one policy call per depth."""
        cfg = self.config
        for run in runs:
            k = min(cfg.parallel, run.budget)
            run.budget -= k
            run.expander.stats.simulations += k
            run.pending, run.paths = {}, []
            limit = run.tree.depth(run.root) + cfg.depth_limit
            for _ in range(k):
                path = [run.root]
                tree = run.tree
                while tree.children(path[-1]) and not tree.is_terminal(path[-1]) and tree.depth(path[-1]) < limit:
                    path.append(self._select(tree, path[-1], run.pending))
                self._mark(path, run.pending)
                run.paths.append(path)
        while True:
            jobs, waiting = [], []
            for run in runs:
                limit = run.tree.depth(run.root) + cfg.depth_limit
                needs = [p for p in run.paths if self._expandable(run.tree, p[-1], limit)]
                if not needs:
                    continue
                leaves = list(dict.fromkeys(p[-1] for p in needs))  # unique, in order
                width = [cfg.root_n_actions or cfg.n_actions if n == run.root else cfg.n_actions for n in leaves]
                jobs.append((run.expander, run.tree, list(zip(leaves, width, strict=True))))
                waiting.append((run, needs, leaves))
            if not jobs:
                break
            for (run, needs, leaves), kids_per_leaf in zip(waiting, expand_many(jobs), strict=True):
                for leaf, kids in zip(leaves, kids_per_leaf, strict=True):
                    for c in kids:
                        self._init_child(run.tree, leaf, c, run.expander.stats)
                for p in needs:
                    nxt = self._select(run.tree, p[-1], run.pending)  # a fresh leaf always gets >= 1 child
                    self._mark([nxt], run.pending)
                    p.append(nxt)
        for run in runs:
            for path in run.paths:
                self._backup(run.tree, path)
            run.paths, run.pending = [], {}

    def _expandable(self, tree: SearchTree, node: int, limit: int) -> bool:
        return not tree.children(node) and not tree.is_terminal(node) and tree.depth(node) < limit

    @staticmethod
    def _mark(path: list[int], pending: dict[int, int]) -> None:
        for n in path:
            pending[n] = pending.get(n, 0) + 1

    def _select(self, tree: SearchTree, node: int, pending: dict[int, int]) -> int:
        cfg = self.config
        parent_n = tree.node(node)["visits"] + pending.get(node, 0)
        best, best_key = -1, (-math.inf, -math.inf)
        for c in tree.children(node):
            attrs = tree.node(c)
            n, q, vl = attrs["visits"], attrs["q"], pending.get(c, 0)
            if vl:
                w = max(1, n)
                q = (q * w - cfg.virtual_loss * vl) / (w + vl)
            prior = tree.edge(c)["prior"]
            score = q + cfg.w_exp * prior * math.sqrt(parent_n) / (1 + n + vl)
            key = (score, prior)
            if key > best_key:
                best, best_key = c, key
        if best < 0:
            raise ValueError(f"node {node} has no children to select from")
        return best

    # ------------------------------------------------------------------ values
    def _evaluate(self, tree: SearchTree, node: int, stats: SearchStats) -> float:
        cfg = self.config
        attrs = tree.node(node)
        value = 0.0
        if attrs["terminal"]:
            value += cfg.outcome_weight * (1.0 if attrs["success"] else -1.0)
        if self.critic is not None:
            start = time.perf_counter()
            value += cfg.critic_weight * float(self.critic(tree.trajectory(node)))
            stats.value_seconds += time.perf_counter() - start
        return value

    def _init_child(self, tree: SearchTree, parent: int, child: int, stats: SearchStats) -> None:
        cfg = self.config
        attrs = tree.node(child)
        attrs["evaluation"] = self._evaluate(tree, child, stats)
        attrs["reward"] = (
            cfg.reward_weight * attrs["env_reward"] + attrs["evaluation"] - tree.node(parent)["evaluation"]
        )
        attrs["value"] = 0.0
        attrs["q"] = tree.node(parent)["value"] + attrs["reward"]

    def _backup(self, tree: SearchTree, path: list[int]) -> None:
        gamma = self.config.gamma
        for n in reversed(path):
            attrs = tree.node(n)
            kids = tree.children(n)
            if kids:
                weights = [max(1, tree.node(c)["visits"]) for c in kids]
                attrs["value"] = sum(w * tree.node(c)["q"] for w, c in zip(weights, kids, strict=True)) / sum(weights)
            attrs["visits"] += 1
            attrs["q"] = attrs["reward"] + gamma * attrs["value"]
