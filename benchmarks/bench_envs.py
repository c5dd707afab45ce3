"""Env reset/step overhead of the built-in text envs, as a ratio to a bare Gymnasium CartPole loop.

A zero-cost scripted "agent" (a fixed string) drives each env, so the numbers are the env's own cost.
Trials interleave the envs and the CartPole baseline (ABAB...) so that machine noise hits both alike;
we report medians over trials.

Run:  python benchmarks/bench_envs.py --trials 7 --episodes 200
      (or ``turnkit bench envs -- --trials 7``)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import gymnasium

import turnkit  # noqa: F401  (registers envs)

SCRIPTED_ACTIONS = {
    "turnkit/MathEpisodes-v0": "ANSWER: 0.5",
    "turnkit/PhysicsPrediction-v0": "frame 3: x=1.00 y=1.00",
}


def time_episodes(env: gymnasium.Env, action, episodes: int, seed0: int) -> tuple[float, float, int]:
    """Seconds spent in reset and in step over ``episodes`` episodes, and the number of steps."""
    t_reset = t_step = 0.0
    steps = 0
    for i in range(episodes):
        t0 = time.perf_counter()
        env.reset(seed=seed0 + i)
        t1 = time.perf_counter()
        t_reset += t1 - t0
        done = False
        while not done:
            a = action if not callable(action) else action()
            t0 = time.perf_counter()
            _, _, term, trunc, _ = env.step(a)
            t_step += time.perf_counter() - t0
            steps += 1
            done = term or trunc
    return t_reset, t_step, steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args([a for a in argv if a != "--"])

    base = gymnasium.make("CartPole-v1")
    base_action = 0  # zero-cost policy for the baseline too
    results: dict[str, dict[str, list[float]]] = {k: {"reset_us": [], "step_us": []} for k in SCRIPTED_ACTIONS}
    baseline: dict[str, list[float]] = {"reset_us": [], "step_us": []}
    envs = {k: gymnasium.make(k) for k in SCRIPTED_ACTIONS}
    for trial in range(args.trials):
        r, s, n = time_episodes(base, base_action, args.episodes, trial * args.episodes)
        baseline["reset_us"].append(1e6 * r / args.episodes)
        baseline["step_us"].append(1e6 * s / n)
        for env_id, env in envs.items():
            r, s, n = time_episodes(env, SCRIPTED_ACTIONS[env_id], args.episodes, trial * args.episodes)
            results[env_id]["reset_us"].append(1e6 * r / args.episodes)
            results[env_id]["step_us"].append(1e6 * s / n)

    med = statistics.median
    rows = {"CartPole-v1 (baseline)": {k: med(v) for k, v in baseline.items()}}
    for env_id, res in results.items():
        rows[env_id] = {k: med(v) for k, v in res.items()}
    for row in rows.values():
        row["reset_ratio"] = row["reset_us"] / rows["CartPole-v1 (baseline)"]["reset_us"]
        row["step_ratio"] = row["step_us"] / rows["CartPole-v1 (baseline)"]["step_us"]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"median over {args.trials} trials x {args.episodes} episodes (µs per call)")
    print(f"{'env':<32} {'reset µs':>10} {'step µs':>10} {'reset ×':>9} {'step ×':>9}")
    for name, row in rows.items():
        print(
            f"{name:<32} {row['reset_us']:>10.1f} {row['step_us']:>10.1f} "
            f"{row['reset_ratio']:>9.1f} {row['step_ratio']:>9.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
