"""Best-of-N: sample N whole episodes of one task, score them with any value function, rank them.

The N episodes branch from one reset snapshot in a :class:`~turnkit.search.tree.SearchTree` (no
deduplication: identical samples stay separate episodes), and every round of turns is ONE batched policy
call over all live episodes, through the same :class:`~turnkit.search.expand.Expander` as MCTS. So a
best-of-N tree renders, saves and exports like an MCTS tree, and its policy cost is counted the same way
(``stats.policy_contexts`` = sampled turns).

Example:
    >>> import gymnasium, turnkit
    >>> from turnkit.agents.scripted import RandomAgent
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
    >>> result = best_of_n(env, RandomAgent(), seed=0, n=3, max_turns=2)
    >>> len(result.trajectories), result.scores  # all fail: -1 each
    (3, [-1.0, -1.0, -1.0])
    >>> result.stats.policy_contexts  # 3 episodes x 2 turns
    6
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import gymnasium

from turnkit.agents.base import Agent
from turnkit.errors import ConfigError
from turnkit.search.expand import Expander, SearchStats, expand_many
from turnkit.search.pairs import PreferencePair, trajectory_pair
from turnkit.search.tree import SearchTree
from turnkit.search.values import ValueFn, outcome_value
from turnkit.types import Trajectory


@dataclass
class BestOfNResult:
    """The ranked episodes of one best-of-N run.

    Attributes:
        tree: The episodes as a tree (root = reset; one leaf per episode; the best one committed).
        trajectories: The N episodes, best first (stable: ties keep sampling order).
        scores: Their value-function scores, in the same order.
        stats: Policy/env counters.
    """

    tree: SearchTree
    trajectories: list[Trajectory]
    scores: list[float]
    stats: SearchStats = field(default_factory=SearchStats)

    @property
    def best(self) -> Trajectory:
        """The highest-scoring episode."""
        return self.trajectories[0]

    def pair(self, *, require_success: bool = True) -> PreferencePair | None:
        """Best vs worst episode at their first differing turn (``None`` if tied, or no success when required).

        Example:
            >>> import gymnasium, turnkit
            >>> from turnkit.agents.scripted import ScriptedAgent
            >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
            >>> best_of_n(env, ScriptedAgent(["ANSWER: 0"]), seed=1, n=2).pair() is None  # identical episodes
            True
        """
        if self.scores[0] <= self.scores[-1] or (require_success and not self.best.success):
            return None
        return trajectory_pair(
            self.trajectories[0], self.trajectories[-1], score_better=self.scores[0], score_worse=self.scores[-1]
        )


def best_of_n(
    env: gymnasium.Env,
    agent: Agent,
    *,
    seed: int | None,
    n: int,
    value_fn: ValueFn = outcome_value,
    env_id: str | None = None,
    salt: int = 0,
    max_turns: int | None = None,
) -> BestOfNResult:
    """Sample ``n`` episodes of the task ``env.reset(seed=seed)`` and rank them by ``value_fn``.

    Args:
        env: The env (possibly wrapped).
        agent: The policy.
        seed: The reset seed.
        n: Episodes to sample.
        value_fn: Scores a finished episode (default: ``+1`` success / ``-1`` failure).
        env_id: Recorded on the tree; defaults to ``env.spec.id``.
        salt: Mixed into sampling seeds (vary it for fresh samples of the same task).
        max_turns: Truncate episodes after this many turns (for envs without a time limit).

    Returns:
        The ranked episodes.
    """
    return best_of_n_many(
        [env], agent, seeds=[seed], n=n, value_fn=value_fn, env_id=env_id, salt=salt, max_turns=max_turns
    )[0]


def best_of_n_many(
    envs: Sequence[gymnasium.Env],
    agent: Agent,
    *,
    seeds: Sequence[int | None],
    n: int,
    value_fn: ValueFn = outcome_value,
    env_id: str | None = None,
    salt: int = 0,
    max_turns: int | None = None,
) -> list[BestOfNResult]:
    """:func:`best_of_n` for several tasks at once (one env each), batching every round across all of them.

    ``stats`` is one object shared by the results and counts the whole batch.

    Example:
        >>> import gymnasium, turnkit
        >>> from turnkit.agents.scripted import RandomAgent
        >>> envs = [gymnasium.make("turnkit/MathEpisodes-v0") for _ in range(2)]
        >>> results = best_of_n_many(envs, RandomAgent(), seeds=[0, 1], n=3, max_turns=1)
        >>> results[0].stats.policy_calls, results[0].stats.policy_contexts
        (1, 6)
    """
    if n < 1:
        raise ConfigError(f"best_of_n needs n >= 1, got {n}")
    if len(envs) != len(seeds):
        raise ValueError(f"got {len(envs)} envs but {len(seeds)} seeds")
    start = time.perf_counter()
    stats = SearchStats()
    expanders = [
        Expander(e, agent, env_id=env_id, salt=salt, breadth_limit=n, dedupe=False, max_turns=max_turns, stats=stats)
        for e in envs
    ]
    trees = [x.new_tree(s, meta={"search": "best_of_n", "n": n}) for x, s in zip(expanders, seeds, strict=True)]
    grown = expand_many([(x, t, [(0, n)]) for x, t in zip(expanders, trees, strict=True)])
    live = [[c for kids in job for c in kids] for job in grown]
    while True:
        jobs, owners = [], []
        for k, (x, tree) in enumerate(zip(expanders, trees, strict=True)):
            ongoing = [c for c in live[k] if not tree.is_terminal(c)]
            if ongoing:
                jobs.append((x, tree, [(c, 1) for c in ongoing]))
                owners.append(k)
        if not jobs:
            break
        for k, job in zip(owners, expand_many(jobs), strict=True):
            tree = trees[k]
            live[k] = [c for c in live[k] if tree.is_terminal(c)] + [kids[0] for kids in job]
    stats.simulations += n * len(envs)
    results = [_rank(tree, sorted(leaves), value_fn, stats) for tree, leaves in zip(trees, live, strict=True)]
    stats.wall_seconds += time.perf_counter() - start
    for r in results:
        r.tree.graph.graph["stats"] = stats.to_dict()
    return results


def _rank(tree: SearchTree, leaves: list[int], value_fn: ValueFn, stats: SearchStats) -> BestOfNResult:
    scored = []
    for leaf in leaves:
        t0 = time.perf_counter()
        traj = tree.trajectory(leaf)
        scored.append((float(value_fn(traj)), leaf, traj))
        stats.value_seconds += time.perf_counter() - t0
    scored.sort(key=lambda item: -item[0])  # stable: ties keep sampling order
    for rank, (score, leaf, _) in enumerate(scored):
        tree.node(leaf).update(q=score, visits=1, rank=rank)
    tree.commit(scored[0][1])
    return BestOfNResult(
        tree=tree, trajectories=[t for _, _, t in scored], scores=[s for s, _, _ in scored], stats=stats
    )
