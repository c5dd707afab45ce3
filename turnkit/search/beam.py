"""Turn-level beam search scored by any value function (e.g. a process critic, as in PAV's beam search).

Each round expands every beam with ``expansions`` sampled turns (ONE batched policy call over all beams),
scores each new episode prefix with ``value_fn``, sets finished episodes aside and keeps the ``width``
best unfinished prefixes. With ``step_delimiter`` the beams are partial turns grown one reasoning step at
a time (PAV's step-level beam search; see :mod:`turnkit.search.expand`). It stops when no beam is left
or after ``max_depth`` turns; the answer is the
best finished episode (or, if none finished, the best prefix). The search runs on a
:class:`~turnkit.search.tree.SearchTree`, so it renders and exports like MCTS.

Example:
    >>> import gymnasium, turnkit
    >>> from turnkit.agents.oracle import OracleAgent
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
    >>> result = beam_search(env, OracleAgent(), seed=0, config=BeamConfig(width=2, expansions=2))
    >>> result.trajectory.success, len(result.tree)  # the oracle's samples are identical: one child
    (True, 2)
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import gymnasium

from turnkit.agents.base import Agent
from turnkit.configs import check_bool, check_int
from turnkit.search.expand import Expander, check_step_options
from turnkit.search.mcts import SearchResult
from turnkit.search.values import ValueFn, outcome_value


@dataclass(frozen=True)
class BeamConfig:
    """Beam search settings. Validated on construction.

    Example:
        >>> BeamConfig(width=0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: BeamConfig.width must be an int >= 1, got 0
    """

    width: int = 4
    """Unfinished prefixes kept per round."""
    expansions: int = 2
    """Turns sampled per beam per round."""
    max_depth: int = 10
    """Most turns."""
    dedupe: bool = True
    """Drop a sampled turn identical to a sibling's."""
    seed: int = 0
    """Mixed into sampling seeds."""
    step_delimiter: str | None = None
    """Grow beams by reasoning steps ending at this string (see :class:`~turnkit.search.mcts.MCTSConfig`)."""
    final_markers: tuple[str, ...] | None = None
    """With steps: strings that finish a turn; ``None``: the env's ``final_answer_markers``."""
    max_turn_steps: int = 32
    """With steps: most steps in one turn."""

    def __post_init__(self) -> None:
        check_int(self, "width", "expansions", "max_depth")
        check_bool(self, "dedupe")
        check_int(self, "seed", low=0)
        check_step_options(self.step_delimiter, self.final_markers, self.max_turn_steps, owner="BeamConfig")


def beam_search(
    env: gymnasium.Env,
    agent: Agent,
    *,
    seed: int | None,
    config: BeamConfig | None = None,
    value_fn: ValueFn = outcome_value,
    env_id: str | None = None,
    salt: int = 0,
) -> SearchResult:
    """Beam search over agent turns for the task ``env.reset(seed=seed)``.

    Args:
        env: The env (possibly wrapped).
        agent: The policy proposing turns.
        seed: The reset seed.
        config: Width, expansions, depth.
        value_fn: Scores an episode prefix (a critic); the default only separates finished outcomes.
        env_id: Recorded on the tree.
        salt: Mixed into sampling seeds.

    Returns:
        The tree (best episode committed), that episode and the stats.
    """
    config = config or BeamConfig()
    start = time.perf_counter()
    expander = Expander(
        env,
        agent,
        env_id=env_id,
        salt=salt * 1_000_003 + config.seed,
        breadth_limit=config.expansions,
        dedupe=config.dedupe,
        max_turns=config.max_depth,
        step_delimiter=config.step_delimiter,
        final_markers=config.final_markers,
        max_turn_steps=config.max_turn_steps,
    )
    tree = expander.new_tree(seed, meta={"search": "beam", "config": asdict(config)})
    beams: list[int] = [0]
    finished: list[int] = []
    scores: dict[int, float] = {}
    while beams:
        grown = expander.expand(tree, [(b, config.expansions) for b in beams])
        expander.stats.simulations += 1
        candidates: list[int] = []
        for child in (c for kids in grown for c in kids):
            t0 = time.perf_counter()
            scores[child] = float(value_fn(tree.trajectory(child)))
            expander.stats.value_seconds += time.perf_counter() - t0
            tree.node(child)["q"] = scores[child]
            tree.node(child)["visits"] = 1
            (finished if tree.is_terminal(child) else candidates).append(child)
        candidates.sort(key=lambda c: (-scores[c], c))
        beams = candidates[: config.width]
    pool = finished or [n for n in tree.graph.nodes if n != 0]
    best = max(pool, key=lambda c: (scores.get(c, 0.0), -c)) if pool else 0
    if best:
        tree.commit(best)
    expander.stats.wall_seconds += time.perf_counter() - start
    tree.graph.graph["stats"] = expander.stats.to_dict()
    return SearchResult(tree=tree, trajectory=tree.trajectory(best), stats=expander.stats)
