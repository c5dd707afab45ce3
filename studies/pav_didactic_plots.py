"""Plots of the PAV didactic experiment (``studies/pav_didactic.py``): curves, prover sweeps, comparisons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def _band(runs: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    acc = np.array([r["accuracy"] for r in runs])
    return np.array(runs[0]["iters"]), acc.mean(0), acc.min(0), acc.max(0)


def plot_main(runs: dict[str, list[dict]], cfg: Any, path: Path) -> None:
    """Accuracy vs RL iterations, mean over seeds with a min-max band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    labels = {"outcome": "outcome only (α = 0)", "progress": f"outcome + α·A^μ, γ = {cfg.gamma:g} prover"}
    for i, (name, rs) in enumerate(runs.items()):
        x, mean, lo, hi = _band(rs)
        color = f"C{i}"
        ax.plot(x, mean, color=color, lw=2, label=f"{labels.get(name, name)}: mean of {len(rs)} seeds")
        ax.fill_between(x, lo, hi, color=color, alpha=0.15)
        for r in rs:
            ax.plot(r["iters"], r["accuracy"], color=color, lw=0.7, alpha=0.6)
    ax.axhline(cfg.target_acc, color="grey", ls=":", lw=1)
    ax.set_xlabel("RL iteration (batch 64)")
    ax.set_ylabel("accuracy (512 samples)")
    ax.set_title(f"PAV didactic: |y*| = {len(cfg.target)}, V = 15, L = 10")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(loc="center right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_sweep(sweep: dict[str, list[dict]], outcome: list[dict], cfg: Any, at: int, path: Path) -> None:
    """Iterations to the target accuracy and accuracy at iteration ``at`` vs prover strength γ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gammas = sorted(sweep, key=float)
    g = np.array([float(x) for x in gammas])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    cap = cfg.iters
    for x, key in zip(g, gammas, strict=True):
        its = [r["iters_to_target"] for r in sweep[key]]
        ax1.scatter(
            [x] * len(its),
            [cap if i is None else i for i in its],
            c=["C3" if i is None else "C0" for i in its],
            s=18,
            alpha=0.7,
        )
    med = [np.median([cap if r["iters_to_target"] is None else r["iters_to_target"] for r in sweep[k]]) for k in gammas]
    ax1.plot(g, med, "C0-", label="progress reward, median")
    out_its = [min(cap, r["iters_to_target"] or cap) for r in outcome]  # censored at the sweep's length
    if out_its:
        ax1.axhline(np.median(out_its), color="C1", ls="--", label="outcome only, median")
    ax1.set_xscale("log")
    ax1.set_xlabel("prover strength γ")
    ax1.set_ylabel(f"iterations to {cfg.target_acc:.0%} accuracy (red: not reached by {cap})")
    ax1.legend(fontsize=8)
    idx = sweep[gammas[0]][0]["iters"].index(at)
    acc = np.array([[r["accuracy"][idx] for r in sweep[k]] for k in gammas])
    ax2.errorbar(
        g,
        acc.mean(1),
        yerr=[acc.mean(1) - acc.min(1), acc.max(1) - acc.mean(1)],
        fmt="o-",
        capsize=3,
        label="progress reward (mean, min-max)",
    )
    out_acc = [r["accuracy"][r["iters"].index(at)] for r in outcome if at in r["iters"]]
    if out_acc:
        ax2.axhline(np.mean(out_acc), color="C1", ls="--", label="outcome only")
    ax2.set_xscale("log")
    ax2.set_xlabel("prover strength γ")
    ax2.set_ylabel(f"accuracy after {at} iterations")
    ax2.set_ylim(-0.02, 1.02)
    ax2.legend(fontsize=8)
    q = "exact Q^μ" if cfg.q == "exact" else f"Monte Carlo Q^μ, {cfg.rollouts} rollouts"
    seeds = len(sweep[gammas[0]])
    opt = getattr(cfg, "optimizer", "adam")
    opt = "Adam" if opt == "adam" else f"{opt} lr {cfg.lr:g}"
    fig.suptitle(f"PAV didactic: prover strength sweep (|y*| = {len(cfg.target)}, {q}, {opt}, {seeds} seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def load_sweeps(spec: str) -> dict[str, tuple[dict[str, list[dict]], list[dict]]]:
    """``"label=dir+dir;label=dir"`` → per label the merged prover sweeps and outcome-only runs of those dirs."""
    out = {}
    for item in spec.split(";"):
        label, dirs = item.split("=", 1)
        sweep: dict[str, list[dict]] = {}
        outcome: list[dict] = []
        for d in dirs.split("+"):
            res = json.loads((Path(d) / "results.json").read_text())
            sweep.update(res.get("sweep", {}))
            runs = res.get("main", {}).get("outcome") or res.get("sweep_outcome", [])
            if not runs and "outcome_from" in res:
                ref = json.loads(Path(res["outcome_from"]).read_text())
                same = ref["config"].get("optimizer", "adam") == res["config"].get("optimizer", "adam")
                runs = ref["main"]["outcome"] if same else []  # another optimizer's outcome runs: not comparable
            outcome = outcome or runs
        out[label] = (sweep, outcome)
    return out


def plot_compare(sweeps: dict[str, tuple[dict, list[dict]]], at: int, path: Path) -> list[str]:
    """Accuracy at iteration ``at`` (left) and best accuracy up to ``at`` (right) vs γ, one line per setting.

    Outcome-only runs of the same setting are a dashed line of the same colour. Returns one text row per
    setting with the left panel's means.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 5.6), sharey=True)
    rows = []
    for i, (label, (sweep, outcome)) in enumerate(sweeps.items()):
        keys = sorted(sweep, key=float)
        g = np.array([float(k) for k in keys])
        for ax, peak in zip(axes, (False, True), strict=True):

            def metric(r: dict, peak: bool = peak) -> float:
                j = r["iters"].index(at)
                return max(r["accuracy"][: j + 1]) if peak else r["accuracy"][j]

            acc = np.array([[metric(r) for r in sweep[k]] for k in keys])
            m = acc.mean(1)
            ax.errorbar(g, m, yerr=[m - acc.min(1), acc.max(1) - m], fmt="o-", color=f"C{i}", capsize=3, label=label)
            out_acc = [metric(r) for r in outcome if at in r["iters"]]
            if out_acc:
                ax.axhline(np.mean(out_acc), color=f"C{i}", ls="--", lw=1, label=f"{label}: outcome only")
            if not peak:
                rows.append(f"{label}: " + ", ".join(f"γ={x:g}: {a:.3f}" for x, a in zip(g, m, strict=True)))
                rows[-1] += f"; outcome only: {np.mean(out_acc):.3f}" if out_acc else ""
    for ax, title in zip(axes, (f"accuracy at iteration {at}", f"best accuracy up to iteration {at}"), strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("prover strength γ (the SFT base policy imitates γ = 5)")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(-0.02, 1.02)
    axes[0].set_ylabel("accuracy (mean over seeds, bars: min-max)")
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=3)
    fig.suptitle("PAV didactic: progress reward vs prover strength")
    fig.tight_layout(rect=(0, 0.05 + 0.035 * ((len(labels) + 2) // 3), 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return rows
