"""``turnkit quickstart``: the main job, end to end on a laptop CPU in a few minutes.

1. Build (or load from the cache) the embedded tiny SFT policy (:func:`turnkit.train.embedded.tiny_policy`).
2. Evaluate it on held-out seeds of ``turnkit/MathEpisodes-v0`` (greedy; seeds from 10⁹ on, disjoint from
   the SFT demonstration seeds ``0 .. 1999`` and from every RL training seed).
3. Train it with the GRPO loop (:func:`turnkit.train.loop.train`) on the same task distribution.
4. Evaluate again on the same held-out seeds; print a before/after table with Wilson 95% intervals; write
   ``summary.json`` and ``quickstart.png`` (training curve + before/after bars) into the output folder.

``--seeds N`` repeats step 3-4 with ``N`` training seeds (the start policy and evaluation seeds stay the
same) and reports the mean improvement with a 95% interval over seeds.

Example:
    >>> cfg = quickstart_train_config(QuickstartConfig(out_dir="/tmp/qs", seed=1))
    >>> cfg.seed, cfg.out_dir, cfg.env_kwargs["difficulty"]
    (1, '/tmp/qs/train', 1)
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnkit.agents.hf import HFPolicy
from turnkit.errors import ConfigError
from turnkit.stats import mean_ci
from turnkit.train.config import TrainConfig
from turnkit.train.embedded import DEFAULT_RECIPE, TinyRecipe, tiny_policy
from turnkit.train.loop import evaluate_policy, train

QUICKSTART_TRAIN: dict[str, Any] = {
    "env_kwargs": {"difficulty": 1},
    "max_turns": 4,
    "group_size": 8,
    "groups_per_step": 16,
    "steps": 40,
    "lr": 2e-4,
    "temperature": 1.0,
    "max_new_tokens": 24,
    "eval_temperature": 0.0,
    "eval_episodes": 300,
    "checkpoint_every": 0,
}
"""The quickstart's RL recipe (any :class:`~turnkit.train.config.TrainConfig` key); see docs/training.md."""


@dataclass(frozen=True)
class QuickstartConfig:
    """Settings of :func:`run_quickstart`.

    Example:
        >>> QuickstartConfig(steps=0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: QuickstartConfig.steps must be None or >= 1, got 0
    """

    out_dir: str = "runs/quickstart"
    """Output folder (``summary.json``, ``quickstart.png``, ``train/``)."""
    seed: int = 0
    """RL training seed."""
    eval_episodes: int | None = None
    """Held-out episodes per evaluation (default: the recipe's 300)."""
    steps: int | None = None
    """RL steps (default: the recipe's)."""
    recipe: TinyRecipe = DEFAULT_RECIPE
    """The start policy's recipe."""
    train_overrides: dict[str, Any] = field(default_factory=dict)
    """Extra :class:`TrainConfig` values on top of :data:`QUICKSTART_TRAIN`."""
    cache: str | None = None
    """Cache root for the tiny policy (default ``$TURNKIT_CACHE`` or ``~/.cache/turnkit``)."""

    def __post_init__(self) -> None:
        for name in ("eval_episodes", "steps"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"QuickstartConfig.{name} must be None or >= 1, got {value!r}")


def quickstart_train_config(qcfg: QuickstartConfig) -> TrainConfig:
    """The :class:`TrainConfig` of one quickstart run."""
    values = {**QUICKSTART_TRAIN, **qcfg.train_overrides}
    values.update(seed=qcfg.seed, out_dir=str(Path(qcfg.out_dir) / "train"))
    if qcfg.steps is not None:
        values["steps"] = qcfg.steps
    if qcfg.eval_episodes is not None:
        values["eval_episodes"] = qcfg.eval_episodes
    return TrainConfig.from_dict(values, source="quickstart")


def _success(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "success": record["eval_success"],
        "ci95": [record["eval_success_lo"], record["eval_success_hi"]],
        "episodes": record["eval_episodes"],
        "mean_turns": record["eval_turns"],
        "errors": record["eval_errors"],
    }


def run_quickstart(
    qcfg: QuickstartConfig, *, progress: bool = True, policy: HFPolicy | None = None, verbose: bool = True
) -> dict[str, Any]:
    """Run the quickstart once (see the module docstring) and return its summary (also in ``summary.json``).

    Args:
        qcfg: Settings.
        progress: Show progress bars.
        policy: Start policy to use instead of the cached tiny policy (tests pass a micro one).
        verbose: Print the before/after table.
    """
    start = time.perf_counter()
    out = Path(qcfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = quickstart_train_config(qcfg)
    if policy is None:
        policy = tiny_policy(recipe=qcfg.recipe, cache=qcfg.cache, progress=progress)
    build_s = time.perf_counter() - start
    before = evaluate_policy(policy, cfg, progress=progress)
    result = train(cfg, policy=policy, progress=progress)
    after = evaluate_policy(result.policy, cfg, progress=progress)
    wall = time.perf_counter() - start
    steps = [r for r in result.history if "reward_mean" in r]
    summary = {
        "env_id": cfg.env_id,
        "env_kwargs": cfg.env_kwargs,
        "split": cfg.split,
        "seed": qcfg.seed,
        "eval_seeds": [cfg.eval_seed, cfg.eval_seed + cfg.eval_episodes - 1],
        "eval_temperature": cfg.eval_temperature,
        "before": _success(before),
        "after": _success(after),
        "improvement": after["eval_success"] - before["eval_success"],
        "wall_s": wall,
        "time_s": {
            "build_or_load_policy": build_s,
            "eval_before": before["eval_s"],
            "train": sum(r["rollout_s"] + r["update_s"] for r in steps),
            "train_rollout": sum(r["rollout_s"] for r in steps),
            "train_update": sum(r["update_s"] for r in steps),
            "eval_after": after["eval_s"],
        },
        "train_config": cfg.to_dict(),
        "recipe": dataclasses.asdict(qcfg.recipe),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    plot_quickstart(steps, summary, out / "quickstart.png")
    if verbose:
        print(format_table([summary]))
        print(f"wall time {wall:.0f}s -> {out / 'summary.json'}, {out / 'quickstart.png'}")
    return summary


def format_table(summaries: Sequence[dict[str, Any]]) -> str:
    """A before/after table, one line per training seed.

    Example:
        >>> s = {"seed": 0, "before": {"success": 0.3, "ci95": [0.25, 0.35], "episodes": 300},
        ...      "after": {"success": 0.6, "ci95": [0.55, 0.65], "episodes": 300}, "improvement": 0.3}
        >>> print(format_table([s]))
        seed  held-out success before   held-out success after    change
           0  0.300 [0.250, 0.350]      0.600 [0.550, 0.650]      +0.300
    """
    lines = ["seed  held-out success before   held-out success after    change"]
    for s in summaries:
        b, a = s["before"], s["after"]
        lines.append(
            f"{s['seed']:>4}  {b['success']:.3f} [{b['ci95'][0]:.3f}, {b['ci95'][1]:.3f}]      "
            f"{a['success']:.3f} [{a['ci95'][0]:.3f}, {a['ci95'][1]:.3f}]      {s['improvement']:+.3f}"
        )
    return "\n".join(lines)


def plot_quickstart(steps: Sequence[dict[str, Any]], summary: dict[str, Any], path: Path) -> None:
    """Training curve (batch success per step) and before/after bars with 95% intervals, in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.5, 3.4), gridspec_kw={"width_ratios": [2, 1]})
    xs = [r["step"] for r in steps]
    ax1.plot(xs, [r["success_rate"] for r in steps], marker=".", lw=1.2, label="training batch success (T=1)")
    ax1.set_xlabel("GRPO step")
    ax1.set_ylabel("success rate")
    ax1.set_ylim(0, 1)
    ax1.grid(alpha=0.3)
    ax1.legend(loc="lower right", fontsize=8)
    labels = ["SFT start", "after RL"]
    values = [summary["before"]["success"], summary["after"]["success"]]
    errs = [
        [v - s["ci95"][0] for v, s in zip(values, (summary["before"], summary["after"]), strict=True)],
        [s["ci95"][1] - v for v, s in zip(values, (summary["before"], summary["after"]), strict=True)],
    ]
    ax2.bar(labels, values, yerr=errs, capsize=6, color=["#999999", "#3a7bd5"])
    ax2.set_ylim(0, 1)
    ax2.set_title(f"held-out success ({summary['before']['episodes']} episodes, 95% CI)", fontsize=9)
    fig.suptitle(f"turnkit quickstart: {summary['env_id']} {summary['env_kwargs']}, seed {summary['seed']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_seeds(qcfg: QuickstartConfig, seeds: Sequence[int], *, progress: bool = True) -> dict[str, Any]:
    """Run the quickstart once per training seed (into ``out_dir/seed-N``) and aggregate over seeds.

    Returns:
        ``{"runs": [...per-seed summaries...], "improvement_mean": m, "improvement_ci95": [lo, hi], ...}``,
        also written to ``out_dir/summary.json``.
    """
    if not seeds:
        raise ConfigError("run_seeds needs at least one seed")
    runs = []
    for seed in seeds:
        sub = dataclasses.replace(qcfg, seed=seed, out_dir=str(Path(qcfg.out_dir) / f"seed-{seed}"))
        runs.append(run_quickstart(sub, progress=progress, verbose=False))
    deltas = [r["improvement"] for r in runs]
    mean, lo, hi = mean_ci(deltas)
    after_mean, after_lo, after_hi = mean_ci([r["after"]["success"] for r in runs])
    agg = {
        "seeds": list(seeds),
        "before_success": runs[0]["before"]["success"],
        "after_success_mean": after_mean,
        "after_success_ci95": [after_lo, after_hi],
        "improvement_mean": mean,
        "improvement_ci95": [lo, hi],
        "wall_s_per_seed": [r["wall_s"] for r in runs],
        "runs": runs,
    }
    out = Path(qcfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(agg, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(format_table(runs))
    print(
        f"over {len(seeds)} seeds: after {after_mean:.3f} [{after_lo:.3f}, {after_hi:.3f}], "
        f"change {mean:+.3f} [{lo:+.3f}, {hi:+.3f}] (mean, 95% CI over seeds) -> {out / 'summary.json'}"
    )
    return agg
