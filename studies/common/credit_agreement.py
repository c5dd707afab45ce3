"""How well a learned critic's per-turn credit agrees with the oracle's, on a run's logged rollouts.

A dense-credit arm can fail to beat outcome-only GRPO for two reasons: its critic credits the wrong turns, or the
loop cannot use even right credit. The oracle arm measures the second; this module measures the first, with no
extra training: on the rollouts a run logged (``rollouts/step-*/trajectories.jsonl``), every pair of turns that
the oracle tells apart (same group, same turn index, different oracle gain) is a question, and the critic's
*pairwise agreement* is the share it orders the same way (``0.5``: chance, ``1``: the oracle; ties count half).

The logged credit of a progress critic (MRT, PAV, the oracle) is its shaped reward, whose returns-to-go are the
gains (:mod:`turnkit.critics.progress`); ``progress=True`` reads the gains back. A process critic (PRIME) logs
its per-turn reward itself.

Example:
    >>> credit = ([0.2, 0.1], [0.0, 0.3])  # the critic's, per turn of two episodes of one group
    >>> rows = [{"group": 0, "steps": [{"critic_rewards": {"prime": c}} for c in cs]} for cs in credit]
    >>> gains = [[0.4, 0.1], [0.1, 0.6]]  # the oracle: episode 0's first turn helped more, its second less
    >>> pairwise_agreement(rows, gains, "prime")
    {'pairs': 2, 'agreement': 1.0}
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium

import turnkit  # noqa: F401  (registers the envs)
from turnkit.critics.oracle import math_values
from turnkit.types import AgentTurn, Step, Trajectory


def oracle_gains(row: Mapping[str, Any], env: gymnasium.Env) -> list[float]:
    """The oracle's gain ``V_{h+1} − V_h`` of each turn of one logged MathEpisodes episode (task rebuilt by seed)."""
    env.reset(seed=row["seed"])
    task = env.unwrapped.task
    steps = tuple(Step(s["observation"], AgentTurn(s["action"]), float(s["reward"])) for s in row["steps"])
    values = math_values(Trajectory(row["env_id"], row["seed"], steps, task=task))
    return [float(b - a) for a, b in itertools.pairwise(values)]


def logged_credit(row: Mapping[str, Any], critic: str, *, progress: bool = False) -> list[float]:
    """``critic``'s credit of each turn of a logged episode; for a progress critic, the returns-to-go of its shaped
    rewards (the gains).

    Example:
        >>> row = {"steps": [{"critic_rewards": {"oracle": r}} for r in (-0.25, 0.5)]}
        >>> logged_credit(row, "oracle"), logged_credit(row, "oracle", progress=True)
        ([-0.25, 0.5], [0.25, 0.5])
    """
    credit = [float(step["critic_rewards"][critic]) for step in row["steps"]]
    if progress:
        for h in range(len(credit) - 2, -1, -1):
            credit[h] += credit[h + 1]
    return credit


def pairwise_agreement(
    rows: Sequence[Mapping[str, Any]], gains: Sequence[Sequence[float]], critic: str, *, progress: bool = False
) -> dict:
    """Share of oracle-ordered turn pairs (same group, same turn index) that ``critic``'s credit orders alike."""
    by_slot: dict[tuple[Any, int], list[tuple[float, float]]] = defaultdict(list)
    for row, row_gains in zip(rows, gains, strict=True):
        credit = logged_credit(row, critic, progress=progress)
        for h, (gain, c) in enumerate(zip(row_gains, credit, strict=True)):
            by_slot[(row["group"], h)].append((gain, c))
    pairs, agree = 0, 0.0
    for turns in by_slot.values():
        for i in range(len(turns)):
            for j in range(i + 1, len(turns)):
                (gi, ci), (gj, cj) = turns[i], turns[j]
                if gi == gj:
                    continue
                pairs += 1
                agree += 0.5 if ci == cj else float((gi > gj) == (ci > cj))
    return {"pairs": pairs, "agreement": agree / pairs if pairs else None}


def run_agreement(run_dir: Path, critic: str, *, progress: bool = False) -> dict:
    """:func:`pairwise_agreement` over every logged step of one run, with the env rebuilt from its config."""
    config = json.loads((run_dir / "config.json").read_text())
    files = sorted(run_dir.glob("rollouts/step-*/trajectories.jsonl"))
    rows = [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines()]
    rows = [
        r for r in rows if r.get("error") is None and all(critic in s.get("critic_rewards", {}) for s in r["steps"])
    ]
    env = gymnasium.make(config["env_id"], **config.get("env_kwargs", {}))
    try:
        gains = [oracle_gains(r, env) for r in rows]
    finally:
        env.close()
    return {**pairwise_agreement(rows, gains, critic, progress=progress), "episodes": len(rows)}
