"""One-step-off (async) GRPO vs the synchronous loop on the quickstart task, at equal steps.

    python studies/async_quickstart.py --seed 0 --out studies/results/async_quickstart/avx512_s0.json   # ~6 min
    python studies/async_quickstart.py --summarize studies/results/async_quickstart/*.json
    python studies/async_quickstart.py --check   # seeds 0 and 1 (~10 min): is async still no worse here?

For one training seed, the quickstart (``turnkit quickstart``: the embedded tiny SFT policy, 300 held-out
MathEpisodes, the quickstart's GRPO recipe) runs twice back to back from the same cached start policy: the
synchronous loop, then ``rollout.async=true`` (``rollout.max_staleness=1``: a background thread generates step t+1's
batch with the step-(t−1) weights while the learner updates). Both use one torch thread (the quickstart's
default), so the synchronous run uses one core and the async one can use two: the measured speed-up is what a
user of ``--set rollout.async=true`` on a 2-core machine gets. Recorded per mode: held-out success before and after
(greedy and sampled at T = 1) and the wall time of the training loop alone (``train_wall``).

``--summarize`` merges result files per float path: async − sync success after training (paired by seed,
Student-t 95% interval over seeds) and the median train-time ratio sync / async. The claim "async is no worse"
holds on a path if the interval's lower end is above −0.05 (the quickstart's between-seed spread is ±0.05).
``--check`` runs seeds 0 and 1 at the recipe's steps and prints whether the paired mean of async − sync stays above
−0.05 for greedy and sampled success (two seeds give no useful interval).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from common.provenance import write_result
from common.tinymath import by_float_path, interval_line

from turnkit.stats import mean_ci
from turnkit.train.quickstart import QuickstartConfig, run_quickstart

MARGIN = 0.05
"""How far below the synchronous loop async may land (lower end of the interval) and still count as no worse."""
CHECK_SEEDS = (0, 1)
"""``--check``: the training seeds run (about 5 minutes each on an idle 2-core box)."""


def run_pair(seed: int, runs: Path, steps: int | None, threads: int) -> dict[str, Any]:
    """The quickstart with ``seed``, synchronous then async; each mode's summary numbers.

    Both modes first run 2 untimed steps (imports, caches, the policy's first forward passes), so the first
    timed run does not pay the process's warm-up.
    """
    modes = (("sync", {}), ("async", {"rollout": {"async_rollout": True}}))
    for mode, overrides in modes:
        warm = QuickstartConfig(out_dir=str(runs / f"warmup-{mode}"), seed=seed, steps=2, eval_episodes=10,
                                threads=threads, train_overrides=overrides)  # fmt: skip
        run_quickstart(warm, progress=False, verbose=False)
    out: dict[str, Any] = {}
    for mode, overrides in modes:
        qcfg = QuickstartConfig(
            out_dir=str(runs / f"{mode}-s{seed}"), seed=seed, steps=steps, threads=threads, train_overrides=overrides
        )
        summary = run_quickstart(qcfg, progress=False, verbose=False)
        out[mode] = {
            "greedy": {"before": summary["before"]["success"], "after": summary["after"]["success"]},
            "sampled": {
                "before": summary["sampled"]["before"]["success"],
                "after": summary["sampled"]["after"]["success"],
            },
            "train_wall_s": summary["time_s"]["train_wall"],
            "wall_s": summary["wall_s"],
        }
        print(f"seed {seed} {mode}: {json.dumps(out[mode])}", flush=True)
    return out


def summarize(runs: list[dict[str, Any]]) -> list[str]:
    """Per float path: async − sync after training (greedy, sampled), speed-up, verdict.

    Example:
        >>> mk = lambda seed, s, a, ws, wa: {"args": {"seed": seed}, "machine": {"float_path": "X"}, "pair": {
        ...     "sync": {"greedy": {"after": s}, "sampled": {"after": s}, "train_wall_s": ws},
        ...     "async": {"greedy": {"after": a}, "sampled": {"after": a}, "train_wall_s": wa}}}
        >>> print("\\n".join(summarize([mk(0, 0.5, 0.5, 100, 60), mk(1, 0.6, 0.62, 100, 70)])))
        X: seeds 0, 1
          async - sync greedy: +0.010 [-0.117, +0.137]  (per seed +0.000, +0.020)
          async - sync sampled: +0.010 [-0.117, +0.137]  (per seed +0.000, +0.020)
          train time sync / async: median 1.55 (per seed 1.67, 1.43)
          no worse (lower end > -0.05): greedy no, sampled no
    """
    lines = []
    for path, group in by_float_path(runs).items():
        lines.append(f"{path}: seeds {', '.join(str(r['args']['seed']) for r in group)}")
        verdicts = []
        for decoding in ("greedy", "sampled"):
            diffs = [r["pair"]["async"][decoding]["after"] - r["pair"]["sync"][decoding]["after"] for r in group]
            lines.append("  " + interval_line(f"async - sync {decoding}", diffs))
            verdicts.append(f"{decoding} {'yes' if mean_ci(diffs)[1] > -MARGIN else 'no'}")
        ratios = [r["pair"]["sync"]["train_wall_s"] / r["pair"]["async"]["train_wall_s"] for r in group]
        per = ", ".join(f"{x:.2f}" for x in ratios)
        lines.append(f"  train time sync / async: median {statistics.median(ratios):.2f} (per seed {per})")
        lines.append(f"  no worse (lower end > -{MARGIN}): {', '.join(verdicts)}")
    return lines


def check_lines(pairs: list[dict[str, Any]]) -> list[str]:
    """The documented finding at check size: async is no worse than sync, as paired means over the seeds run.

    Example:
        >>> pair = lambda s, a: {d: {"after": x} for d, x in (("greedy", s), ("sampled", a))}
        >>> print("\\n".join(check_lines([{"sync": pair(0.8, 0.8), "async": pair(0.82, 0.70)}])))
        async - sync greedy: +0.020 (paired mean of 1 seeds); no drop by > 0.05: holds here
        async - sync sampled: -0.100 (paired mean of 1 seeds); no drop by > 0.05: does NOT hold here
    """
    lines = []
    for decoding in ("greedy", "sampled"):
        diff = statistics.fmean(p["async"][decoding]["after"] - p["sync"][decoding]["after"] for p in pairs)
        verdict = "holds here" if diff > -MARGIN else "does NOT hold here"
        mean = f"{diff:+.3f} (paired mean of {len(pairs)} seeds)"
        lines.append(f"async - sync {decoding}: {mean}; no drop by > {MARGIN}: {verdict}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=None, help="RL steps (default: the quickstart recipe's)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=Path, default=Path("runs/async_quickstart"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--summarize", nargs="+", type=Path, help="result files to merge (no runs)")
    parser.add_argument("--check", action="store_true", help="seeds 0 and 1: does 'no worse' hold on this machine?")
    args = parser.parse_args()
    if args.summarize:
        print("\n".join(summarize([json.loads(p.read_text()) for p in args.summarize])))
        return
    if args.check:
        started = int(time.time())
        pairs = [
            run_pair(seed, args.runs / f"check-s{seed}-{started}", args.steps, args.threads) for seed in CHECK_SEEDS
        ]
        print("\n".join(check_lines(pairs)))
        return
    started = time.time()
    pair = run_pair(args.seed, args.runs / f"s{args.seed}-{int(started)}", args.steps, args.threads)
    result = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "pair": pair}
    if args.out:
        write_result(args.out, result, started=started)


if __name__ == "__main__":
    main()
