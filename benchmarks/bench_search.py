"""Search benchmarks: where MCTS spends its time and what snapshots cost.

Two parts (medians over trials, configurations interleaved so that machine noise hits all alike):

* ``overhead``: MCTS with the embedded tiny policy on ``turnkit/MathEpisodes-v0`` (difficulty 1): share of
  wall time spent outside ``agent.act`` (target <= 10%), and the lockstep batching speed-up: the same
  tasks searched one tree at a time (baseline) vs all trees in lockstep (``MCTS.search_many``), same
  trees, same number of sampled turns.
* ``snapshot``: ``snapshot`` + ``restore`` cost against history length, for the math env (O(state):
  ``get_state``/``set_state``) and for the generic replay fallback (O(history)).

Whether MCTS-DPO data improves the policy is a study, not a speed measurement: ``studies/mcts_dpo.py``.

Run:  python benchmarks/bench_search.py --tasks 16 --trials 3     (writes runs/bench_search/bench.json)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

import turnkit  # noqa: F401  (registers the built-in envs)
from turnkit.envs.core import TextEnv, Transition, restore_env, snapshot_env
from turnkit.search.mcts import MCTS, MCTSConfig
from turnkit.types import Task

MATH = "turnkit/MathEpisodes-v0"
MATH_KWARGS = {"difficulty": 1}


# ---------------------------------------------------------------------------------------------- overhead


def overhead(tasks: int, trials: int, cfg: MCTSConfig) -> dict[str, Any]:
    from turnkit.models.embedded import tiny_policy

    policy = tiny_policy(progress=False)
    rows: dict[str, list[dict[str, float]]] = {"one_tree_at_a_time": [], "lockstep": []}
    for trial in range(trials):
        seeds = list(range(trial * tasks, (trial + 1) * tasks))
        for name in rows:  # interleaved
            envs = [gymnasium.make(MATH, **MATH_KWARGS) for _ in seeds]
            t0 = time.perf_counter()
            if name == "lockstep":
                stats = MCTS(cfg).search_many(envs, policy, seeds=seeds)[0].stats.to_dict()
            else:
                parts = [MCTS(cfg).search(e, policy, seed=s).stats.to_dict() for e, s in zip(envs, seeds, strict=True)]
                stats = {k: sum(p[k] for p in parts) for k in parts[0] if k != "overhead_share"}
            wall = time.perf_counter() - t0
            rows[name].append(
                {
                    "wall_s": wall,
                    "policy_s": stats["policy_seconds"],
                    "outside_policy_share": (wall - stats["policy_seconds"]) / wall,
                    "env_s": stats["env_seconds"],
                    "policy_calls": stats["policy_calls"],
                    "sampled_turns": stats["policy_contexts"],
                }
            )
    out: dict[str, Any] = {"tasks_per_trial": tasks, "trials": trials, "config": cfg.to_dict()}
    for name, trs in rows.items():
        out[name] = {k: statistics.median(r[k] for r in trs) for k in trs[0]}
    out["lockstep_speedup"] = statistics.median(
        a["wall_s"] / b["wall_s"] for a, b in zip(rows["one_tree_at_a_time"], rows["lockstep"], strict=True)
    )
    return out


# ---------------------------------------------------------------------------------------------- snapshots


class ReplayCounter(TextEnv):
    """Counts to 10**9 one message at a time; no get_state, so snapshots replay the history."""

    def generate_task(self, rng: np.random.Generator) -> Task:
        return Task(task_id="count", prompt="Say anything.", family="bench")

    def begin(self, task: Task) -> str:
        self._n = 0
        return task.prompt

    def respond(self, action: str) -> Transition:
        self._n += 1
        return Transition(f"{self._n} messages so far.", terminated=self._n >= 10**9)


def snapshot_cost(lengths: list[int], repeats: int) -> dict[str, Any]:
    envs = {
        "math (get_state)": MATH_KWARGS | {"token_budget": 10**9, "max_attempts": 10**9},
        "replay fallback": None,
    }
    out: dict[str, Any] = {}
    for name, kwargs in envs.items():
        env = gymnasium.make(MATH, max_episode_steps=10**9, **kwargs) if kwargs is not None else ReplayCounter()
        env.reset(seed=0)
        row, taken = {}, 0
        for length in lengths:
            while taken < length:
                env.step("thinking it over")
                taken += 1
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                snap = snapshot_env(env)
                restore_env(env, snap)
                times.append(time.perf_counter() - t0)
            row[str(length)] = statistics.median(times) * 1e6
        out[name] = row
    return {"unit": "microseconds per snapshot + restore (median)", "history_lengths": lengths, **out}


# ---------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/bench_search")
    p.add_argument("--tasks", type=int, default=32, help="tasks (trees) per trial")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--simulations", type=int, default=8)
    p.add_argument("--root-multiplier", type=int, default=2)
    p.add_argument("--n-actions", type=int, default=2)
    p.add_argument("--root-n-actions", type=int, default=4)
    p.add_argument("--depth-limit", type=int, default=3)
    args = p.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    cfg = MCTSConfig(
        iterations=args.simulations,
        root_multiplier=args.root_multiplier,
        n_actions=args.n_actions,
        root_n_actions=args.root_n_actions,
        depth_limit=args.depth_limit,
    )
    result = {
        "overhead": overhead(args.tasks, args.trials, cfg),
        "snapshot": snapshot_cost([1, 10, 100, 1000], repeats=50),
    }
    text = json.dumps(result, indent=2)
    (Path(args.out) / "bench.json").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
