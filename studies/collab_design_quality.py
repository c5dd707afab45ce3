"""CollabDesign-v0: what the reward says about scripted agents, and how it ranks perturbed copies of a design.

Two measurements on real Chromium renders (one shared browser):

* **baselines**, over seeds ``0 .. tasks-1`` per split: final reward (with its visual and text parts, mean and
  95% CI, ``turnkit.stats.mean_ci``), success rate (reward >= 0.9) and turns of the privileged oracle, of the
  scripted feedback follower (10 turns) and of its answer-at-once ablation;
* **calibration** (only when ``--splits`` includes ``id``): the reward of each of the first min(tasks, 20) ID
  reference pages against perturbed copies of itself (:mod:`turnkit.envs.collab_design.perturb`): median,
  min and max, and the median visual and text parts.

docs/envs/collab_design.md ("Reward", "Baselines") rests on these numbers. ``--json`` adds the machine record
(:func:`common.provenance.machine_record`) and the wall time (``machine``, ``wall_s``).

Run:  python studies/collab_design_quality.py --tasks 200 --splits id
      python studies/collab_design_quality.py --tasks 200 --splits id --json \
          > studies/results/collab_design_quality/quality_id.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import gymnasium
import numpy as np
from common.provenance import machine_record

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.browser import Browser
from turnkit.envs.collab_design.baselines import FeedbackFollower
from turnkit.envs.collab_design.generator import reference_html, sample_design
from turnkit.envs.collab_design.perturb import perturbations
from turnkit.envs.collab_design.score import DesignScore, design_score
from turnkit.stats import mean_ci

ENV_ID = "turnkit/CollabDesign-v0"


def baselines(
    browser: Browser, seeds: int, splits: tuple[str, ...] = ("id", "ood", "combo")
) -> dict[str, dict[str, float]]:
    """Mean final reward (with its visual and text parts), success rate and turns per (agent, split)."""
    agents = {
        "oracle": OracleAgent(),
        "answer at once": FeedbackFollower(answer_at_once=True),
        "feedback follower": FeedbackFollower(),
    }
    out = {}
    for split in splits:
        env = gymnasium.make(ENV_ID, split=split, browser=browser)
        for name, agent in agents.items():
            trajs = [turnkit.collect(env, agent, seed=s) for s in range(seeds)]  # type: ignore[arg-type]
            if any(t.error is not None for t in trajs):
                raise RuntimeError(f"{name} [{split}]: {next(t.error for t in trajs if t.error is not None)}")
            rewards = [t.total_reward for t in trajs]
            low, high = mean_ci(rewards)[1:]
            out[f"{name} [{split}]"] = {
                "n": len(trajs),
                "reward": statistics.mean(rewards),
                "reward_ci95": [low, high],
                "visual": statistics.mean(t.steps[-1].info["visual_similarity"] for t in trajs),
                "text": statistics.mean(t.steps[-1].info["text_similarity"] for t in trajs),
                "success": statistics.mean(float(t.success) for t in trajs),
                "turns": statistics.mean(len(t.steps) for t in trajs),
            }
    return out


def calibration(browser: Browser, seeds: int) -> dict[str, dict[str, float]]:
    """Median reward (and its visual and text parts) of ID reference pages vs perturbed copies of themselves."""
    scores: dict[str, list[DesignScore]] = {}
    for seed in range(seeds):
        d = sample_design(np.random.default_rng(seed), "id")
        ref = browser.render(reference_html(d).strip())
        for name, variant in perturbations(d).items():
            scores.setdefault(name, []).append(design_score(browser.render(variant), ref))
    return {
        k: {
            "reward": statistics.median(s.total for s in v),
            "min": min(s.total for s in v),
            "max": max(s.total for s in v),
            "visual": statistics.median(s.visual for s in v),
            "text": statistics.median(s.text for s in v),
        }
        for k, v in scores.items()
    }


def quality(seeds: int, as_json: bool, splits: tuple[str, ...]) -> int:
    """Print the baselines and the metric calibration (see the module docstring)."""
    started = time.time()
    with Browser() as browser:
        calib = calibration(browser, min(seeds, 20)) if "id" in splits else {}
        base = baselines(browser, seeds, splits)
    if as_json:
        record = {"seeds": seeds, "baselines": base, "calibration": calib, "machine": machine_record()}
        print(json.dumps({**record, "wall_s": round(time.time() - started, 1)}, indent=2))
        return 0
    print(f"{'agent [split]':<32}{'n':>5}{'reward':>8}{'95% CI':>16}{'visual':>8}{'text':>7}{'success':>9}{'turns':>7}")
    for name, r in base.items():
        ci = f"[{r['reward_ci95'][0]:.3f}, {r['reward_ci95'][1]:.3f}]"
        print(
            f"{name:<32}{r['n']:>5}{r['reward']:>8.3f}{ci:>16}{r['visual']:>8.3f}{r['text']:>7.3f}"
            f"{100 * r['success']:>8.0f}%{r['turns']:>7.1f}"
        )
    print(f"\n{'reference vs ... (median)':<32}{'reward':>8}{'min':>7}{'max':>7}{'visual':>8}{'text':>7}")
    for name, v in calib.items():
        print(f"{name:<32}{v['reward']:>8.3f}{v['min']:>7.3f}{v['max']:>7.3f}{v['visual']:>8.3f}{v['text']:>7.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="seeds (tasks) per split")
    parser.add_argument("--splits", default="id,ood,combo", help="comma-separated splits")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    return quality(args.tasks, args.json, tuple(args.splits.split(",")))


if __name__ == "__main__":
    raise SystemExit(main())
