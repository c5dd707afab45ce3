"""Throughput of turnkit/CollabDesign-v0: episodes per second and the share of time spent rendering.

Configurations, run side by side in interleaved trials (ABCABC...) on one warm browser; medians over trials:

* ``oracle``: the privileged oracle answers at once with the reference HTML; its render is a cache hit
  (the reference was rendered to score it), so an episode costs one browser render.
* ``oracle, no cache``: the same with ``RenderCache(0)``: two renders per episode (the baseline of the cache).
* ``follower``: the scripted feedback follower (10 turns, one new render per turn plus the reference).

Browser start-up (one per env, paid once) is measured separately. Every trial uses new seeds, so no design
is rendered twice across trials.

``--group G`` compares, for oracle ``collect_group`` calls of G envs (the env and its clones are made, run and
closed each time, as a training loop does), one private Chromium per env (``share_browser=False``) against the
pooled shared browser (the default): episodes/s (median of ``--trials`` interleaved trials, and the ratio),
the share of wall time inside ``Browser.render`` (cold starts included) and browsers started per group.

Run:  python benchmarks/bench_collab_design.py --trials 5 --episodes 20
      python benchmarks/bench_collab_design.py --group 8 --trials 7 [--no-cache]
      (or ``turnkit bench collab_design -- --trials 5``)

The agents' rewards and the metric's calibration are a study: ``studies/collab_design_quality.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import gymnasium
from gymnasium.envs.registration import register

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.browser import Browser, RenderCache, launched_profiles, shared_cache
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


def group_round(shared: bool, group_size: int, seed: int) -> dict[str, float]:
    """One ``collect_group`` of the oracle on a fresh env (clones included), closed afterwards; timings."""
    envs: list[gymnasium.Env] = []

    def factory() -> gymnasium.Env:
        env = gymnasium.make(ENV_ID, share_browser=shared)
        envs.append(env)
        return env

    launched = len(launched_profiles())
    start = time.perf_counter()
    trajs = turnkit.collect_group(factory, OracleAgent(), seed=seed, group_size=group_size)
    browsers = {id(e.unwrapped.browser): e.unwrapped.browser for e in envs}.values()
    render_s = sum(b.render_seconds for b in browsers)
    for env in envs:
        env.close()
    wall = time.perf_counter() - start
    if any(t.error is not None or not t.success for t in trajs):
        raise RuntimeError(f"seed {seed}: an oracle episode failed: {[t.error for t in trajs]}")
    return {
        "episodes_per_s": group_size / wall,
        "render_share": render_s / wall,
        "browsers_started": float(len(launched_profiles()) - launched),
        "seconds_per_group": wall,
    }


def groups(trials: int, group_size: int, as_json: bool, cache: bool) -> int:
    """Separate browsers vs one shared browser for oracle groups, interleaved trials, medians and ratio.

    With ``cache=False`` the process-wide render cache is switched off, so that every env renders the reference
    and its answer itself, as the envs of a group do when their agents write different pages (with the cache,
    an oracle group renders one page in total and only the first env ever starts a browser).
    """
    if not cache:
        shared_cache().max_entries = 0
        shared_cache().clear()
    rows: dict[str, list[dict[str, float]]] = {"separate browsers": [], "shared browser": []}
    seed = 50_000  # fresh designs: every group renders its reference once
    for _ in range(trials):
        for name in rows:
            rows[name].append(group_round(name == "shared browser", group_size, seed))
            seed += 1
    med = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in rows.items()}
    ratio = med["shared browser"]["episodes_per_s"] / med["separate browsers"]["episodes_per_s"]
    ratios = [
        s["episodes_per_s"] / p["episodes_per_s"]
        for s, p in zip(rows["shared browser"], rows["separate browsers"], strict=True)
    ]
    if as_json:
        print(
            json.dumps(
                {
                    "group_size": group_size,
                    "trials": trials,
                    "render_cache": cache,
                    "medians": med,
                    "speedup": ratio,
                    "per_trial_speedups": ratios,
                },
                indent=2,
            )
        )
        return 0
    what = "render cache on" if cache else "render cache off"
    print(f"oracle, collect_group of {group_size} (env + clones made, run, closed; {what}), median of {trials} trials")
    print(f"{'configuration':<20}{'episodes/s':>12}{'s/group':>10}{'render share':>14}{'browsers':>10}")
    for name, r in med.items():
        print(
            f"{name:<20}{r['episodes_per_s']:>12.2f}{r['seconds_per_group']:>10.2f}{100 * r['render_share']:>13.0f}%"
            f"{r['browsers_started']:>10.0f}"
        )
    print(f"shared / separate: {ratio:.2f}x (per-trial ratios {min(ratios):.2f}-{max(ratios):.2f})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=20, help="episodes per configuration and trial")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--group", type=int, default=0, metavar="G", help="shared vs separate browsers, groups of G")
    parser.add_argument("--no-cache", action="store_true", help="--group with the render cache switched off")
    args = parser.parse_args([a for a in (sys.argv[1:] if argv is None else argv) if a != "--"])
    if args.group:
        return groups(args.trials, args.group, args.json, cache=not args.no_cache)

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
