"""Throughput of turnkit/CollabDesign-v0: episodes per second and the share of time spent rendering.

Configurations, run side by side in interleaved trials (ABCABC...) on one warm browser; medians over trials:

* ``oracle``: the privileged oracle answers at once with the reference HTML; its render is a cache hit
  (the reference was rendered to score it), so an episode costs one browser render.
* ``oracle, no cache``: the same with ``RenderCache(0)``: two renders per episode (the baseline of the cache).
* ``follower``: the scripted feedback follower (10 turns, one new render per turn plus the reference).

Browser start-up (one per env, paid once) is measured separately. Every trial uses new seeds, so no design
is rendered twice across trials.

Run:  python benchmarks/bench_collab_design.py --trials 5 --episodes 20
      (or ``turnkit bench collab_design -- --trials 5``)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import gymnasium
from gymnasium.envs.registration import register

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.browser import Browser, RenderCache
from turnkit.envs.collab_design.baselines import FeedbackFollower

ENV_ID = "turnkit/CollabDesign-v0"
if ENV_ID not in gymnasium.registry:  # until turnkit/envs/registration.py registers it
    register(id=ENV_ID, entry_point="turnkit.envs.collab_design.env:CollabDesignEnv", max_episode_steps=10)


def run(browser: Browser, agent: object, cache_entries: int, seeds: range) -> dict[str, float]:
    """Play one episode per seed; return episodes/s, render share, renders and steps."""
    browser.cache = RenderCache(cache_entries)
    env = gymnasium.make(ENV_ID, browser=browser)
    renders0, seconds0 = browser.renders, browser.render_seconds
    steps = 0
    start = time.perf_counter()
    for seed in seeds:
        traj = turnkit.collect(env, agent, seed=seed)  # type: ignore[arg-type]
        if traj.error is not None:
            raise RuntimeError(f"seed {seed}: {traj.error}")
        steps += len(traj.steps)
    wall = time.perf_counter() - start
    renders, render_s = browser.renders - renders0, browser.render_seconds - seconds0
    return {
        "episodes_per_s": len(seeds) / wall,
        "render_share": render_s / wall,
        "ms_per_render": 1000 * render_s / max(renders, 1),
        "renders_per_episode": renders / len(seeds),
        "steps_per_episode": steps / len(seeds),
    }


def startup_seconds(trials: int) -> float:
    """Median wall time from ``Browser()`` to the first finished render (a cold start)."""
    times = []
    for _ in range(trials):
        start = time.perf_counter()
        with Browser(cache=RenderCache(0)) as b:
            b.render("<p>warm</p>")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=20, help="episodes per configuration and trial")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args([a for a in (argv or []) if a != "--"])

    configs = {
        "oracle": (OracleAgent(), 64),
        "oracle, no cache": (OracleAgent(), 0),
        "follower (10 turns)": (FeedbackFollower(), 64),
    }
    results: dict[str, list[dict[str, float]]] = {k: [] for k in configs}
    browser = Browser()
    browser.start()
    try:
        next_seed = 0
        for _ in range(args.trials):
            for name, (agent, entries) in configs.items():
                n = args.episodes if not name.startswith("follower") else max(2, args.episodes // 5)
                results[name].append(run(browser, agent, entries, range(next_seed, next_seed + n)))
                next_seed += n
    finally:
        browser.close()
    rows = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in results.items()}
    base = rows["oracle, no cache"]["episodes_per_s"]
    for row in rows.values():
        row["speedup_vs_no_cache"] = row["episodes_per_s"] / base
    startup = startup_seconds(max(3, args.trials))
    if args.json:
        print(json.dumps({"configs": rows, "browser_startup_s": startup}, indent=2))
        return 0
    header = ("configuration", "episodes/s", "render share", "ms/render", "renders/ep", "vs no cache")
    print(f"{header[0]:<22}" + "".join(f"{h:>13}" for h in header[1:]))
    for name, r in rows.items():
        print(
            f"{name:<22}{r['episodes_per_s']:>13.2f}{100 * r['render_share']:>12.0f}%{r['ms_per_render']:>13.0f}"
            f"{r['renders_per_episode']:>13.1f}{r['speedup_vs_no_cache']:>12.2f}x"
        )
    print(f"browser cold start (median of {max(3, args.trials)}): {startup:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
