"""SmolLM2-135M learns multi-turn MathEpisodes with GRPO after a LoRA warm start: 5 RL seeds, two float paths.

Question (issue #39, item 4): does GRPO through turnkit's shared loop make a real pretrained model better at a
multi-turn task, measured on held-out seeds, on two float paths, within about an hour of 2-core CPU per seed?

Protocol (the recipe is turnkit's own: :mod:`turnkit.train.quickstart_smollm2`):

* Task: ``turnkit/MathEpisodes-v0``, difficulty 2 arithmetic (one of +, -, x; numbers up to 99), three attempts
  with ``Incorrect. N attempts left.`` between them, cut at 4 turns. After the warm start, episodes run 2-3 turns.
* Start: SmolLM2-135M-Instruct in fp32 (the GGUF's Q4_1 weights, dequantised) with a rank-8 LoRA warm-started
  by :func:`turnkit.train.warmstart.warm_start`: 30 SFT steps on 64 oracle answers and 64 corrected retries
  (training seeds 0-127). One warm start per float path, shared by its RL seeds, as the quickstart's start
  policy is.
* RL: :data:`~turnkit.train.quickstart_smollm2.SMOLLM2_TRAIN`, GRPO with RLOO-style group baselines through
  :func:`turnkit.train.loop.train`, on the adapter; RL seeds 0-4 (task draws, sampling).
* Held-out evaluation: 200 episodes greedy and 200 at T = 1 (seeds 10^9 ..), at the start and after each RL
  seed. Reported: success (Wilson 95%), turns per episode, first-answer success, recoveries (episodes won on a
  retry), the format rate; over seeds, the mean change with a Student-t 95% interval.
* Float paths: the machine's native one, and ``ATEN_CPU_CAPABILITY=default`` with its own ``TURNKIT_CACHE`` (so
  the converted model and the warm start are computed on that path too). One torch thread per run.

Commands (``--jobs 2`` runs two 1-thread jobs side by side)::

    python studies/smollm2_grpo.py run --path native --jobs 2
    ATEN_CPU_CAPABILITY=default TURNKIT_CACHE=/tmp/tk_default python studies/smollm2_grpo.py run --path default --jobs 2
    python studies/smollm2_grpo.py report        # results.json, smollm2_grpo.png and the table
    python studies/smollm2_grpo.py check         # toy size end to end (a few minutes); writes under /tmp

Each unit of work writes its own file under ``--out/<path>/`` (``start.json``, ``seed-N.json``) with the machine
record it ran on; ``run`` skips units whose file exists, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
import torch
from common.provenance import machine_record, write_result

from turnkit.envs.math.answers import extract_answer
from turnkit.rollout.collect import collect_batch
from turnkit.stats import mean_ci, wilson_interval
from turnkit.train.config import EVAL_SEED_START, TrainConfig
from turnkit.train.loop import train
from turnkit.train.quickstart_smollm2 import ENV_ID, ENV_KWARGS, SMOLLM2_TRAIN, smollm2_start_policy
from turnkit.types import Trajectory

STEP_KEYS = (
    "step",
    "success_rate",
    "reward_mean",
    "tied_frac",
    "mean_turns",
    "update_tokens",
    "generate_s",
    "update_s",
)
"""What each GRPO step's record contributes to a seed's result file (the loop's own names)."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The study's command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["run", "start", "seed", "report", "check"])
    parser.add_argument("--path", default="native", help="float path label of this process (native, default)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="RL seeds")
    parser.add_argument("--seed", type=int, default=0, help="the RL seed of `seed`")
    parser.add_argument("--jobs", type=int, default=1, help="units run side by side by `run` (1 thread each)")
    parser.add_argument("--eval-episodes", type=int, default=200, help="held-out episodes per decoding")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the recipe's)")
    parser.add_argument("--out", default="studies/results/smollm2_grpo")
    parser.add_argument("--runs", default="runs/smollm2_grpo", help="GRPO run folders")
    return parser.parse_args(argv)


def play(policy: Any, seeds: Sequence[int]) -> list[Trajectory]:
    """One held-out episode per seed, all side by side."""
    envs = [gymnasium.make(ENV_ID, split="id", **ENV_KWARGS) for _ in seeds]
    try:
        return collect_batch(envs, policy, list(seeds))
    finally:
        for env in envs:
            env.close()


def episode_stats(trajs: Sequence[Trajectory]) -> dict[str, Any]:
    """Success (Wilson 95%), turns, format rate, first-answer success and recoveries of finished episodes.

    Example:
        >>> from turnkit.types import AgentTurn, Step
        >>> turns = (Step("q", AgentTurn("ANSWER: 3"), 0.0), Step("Incorrect.", AgentTurn("ANSWER: 4"), 1.0))
        >>> s = episode_stats([Trajectory("t", 0, turns)])
        >>> s["success"], s["turns_mean"], s["recoveries"], s["first_answer_success"], s["format_rate"]
        (1.0, 2.0, 1, 0.0, 1.0)
    """
    n = len(trajs)
    wins = sum(t.success for t in trajs)
    texts = [s.action.text for t in trajs for s in t.steps]
    return {
        "episodes": n,
        "success": wins / n,
        "success_ci": list(wilson_interval(wins, n)),
        "turns_mean": sum(len(t.steps) for t in trajs) / n,
        "format_rate": sum(extract_answer(x) is not None for x in texts) / max(len(texts), 1),
        "first_answer_success": sum(t.success and len(t.steps) == 1 for t in trajs) / n,
        "recoveries": sum(t.success and len(t.steps) >= 2 for t in trajs),
        "errors": sum(t.error is not None for t in trajs),
        "examples": [[s.action.text for s in t.steps] for t in trajs[:4]],
    }


def evaluate(policy: Any, episodes: int, sampling_seed: int) -> dict[str, Any]:
    """Greedy and sampled (T = 1) held-out evaluation, each with its wall time."""
    seeds = range(EVAL_SEED_START, EVAL_SEED_START + episodes)
    out = {}
    for name, temperature in (("greedy", 0.0), ("sampled", 1.0)):
        t0 = time.time()
        trajs = play(policy.with_sampling(temperature=temperature, seed=sampling_seed), seeds)
        out[name] = {**episode_stats(trajs), "wall_s": round(time.time() - t0, 1)}
    return out


def run_start(args: argparse.Namespace) -> None:
    """The warm start (or its cached copy) and its held-out evaluation."""
    started = time.time()
    policy, info = smollm2_start_policy(progress=False)
    t0 = time.time()
    result = {"warm_start": info, "eval": evaluate(policy, args.eval_episodes, sampling_seed=0)}
    result["eval_s"] = round(time.time() - t0, 1)
    write_result(Path(args.out) / args.path / "start.json", result, started=started)


def run_seed(args: argparse.Namespace) -> None:
    """GRPO from the warm start with RL seed ``args.seed``, then the held-out evaluation."""
    started = time.time()
    policy, info = smollm2_start_policy(progress=False)
    values = {**SMOLLM2_TRAIN, "seed": args.seed, "out_dir": str(Path(args.runs) / args.path / f"seed-{args.seed}")}
    # training task seeds stay out of the study's held-out seeds
    values["eval"] = {**SMOLLM2_TRAIN["eval"], "episodes": args.eval_episodes}
    if args.steps is not None:
        values.update(steps=args.steps, log={**SMOLLM2_TRAIN["log"], "checkpoint_every": args.steps})
    cfg = TrainConfig.from_dict(values, source="smollm2_grpo")
    t0 = time.time()
    run = train(cfg, progress=False, policy=policy)
    train_s = time.time() - t0
    t0 = time.time()
    result = {
        "seed": args.seed,
        "warm_start_from_cache": info["from_cache"],
        "train_config": cfg.to_dict(),
        "steps": [{k: r[k] for k in STEP_KEYS if k in r} for r in run.history if "tied_frac" in r],
        "train_s": round(train_s, 1),
        "eval": evaluate(run.policy, args.eval_episodes, sampling_seed=0),
        "eval_s": round(time.time() - t0, 1),
    }
    write_result(Path(args.out) / args.path / f"seed-{args.seed}.json", result, started=started)


def run_all(args: argparse.Namespace) -> None:
    """The warm start first (every unit loads it), then the start's evaluation and the RL seeds, ``--jobs`` at once."""
    smollm2_start_policy(progress=True)  # trains and caches the warm start once, before the units share it
    out = Path(args.out) / args.path
    units = [["start"]] if not (out / "start.json").is_file() else []
    units += [["seed", "--seed", str(s)] for s in args.seeds if not (out / f"seed-{s}.json").is_file()]
    common = ["--path", args.path, "--eval-episodes", str(args.eval_episodes), "--out", args.out, "--runs", args.runs]
    if args.steps is not None:
        common += ["--steps", str(args.steps)]
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def launch(unit: list[str]) -> tuple[str, int]:
        name = unit[0] if len(unit) == 1 else f"seed-{unit[-1]}"
        with open(logs / f"{name}.log", "w", encoding="utf-8") as log:
            code = subprocess.call([sys.executable, __file__, *unit, *common], stdout=log, stderr=subprocess.STDOUT)
        print(f"{args.path}: {name} finished (exit {code})", flush=True)
        return name, code

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        failed = [name for name, code in pool.map(launch, units) if code != 0]
    if failed:
        raise SystemExit(f"units failed: {failed}; see {logs}")


def cell(e: dict[str, Any]) -> str:
    """``0.345 [0.281, 0.415]``."""
    return f"{e['success']:.3f} [{e['success_ci'][0]:.3f}, {e['success_ci'][1]:.3f}]"


def summarize(out: Path) -> dict[str, Any]:
    """Per float path: the start, each seed and the mean change over seeds with its 95% interval."""
    summary: dict[str, Any] = {}
    for path_dir in sorted(p for p in out.iterdir() if (p / "start.json").is_file()):
        start = json.loads((path_dir / "start.json").read_text())
        seeds = [json.loads(p.read_text()) for p in sorted(path_dir.glob("seed-*.json"))]
        entry: dict[str, Any] = {"float_path": start["machine"]["float_path"], "start": start["eval"], "seeds": {}}
        for decoding in ("greedy", "sampled"):
            changes = [s["eval"][decoding]["success"] - start["eval"][decoding]["success"] for s in seeds]
            mean, lo, hi = mean_ci(changes) if len(changes) >= 2 else (float("nan"),) * 3
            entry[decoding] = {
                "start": start["eval"][decoding]["success"],
                "after": [s["eval"][decoding]["success"] for s in seeds],
                "change_mean": mean,
                "change_ci95": [lo, hi],
                "turns_start": start["eval"][decoding]["turns_mean"],
                "turns_after": [s["eval"][decoding]["turns_mean"] for s in seeds],
                "recoveries_start": start["eval"][decoding]["recoveries"],
                "recoveries_after": [s["eval"][decoding]["recoveries"] for s in seeds],
            }
        for s in seeds:
            entry["seeds"][s["seed"]] = {"train_s": s["train_s"], "eval_s": s["eval_s"], "wall_s": s["wall_s"]}
        summary[path_dir.name] = entry
    return summary


def table(summary: dict[str, Any]) -> str:
    """The learning table: per float path and decoding, start, each seed after RL, and the mean change."""
    lines = ["| path | decoding | warm start | after GRPO, seeds 0-4 | mean change [95% CI] | turns | recoveries |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for path, entry in summary.items():
        for decoding in ("greedy", "sampled"):
            d = entry[decoding]
            after = " ".join(f"{x:.3f}" for x in d["after"])
            turns = f"{d['turns_start']:.2f} -> {sum(d['turns_after']) / max(len(d['turns_after']), 1):.2f}"
            rec = f"{d['recoveries_start']} -> {' '.join(str(r) for r in d['recoveries_after'])}"
            lines.append(
                f"| {path} ({entry['float_path']}) | {decoding} | {cell(entry['start'][decoding])} | {after} | "
                f"{d['change_mean']:+.3f} [{d['change_ci95'][0]:+.3f}, {d['change_ci95'][1]:+.3f}] | {turns} | {rec} |"
            )
    return "\n".join(lines)


def plot(summary: dict[str, Any], path: Path) -> None:
    """Held-out success at the warm start and after GRPO (each seed a dot), per float path and decoding."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    for ax, decoding in zip(axes, ("greedy", "sampled"), strict=True):
        for i, (name, entry) in enumerate(summary.items()):
            d = entry[decoding]
            x0, x1 = i * 3, i * 3 + 1
            ax.bar([x0], [d["start"]], color="#999999", label="warm start" if i == 0 else None)
            mean_after = sum(d["after"]) / max(len(d["after"]), 1)
            ax.bar([x1], [mean_after], color="#3a7bd5", label="after GRPO (mean)" if i == 0 else None)
            ax.scatter([x1] * len(d["after"]), d["after"], color="black", s=10, zorder=3)
            ax.text(x0 + 0.5, -0.12, name, ha="center", transform=ax.get_xaxis_transform())
        ax.set_xticks([])
        ax.set_title(f"held-out success, {decoding}", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("success")
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle("SmolLM2-135M on multi-turn MathEpisodes (d2, 3 attempts): warm start -> GRPO", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    if args.action == "check":
        args.out, args.runs, args.seeds, args.steps, args.eval_episodes = (
            "/tmp/smollm2_grpo_check", "/tmp/smollm2_grpo_check/runs", [0, 1], 1, 4
        )  # fmt: skip
        args.action, args.jobs = "run", 2
    if args.action == "start":
        run_start(args)
    elif args.action == "seed":
        run_seed(args)
    elif args.action == "run":
        run_all(args)
    if args.action in ("run", "report"):
        out = Path(args.out)
        summary = summarize(out)
        started = time.time()
        write_result(out / "results.json", {"summary": summary}, started=started, record=machine_record())
        plot(summary, out / "smollm2_grpo.png")
        print(table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
