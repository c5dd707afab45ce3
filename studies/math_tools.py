"""MathEpisodes with and without tools: does the python tool help a scripted agent on harder problems?

Question (issue #15): with tools, does a scripted tool-using agent solve harder MathEpisodes (difficulty 3)
more often than the same agent without tools?

Protocol (all seeded, no torch, so float paths play no part):

* Env: ``turnkit/MathEpisodes-v0`` at ``difficulty=3``, all four kinds, splits ``id`` and ``ood``, default
  episode settings (3 attempts, 512-word budget, 10-turn limit). Held-out seeds ``--seed0 .. --seed0+N-1``
  per split (default 10,000..10,299), the same seeds in both conditions (paired episodes).
* Agent: :class:`turnkit.envs.math.tool_solver.ToolSolverAgent`, which reads only the public problem text
  (``uses_privileged`` is ``False``). With ``tools=["python"]`` it runs the problem as an exact
  ``Fraction`` program in the env's python session, one operation per call, and answers with what it
  printed. Without tools it computes "in its head": every intermediate result rounded to ``--digits``
  significant digits (default 2). That rule is a modelling choice (see the agent's docstring): this is a
  demonstration that the tool pipeline works end to end and what it buys a fixed agent, not a learning claim.
* Reported per condition and split (and pooled): success with its Wilson 95% interval
  (``turnkit.stats.wilson_interval``), mean turns and tool calls per episode (Student-t 95% intervals,
  ``turnkit.stats.mean_ci``), success per kind, tool call statuses; and the reader's translation accuracy:
  the share of problems whose plan, run exactly, equals the reference answer (the study reads the
  privileged answer to score; the agent never does).

Writes ``results.json`` (every episode, the summary, the command, a machine record) and ``math_tools.png``
under ``--out``; each (condition, split) cell is cached under ``--runs`` with the machine record it was played
on and reused by a rerun with the same settings. The record (``machine``) is
:func:`common.provenance.machine_record` with this study's additions: load average, platform, the sandbox's
version and the versions of the packages the env uses. ``wall_s`` is this invocation's wall time;
``cell_wall_s`` each cell's own (recorded when it ran, also for cells reused from the cache, which
``cells_from_cache`` lists).

Example::

    python studies/math_tools.py --episodes 300
    python studies/math_tools.py --replot
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections import Counter
from fractions import Fraction
from importlib import metadata
from pathlib import Path
from typing import Any

from common.provenance import machine_record, write_result

CONDITIONS = ("no_tools", "tools")
SPLITS = ("id", "ood")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The study's command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=300, help="episodes per split and condition")
    parser.add_argument("--seed0", type=int, default=10_000, help="first held-out seed")
    parser.add_argument("--difficulty", type=int, default=3)
    parser.add_argument("--splits", nargs="+", default=list(SPLITS), choices=["id", "ood", "combo"])
    parser.add_argument("--digits", type=int, default=2, help="significant digits of the no-tool estimate")
    parser.add_argument("--out", default="studies/results/math_tools")
    parser.add_argument("--runs", default="runs/math_tools", help="cache of finished (condition, split) cells")
    parser.add_argument("--replot", action="store_true", help="only redraw math_tools.png from --out's results.json")
    return parser.parse_args(argv)


def run_cell(condition: str, split: str, args: argparse.Namespace, record: dict[str, Any]) -> dict[str, Any]:
    """Play ``args.episodes`` episodes of one condition and split, one after another in one env.

    The cell is cached with ``record`` (:func:`machine`), the machine it was played on.
    """
    cache = (
        Path(args.runs) / f"{condition}-{split}-d{args.difficulty}-n{args.episodes}-s{args.seed0}-g{args.digits}.json"
    )
    if cache.is_file():
        return {**json.loads(cache.read_text()), "from_cache": str(cache)}
    import gymnasium

    import turnkit
    from turnkit.envs.math.tool_solver import ToolSolverAgent
    from turnkit.envs.math.translate import read_problem, run_plan

    tools = ["python"] if condition == "tools" else None
    env = gymnasium.make("turnkit/MathEpisodes-v0", difficulty=args.difficulty, split=split, tools=tools)
    agent = ToolSolverAgent(digits=args.digits)
    episodes = []
    started = time.time()
    try:
        for seed in range(args.seed0, args.seed0 + args.episodes):
            traj = turnkit.collect(env, agent, seed=seed)
            task = traj.task
            answer = Fraction(str(task.privileged["answer"]))
            plan = read_problem(task.prompt)
            calls = [s.info["tool"] for s in traj.steps if "tool" in s.info]
            episodes.append(
                {
                    "seed": seed,
                    "kind": task.metadata["kind"],
                    "prompt": task.prompt,
                    "answer": str(task.privileged["answer"]),
                    "success": bool(traj.success),
                    "turns": len(traj.steps),
                    "tool_calls": len(calls),
                    "tool_statuses": dict(Counter(c["status"] for c in calls)),
                    "final_action": traj.steps[-1].action.text if traj.steps else "",
                    "readable": plan is not None,
                    "translated_exactly": plan is not None and run_plan(plan) == answer,
                    "error": None if traj.error is None else str(traj.error),
                }
            )
    finally:
        env.close()
    return write_recorded(cache, {"condition": condition, "split": split, "episodes": episodes}, record, started)


def write_recorded(path: Path, result: dict[str, Any], record: dict[str, Any], started: float) -> dict[str, Any]:
    """Write ``result`` as JSON with ``record`` as its ``machine`` and ``wall_s`` (seconds since ``started``).

    :func:`common.provenance.write_result` with this study's own record (:func:`machine`); returns what it wrote.
    """
    return json.loads(write_result(path, result, started=started, record=record).read_text(encoding="utf-8"))


def summarise(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Success (Wilson 95%), turns and tool calls (Student-t 95%), per-kind success, translation accuracy."""
    from turnkit.stats import mean_ci, wilson_interval

    def rate(flags: list[bool]) -> dict[str, Any]:
        k, n = sum(flags), len(flags)
        lo, hi = wilson_interval(k, n)
        return {"rate": k / n if n else 0.0, "k": k, "n": n, "ci95": [lo, hi]}

    def mean(values: list[float]) -> dict[str, Any]:
        m, lo, hi = mean_ci(values) if len(values) > 1 else (values[0], values[0], values[0])
        return {"mean": m, "ci95": [lo, hi]}

    statuses: Counter[str] = Counter()
    for e in episodes:
        statuses.update(e["tool_statuses"])
    kinds = sorted({e["kind"] for e in episodes})
    return {
        "success": rate([e["success"] for e in episodes]),
        "turns": mean([float(e["turns"]) for e in episodes]),
        "tool_calls": mean([float(e["tool_calls"]) for e in episodes]),
        "success_by_kind": {k: rate([e["success"] for e in episodes if e["kind"] == k]) for k in kinds},
        "translation_accuracy": rate([e["translated_exactly"] for e in episodes]),
        "unreadable": sum(not e["readable"] for e in episodes),
        "tool_statuses": dict(statuses),
        "errors": sum(e["error"] is not None for e in episodes),
    }


def machine() -> dict[str, Any]:
    """Where the study ran: :func:`common.provenance.machine_record` and the load, platform, versions, sandbox."""
    versions = {}
    for package in ("turnkit", "gymnasium", "numpy", "sympy", "pexpect"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    bwrap = shutil.which("bwrap")
    bwrap_version = None
    if bwrap:
        done = subprocess.run([bwrap, "--version"], capture_output=True, text=True, check=False)
        bwrap_version = done.stdout.strip() or None
    return {
        **machine_record(),
        "threads_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "load_average_at_start": list(os.getloadavg()),
        "platform": platform.platform(),
        "versions": versions,
        "sandbox": bwrap_version,
        "torch_used": "no (no model; float paths play no part; the record's torch fields are the installed ones)",
    }


def plot(summary: dict[str, Any], path: Path) -> None:
    """Bars: success per split (and pooled) with and without tools, Wilson 95% intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    groups = list(summary["tools"])
    width = 0.38
    fig, ax = plt.subplots(figsize=(6, 3.6))
    bars = (
        ("no_tools", "#d9a6a6", f"no tools ({summary['digits']}-significant-digit estimate)"),
        ("tools", "#a6bddb", "python tool"),
    )
    for j, (condition, color, label) in enumerate(bars):
        rows = [summary[condition][g]["success"] for g in groups]
        means = np.array([r["rate"] for r in rows])
        errs = np.clip([[r["rate"] - r["ci95"][0], r["ci95"][1] - r["rate"]] for r in rows], 0, None).T  # float dust
        x = np.arange(len(groups)) + (j - 0.5) * width
        ax.bar(x, means, width, yerr=errs, capsize=4, color=color, label=label)
        for xi, r in zip(x, rows, strict=True):
            ax.text(xi, min(r["ci95"][1] + 0.02, 1.02), f"{r['rate']:.2f}", ha="center", fontsize=8)
    ax.set_xticks(np.arange(len(groups)), [f"{g}\n(n={summary['tools'][g]['success']['n']})" for g in groups])
    ax.set_ylim(0, 1.3)
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.set_ylabel("success (Wilson 95% CI)")
    ax.set_title(f"MathEpisodes difficulty {summary['difficulty']}: scripted solver")
    ax.legend(loc="upper center", ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the study (see the module docstring)."""
    args = parse_args(argv)
    out = Path(args.out)
    if args.replot:
        saved = json.loads((out / "results.json").read_text())
        plot(saved["summary"], out / "math_tools.png")
        return saved
    out.mkdir(parents=True, exist_ok=True)
    record = machine()
    started = time.time()
    cells: dict[str, dict[str, Any]] = {c: {} for c in CONDITIONS}
    for split in args.splits:
        for condition in CONDITIONS:
            cell = run_cell(condition, split, args, record)
            cells[condition][split] = cell
            wins = sum(e["success"] for e in cell["episodes"])
            print(f"{condition:>8} {split:>4}: {wins}/{len(cell['episodes'])} ({cell['wall_s']:.0f}s)", flush=True)
    summary: dict[str, Any] = {"difficulty": args.difficulty, "digits": args.digits}
    for condition in CONDITIONS:
        table = {split: summarise(cells[condition][split]["episodes"]) for split in args.splits}
        if len(args.splits) > 1:
            table["pooled"] = summarise([e for split in args.splits for e in cells[condition][split]["episodes"]])
        summary[condition] = table
    argv_used = sys.argv[1:] if argv is None else argv
    result = {
        "command": " ".join(["python studies/math_tools.py", *argv_used]).strip(),
        "settings": {k: v for k, v in vars(args).items() if k != "replot"},
        "env": "turnkit/MathEpisodes-v0 (max_attempts 3, token_budget 512 words, TimeLimit 10 turns)",
        "agent": "turnkit.envs.math.tool_solver.ToolSolverAgent",
        "summary": summary,
        "cell_wall_s": {c: {s: cells[c][s]["wall_s"] for s in args.splits} for c in CONDITIONS},
        "cells_from_cache": [
            cell["from_cache"] for c in CONDITIONS for cell in cells[c].values() if "from_cache" in cell
        ],
        "episodes": {c: {s: cells[c][s]["episodes"] for s in args.splits} for c in CONDITIONS},
    }
    result = write_recorded(out / "results.json", result, record, started)
    plot(summary, out / "math_tools.png")
    for condition in CONDITIONS:
        for group, row in summary[condition].items():
            s = row["success"]
            print(
                f"{condition:>8} {group:>6}: success {s['rate']:.3f} [{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}] "
                f"({s['k']}/{s['n']}), turns {row['turns']['mean']:.2f}, tool calls {row['tool_calls']['mean']:.2f}, "
                f"translated {row['translation_accuracy']['rate']:.3f}"
            )
    return result


if __name__ == "__main__":
    main()
