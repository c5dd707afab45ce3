"""Grow a :class:`~turnkit.search.tree.SearchTree`: batched policy calls, env steps from snapshots, timing.

:class:`Expander` is what MCTS, beam search and the synthesis loop share. One :meth:`Expander.expand` call
samples turns for *many* nodes with a single ``agent.act`` (so the policy sees one full batch), then steps
the env from each parent's snapshot and records the children. :class:`SearchStats` keeps the time spent in
the policy, the env and the value function, so benchmarks can report the share of wall time spent outside
policy calls.

**Reasoning steps** (``step_delimiter``, e.g. ``"\n"`` for lines or ``"\n\n"`` for paragraphs): each
sample is ONE step of the turn. The policy continues the turn so far (``Context.prefix_text`` and
``prefix_token_ids``) and stops at the delimiter (``Context.stop``; it reports ``finish_reason="stop_string"``).
A step that does not finish the turn becomes a *partial* child (no env step; it shares its parent's env
snapshot). A step finishes the turn when the policy ended it otherwise (EOS, length), when it contains one
of the ``final_markers`` (default: the env's ``final_answer_markers`` attribute, if any), or when the turn
reached ``max_turn_steps`` steps; then the whole turn text goes to ``env.step``. Envs never see steps, so
every env supports them; only the agent must (``supports_prefix``, e.g.
:class:`~turnkit.agents.hf.HFPolicy`); other agents are refused with an :class:`~turnkit.errors.AgentError`.

Sampling seeds: every context carries ``episode_seed = salt`` (a mix of the tree's seed and the search
seed), ``turn = depth``; model-backed agents derive per-context seeds from that plus the conversation, and
identical contexts in one batch get distinct ranks (see :mod:`turnkit.agents.sampling`). So a search is
reproducible, batching is invisible, and the ``n`` samples of one node differ.

Example:
    >>> import gymnasium, turnkit
    >>> from turnkit.agents.oracle import OracleAgent
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
    >>> exp = Expander(env, OracleAgent())
    >>> tree = exp.new_tree(seed=0)
    >>> [kids] = exp.expand(tree, [(0, 3)])
    >>> len(kids), tree.node(kids[0])["success"]  # the oracle's three replies are identical: one child
    (1, True)
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium
import numpy as np

from turnkit.agents.base import Agent, Context, uses_privileged
from turnkit.envs.core import restore_env, snapshot_env
from turnkit.errors import AgentError, ConfigError
from turnkit.search.tree import SearchTree
from turnkit.types import AgentTurn

_MASK63 = (1 << 63) - 1


@dataclass
class SearchStats:
    """Counters and timers of one search (or the sum of several, with :meth:`add`).

    Attributes:
        policy_calls: ``agent.act`` calls.
        policy_contexts: Contexts sent to the policy (= sampled turns).
        policy_tokens: Tokens generated.
        policy_seconds: Wall time inside ``agent.act``.
        env_steps: Env steps taken (one per sampled turn).
        env_seconds: Wall time in ``restore``, ``step`` and ``snapshot``.
        value_seconds: Wall time in the value function (critic).
        simulations: MCTS simulations (or beam rounds).
        wall_seconds: Total wall time of the search (set by the search).
    """

    policy_calls: int = 0
    policy_contexts: int = 0
    policy_tokens: int = 0
    policy_seconds: float = 0.0
    env_steps: int = 0
    env_seconds: float = 0.0
    value_seconds: float = 0.0
    simulations: int = 0
    wall_seconds: float = 0.0

    @property
    def overhead_share(self) -> float:
        """Share of wall time spent outside policy calls (search bookkeeping, env, critic).

        Example:
            >>> SearchStats(policy_seconds=9.0, wall_seconds=10.0).overhead_share
            0.1
        """
        if self.wall_seconds <= 0:
            return 0.0
        return max(0.0, self.wall_seconds - self.policy_seconds) / self.wall_seconds

    def add(self, other: SearchStats) -> None:
        """Add ``other``'s counters to these (in place).

        Example:
            >>> s = SearchStats(policy_calls=1)
            >>> s.add(SearchStats(policy_calls=2, wall_seconds=1.5))
            >>> s.policy_calls, s.wall_seconds
            (3, 1.5)
        """
        for key, value in asdict(other).items():
            setattr(self, key, getattr(self, key) + value)

    def to_dict(self) -> dict[str, Any]:
        """The counters plus ``overhead_share``, as a JSON-ready dict."""
        return {**asdict(self), "overhead_share": self.overhead_share}


def mix_seed(*parts: int | None) -> int:
    """A stable non-negative 63-bit seed mixed from integers (``None`` counts as 0).

    Example:
        >>> mix_seed(1, 2) == mix_seed(1, 2), mix_seed(1, 2) == mix_seed(2, 1)
        (True, False)
    """
    state = np.random.SeedSequence([int(p or 0) & _MASK63 for p in parts]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31 ^ int(state[1])) & _MASK63


def length_normalised_prior(turn: AgentTurn, exponent: float = 1.25) -> float | None:
    """MCTS-DPO's step prior ``exp(Σ_t log π(a_t) / |a|^exponent)``; ``None`` without log-probs.

    Example:
        >>> from turnkit.types import AgentTurn
        >>> round(length_normalised_prior(AgentTurn("ab", (1, 2), (-1.0, -1.0))), 4)  # exp(-2 / 2**1.25)
        0.4313
        >>> length_normalised_prior(AgentTurn("ab")) is None
        True
    """
    if not turn.logprobs:
        return None
    return math.exp(float(sum(turn.logprobs)) / len(turn.logprobs) ** exponent)


class Expander:
    """Adds children to tree nodes with one batched policy call per :meth:`expand`.

    Args:
        env: The env (possibly wrapped, e.g. by ``gymnasium.make``); used for every step through
            :func:`~turnkit.envs.core.snapshot_env` / :func:`~turnkit.envs.core.restore_env`.
        agent: The policy.
        env_id: Recorded on trees; defaults to ``env.spec.id`` or the class name.
        salt: Mixed into the sampling seed of every context (e.g. the synthesis iteration).
        breadth_limit: Most children per node.
        dedupe: Drop samples whose text equals an existing sibling's.
        prior_exponent: Length exponent of :func:`length_normalised_prior`.
        max_turns: Treat a node after this many turns as truncated (for envs without a ``TimeLimit``).
        stats: Counters to update (a fresh :class:`SearchStats` by default).
        step_delimiter: Expand by reasoning steps ending at this string (see the module docstring);
            ``None``: whole turns.
        final_markers: Strings whose presence in a step finishes the turn; ``None``: the env's
            ``final_answer_markers`` attribute (or none).
        max_turn_steps: Most steps in one turn; the step reaching it finishes the turn.

    Raises:
        AgentError: ``step_delimiter`` is set and the agent cannot continue a partial turn.
    """

    def __init__(
        self,
        env: gymnasium.Env,
        agent: Agent,
        *,
        env_id: str | None = None,
        salt: int = 0,
        breadth_limit: int = 4,
        dedupe: bool = True,
        prior_exponent: float = 1.25,
        max_turns: int | None = None,
        stats: SearchStats | None = None,
        step_delimiter: str | None = None,
        final_markers: Sequence[str] | None = None,
        max_turn_steps: int = 32,
    ) -> None:
        check_step_options(step_delimiter, final_markers, max_turn_steps, owner="Expander")
        if step_delimiter is not None and not getattr(agent, "supports_prefix", False):
            raise AgentError(
                f"step-level search (step_delimiter={step_delimiter!r}) needs an agent that continues a partial "
                f"turn and stops at a string (supports_prefix = True, e.g. HFPolicy); {type(agent).__name__} "
                "does not"
            )
        if breadth_limit < 1:
            raise ConfigError(f"breadth_limit must be >= 1, got {breadth_limit}")
        if max_turns is not None and max_turns < 1:
            raise ConfigError(f"max_turns must be >= 1 or None, got {max_turns}")
        self.env = env
        self.agent = agent
        self.env_id = env_id or (env.spec.id if env.spec is not None else type(env.unwrapped).__name__)
        self.salt = salt
        self.breadth_limit = breadth_limit
        self.dedupe = dedupe
        self.prior_exponent = prior_exponent
        self.max_turns = max_turns
        self.stats = stats if stats is not None else SearchStats()
        self._privileged = uses_privileged(agent)
        self.step_delimiter = step_delimiter
        if final_markers is None:
            final_markers = getattr(env.unwrapped, "final_answer_markers", ())
        self.final_markers = tuple(final_markers)
        self.max_turn_steps = max_turn_steps

    def new_tree(self, seed: int | None, *, meta: dict[str, Any] | None = None) -> SearchTree:
        """Reset the env with ``seed`` and return a one-node tree holding the reset snapshot."""
        start = time.perf_counter()
        obs, _info = self.env.reset(seed=seed)
        snap = snapshot_env(self.env)
        self.stats.env_seconds += time.perf_counter() - start
        task = getattr(self.env.unwrapped, "task", None)
        return SearchTree(env_id=self.env_id, seed=seed, observation=obs, task=task, root_snapshot=snap, meta=meta)

    def context(self, tree: SearchTree, node: int) -> Context:
        """The policy context at ``node`` (privileged task only for agents that use it).

        In step-level search it asks for one step: the turn so far as the prefix, the delimiter as the stop.
        """
        prefix = tree.action(node) if node != 0 and tree.is_partial(node) else None
        return Context(
            messages=tree.messages(node),
            env_id=tree.env_id,
            turn=tree.turn(node),
            episode_seed=mix_seed(tree.seed, self.salt),
            task=tree.task if self._privileged else None,
            prefix_text=prefix.text if prefix else "",
            prefix_token_ids=prefix.token_ids if prefix else (),
            stop=(self.step_delimiter,) if self.step_delimiter is not None else (),
        )

    def finishes_turn(self, tree: SearchTree, node: int, step: AgentTurn) -> bool:
        """Whether ``step``, sampled at ``node``, completes the turn (always, without ``step_delimiter``).

        Example:
            >>> import gymnasium, turnkit
            >>> from turnkit.agents.oracle import OracleAgent
            >>> exp = Expander(gymnasium.make("turnkit/MathEpisodes-v0"), OracleAgent())
            >>> exp.finishes_turn(SearchTree(env_id="demo", seed=0, observation="q"), 0, AgentTurn("x\\n"))
            True
        """
        if self.step_delimiter is None or step.finish_reason != "stop_string":
            return True
        if any(m in step.text for m in self.final_markers):
            return True
        steps_so_far = tree.depth(node) - tree.depth(tree.turn_start(node)) if tree.is_partial(node) else 0
        return steps_so_far + 1 >= self.max_turn_steps

    def expand(self, tree: SearchTree, requests: Sequence[tuple[int, int]]) -> list[list[int]]:
        """Sample ``n`` turns at each ``(node, n)`` (one policy call) and add the distinct ones as children.

        Each request's node must have a snapshot and must not be terminal. A node gets at most
        ``breadth_limit`` children; exact duplicates of existing siblings are dropped when ``dedupe``.

        Returns:
            The new child ids of each request, in order (possibly empty when every sample was a duplicate).
        """
        return expand_many([(self, tree, requests)])[0]

    def check(self, tree: SearchTree, requests: Sequence[tuple[int, int]]) -> None:
        """Raise ``ValueError`` unless every ``(node, n)`` can be expanded."""
        for node, n in requests:
            if tree.is_terminal(node):
                raise ValueError(f"cannot expand terminal node {node}")
            if node not in tree.snapshots:
                raise ValueError(f"node {node} has no env snapshot (trees loaded from disk cannot be searched)")
            if n < 1:
                raise ValueError(f"need n >= 1 samples per node, got {n} for node {node}")

    def add_turns(self, tree: SearchTree, node: int, turns: Sequence[AgentTurn], n: int) -> list[int]:
        """Step the env with each sampled turn from ``node`` and add the distinct ones (breadth-capped)."""
        return self._add_children(tree, node, list(turns), n)

    def _add_children(self, tree: SearchTree, node: int, turns: list[AgentTurn], n: int) -> list[int]:
        seen = {tree.edge(c)["text"] for c in tree.children(node)} if self.dedupe else set()
        room = self.breadth_limit - len(tree.children(node))
        new = []
        for turn in turns:
            if room <= 0:
                break
            if self.dedupe and turn.text in seen:
                continue
            seen.add(turn.text)
            prior = length_normalised_prior(turn, self.prior_exponent)
            new.append(self.step(tree, node, turn, 1.0 / n if prior is None else prior))
            room -= 1
        return new

    def step(self, tree: SearchTree, node: int, turn: AgentTurn, prior: float) -> int:
        """Restore ``node``'s snapshot, play ``turn`` and add the resulting child (with its snapshot).

        In step-level search ``turn`` is one step: a step that does not finish the turn adds a partial
        child without touching the env; one that does plays the whole turn (the steps since the turn began).
        """
        if not self.finishes_turn(tree, node, turn):
            child = tree.add_child(node, turn, observation="", prior=prior, partial=True)
            if node in tree.snapshots:  # same env state: the turn is not played yet
                tree.snapshots[child] = tree.snapshots[node]
            return child
        text = turn.text
        if node != 0 and tree.is_partial(node):
            text = tree.action(node).text + turn.text
        start = time.perf_counter()
        restore_env(self.env, tree.snapshots[node])
        obs, reward, terminated, truncated, info = self.env.step(text)
        if self.max_turns is not None and tree.turn(node) + 1 >= self.max_turns and not terminated:
            truncated = True
        snap = snapshot_env(self.env)
        self.stats.env_seconds += time.perf_counter() - start
        self.stats.env_steps += 1
        return tree.add_child(
            node,
            turn,
            observation=obs,
            env_reward=float(reward),
            terminal=bool(terminated),
            truncated=bool(truncated),
            info=info,
            prior=prior,
            snapshot=snap,
        )


def check_step_options(
    step_delimiter: str | None, final_markers: Sequence[str] | None, max_turn_steps: int, *, owner: str
) -> None:
    """Raise :class:`~turnkit.errors.ConfigError` for unusable step-search options (shared by the configs).

    Example:
        >>> check_step_options("", None, 32, owner="MCTSConfig")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: MCTSConfig.step_delimiter must be a non-empty string or None, got ''
    """
    if step_delimiter is not None and (not isinstance(step_delimiter, str) or not step_delimiter):
        raise ConfigError(f"{owner}.step_delimiter must be a non-empty string or None, got {step_delimiter!r}")
    if final_markers is not None and (
        isinstance(final_markers, str) or not all(isinstance(m, str) and m for m in final_markers)
    ):
        raise ConfigError(
            f"{owner}.final_markers must be a sequence of non-empty strings or None, got {final_markers!r}"
        )
    if not isinstance(max_turn_steps, int) or max_turn_steps < 1:
        raise ConfigError(f"{owner}.max_turn_steps must be an int >= 1, got {max_turn_steps!r}")


Job = tuple[Expander, SearchTree, Sequence[tuple[int, int]]]
"""One tree's expansion requests: its expander, the tree, and ``(node, n_samples)`` pairs."""


def expand_many(jobs: Sequence[Job]) -> list[list[list[int]]]:
    """Expand nodes of several trees with ONE ``agent.act`` call over all their contexts.

    Every job's expander must use the same agent (each keeps its own env). Policy counters go to each
    expander's :class:`SearchStats` once per distinct stats object: its own contexts and tokens, one call,
    and a share of the call's time proportional to its contexts.

    Returns:
        Per job, per request, the new child ids.

    Example:
        >>> import gymnasium, turnkit
        >>> from turnkit.agents.scripted import RandomAgent
        >>> agent, stats = RandomAgent(), SearchStats()
        >>> exps = [Expander(gymnasium.make("turnkit/MathEpisodes-v0"), agent, stats=stats, dedupe=False)
        ...         for _ in range(2)]
        >>> trees = [e.new_tree(seed=s) for e, s in zip(exps, (0, 1))]
        >>> out = expand_many([(exps[0], trees[0], [(0, 2)]), (exps[1], trees[1], [(0, 3)])])
        >>> [len(kids) for job in out for kids in job], stats.policy_calls, stats.policy_contexts
        ([2, 3], 1, 5)
    """
    if not jobs:
        return []
    agent = jobs[0][0].agent
    if any(exp.agent is not agent for exp, _, _ in jobs):
        raise ValueError("expand_many needs one agent for all jobs")
    for exp, tree, requests in jobs:
        exp.check(tree, requests)
    contexts = [exp.context(tree, node) for exp, tree, reqs in jobs for node, n in reqs for _ in range(n)]
    turns: list[AgentTurn] = []
    elapsed = 0.0
    if contexts:
        start = time.perf_counter()
        try:
            turns = list(agent.act(contexts))
        except Exception as exc:
            raise AgentError(f"policy failed during search: {type(exc).__name__}: {exc}") from exc
        elapsed = time.perf_counter() - start
        if len(turns) != len(contexts):
            raise AgentError(f"agent returned {len(turns)} turns for {len(contexts)} contexts")
    counted: dict[int, SearchStats] = {}
    out: list[list[list[int]]] = []
    i = 0
    for exp, tree, requests in jobs:
        job_turns = turns[i : i + sum(n for _, n in requests)]
        stats = counted.setdefault(id(exp.stats), exp.stats)
        if job_turns:
            stats.policy_contexts += len(job_turns)
            stats.policy_tokens += sum(len(t.token_ids) for t in job_turns)
            stats.policy_seconds += elapsed * len(job_turns) / len(contexts)
        i += len(job_turns)
        kids, j = [], 0
        for node, n in requests:
            kids.append(exp.add_turns(tree, node, job_turns[j : j + n], n))
            j += n
        out.append(kids)
    if contexts:
        for stats in counted.values():
            stats.policy_calls += 1
    return out
