"""PRIME's implicit process reward vs outcome-only GRPO on SmolLM2-135M: 5 RL seeds, two float paths.

Question (issue #39, item 6): on the tiny models PRIME's online implicit PRM never learned to rank and PRIME
lowered success (``critics_quickstart.py``: PRIME − env −0.199 / −0.255 greedy; ``prime.py``: PRIME − RLOO
−0.259 / −0.132, collapses on 5/10 and 2/10 seeds). Does the ordering hold on a real pretrained model, whose
log-probabilities carry far more than a 0.5M-parameter byte model's?

Protocol: the arm ``smollm2_grpo.py`` measured (outcome-only GRPO) is the control, seed for seed:

* Start: the same warm-started SmolLM2 (:func:`~turnkit.train.quickstart_smollm2.smollm2_start_policy`, the
  cached adapter of each float path), evaluated once by ``smollm2_grpo.py start``.
* PRIME arm: :data:`~turnkit.train.quickstart_smollm2.SMOLLM2_TRAIN` plus ``critic = {"prime": {"weight": 1}}``
  through the shared loop (:mod:`turnkit.critics.prime`): the PRM is a rank-16 LoRA on a frozen copy of the
  warm-started policy (its adapter merged), its reference that copy; every generated token gets
  ``β (log π_φ − log π_ref)`` (β = 0.05), summed per turn and added to the env reward; the PRM then takes one BCE
  step on the batch's informative groups (accuracy in [0.2, 0.8]). With a critic the loop's advantages are
  per-turn returns-to-go (γ = 1) normalised by the group's episode returns; with the env reward alone they equal
  the control's episode advantages, so the first two steps of both arms are the same rollouts (checked).
* RL seeds 0-4, 20 steps of 4 groups × 4, lr 3e-4: everything as in the control. Held-out: 200 episodes greedy
  and 200 at T = 1 (seeds 10^9 ..). Reported per float path: PRIME − GRPO per seed (paired: same task draws) and
  its mean with a Student-t 95% interval, collapses (sampled success below half the start), the PRM's
  ranking accuracy on each fresh batch (before its update; 0.5 is chance) and its BCE loss (ln 2 = 0.693 is
  an untrained PRM).

Commands (the control must exist: ``smollm2_grpo.py run``; the two paths side by side, one 1-thread job each)::

    python studies/smollm2_prime.py run --path native
    ATEN_CPU_CAPABILITY=default TURNKIT_CACHE=/tmp/tk_default python studies/smollm2_prime.py run --path default
    python studies/smollm2_prime.py report       # results.json, smollm2_prime.png and the table
    python studies/smollm2_prime.py check        # toy size end to end (minutes): the PRM's step records

Each seed writes ``--out/<path>/seed-N.json`` with its machine record; ``run`` skips seeds whose file exists.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from common.provenance import machine_record, write_result
from smollm2_grpo import STEP_KEYS, evaluate

from turnkit.stats import mean_ci
from turnkit.train.config import TrainConfig
from turnkit.train.loop import train
from turnkit.train.quickstart_smollm2 import SMOLLM2_TRAIN, smollm2_start_policy

PRIME_KEYS = (
    "prime/rank_acc",
    "prime/implicit_return",
    "prime/prm_kept",
    "prime/prm_loss",
    "prime/prm_accuracy",
    "critic_s",
)
"""The PRM's per-step record: ranking on the fresh batch, its summed reward, the BCE step and the time it takes."""

CHECK_OUT = "/tmp/smollm2_prime_check"
"""Where ``check`` writes: two seeds of two steps, 4 held-out episodes, printed as the PRM's step records."""

SAME_ROLLOUT_STEPS = 2
"""Steps whose rollouts both arms share: the PRM starts at reward 0, so step 1's update equals the control's."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The study's command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["run", "seed", "report", "check"])
    parser.add_argument("--path", default="native", help="float path label of this process (native, default)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="RL seeds")
    parser.add_argument("--seed", type=int, default=0, help="the RL seed of `seed`")
    parser.add_argument("--jobs", type=int, default=1, help="seeds run side by side by `run` (1 thread each)")
    parser.add_argument("--weight", type=float, default=1.0, help="weight of PRIME's process reward")
    parser.add_argument("--eval-episodes", type=int, default=200, help="held-out episodes per decoding")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the recipe's)")
    parser.add_argument("--control", default="studies/results/smollm2_grpo", help="smollm2_grpo.py's results")
    parser.add_argument("--out", default="studies/results/smollm2_prime")
    parser.add_argument("--runs", default="runs/smollm2_prime", help="training run folders")
    return parser.parse_args(argv)


MICRO_BATCH_ROWS = 8
"""Rows per forward + backward of the policy update (the control's one pass over ~46 turn rows held ~12 GB; two
PRIME runs side by side, each also holding the PRM, ran out of the box's 24 GB)."""


def prime_config(
    seed: int, weight: float, out_dir: str, *, eval_episodes: int = 200, steps: int | None = None
) -> TrainConfig:
    """The control's recipe with PRIME's process reward at ``weight``, its update in micro-batches.

    ``eval_episodes`` is the study's held-out count: the loop draws training task seeds outside
    ``[10^9, 10^9 + eval_episodes)``, so it must equal the control's for both arms to draw the same tasks.

    Example:
        >>> cfg = prime_config(3, 1.0, "/tmp/x")
        >>> cfg.critic, cfg.seed, cfg.steps == SMOLLM2_TRAIN["steps"], cfg.update.micro_batch_rows, cfg.eval.episodes
        ({'prime': {'weight': 1.0}}, 3, True, 8, 200)
    """
    values = {**SMOLLM2_TRAIN, "seed": seed, "out_dir": out_dir, "critic": {"prime": {"weight": weight}}}
    values["update"] = {**SMOLLM2_TRAIN.get("update", {}), "micro_batch_rows": MICRO_BATCH_ROWS}
    values["eval"] = {**SMOLLM2_TRAIN.get("eval", {}), "episodes": eval_episodes}
    if steps is not None:
        values.update(steps=steps, log={**SMOLLM2_TRAIN.get("log", {}), "checkpoint_every": steps})
    return TrainConfig.from_dict(values, source="smollm2_prime")


def run_seed(args: argparse.Namespace) -> None:
    """PRIME from the warm start with RL seed ``args.seed``, then the held-out evaluation."""
    started = time.time()
    policy, info = smollm2_start_policy(progress=False)
    out_dir = str(Path(args.runs) / args.path / f"seed-{args.seed}")
    cfg = prime_config(args.seed, args.weight, out_dir, eval_episodes=args.eval_episodes, steps=args.steps)
    t0 = time.time()
    run = train(cfg, progress=False, policy=policy)
    train_s = time.time() - t0
    t0 = time.time()
    result = {
        "seed": args.seed,
        "warm_start_key": Path(info["adapter_dir"]).name,
        "warm_start_from_cache": info["from_cache"],
        "train_config": cfg.to_dict(),
        "steps": [{k: r[k] for k in (*STEP_KEYS, *PRIME_KEYS) if k in r} for r in run.history if "tied_frac" in r],
        "train_s": round(train_s, 1),
        "eval": evaluate(run.policy, args.eval_episodes, sampling_seed=0),
        "eval_s": round(time.time() - t0, 1),
    }
    write_result(Path(args.out) / args.path / f"seed-{args.seed}.json", result, started=started)


def run_all(args: argparse.Namespace) -> None:
    """The warm start first (cached once), then the seeds, ``--jobs`` at once, each in its own process."""
    smollm2_start_policy(progress=True)
    out = Path(args.out) / args.path
    seeds = [s for s in args.seeds if not (out / f"seed-{s}.json").is_file()]
    common = ["--path", args.path, "--eval-episodes", str(args.eval_episodes), "--weight", str(args.weight)]
    common += ["--out", args.out, "--runs", args.runs] + (["--steps", str(args.steps)] if args.steps else [])
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def launch(seed: int) -> tuple[int, int]:
        with open(logs / f"seed-{seed}.log", "w", encoding="utf-8") as log:
            unit = [sys.executable, __file__, "seed", "--seed", str(seed), *common]
            code = subprocess.call(unit, stdout=log, stderr=subprocess.STDOUT)
        print(f"{args.path}: seed {seed} finished (exit {code})", flush=True)
        return seed, code

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        failed = [seed for seed, code in pool.map(launch, seeds) if code != 0]
    if failed:
        raise SystemExit(f"seeds failed: {failed}; see {logs}")


def rollout_diagnostics(run_dir: Path) -> dict[str, dict[str, float]]:
    r"""What the learner saw at each saved step (``rollouts/step-N``): where PRIME's advantages went, and its scale.

    Per step: the mean ``|advantage|`` of episodes in groups whose env returns all tie (the control skips them:
    no signal) and in the other groups, and PRIME's weighted reward per turn (mean, min, max) next to the env
    reward's 0/1.

    Example:
        >>> import json, tempfile
        >>> turn = lambda adv, r: {"advantage": adv, "critic_rewards": {"env": 0.0, "prime": r}}
        >>> rows = [{"group": 0, "total_reward": 0.0, "steps": [turn(1.5, -0.2)]},
        ...         {"group": 0, "total_reward": 0.0, "steps": [turn(-1.5, 0.1)]}]
        >>> with tempfile.TemporaryDirectory() as d:
        ...     (Path(d) / "rollouts" / "step-000010").mkdir(parents=True)
        ...     _ = (Path(d) / "rollouts" / "step-000010" / "trajectories.jsonl").write_text(
        ...         "\n".join(json.dumps(r) for r in rows))
        ...     rollout_diagnostics(Path(d))["10"]["adv_tied_groups"]
        1.5
    """
    out: dict[str, dict[str, float]] = {}
    for file in sorted(run_dir.glob("rollouts/step-*/trajectories.jsonl")):
        rows = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
        outcomes: dict[Any, set[float]] = {}
        for row in rows:
            outcomes.setdefault(row["group"], set()).add(row["total_reward"])
        tied, untied, prime = [], [], []
        for row in rows:
            adv = [abs(t["advantage"]) for t in row["steps"] if t.get("advantage") is not None]
            if adv:
                (tied if len(outcomes[row["group"]]) == 1 else untied).append(sum(adv) / len(adv))
            prime += [t["critic_rewards"]["prime"] for t in row["steps"] if "prime" in t.get("critic_rewards", {})]
        out[str(int(file.parent.name.split("-")[1]))] = {
            "adv_tied_groups": _mean(tied),
            "adv_other_groups": _mean(untied),
            "tied_group_episodes": len(tied),
            "prime_turn_mean": _mean(prime),
            "prime_turn_min": min(prime, default=math.nan),
            "prime_turn_max": max(prime, default=math.nan),
        }
    return out


def earlier_rollouts(results: Path) -> dict[str, dict[str, Any]]:
    """Per float path and seed (as a string), the rollout diagnostics an earlier report wrote to ``results``.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     file = Path(d) / "results.json"
        ...     _ = file.write_text(json.dumps({"summary": {"native": {"rollouts": {"0": {"10": {}}}}}}))
        ...     earlier_rollouts(file), earlier_rollouts(Path(d) / "missing.json")
        ({'native': {'0': {'10': {}}}}, {})
    """
    if not results.is_file():
        return {}
    summary = json.loads(results.read_text())["summary"]
    return {path: entry.get("rollouts", {}) for path, entry in summary.items()}


def seed_rollouts(runs: Path, seeds: Sequence[int], earlier: dict[str, Any]) -> dict[int, Any]:
    """:func:`rollout_diagnostics` of each seed's run folder under ``runs``, else what ``earlier`` kept for it.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     (Path(d) / "seed-1").mkdir()
        ...     seed_rollouts(Path(d), [0, 1, 2], {"0": {"10": {"adv_tied_groups": 1.5}}})
        {0: {'10': {'adv_tied_groups': 1.5}}, 1: {}}
    """
    out: dict[int, Any] = {}
    for seed in seeds:
        folder = runs / f"seed-{seed}"
        if folder.is_dir():
            out[seed] = rollout_diagnostics(folder)
        elif str(seed) in earlier:
            out[seed] = earlier[str(seed)]
    return out


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan


def _interval(diffs: Sequence[float]) -> dict[str, Any]:
    mean, lo, hi = mean_ci(diffs) if len(diffs) >= 2 else (float("nan"),) * 3
    return {"per_seed": list(diffs), "mean": mean, "ci95": [lo, hi]}


def summarize(out: Path, control: Path, runs: Path | None = None) -> dict[str, Any]:
    """Per float path: PRIME − GRPO (paired by seed) per decoding, collapses, the PRM's learning, timings, and
    (with the run folders under ``runs``) :func:`rollout_diagnostics` per seed; a seed whose run folder is gone
    (run on another machine) keeps the diagnostics the last report in ``out/results.json`` recorded for it.

    Raises:
        SystemExit: A PRIME seed without its control, or a control made from another warm start.
    """
    earlier = earlier_rollouts(out / "results.json")
    summary: dict[str, Any] = {}
    for path_dir in sorted(p for p in out.iterdir() if p.is_dir() and any(p.glob("seed-*.json"))):
        start = json.loads((control / path_dir.name / "start.json").read_text())
        prime = {d["seed"]: d for d in (json.loads(p.read_text()) for p in sorted(path_dir.glob("seed-*.json")))}
        grpo = {}
        for seed, run in prime.items():
            file = control / path_dir.name / f"seed-{seed}.json"
            if not file.is_file():
                raise SystemExit(f"no control for {path_dir.name} seed {seed}: run smollm2_grpo.py first ({file})")
            if run["warm_start_key"] != Path(start["warm_start"]["adapter_dir"]).name:
                key = run["warm_start_key"]
                raise SystemExit(f"{path_dir.name} seed {seed}: warm start {key} is not the control's")
            grpo[seed] = json.loads(file.read_text())
        seeds = sorted(prime)
        entry: dict[str, Any] = {"float_path": start["machine"]["float_path"], "seeds": seeds}
        for decoding in ("greedy", "sampled"):
            begin = start["eval"][decoding]["success"]
            p = [prime[s]["eval"][decoding]["success"] for s in seeds]
            g = [grpo[s]["eval"][decoding]["success"] for s in seeds]
            entry[decoding] = {
                "start": begin,
                "grpo": g,
                "prime": p,
                "prime_minus_grpo": _interval([a - b for a, b in zip(p, g, strict=True)]),
                "prime_minus_start": _interval([a - begin for a in p]),
                "collapsed": [s for s, a in zip(seeds, p, strict=True) if a < begin / 2],
                "turns_prime": [prime[s]["eval"][decoding]["turns_mean"] for s in seeds],
                "format_prime": [prime[s]["eval"][decoding]["format_rate"] for s in seeds],
            }
        entry["same_rollouts"] = all(
            [r["success_rate"] for r in prime[s]["steps"][:SAME_ROLLOUT_STEPS]]
            == [r["success_rate"] for r in grpo[s]["steps"][:SAME_ROLLOUT_STEPS]]
            for s in seeds
        )
        steps = [prime[s]["steps"] for s in seeds]
        entry["prm"] = {
            key: [_mean([run[i].get(key, math.nan) for run in steps]) for i in range(len(steps[0]))]
            for key in ("prime/rank_acc", "prime/prm_loss", "prime/implicit_return", "prime/prm_kept")
        }
        entry["time"] = {
            s: {
                "prime_train_s": prime[s]["train_s"],
                "grpo_train_s": grpo[s]["train_s"],
                "critic_s": sum(r.get("critic_s", 0.0) for r in prime[s]["steps"]),
            }
            for s in seeds
        }
        if runs is not None:
            entry["rollouts"] = seed_rollouts(runs / path_dir.name, seeds, earlier.get(path_dir.name, {}))
        summary[path_dir.name] = entry
    return summary


def table(summary: dict[str, Any]) -> str:
    """PRIME vs the control per float path and decoding, and the PRM's ranking over training."""
    lines = [
        "| path | decoding | warm start | GRPO, per seed | PRIME, per seed | PRIME − GRPO [95% CI] | collapsed |",
        "|---|---|---|---|---|---|---|",
    ]
    for path, entry in summary.items():
        for decoding in ("greedy", "sampled"):
            d = entry[decoding]
            diff = d["prime_minus_grpo"]
            lines.append(
                f"| {path} ({entry['float_path']}) | {decoding} | {d['start']:.3f} | "
                f"{' '.join(f'{x:.3f}' for x in d['grpo'])} | {' '.join(f'{x:.3f}' for x in d['prime'])} | "
                f"{diff['mean']:+.3f} [{diff['ci95'][0]:+.3f}, {diff['ci95'][1]:+.3f}] | "
                f"{len(d['collapsed'])}/{len(entry['seeds'])} |"
            )
    lines += ["", "| path | PRM rank acc, steps 1-5 / 6-10 / 11-15 / 16-20 | PRM BCE, same windows | same rollouts |",
              "|---|---|---|---|"]  # fmt: skip
    for path, entry in summary.items():
        windows = []
        for key in ("prime/rank_acc", "prime/prm_loss"):
            series = entry["prm"][key]
            windows.append(" / ".join(f"{_mean(series[i : i + 5]):.3f}" for i in range(0, len(series), 5)))
        lines.append(f"| {path} | {windows[0]} | {windows[1]} | {entry['same_rollouts']} |")
    lines += ["", "| path | step | mean abs adv.: env-tied groups / others | PRIME reward per turn: mean [range] |",
              "|---|---|---|---|"]  # fmt: skip
    for path, entry in summary.items():
        seeds = list(entry.get("rollouts", {}).values())
        for step in sorted({k for d in seeds for k in d}, key=int):
            rows = [d[step] for d in seeds if step in d]
            avg = {key: _mean([r[key] for r in rows]) for key in rows[0]}
            low, high = min(r["prime_turn_min"] for r in rows), max(r["prime_turn_max"] for r in rows)
            lines.append(
                f"| {path} | {step} | {avg['adv_tied_groups']:.2f} / {avg['adv_other_groups']:.2f} | "
                f"{avg['prime_turn_mean']:+.2f} [{low:+.2f}, {high:+.2f}] |"
            )
    return "\n".join(lines)


def plot(summary: dict[str, Any], path: Path) -> None:
    """Left: held-out sampled success, warm start vs GRPO vs PRIME per seed; right: the PRM's ranking accuracy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for i, (name, entry) in enumerate(summary.items()):
        d = entry["sampled"]
        base = i * 4
        left.bar([base], [d["start"]], color="#999999", label="warm start" if i == 0 else None)
        for k, (arm, color) in enumerate((("grpo", "#3a7bd5"), ("prime", "#d5793a"))):
            left.bar([base + 1 + k], [sum(d[arm]) / len(d[arm])], color=color, label=arm.upper() if i == 0 else None)
            left.scatter([base + 1 + k] * len(d[arm]), d[arm], color="black", s=10, zorder=3)
        left.text(base + 1, -0.12, name, ha="center", transform=left.get_xaxis_transform())
        series = entry["prm"]["prime/rank_acc"]
        right.plot(range(1, len(series) + 1), series, marker=".", label=name)
    left.set_xticks([])
    left.set_ylabel("held-out success (T = 1)")
    left.set_ylim(0, left.get_ylim()[1] * 1.25)  # headroom: the legend sits above the bars and dots
    left.legend(fontsize=8, loc="upper center", ncol=3)
    left.grid(axis="y", alpha=0.3)
    right.axhline(0.5, color="gray", linestyle="--", linewidth=1)
    right.set_xlabel("GRPO step")
    right.set_ylabel("PRM ranking accuracy (mean over seeds)")
    right.legend(fontsize=8)
    right.grid(alpha=0.3)
    fig.suptitle("SmolLM2-135M, multi-turn MathEpisodes: PRIME's process reward vs outcome-only GRPO", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    if args.action == "check":
        args.out, args.runs, args.seeds, args.steps, args.eval_episodes = (
            CHECK_OUT, f"{CHECK_OUT}/runs", [0, 1], 2, 4
        )  # fmt: skip
        args.action, args.jobs = "run", 2
    if args.action == "seed":
        run_seed(args)
    elif args.action == "run":
        run_all(args)
    if args.out == CHECK_OUT:
        for file in sorted(Path(args.out, args.path).glob("seed-*.json")):
            for record in json.loads(file.read_text())["steps"]:
                print(file.stem, {k: round(v, 3) for k, v in record.items() if k in ("step", *PRIME_KEYS)})
        return 0
    if args.action in ("run", "report"):
        out = Path(args.out)
        summary = summarize(out, Path(args.control), Path(args.runs))
        write_result(out / "results.json", {"summary": summary}, started=time.time(), record=machine_record())
        plot(summary, out / "smollm2_prime.png")
        print(table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
