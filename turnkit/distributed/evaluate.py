"""Evaluate an agent on Ray env workers: the same episodes, summary and files as local evaluation.

Example (``turnkit eval ... --ray local --ray-workers 4`` runs this):
    >>> from turnkit.agents.oracle import OracleAgent
    >>> from turnkit.distributed import RayConfig, SharedAgent
    >>> summary = evaluate_on_ray("turnkit/MathEpisodes-v0", SharedAgent(OracleAgent()), episodes=8,
    ...                           ray=RayConfig(workers=2), progress=False)
    >>> summary.episodes, summary.success_rate
    (8, 1.0)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from turnkit.distributed.cluster import RayConfig
from turnkit.distributed.collector import RayCollector
from turnkit.distributed.worker import AgentFactory, EnvSpec
from turnkit.rollout.evaluate import EvalSummary, play_in_blocks, summarize, write_evaluation


def evaluate_on_ray(
    env_id: str,
    agent_factory: AgentFactory,
    *,
    episodes: int,
    ray: RayConfig,
    seed: int = 0,
    split: str = "id",
    batch_size: int = 16,
    env_kwargs: dict[str, Any] | None = None,
    out_dir: str | Path | None = None,
    progress: bool = True,
) -> EvalSummary:
    """Run ``episodes`` seeded episodes (seeds ``seed ..``) on Ray workers and summarise them.

    Args:
        env_id: A registered env id (``"module:Env-v0"`` for one the workers must import).
        agent_factory: Builds each worker's agent.
        episodes: Number of episodes.
        ray: The cluster and worker settings.
        seed: First seed.
        split: Task split passed to the env.
        batch_size: Episodes one worker plays side by side.
        env_kwargs: Extra ``gymnasium.make`` arguments.
        out_dir: If given, write ``trajectories.jsonl`` and ``summary.json`` there.
        progress: Show a progress bar (advanced per finished block of ``workers × batch_size`` episodes).
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    env = EnvSpec(env_id, {"split": split, **(env_kwargs or {})})
    start = time.perf_counter()
    with RayCollector(env, agent_factory, ray) as collector:
        trajs = play_in_blocks(collector.collect, seed=seed, episodes=episodes, block=ray.workers * batch_size,
                               desc=f"eval {env_id} [{split}] on Ray", progress=progress)  # fmt: skip
    summary = summarize(env_id, split, seed, trajs, time.perf_counter() - start)
    if out_dir is not None:
        write_evaluation(out_dir, trajs, summary)
    return summary
