"""Alignment from Demonstrations on MathEpisodes: best-of-N with each IRL reward model and the closed-form baseline.

Per seed, ``common.afd.run_afd`` (studies/common/afd.py): the embedded SFT policy and the same recipe stopped
at 40 SFT steps (the "initial" policy) sample 512 single-attempt training tasks; one reward model per data
choice (Init-SFT, Init-Demo, SFT-Demo: negatives vs positives) is trained from the SFT policy's weights as a
discriminator; then 16 SFT samples per held-out task (200 tasks from seed 3·10⁶) are ranked by each reward
model and by the closed-form ``log π_SFT − log π_init``, and the best of the first N (N = 1, 4, 16) is judged by
the env's success (the gold reward), against one independent SFT sample per task. The seed changes every sample, the
reward model's initialisation and its minibatches; the two policies are the same builds within a float path.

Besides the critics, every seed records two reference selectors over the same candidates: a plurality vote (the
most frequent reply) and the floor of an uninformative critic (a uniformly random distinct reply).

Run (one process per float path; the second builds its own policies under its float path in its own cache; name
the native file after the path it runs on, ``torch.backends.cpu.get_cpu_capability()``):
    python studies/irl_afd.py --out studies/results/irl_afd/avx512.json
    ATEN_CPU_CAPABILITY=default TURNKIT_CACHE=/tmp/turnkit-cache-default \\
        python studies/irl_afd.py --out studies/results/irl_afd/default.json
    python studies/irl_afd.py --merge studies/results/irl_afd/*.json
    python studies/irl_afd.py --check          # a few minutes: does the documented ordering hold here?
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from common.provenance import write_result

import turnkit  # noqa: F401  (registers the built-in envs)
from turnkit.stats import mean_ci

CRITICS = ("afd_init_sft", "afd_init_demo", "afd_sft_demo", "afd_closed_form")
CLAIMS = {
    "the closed form beats one sample at N=4": (("afd_closed_form", "4"), ("baseline", "1")),
    "the closed form beats the Init-SFT reward model at N=4": (("afd_closed_form", "4"), ("afd_init_sft", "4")),
    "one sample beats the Init-SFT reward model's best of 16": (("baseline", "1"), ("afd_init_sft", "16")),
    "Init-SFT beats SFT-Demo at N=4 (the paper's ordering of the two)": (("afd_init_sft", "4"), ("afd_sft_demo", "4")),
    "the Init-SFT reward model beats a random distinct reply at N=16": (
        ("afd_init_sft", "16"),
        ("distinct_reply_floor", "16"),
    ),
    "a plurality vote beats the closed form at N=16": (("plurality_vote", "16"), ("afd_closed_form", "16")),
}
"""Orderings ``--merge`` and ``--check`` test: name -> ((selector, N) that should win, (selector, N) that should
lose); the selector ``baseline`` is one SFT sample per task, ``plurality_vote`` and ``distinct_reply_floor`` are
the reference selectors of ``run_afd`` (the most frequent reply; a uniformly random distinct reply)."""


def study(args: argparse.Namespace) -> dict[str, Any]:
    """One :func:`common.afd.run_afd` per seed, written after each so a stopped study keeps its seeds."""
    import torch
    from common.afd import AfDStudyConfig, run_afd

    torch.set_num_threads(args.threads)
    started = time.time()
    per_seed: dict[str, Any] = {}
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as out:
            cfg = AfDStudyConfig(
                out_dir=out,
                data=("init_sft", "init_demo", "sft_demo"),
                ns=tuple(args.ns),
                train_episodes=args.train_episodes,
                eval_episodes=args.eval,
                seed=seed,
            )
            summary = run_afd(cfg, progress=False)
        summary.pop("config", None)
        per_seed[str(seed)] = summary
        print(json.dumps({"seed": seed, **_headline(summary)}), flush=True)
        if args.out:
            write_result(
                args.out, {"settings": vars(args) | {"out": str(args.out)}, "seeds": per_seed}, started=started
            )
    return per_seed


def _headline(summary: dict[str, Any]) -> dict[str, float]:
    out = {"baseline": summary["baseline"]["success"]}
    for critic, by_n in (summary["best_of_n"] | {"plurality_vote": summary["reference"]["plurality_vote"]}).items():
        for n, row in by_n.items():
            out[f"{critic}@{n}"] = row["success"]
    return out


def table(per_seed: dict[str, Any], label: str) -> list[str]:
    """Markdown rows: per critic and N, mean success, its gain over one sample, and the win/lose rates (t-CIs)."""
    seeds = list(per_seed.values())
    ns = sorted({n for s in seeds for by_n in s["best_of_n"].values() for n in by_n}, key=int)
    base = [s["baseline"]["success"] for s in seeds]
    m, lo, hi = mean_ci(base)
    lines = [
        f"| {label} | one SFT sample (baseline) | 1 | {m:.3f} [{lo:.3f}, {hi:.3f}] | | | |",
    ]
    for critic in (*CRITICS, "plurality_vote"):
        for n in ns:
            have = [s for s in seeds if critic in s["best_of_n"] | s.get("reference", {})]
            rows = [(s["best_of_n"] | s.get("reference", {}))[critic][n] for s in have]
            if not rows:
                continue
            success = mean_ci([r["success"] for r in rows])
            gain = mean_ci([r["success"] - s["baseline"]["success"] for r, s in zip(rows, have, strict=True)])
            win = sum(r["win"] for r in rows) / sum(r["tasks"] for r in rows)
            lose = sum(r["lose"] for r in rows) / sum(r["tasks"] for r in rows)
            lines.append(
                f"| {label} | {critic} | {n} | {success[0]:.3f} [{success[1]:.3f}, {success[2]:.3f}] | "
                f"{gain[0]:+.3f} [{gain[1]:+.3f}, {gain[2]:+.3f}] | {win:.3f} | {lose:.3f} |"
            )
    for n in ns:
        floors = [s["reference"]["distinct_reply_floor"][n] for s in seeds if "reference" in s]
        if floors:
            m, lo, hi = mean_ci(floors)
            lines.append(f"| {label} | a random distinct reply (floor) | {n} | {m:.3f} [{lo:.3f}, {hi:.3f}] | | | |")
    header = [
        "| path | selector | N | success | − one sample | win rate | lose rate |",
        "|---|---|---|---|---|---|---|",
    ]
    return header + lines + ranking_table(per_seed, label)


def ranking_table(per_seed: dict[str, Any], label: str) -> list[str]:
    """Markdown rows: per critic, Spearman's ρ of score and success within a task's candidates (mean over seeds)."""
    seeds = [s for s in per_seed.values() if "ranking" in s]
    if not seeds:
        return []
    lines = ["", "| path | critic | ρ(score, success) within a task | tasks per seed |", "|---|---|---|---|"]
    for critic in CRITICS:
        rows = [s["ranking"][critic] for s in seeds if critic in s["ranking"]]
        if rows:
            m, lo, hi = mean_ci([r["spearman"] for r in rows])
            tasks = sum(r["tasks"] for r in rows) / len(rows)
            lines.append(f"| {label} | {critic} | {m:+.3f} [{lo:+.3f}, {hi:+.3f}] | {tasks:.0f} |")
    return lines


def _success(seed: dict[str, Any], selector: str, n: str) -> float | None:
    if selector == "baseline":
        return float(seed["baseline"]["success"])
    if selector == "distinct_reply_floor":
        floor = seed.get("reference", {}).get(selector, {}).get(n)
        return None if floor is None else float(floor)
    row = (seed["best_of_n"] | seed.get("reference", {})).get(selector, {}).get(n)
    return None if row is None else float(row["success"])


def claim_deltas(per_seed: dict[str, Any], winner: tuple[str, str], loser: tuple[str, str]) -> list[float]:
    """Per seed, the winner's success minus the loser's (seeds that did not measure both are left out)."""
    out = []
    for seed in per_seed.values():
        a, b = _success(seed, *winner), _success(seed, *loser)
        if a is not None and b is not None:
            out.append(a - b)
    return out


def merge(paths: list[str]) -> None:
    """Tables per float path (files of one path pooled) and each claim's verdict on every path."""
    pooled: dict[str, dict[str, Any]] = {}
    for p in paths:
        data = json.loads(Path(p).read_text())
        m = data["machine"]
        entry = pooled.setdefault(m["float_path"], {"seeds": {}, "sources": []})
        entry["seeds"].update({f"{p}:{k}": v for k, v in data["seeds"].items()})
        entry["sources"].append(f"{m['cpu_model']}, {m['threads']} thread(s): {m['command']}")
    for path, entry in pooled.items():
        print(f"\n{path} ({len(entry['seeds'])} seeds):\n  " + "\n  ".join(entry["sources"]))
        print("\n".join(table(entry["seeds"], path)))
    for name, (winner, loser) in CLAIMS.items():
        verdicts = []
        for path, entry in pooled.items():
            deltas = claim_deltas(entry["seeds"], winner, loser)
            if len(deltas) < 2:
                print(f"{name} [{path}]: fewer than two seeds measured it")
                continue
            mean, lo, hi = mean_ci(deltas)
            verdicts.append(lo > 0)
            print(f"{name} [{path}, {len(deltas)} seeds]: {mean:+.3f} [{lo:+.3f}, {hi:+.3f}]")
        measured = f"{len(verdicts)} of {len(pooled)} paths measured it"
        verdict = "holds on every path that measured it" if verdicts and all(verdicts) else "does NOT hold everywhere"
        print(f"{name}: {verdict} ({measured})")


def check(args: argparse.Namespace) -> None:
    """Reduced re-run (two seeds, 256 training and 100 held-out tasks): do the documented orderings hold here?"""
    args.seeds, args.train_episodes, args.eval = [0, 1], 256, 100
    per_seed = study(args)
    print("\n".join(table(per_seed, "this machine")))
    for name, (winner, loser) in CLAIMS.items():
        deltas = claim_deltas(per_seed, winner, loser)
        if not deltas:
            continue
        ok = all(d > 0 for d in deltas)
        print(f"{name}: per-seed deltas {[round(d, 3) for d in deltas]} -> {'holds' if ok else 'does not hold'} here")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--ns", nargs="+", type=int, default=[1, 4, 16])
    parser.add_argument("--train-episodes", type=int, default=512)
    parser.add_argument("--eval", type=int, default=200, help="held-out tasks")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="result JSON (rewritten after every seed)")
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
