"""Step-level preference pairs from search trees, exported in TRL's conversational DPO format.

**From an MCTS tree** (:func:`tree_pairs`, after MCTS-DPO): at every node of the committed path with at
least two children, ``chosen`` is the child turn with the highest ``Q`` and ``rejected`` the one with the
lowest ``Q`` (``rejected="lowest_q"``, the paper's rule) or a uniformly random non-best child
(``rejected="random"``). The released MCTS-DPO code silently does the latter because a flag defaults to
true; here the rule is an explicit, recorded choice, so the two can be compared as an ablation. A pair is
kept only when ``Q_w − Q_l > min_q_gap``, and (``require_success``, the paper's setting) only from trees whose
committed episode succeeded. Its confidence is ``1 / (1 + N_l / max(1, N_w))`` from the visit counts,
which :mod:`turnkit.train.dpo` turns into the conservative-DPO smoothing ``ε = min(1 − confidence, 0.5)``.

**From sampled episodes** (:func:`trajectory_pair`): the best and the worst of N episodes of one task,
compared at the first turn where they differ (best-of-N baselines).

**Record format** (one JSON object per line, :func:`write_pairs`; loads with
``datasets.load_dataset("json", data_files=path)`` and trains with TRL's ``DPOTrainer``)::

    prompt       [{"role": "user", "content": ...}, {"role": "assistant", ...}, ..., {"role": "user", ...}]
    chosen       [{"role": "assistant", "content": <preferred turn>}]
    rejected     [{"role": "assistant", "content": <other turn>}]
    q_chosen, q_rejected, n_chosen, n_rejected, confidence, step, env_id, seed, task_id, source
    prompt_token_ids, chosen_token_ids, rejected_token_ids   (exact policy ids; [] for non-token agents)

``step`` is the turn index of the pair in its episode; both sides share the same prompt, and
``chosen != rejected`` always.

Example:
    >>> from turnkit.types import AgentTurn
    >>> from turnkit.search.tree import SearchTree
    >>> tree = SearchTree(env_id="demo", seed=3, observation="2+2?")
    >>> good = tree.add_child(0, AgentTurn("ANSWER: 4"), observation="Correct.", terminal=True,
    ...                       info={"success": True})
    >>> bad = tree.add_child(0, AgentTurn("ANSWER: 5"), observation="Wrong.", terminal=True,
    ...                      info={"success": False})
    >>> tree.node(good).update(q=1.0, visits=3); tree.node(bad).update(q=-1.0, visits=1)
    >>> tree.commit(good)
    >>> [pair] = tree_pairs(tree)
    >>> pair.chosen, pair.rejected, pair.confidence  # 1 / (1 + 1/3)
    ('ANSWER: 4', 'ANSWER: 5', 0.75)
    >>> pair.to_record()["prompt"]
    [{'role': 'user', 'content': '2+2?'}]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np

from turnkit.configs import check_bool, check_choice, check_float, check_int
from turnkit.errors import ConfigError, DataError
from turnkit.jsonl import json_objects
from turnkit.search.expand import mix_seed
from turnkit.search.tree import SearchTree
from turnkit.types import Message, Trajectory

if TYPE_CHECKING:
    import datasets

RejectedRule = Literal["lowest_q", "random"]
PairScope = Literal["committed", "all"]


@dataclass(frozen=True)
class PairConfig:
    """How :func:`tree_pairs` picks pairs. Validated on construction.

    Example:
        >>> PairConfig().rejected
        'lowest_q'
        >>> PairConfig(rejected="worst")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: PairConfig.rejected must be one of ['lowest_q', 'random'], got 'worst'
    """

    rejected: RejectedRule = "lowest_q"
    """``"lowest_q"`` (MCTS-DPO's stated rule) or ``"random"`` (a random non-best sibling: what the released
    code does by default)."""
    require_success: bool = True
    """Take pairs only from trees whose committed episode succeeded (MCTS-DPO)."""
    min_q_gap: float = 0.0
    """Keep a pair only when ``Q_w − Q_l`` exceeds this."""
    scope: PairScope = "committed"
    """``"committed"``: nodes on the committed path (MCTS-DPO); ``"all"``: every node with >= 2 children."""
    seed: int = 0
    """Seed of the ``"random"`` rule (mixed with the tree's seed and the node id)."""
    require_value: bool = False
    """Compare only children whose ``Q`` rests on something (:func:`has_value`). Without a critic, a turn that
    ends nothing and that the search did not follow to a terminal state keeps ``Q = 0``, and against a wrong
    last answer (``−1``) it wins: with retries, such pairs teach the policy to reply without answering."""

    def __post_init__(self) -> None:
        check_choice(self, "rejected", get_args(RejectedRule))
        check_choice(self, "scope", get_args(PairScope))
        check_float(self, "min_q_gap", low=0.0)
        check_bool(self, "require_success", "require_value")
        check_int(self, "seed", low=0)


@dataclass(frozen=True)
class PreferencePair:
    """One step-level preference: two turns for the same conversation prefix.

    Attributes:
        prompt: The conversation up to the turn (ends with the env's message, role ``user``).
        chosen: The preferred turn's text.
        rejected: The other turn's text (never equal to ``chosen``).
        prompt_token_ids: The exact prompt ids the policy sampled both turns from (``()`` if unknown).
        chosen_token_ids: The exact ids of the chosen turn (``()`` if unknown).
        rejected_token_ids: The exact ids of the rejected turn (``()`` if unknown).
        q_chosen: ``Q`` (or score) of the chosen turn.
        q_rejected: ``Q`` (or score) of the rejected turn.
        n_chosen: Visits of the chosen turn.
        n_rejected: Visits of the rejected turn.
        confidence: ``1 / (1 + N_l / max(1, N_w))`` for MCTS pairs, ``1`` otherwise.
        step: Turn index of the pair in its episode.
        env_id: The env id.
        seed: The episode's reset seed.
        task_id: The task id, if known.
        source: ``"mcts"``, ``"best_of_n"``, ...
    """

    prompt: tuple[Message, ...]
    chosen: str
    rejected: str
    prompt_token_ids: tuple[int, ...] = ()
    chosen_token_ids: tuple[int, ...] = ()
    rejected_token_ids: tuple[int, ...] = ()
    q_chosen: float = 0.0
    q_rejected: float = 0.0
    n_chosen: int = 0
    n_rejected: int = 0
    confidence: float = 1.0
    step: int = 0
    env_id: str = ""
    seed: int | None = None
    task_id: str | None = None
    source: str = field(default="mcts")

    def __post_init__(self) -> None:
        if not self.prompt or self.prompt[-1].role != "user":
            raise DataError("a preference pair's prompt must be non-empty and end with a user message")
        if self.chosen == self.rejected and self.chosen_token_ids == self.rejected_token_ids:
            raise DataError(f"chosen and rejected are the same turn: {self.chosen[:80]!r}")
        if not 0 < self.confidence <= 1:
            raise DataError(f"confidence must be in (0, 1], got {self.confidence!r}")

    def to_record(self) -> dict[str, Any]:
        """The pair as one JSON-ready row in TRL's conversational format plus turnkit's columns.

        Example:
            >>> pair = PreferencePair((Message("user", "q"),), "a", "b")
            >>> sorted(pair.to_record())[:4]
            ['chosen', 'chosen_token_ids', 'confidence', 'env_id']
        """
        rec = asdict(self)
        rec["prompt"] = [{"role": m.role, "content": m.content} for m in self.prompt]
        rec["chosen"] = [{"role": "assistant", "content": self.chosen}]
        rec["rejected"] = [{"role": "assistant", "content": self.rejected}]
        for key in ("prompt_token_ids", "chosen_token_ids", "rejected_token_ids"):
            rec[key] = list(rec[key])
        return rec

    @classmethod
    def from_record(
        cls, rec: Mapping[str, Any], *, path: str | Path | None = None, line: int | None = None
    ) -> PreferencePair:
        """Parse a row written by :meth:`to_record`; ``chosen``/``rejected``/``prompt`` may also be plain strings.

        Raises:
            DataError: A missing or malformed field (the message names the file and line when given).

        Example:
            >>> PreferencePair.from_record({"prompt": "q", "chosen": "a", "rejected": "b"}).prompt
            (Message(role='user', content='q'),)
            >>> PreferencePair.from_record({"prompt": "q", "chosen": "a"}, path="p.jsonl", line=2)
            Traceback (most recent call last):
            ...
            turnkit.errors.DataError: p.jsonl:2: missing field 'rejected'
        """
        for key in ("prompt", "chosen", "rejected"):
            if key not in rec:
                raise DataError(f"missing field {key!r}", path=path, line=line)
        try:
            prompt = _messages(rec["prompt"])
            chosen = _completion(rec["chosen"])
            rejected = _completion(rec["rejected"])
            numbers: dict[str, Any] = {k: float(rec[k]) for k in _FLOAT_FIELDS if rec.get(k) is not None}
            numbers.update({k: int(rec[k]) for k in _INT_FIELDS if rec.get(k) is not None})
            ids: dict[str, Any] = {k: tuple(int(x) for x in rec.get(k) or ()) for k in _ID_FIELDS}
            return cls(
                prompt=prompt,
                chosen=chosen,
                rejected=rejected,
                env_id=str(rec.get("env_id") or ""),
                seed=None if rec.get("seed") is None else int(rec["seed"]),
                task_id=rec.get("task_id"),
                source=str(rec.get("source") or "unknown"),
                **ids,
                **numbers,
            )
        except DataError as exc:
            raise DataError(str(exc), path=path, line=line) from exc
        except (TypeError, ValueError, KeyError) as exc:
            raise DataError(f"malformed pair: {type(exc).__name__}: {exc}", path=path, line=line) from exc


_ID_FIELDS = ("prompt_token_ids", "chosen_token_ids", "rejected_token_ids")
_INT_FIELDS = ("n_chosen", "n_rejected", "step")
_FLOAT_FIELDS = ("q_chosen", "q_rejected", "confidence")


def _messages(value: Any) -> tuple[Message, ...]:
    if isinstance(value, str):
        return (Message("user", value),)
    out = []
    for m in value:
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise DataError(f"a prompt message must have 'role' and 'content', got {m!r}")
        out.append(Message(m["role"], str(m["content"])))
    return tuple(out)


def _completion(value: Any) -> str:
    if isinstance(value, str):
        return value
    msgs = _messages(value)
    if len(msgs) != 1 or msgs[0].role != "assistant":
        raise DataError(f"a completion must be one assistant message, got {len(msgs)} message(s)")
    return msgs[0].content


def visit_confidence(n_chosen: int, n_rejected: int) -> float:
    """MCTS-DPO's pair confidence ``1 / (1 + N_l / max(1, N_w))``.

    Example:
        >>> visit_confidence(3, 1), visit_confidence(0, 0), visit_confidence(1, 4)
        (0.75, 1.0, 0.2)
    """
    return 1.0 / (1.0 + n_rejected / max(1, n_chosen))


def tree_pairs(tree: SearchTree, config: PairConfig | None = None) -> list[PreferencePair]:
    """Extract step-level pairs from a searched tree (see the module docstring for the rules).

    Args:
        tree: A tree from :class:`~turnkit.search.mcts.MCTS` (or loaded from disk).
        config: Pair rules (defaults: lowest-Q rejected, successful trees only, committed path).

    Returns:
        The pairs in turn order (empty when the tree does not qualify).
    """
    config = config or PairConfig()
    committed = tree.committed_path()
    if config.require_success and not tree.trajectory(committed[-1]).success:
        return []
    if config.scope == "committed":
        nodes: Iterable[int] = committed
    else:
        nodes = sorted(tree.graph.nodes)
    out = []
    for node in nodes:
        kids = tree.children(node)
        if config.require_value:
            kids = [c for c in kids if has_value(tree, c)]
        if len(kids) < 2:
            continue
        by_q = sorted(kids, key=lambda c: (tree.node(c)["q"], tree.node(c)["visits"], -c))
        best = by_q[-1]
        q_best = tree.node(best)["q"]
        worse = [c for c in by_q[:-1] if q_best - tree.node(c)["q"] > config.min_q_gap]
        if not worse:
            continue
        if config.rejected == "lowest_q":
            other = worse[0]
        else:
            rng = np.random.default_rng(mix_seed(config.seed, tree.seed, node))
            other = worse[int(rng.integers(len(worse)))]
        pair = sibling_pair(tree, best, other)
        if pair is not None:
            out.append(pair)
    return out


def has_value(tree: SearchTree, node: int) -> bool:
    """Whether ``node``'s ``Q`` rests on an evaluation: it or a node below it is terminal or was scored non-zero.

    Example:
        >>> from turnkit.types import AgentTurn
        >>> tree = SearchTree(env_id="demo", seed=0, observation="2+2?")
        >>> stall = tree.add_child(0, AgentTurn(": 4"), observation="No answer yet.")
        >>> wrong = tree.add_child(0, AgentTurn("ANSWER: 5"), observation="Wrong.", terminal=True)
        >>> has_value(tree, stall), has_value(tree, wrong)
        (False, True)
        >>> _ = tree.add_child(stall, AgentTurn("ANSWER: 4"), observation="Correct.", terminal=True)
        >>> has_value(tree, stall)
        True
    """
    stack = [node]
    while stack:
        attrs = tree.node(stack[-1])
        if attrs.get("terminal") or attrs.get("evaluation", 0.0) != 0.0:
            return True
        stack.extend(tree.children(stack.pop()))
    return False


def sibling_pair(tree: SearchTree, chosen: int, rejected: int, *, source: str = "mcts") -> PreferencePair | None:
    """The pair (``chosen`` over ``rejected``) of two children of the same node; ``None`` if their turns match."""
    parent = tree.parent(chosen)
    if tree.parent(rejected) != parent:
        raise ValueError(f"nodes {chosen} and {rejected} are not siblings")
    a, b = tree.action(chosen), tree.action(rejected)
    if a.text == b.text and a.token_ids == b.token_ids:
        return None
    w, lo = tree.node(chosen), tree.node(rejected)
    return PreferencePair(
        prompt=tree.messages(parent),
        chosen=a.text,
        rejected=b.text,
        prompt_token_ids=a.prompt_token_ids if a.prompt_token_ids == b.prompt_token_ids else (),
        chosen_token_ids=a.token_ids,
        rejected_token_ids=b.token_ids,
        q_chosen=float(w["q"]),
        q_rejected=float(lo["q"]),
        n_chosen=int(w["visits"]),
        n_rejected=int(lo["visits"]),
        confidence=visit_confidence(int(w["visits"]), int(lo["visits"])) if source == "mcts" else 1.0,
        step=tree.depth(parent),
        env_id=tree.env_id,
        seed=tree.seed,
        task_id=tree.graph.graph.get("task_id"),
        source=source,
    )


def trajectory_pair(
    better: Trajectory, worse: Trajectory, *, score_better: float = 1.0, score_worse: float = 0.0
) -> PreferencePair | None:
    """Compare two episodes of the same task at the first turn where their actions differ.

    Returns:
        The pair, or ``None`` when one episode's actions are a prefix of the other's.

    Raises:
        DataError: The episodes did not start from the same observation (different tasks or seeds).

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> def ep(*acts):
        ...     return Trajectory("demo", 0, tuple(Step("q", AgentTurn(a), 0.0) for a in acts), initial_observation="q")
        >>> pair = trajectory_pair(ep("x", "y"), ep("x", "z"))
        >>> pair.step, pair.chosen, pair.rejected, [m.content for m in pair.prompt]
        (1, 'y', 'z', ['q', 'x', 'q'])
    """
    if better.initial_observation != worse.initial_observation:
        raise DataError("trajectory_pair needs two episodes of the same task (initial observations differ)")
    for k, (sa, sb) in enumerate(zip(better.steps, worse.steps, strict=False)):
        if sa.observation != sb.observation:
            raise DataError(f"episodes diverge in the env's message at turn {k} before their actions do")
        if sa.action.text == sb.action.text:
            continue
        prompt = [Message("user", better.initial_observation)]
        for j in range(k):
            prompt.append(Message("assistant", better.steps[j].action.text))
            prompt.append(Message("user", better.steps[j + 1].observation))
        ta, tb = sa.action, sb.action
        return PreferencePair(
            prompt=tuple(prompt),
            chosen=ta.text,
            rejected=tb.text,
            prompt_token_ids=ta.prompt_token_ids if ta.prompt_token_ids == tb.prompt_token_ids else (),
            chosen_token_ids=ta.token_ids,
            rejected_token_ids=tb.token_ids,
            q_chosen=float(score_better),
            q_rejected=float(score_worse),
            n_chosen=1,
            n_rejected=1,
            step=k,
            env_id=better.env_id,
            seed=better.seed,
            task_id=better.task.task_id if better.task else None,
            source="best_of_n",
        )
    return None


def write_pairs(pairs: Sequence[PreferencePair], path: str | Path) -> Path:
    """Write pairs as JSONL (one :meth:`PreferencePair.to_record` per line); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for pair in pairs:
            f.write(json.dumps(pair.to_record(), ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def read_pairs(path: str | Path) -> list[PreferencePair]:
    """Read a JSONL file of pairs; errors name the file and line.

    Example:
        >>> import tempfile, os
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = write_pairs([PreferencePair((Message("user", "q"),), "a", "b", step=2)], os.path.join(d, "x.jsonl"))
        ...     [pair.step for pair in read_pairs(p)]
        [2]
    """
    path = Path(path)
    out = []
    for i, rec in json_objects(path):
        out.append(PreferencePair.from_record(rec, path=path, line=i))
    return out


def pairs_to_dataset(pairs: Sequence[PreferencePair]) -> datasets.Dataset:
    """The pairs as a Hugging Face ``datasets.Dataset`` (same columns as the JSONL rows).

    Needs the ``datasets`` package (``pip install datasets``).
    """
    try:
        import datasets
    except ModuleNotFoundError as exc:
        raise ConfigError("pairs_to_dataset needs the 'datasets' package: pip install datasets") from exc
    return datasets.Dataset.from_list([p.to_record() for p in pairs])
