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
from dataclasses import dataclass, field

import gymnasium

from turnkit.agents.base import Agent
from turnkit.errors import ConfigError
from turnkit.search.expand import Expander, SearchStats
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
    if n < 1:
        raise ConfigError(f"best_of_n needs n >= 1, got {n}")
    start = time.perf_counter()
    expander = Expander(env, agent, env_id=env_id, salt=salt, breadth_limit=n, dedupe=False, max_turns=max_turns)
    tree = expander.new_tree(seed, meta={"search": "best_of_n", "n": n})
    live = [c for kids in expander.expand(tree, [(0, n)]) for c in kids]
    while True:
        ongoing = [c for c in live if not tree.is_terminal(c)]
        if not ongoing:
            break
        grown = expander.expand(tree, [(c, 1) for c in ongoing])
        live = [c for c in live if tree.is_terminal(c)] + [kids[0] for kids in grown]
    leaves = sorted(live)
    scored = []
    for leaf in leaves:
        t0 = time.perf_counter()
        traj = tree.trajectory(leaf)
        scored.append((float(value_fn(traj)), leaf, traj))
        expander.stats.value_seconds += time.perf_counter() - t0
    scored.sort(key=lambda item: -item[0])  # stable: ties keep sampling order
    for rank, (score, leaf, _) in enumerate(scored):
        tree.node(leaf)["q"] = score
        tree.node(leaf)["visits"] = 1
        tree.node(leaf)["rank"] = rank
    tree.commit(scored[0][1])
    expander.stats.simulations += n
    expander.stats.wall_seconds += time.perf_counter() - start
    tree.graph.graph["stats"] = expander.stats.to_dict()
    return BestOfNResult(
        tree=tree,
        trajectories=[t for _, _, t in scored],
        scores=[s for s, _, _ in scored],
        stats=expander.stats,
    )
