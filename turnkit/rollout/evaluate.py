"""Evaluate an agent on many seeded episodes: batched collection, progress bar, JSONL + summary.

Example:
    >>> from turnkit.agents.oracle import OracleAgent
    >>> s = evaluate("turnkit/MathEpisodes-v0", OracleAgent(), episodes=4, seed=0, progress=False)
    >>> s.success_rate, s.episodes, s.errors
    (1.0, 4, {})
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium
from tqdm.auto import tqdm

from turnkit.agents.base import Agent
from turnkit.envs import registration as _registration  # noqa: F401  (registers the built-in env ids)
from turnkit.rollout.collect import collect_batch
from turnkit.rollout.records import trajectory_to_record, write_jsonl
from turnkit.stats import mean_ci, wilson_interval
from turnkit.types import Trajectory


@dataclass(frozen=True)
class EvalSummary:
    """Aggregate results of an evaluation run.

    Attributes:
        env_id: The env evaluated.
        split: The task split.
        episodes: Number of episodes.
        seed: First seed (episodes use ``seed, seed + 1, ...``).
        success_rate: Fraction of successful episodes (errored episodes count as failures).
        success_ci95: Wilson 95% interval of the success rate.
        mean_reward: Mean total reward per episode.
        mean_reward_ci95: Normal-approximation 95% interval of the mean reward.
        mean_turns: Mean number of agent turns.
        errors: Infrastructure errors by cause.
        wall_s: Wall-clock seconds.
    """

    env_id: str
    split: str
    episodes: int
    seed: int
    success_rate: float
    success_ci95: tuple[float, float]
    mean_reward: float
    mean_reward_ci95: tuple[float, float]
    mean_turns: float
    errors: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0

    def to_json(self) -> str:
        """The summary as pretty JSON."""
        return json.dumps(asdict(self), indent=2)

    def metrics(self, prefix: str = "eval_") -> dict[str, float]:
        """The headline numbers as a flat metrics record (what the training loops log after an evaluation).

        Example:
            >>> s = EvalSummary("e", "id", 10, 0, 0.5, (0.2, 0.8), 1.0, (0.5, 1.5), 2.0, {"timeout": 1})
            >>> s.metrics()["eval_success_lo"], s.metrics()["eval_errors"]
            (0.2, 1)
        """
        lo, hi = self.success_ci95
        return {
            f"{prefix}success": self.success_rate,
            f"{prefix}success_lo": lo,
            f"{prefix}success_hi": hi,
            f"{prefix}reward": self.mean_reward,
            f"{prefix}turns": self.mean_turns,
            f"{prefix}episodes": self.episodes,
            f"{prefix}errors": sum(self.errors.values()),
            f"{prefix}s": self.wall_s,
        }


def summarize(env_id: str, split: str, seed: int, trajs: list[Trajectory], wall_s: float) -> EvalSummary:
    """Aggregate finished trajectories into an :class:`EvalSummary`."""
    n = len(trajs)
    wins = sum(t.success for t in trajs)
    rewards = [t.total_reward for t in trajs] or [0.0]
    mean, lo, hi = mean_ci(rewards)
    errors = Counter(t.error.cause.value for t in trajs if t.error is not None)
    return EvalSummary(
        env_id=env_id,
        split=split,
        episodes=n,
        seed=seed,
        success_rate=wins / n if n else 0.0,
        success_ci95=wilson_interval(wins, n),
        mean_reward=mean,
        mean_reward_ci95=(lo, hi),
        mean_turns=sum(len(t.steps) for t in trajs) / n if n else 0.0,
        errors=dict(errors),
        wall_s=wall_s,
    )


def evaluate(
    env_id: str,
    agent: Agent,
    *,
    episodes: int,
    seed: int = 0,
    split: str = "id",
    batch_size: int = 16,
    env_kwargs: dict[str, Any] | None = None,
    out_dir: str | Path | None = None,
    progress: bool = True,
) -> EvalSummary:
    """Run ``episodes`` seeded episodes of ``env_id`` and summarise them.

    Args:
        env_id: A registered env id.
        agent: The policy under evaluation.
        episodes: Number of episodes (seeds ``seed .. seed + episodes - 1``).
        seed: First seed.
        split: Task split passed to the env.
        batch_size: Episodes played side by side (one agent call per round).
        env_kwargs: Extra keyword arguments for ``gymnasium.make``.
        out_dir: If given, write ``trajectories.jsonl`` and ``summary.json`` there.
        progress: Show a progress bar.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    kwargs = dict(env_kwargs or {})
    envs = [gymnasium.make(env_id, split=split, **kwargs) for _ in range(min(batch_size, episodes))]
    start = time.perf_counter()
    play = lambda seeds: collect_batch(envs[: len(seeds)], agent, seeds)  # noqa: E731
    sink = EpisodeSink(out_dir) if out_dir is not None else None
    trajs = play_in_blocks(play, seed=seed, episodes=episodes, block=len(envs), desc=f"eval {env_id} [{split}]",
                           progress=progress, on_block=sink)  # fmt: skip
    for env in envs:
        env.close()
    summary = summarize(env_id, split, seed, trajs, time.perf_counter() - start)
    if sink is not None:
        sink.finish(summary)
    return summary


class EpisodeSink:
    """Appends each finished block of episodes to ``out_dir/trajectories.jsonl`` as it comes, then the summary.

    A long evaluation can be read (and is not lost) while it runs; ``summary.json`` appears when it ends.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp()) / "eval"
        >>> sink = EpisodeSink(out)
        >>> sink([Trajectory(env_id="e", seed=1)])
        >>> len((out / "trajectories.jsonl").read_text().splitlines()), (out / "summary.json").exists()
        (1, False)
    """

    def __init__(self, out_dir: str | Path) -> None:
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "summary.json").unlink(missing_ok=True)  # an old summary never describes the new episodes
        (self.out / "trajectories.jsonl").write_text("", encoding="utf-8")

    def __call__(self, trajs: list[Trajectory]) -> None:
        """Append one block of episodes."""
        with open(self.out / "trajectories.jsonl", "a", encoding="utf-8") as f:
            for t in trajs:
                f.write(json.dumps(trajectory_to_record(t), ensure_ascii=False) + "\n")

    def finish(self, summary: EvalSummary) -> None:
        """Write ``summary.json``."""
        (self.out / "summary.json").write_text(summary.to_json() + "\n", encoding="utf-8")


def play_in_blocks(
    play: Callable[[list[int]], list[Trajectory]],
    *,
    seed: int,
    episodes: int,
    block: int,
    desc: str,
    progress: bool,
    on_block: Callable[[list[Trajectory]], None] | None = None,
) -> list[Trajectory]:
    """Seeds ``seed .. seed + episodes - 1`` through ``play`` in blocks of ``block``, with a progress bar.

    ``on_block`` is called with each block's episodes as soon as they finish (e.g. :class:`EpisodeSink`).

    Example:
        >>> from turnkit.types import Trajectory
        >>> play = lambda seeds: [Trajectory(env_id="e", seed=s) for s in seeds]
        >>> [t.seed for t in play_in_blocks(play, seed=3, episodes=5, block=2, desc="x", progress=False)]
        [3, 4, 5, 6, 7]
    """
    trajs: list[Trajectory] = []
    with tqdm(total=episodes, desc=desc, disable=not progress, unit="ep") as bar:
        for first in range(seed, seed + episodes, block):
            seeds = list(range(first, min(first + block, seed + episodes)))
            played = play(seeds)
            trajs.extend(played)
            if on_block is not None:
                on_block(played)
            bar.update(len(seeds))
            bar.set_postfix(success=f"{sum(t.success for t in trajs) / len(trajs):.2f}")
    return trajs


def write_evaluation(out_dir: str | Path, trajs: list[Trajectory], summary: EvalSummary) -> None:
    """Write ``trajectories.jsonl`` and ``summary.json`` into ``out_dir`` (created if needed).

    Example:
        >>> import tempfile
        >>> trajs = [Trajectory(env_id="e", seed=1)]
        >>> out = Path(tempfile.mkdtemp()) / "eval"
        >>> write_evaluation(out, trajs, summarize("e", "id", 1, trajs, 0.1))
        >>> sorted(p.name for p in out.iterdir())
        ['summary.json', 'trajectories.jsonl']
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(str(out / "trajectories.jsonl"), trajs)
    (out / "summary.json").write_text(summary.to_json() + "\n", encoding="utf-8")
