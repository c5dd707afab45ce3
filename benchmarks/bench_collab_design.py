"""Throughput of turnkit/CollabDesign-v0: episodes per second and the share of time spent rendering.

Configurations, run side by side in interleaved trials (ABCABC...) on one warm browser; medians over trials:

* ``oracle``: the privileged oracle answers at once with the reference HTML; its render is a cache hit
  (the reference was rendered to score it), so an episode costs one browser render.
* ``oracle, no cache``: the same with ``RenderCache(0)``: two renders per episode (the baseline of the cache).
* ``follower``: the scripted feedback follower (10 turns, one new render per turn plus the reference).

Browser start-up (one per env, paid once) is measured separately. Every trial uses new seeds, so no design
is rendered twice across trials.

``--quality N`` instead measures what the numbers in ``docs/envs/collab_design.md`` rest on, over N seeds per
split: final similarity and success rate of the oracle, of the feedback follower and of its answer-at-once
ablation, and the similarity of the reference to perturbed copies of itself (the metric's calibration).

Run:  python benchmarks/bench_collab_design.py --trials 5 --episodes 20
      python benchmarks/bench_collab_design.py --quality 10
      (or ``turnkit bench collab_design -- --trials 5``)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time

import gymnasium
import numpy as np
from gymnasium.envs.registration import register

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.browser import Browser, RenderCache
from turnkit.envs.collab_design.baselines import FeedbackFollower
from turnkit.envs.collab_design.generator import ID_LAYOUTS, ID_PALETTES, reference_html, sample_design
from turnkit.envs.collab_design.palettes import PALETTES
from turnkit.envs.collab_design.similarity import visual_similarity

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


def baselines(browser: Browser, seeds: int) -> dict[str, dict[str, float]]:
    """Mean final similarity and success rate per (agent, split)."""
    agents = {
        "oracle": OracleAgent(),
        "answer at once": FeedbackFollower(answer_at_once=True),
        "feedback follower": FeedbackFollower(),
    }
    out = {}
    for split in ("id", "ood", "combo"):
        env = gymnasium.make(ENV_ID, split=split, browser=browser)
        for name, agent in agents.items():
            trajs = [turnkit.collect(env, agent, seed=s) for s in range(seeds)]  # type: ignore[arg-type]
            out[f"{name} [{split}]"] = {
                "similarity": statistics.mean(t.total_reward for t in trajs),
                "success": statistics.mean(float(t.success) for t in trajs),
                "turns": statistics.mean(len(t.steps) for t in trajs),
            }
    return out


def calibration(browser: Browser, seeds: int) -> dict[str, float]:
    """Median similarity of ID reference pages to perturbed copies of themselves."""
    scores: dict[str, list[float]] = {}
    for seed in range(seeds):
        d = sample_design(np.random.default_rng(seed), "id")
        html = reference_html(d)
        other = sample_design(np.random.default_rng(seed + 10_000), "id")
        layout = ID_LAYOUTS[(ID_LAYOUTS.index(d.layout) + 1) % len(ID_LAYOUTS)]
        n = 2 if layout == "sidebar" else 3 if layout in ("hero", "split") else len(d.items)
        variants = {
            "shifted by 2 px": html.replace("<body>", "<body style='transform:translate(2px,2px)'>"),
            "shifted by 4 px": html.replace("<body>", "<body style='transform:translate(4px,4px)'>"),
            "shifted by 16 px": html.replace("<body>", "<body style='transform:translate(16px,16px)'>"),
            "other wording": reference_html(
                dataclasses.replace(d, brand=other.brand, headline=other.headline, tagline=other.tagline)
            ),
            "other alignment": reference_html(
                dataclasses.replace(d, align="left" if d.align == "center" else "center")
            ),
            "heading 8 px bigger": reference_html(dataclasses.replace(d, heading_px=d.heading_px + 8)),
            "next palette": reference_html(
                dataclasses.replace(d, palette=ID_PALETTES[(ID_PALETTES.index(d.palette) + 1) % len(ID_PALETTES)])
            ),
            "blank page, same background": f"<body style='background:{PALETTES[d.palette]['bg']}'></body>",
            "next layout": reference_html(
                dataclasses.replace(d, layout=layout, items=(d.items * 3)[:n], descriptions=(d.descriptions * 3)[:n])
            ),
            "empty white page": "<body></body>",
        }
        ref = browser.render(html.strip()).pixels
        for name, variant in variants.items():
            scores.setdefault(name, []).append(visual_similarity(ref, browser.render(variant).pixels))
    return {k: statistics.median(v) for k, v in scores.items()}


def quality(seeds: int, as_json: bool) -> int:
    """Print the baselines and the metric calibration (see the module docstring)."""
    with Browser() as browser:
        base, calib = baselines(browser, seeds), calibration(browser, seeds)
    if as_json:
        print(json.dumps({"baselines": base, "calibration": calib}, indent=2))
        return 0
    print(f"{'agent [split]':<32}{'similarity':>11}{'success':>9}{'turns':>7}")
    for name, r in base.items():
        print(f"{name:<32}{r['similarity']:>11.3f}{100 * r['success']:>8.0f}%{r['turns']:>7.1f}")
    print(f"\n{'reference vs ...':<32}{'similarity (median)':>20}")
    for name, v in calib.items():
        print(f"{name:<32}{v:>20.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=20, help="episodes per configuration and trial")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--quality", type=int, default=0, metavar="N", help="baselines + calibration, N seeds")
    args = parser.parse_args([a for a in (sys.argv[1:] if argv is None else argv) if a != "--"])
    if args.quality:
        return quality(args.quality, args.json)

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
