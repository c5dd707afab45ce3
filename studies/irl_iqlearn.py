"""IQLearn vs MLE on MathEpisodes demonstrations: success, diversity, and whether extracted rewards track success.

The embedded default's recipe (a fresh 0.46M-parameter tiny model, 400 steps of batch 32 on oracle demonstrations
of difficulty-1 MathEpisodes) with the loss swapped for IQLearn's TD-regularised MLE at ``λ ∈ {0, 0.1, 1}``
(``λ = 0`` *is* the recipe's SFT), on the full 2,000 demonstration episodes and on a small-data regime of 100.
Per run, on held-out seeds from 10**9 (never demonstrated):

* greedy and sampled (T = 1) success over ``--eval`` episodes;
* diversity of sampled first answers: ``--prompts`` tasks x ``--samples`` answers each, Self-BLEU within a
  task (lower = more diverse) and distinct-1/2 over all answers;
* Spearman's ρ between each sampled episode's summed extracted reward (``turnkit.critics.iqlearn``) and its
  success (the paper: it rises with λ), and between the first answer's reward and its correctness
  (``spearman_first``: one turn each, so the number of retries cannot drive it).

Run (one process per float path; about 45 minutes each on one core):
    python studies/irl_iqlearn.py --out studies/results/irl_iqlearn/native.json
    ATEN_CPU_CAPABILITY=default python studies/irl_iqlearn.py --out studies/results/irl_iqlearn/aten_default.json
    python studies/irl_iqlearn.py --merge studies/results/irl_iqlearn/native.json \
        studies/results/irl_iqlearn/aten_default.json
    python studies/irl_iqlearn.py --check          # a few minutes: does the documented ordering hold here?
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from common.provenance import write_result
from common.text_metrics import distinct_n, self_bleu, spearman

import turnkit  # noqa: F401  (registers the built-in envs)
from turnkit.stats import mean_ci

MATH = "turnkit/MathEpisodes-v0"
ENV_KWARGS = {"difficulty": 1}
HELD_OUT_SEED = 10**9
REGIMES = {"full": 2000, "small": 100}
"""Demonstration episodes of each data regime."""
CLAIMS = {
    "diversity rises with λ: Self-BLEU(λ=0) > Self-BLEU(λ=1)": ("self_bleu", 0.0, 1.0),
    "the episode's extracted reward tracks success better with λ: ρ(λ=1) > ρ(λ=0)": ("spearman", 1.0, 0.0),
    "the first answer's extracted reward tracks its correctness worse with λ: ρ(λ=0) > ρ(λ=1)": (
        "spearman_first",
        0.0,
        1.0,
    ),
    "λ = 1 costs greedy success: success(λ=0) > success(λ=1)": ("greedy_success", 0.0, 1.0),
    "the first answer's extracted reward tracks its correctness better at λ = 0.1: ρ(λ=0.1) > ρ(λ=0)": (
        "spearman_first",
        0.1,
        0.0,
    ),
}
"""Orderings ``--merge`` and ``--check`` test: name -> (metric, the λ with the larger value, the λ with the smaller)."""


def play(policy: Any, seeds: list[int], *, temperature: float, max_turns: int | None = None) -> list[Any]:
    """Play one episode per seed, batched 64 at a time; the trajectories in seed order."""
    import gymnasium

    from turnkit.rollout.collect import collect_batch

    envs = [gymnasium.make(MATH, **ENV_KWARGS) for _ in range(min(64, len(seeds)))]
    agent = policy.with_sampling(temperature=temperature, seed=12345)
    trajs: list[Any] = []
    for lo in range(0, len(seeds), len(envs)):
        chunk = seeds[lo : lo + len(envs)]
        trajs.extend(collect_batch(envs[: len(chunk)], agent, chunk, max_turns=max_turns))
    for env in envs:
        env.close()
    return trajs


def measure(policy: Any, gamma: float, args: argparse.Namespace) -> dict[str, float]:
    """Held-out sampled success, reward/success Spearman and diversity of one trained policy."""
    from turnkit.critics.base import score_all
    from turnkit.critics.iqlearn import IQLearnReward

    seeds = list(range(HELD_OUT_SEED, HELD_OUT_SEED + args.eval))
    sampled = play(policy, seeds, temperature=1.0)
    clean = [t for t in sampled if t.error is None]
    scored = score_all(IQLearnReward(policy, gamma=gamma), clean)
    returns = [r.total for r in scored]
    first = [r.step_rewards[0] for r in scored]
    wins = [float(t.success) for t in clean]
    solved_first = [float(t.steps[0].reward > 0) for t in clean]  # MathEpisodes pays 1 for a correct answer
    prompts = list(range(HELD_OUT_SEED, HELD_OUT_SEED + args.prompts))
    answers = play(policy, [s for s in prompts for _ in range(args.samples)], temperature=1.0, max_turns=1)
    texts = [t.steps[0].action.text.strip() or "<empty>" for t in answers if t.steps]
    groups = [texts[i : i + args.samples] for i in range(0, len(texts), args.samples)]
    return {
        "sampled_success": sum(wins) / max(len(wins), 1),
        "spearman": spearman(returns, wins) if len(set(wins)) > 1 else math.nan,
        "spearman_first": spearman(first, solved_first) if len(set(solved_first)) > 1 else math.nan,
        "self_bleu": sum(self_bleu(g) for g in groups) / len(groups),
        "distinct_1": distinct_n(texts, 1),
        "distinct_2": distinct_n(texts, 2),
        "sampled_errors": float(len(sampled) - len(clean)),
    }


def run_one(regime: str, lam: float, seed: int, rows: list[Any], args: argparse.Namespace) -> dict[str, Any]:
    """Train one policy from scratch with IQLearn at ``lam`` and measure it."""
    from turnkit.train.iqlearn import IQLearnConfig, build_start_policy, train_iqlearn

    start = time.time()
    with tempfile.TemporaryDirectory() as out:
        cfg = IQLearnConfig(
            model="scratch",
            lam=lam,
            gamma=args.gamma,
            seed=seed,
            steps=args.steps,
            demo_episodes=REGIMES[regime],
            eval_episodes=args.eval,
            eval_seed=HELD_OUT_SEED,
            checkpoint_every=0,
            out_dir=out,
        )
        result = train_iqlearn(cfg, policy=build_start_policy(cfg), rows=rows, progress=False)
    last = [r for r in result.history if "nll" in r][-1]
    record = {
        "regime": regime,
        "lam": lam,
        "seed": seed,
        "greedy_success": result.final_eval["eval_success"] if result.final_eval else math.nan,
        "train_nll": last["nll"],
        "train_td_sq": last["td_sq"],
        **measure(result.policy, args.gamma, args),
        "run_s": round(time.time() - start, 1),
    }
    print(json.dumps(record), flush=True)
    return record


def study(args: argparse.Namespace) -> dict[str, Any]:
    """Every (regime, λ, seed) run, written after each one so a stopped study keeps what it measured."""
    import torch

    from turnkit.models.embedded import DEFAULT_RECIPE, build_tiny_tokenizer_for
    from turnkit.rollout.demos import collect_demos, demo_rows

    torch.set_num_threads(args.threads)
    started = time.time()
    tokenizer = build_tiny_tokenizer_for(DEFAULT_RECIPE)
    runs: list[dict[str, Any]] = []
    for regime in args.regimes:
        demos = collect_demos(MATH, episodes=REGIMES[regime], seed=0, env_kwargs=ENV_KWARGS)
        rows = demo_rows(demos.trajectories, tokenizer)
        for seed in args.seeds:
            for lam in args.lams:
                runs.append(run_one(regime, lam, seed, rows, args))
                if args.out:
                    write_result(
                        args.out, {"settings": vars(args) | {"out": str(args.out)}, "runs": runs}, started=started
                    )
    return {"runs": runs}


def summarize(runs: list[dict[str, Any]], label: str) -> list[str]:
    """Markdown rows: mean and 95% t-interval over seeds per (regime, λ), and each metric's paired λ − 0 delta."""
    metrics = (
        "greedy_success",
        "sampled_success",
        "spearman",
        "spearman_first",
        "self_bleu",
        "distinct_2",
        "train_nll",
    )
    lines = ["| path | regime | λ | seeds | " + " | ".join(metrics) + " |", "|---" * (4 + len(metrics)) + "|"]
    for regime in dict.fromkeys(r["regime"] for r in runs):
        for lam in sorted({r["lam"] for r in runs if r["regime"] == regime}):
            sel = [r for r in runs if r["regime"] == regime and r["lam"] == lam]
            cells = []
            for m in metrics:
                values = [r[m] for r in sel if not math.isnan(r[m])]
                if not values:
                    cells.append("n/a")
                    continue
                mean, lo, hi = mean_ci(values)
                cells.append(f"{mean:.3f} [{lo:.3f}, {hi:.3f}]")
            lines.append(f"| {label} | {regime} | {lam:g} | {len(sel)} | " + " | ".join(cells) + " |")
    return lines


def paired_deltas(runs: list[dict[str, Any]], metric: str, high: float, low: float) -> dict[str, list[float]]:
    """Per regime, the per-seed differences ``metric(λ=high) − metric(λ=low)`` (positive when the claim holds)."""
    out: dict[str, list[float]] = {}
    for regime in dict.fromkeys(r["regime"] for r in runs):
        by = {(r["lam"], r["seed"]): r[metric] for r in runs if r["regime"] == regime}
        deltas = [by[(high, s)] - by[(low, s)] for (lam, s) in by if lam == high and (low, s) in by]
        out[regime] = [d for d in deltas if not math.isnan(d)]
    return out


def merge(paths: list[str]) -> None:
    """Print the table per float path (files of one path are pooled) and whether each claim holds on every path."""
    pooled: dict[str, dict[str, Any]] = {}
    for p in paths:
        data = json.loads(Path(p).read_text())
        m = data["machine"]
        entry = pooled.setdefault(m["float_path"], {"runs": [], "sources": []})
        entry["runs"].extend(data["runs"])
        entry["sources"].append(f"{m['cpu_model']}, {m['threads']} thread(s): {m['command']}")
    for path, entry in pooled.items():
        print(f"\n{path}:\n  " + "\n  ".join(entry["sources"]))
        print("\n".join(summarize(entry["runs"], path)))
    for name, (metric, high, low) in CLAIMS.items():
        verdicts: dict[str, list[bool]] = {}
        for path, entry in pooled.items():
            for regime, deltas in paired_deltas(entry["runs"], metric, high, low).items():
                if len(deltas) < 2:
                    continue
                mean, lo, hi = mean_ci(deltas)
                verdicts.setdefault(regime, []).append(lo > 0)
                print(f"{name} [{path}, {regime}, {len(deltas)} seeds]: {mean:+.3f} [{lo:+.3f}, {hi:+.3f}]")
        for regime, held in verdicts.items():
            word = "holds on every path" if all(held) else "does NOT hold on every path"
            print(f"  -> {regime} data: {word} ({sum(held)} of {len(held)})")


def check(args: argparse.Namespace) -> None:
    """Reduced re-run (full data, λ 0 and 1, two seeds, 100 held-out episodes): do the documented orderings hold?"""
    args.regimes, args.lams, args.seeds = ["full"], [0.0, 1.0], [0, 1]
    args.eval, args.prompts = 100, 10
    runs = study(args)["runs"]
    print("\n".join(summarize(runs, "this machine")))
    for name, (metric, high, low) in CLAIMS.items():
        deltas = paired_deltas(runs, metric, high, low)["full"]
        if not deltas:
            continue  # a claim about a λ the check does not train
        ok = all(d > 0 for d in deltas)
        print(f"{name}: per-seed deltas {[round(d, 3) for d in deltas]} -> {'holds' if ok else 'does not hold'} here")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regimes", nargs="+", default=list(REGIMES), choices=list(REGIMES))
    parser.add_argument("--lams", nargs="+", type=float, default=[0.0, 0.1, 1.0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--eval", type=int, default=200, help="held-out episodes (greedy and sampled)")
    parser.add_argument("--prompts", type=int, default=25, help="tasks for the diversity samples")
    parser.add_argument("--samples", type=int, default=8, help="sampled first answers per task")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="result JSON (rewritten after every run)")
    parser.add_argument("--merge", nargs="+", default=None, help="result files to tabulate")
    parser.add_argument("--check", action="store_true", help="quick re-test of the documented orderings")
    args = parser.parse_args()
    if args.merge:
        merge(args.merge)
    elif args.check:
        check(args)
    else:
        study(args)


if __name__ == "__main__":
    main()
