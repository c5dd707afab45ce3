"""turnkit/MiniWoB-v0: scripted-solver and random-action success per task, env speed, and the curation check.

Modes (combine freely):

* ``--solvers N``: each scripted solver (:mod:`turnkit.envs.web.miniwob.solvers`) on page seeds 1..N of its
  task; success rate with a 95% Wilson interval (:func:`turnkit.stats.wilson_interval`).
* ``--random N``: the random-action baseline (:class:`~turnkit.envs.web.miniwob.baselines.RandomWebAgent`: a
  valid action on a uniformly chosen element) on page seeds 1..N of every curated task, 12 turns at most.
* ``--speed N``: env resets/s and steps/s of N episodes of random actions on a few tasks (one warm Chromium;
  the time inside ``reset`` and ``step`` only, medians over tasks).
* ``--check``: :func:`turnkit.check_env` (every check, cross-process included, seeds 0-2) on every curated task.

Run:  python benchmarks/bench_miniwob.py --solvers 100 --random 100 --speed 30 --check \
          --out benchmarks/results/miniwob.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium

import turnkit
from turnkit.agents.base import Context
from turnkit.agents.oracle import OracleAgent
from turnkit.envs.web.miniwob.baselines import RandomWebAgent, random_reply
from turnkit.envs.web.miniwob.env import MiniWoBEnv
from turnkit.envs.web.miniwob.solvers import SOLVERS
from turnkit.envs.web.miniwob.tasks import CURATED
from turnkit.rollout.collect import collect_batch
from turnkit.stats import wilson_interval
from turnkit.types import Message

SPEED_TASKS = ("click-button", "enter-text", "click-checkboxes", "click-dialog", "choose-list")


def success_rates(env: MiniWoBEnv, agent: Any, names: Sequence[str], n: int) -> dict[str, dict[str, Any]]:
    """Success of ``agent`` on page seeds 1..n of each task (max 12 turns), with Wilson intervals."""
    out = {}
    for name in names:
        wins, rewards, steps = 0, [], 0
        start = time.perf_counter()
        for seed in range(1, n + 1):
            task = env.make_task(name, seed)
            (traj,) = collect_batch([env], agent, [None], max_turns=12, reset_options=[{"task": task}])
            if traj.error is not None:
                raise RuntimeError(f"{name} seed {seed}: {traj.error}")
            wins += bool(traj.success)
            rewards.append(traj.total_reward)
            steps += len(traj.steps)
        lo, hi = wilson_interval(wins, n)
        out[name] = {
            "n": n,
            "success": wins / n,
            "ci95": [round(lo, 3), round(hi, 3)],
            "mean_raw_reward": round(statistics.fmean(rewards), 3),
            "steps_per_episode": round(steps / n, 2),
            "seconds": round(time.perf_counter() - start, 1),
        }
        print(f"  {name:28s} {wins:3d}/{n} [{lo:.2f}, {hi:.2f}]  steps/ep {steps / n:.1f}", flush=True)
    return out


def speed(n: int) -> dict[str, Any]:
    """Resets/s and steps/s (time inside reset/step only) of random episodes on :data:`SPEED_TASKS`."""
    per_task = {}
    env = MiniWoBEnv(task=list(SPEED_TASKS))
    env.reset(seed=0)  # start Chromium outside the timing
    agent = RandomWebAgent()
    for name in SPEED_TASKS:
        reset_s, step_s, steps = [], 0.0, 0
        for seed in range(1, n + 1):
            t = time.perf_counter()
            task = env.make_task(name, seed)
            obs, _ = env.reset(options={"task": task})
            reset_s.append(time.perf_counter() - t)
            ctx_messages = [Message("user", obs)]
            for turn in range(12):
                action = agent.act([Context(tuple(ctx_messages), turn=turn, episode_seed=seed)])[0].text
                t = time.perf_counter()
                obs, _, terminated, _, _ = env.step(action)
                step_s += time.perf_counter() - t
                steps += 1
                ctx_messages += [Message("assistant", action), Message("user", obs)]
                if terminated:
                    break
        per_task[name] = {
            "resets_per_s": round(1 / statistics.median(reset_s), 2),
            "steps_per_s": round(steps / step_s, 2),
            "steps": steps,
        }
        rates = per_task[name]
        print(f"  {name:20s} resets/s {rates['resets_per_s']:6.2f}  steps/s {rates['steps_per_s']:6.2f}", flush=True)
    env.close()
    return {
        "per_task": per_task,
        "median_resets_per_s": statistics.median(v["resets_per_s"] for v in per_task.values()),
        "median_steps_per_s": statistics.median(v["steps_per_s"] for v in per_task.values()),
    }


def check_all() -> dict[str, Any]:
    """Full check_env (seeds 0-2, cross-process included) on every curated task."""
    out = {}
    for name in sorted(CURATED):
        env = gymnasium.make("turnkit/MiniWoB-v0", task=name)
        policy = None if name in SOLVERS else random_reply
        start = time.perf_counter()
        report = turnkit.check_env(env, seeds=(0, 1, 2), raise_on_failure=False, policy=policy)
        env.close()
        out[name] = {"ok": report.ok, "seconds": round(time.perf_counter() - start, 1)}
        if not report.ok:
            out[name]["report"] = str(report)
        print(f"  {name:28s} {'passed' if report.ok else 'FAILED'} in {out[name]['seconds']} s", flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected measurements and print (and optionally save) the results."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--solvers", type=int, default=0, help="episodes per solved task")
    p.add_argument("--random", type=int, default=0, help="episodes per curated task for the random baseline")
    p.add_argument("--speed", type=int, default=0, help="random episodes per task for the speed measurement")
    p.add_argument("--check", action="store_true", help="run check_env on every curated task")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    args = p.parse_args(argv)
    results: dict[str, Any] = {"argv": sys.argv[1:]}
    env = MiniWoBEnv()
    try:
        if args.solvers:
            print(f"scripted solvers, {args.solvers} page seeds each:")
            results["solvers"] = success_rates(env, OracleAgent(), sorted(SOLVERS), args.solvers)
        if args.random:
            print(f"random-action baseline, {args.random} page seeds each:")
            results["random"] = success_rates(env, RandomWebAgent(), sorted(CURATED), args.random)
    finally:
        env.close()
    if args.speed:
        print(f"speed, {args.speed} random episodes per task:")
        results["speed"] = speed(args.speed)
    if args.check:
        print("check_env on every curated task:")
        results["check"] = check_all()
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    failed = [k for k, v in results.get("check", {}).items() if not v["ok"]]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
