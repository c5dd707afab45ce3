"""``turnkit quickstart``: the main job, end to end on a laptop CPU in a few minutes.

1. Build (or load from the cache) the embedded tiny SFT policy (:func:`turnkit.models.embedded.tiny_policy`).
2. Evaluate it on held-out seeds of ``turnkit/MathEpisodes-v0`` (greedy, and sampled at the training
   temperature; seeds from 10⁹ on, disjoint from the SFT demonstration seeds ``0 .. 1999`` and from every RL
   training seed). With ``max_attempts`` above 1 (``--set env_kwargs.max_attempts=2``) a wrong answer gets
   ``"Incorrect. 1 attempt left."`` and a retry.
3. Train it with the GRPO loop (:func:`turnkit.train.loop.train`) on the same task distribution.
4. Evaluate again on the same held-out seeds; print a before/after table with Wilson 95% intervals, the mean
   turns per episode and the share of episodes won on a retry (:func:`retry_stats`); write ``summary.json``
   and ``quickstart.png`` (training curve + before/after bars split by first answer and retry) into the
   output folder.

The output folder, which ``turnkit view runs/quickstart`` shows (curves, evaluations and every held-out
episode)::

    summary.json, quickstart.png
    train/                      the GRPO run (config.json, metrics.jsonl, checkpoints/, curves.png)
    eval/sft-greedy/            trajectories.jsonl + summary.json of each held-out evaluation:
    eval/sft-sampled/           the start policy and the trained one, greedy and at the training temperature
    eval/rl-greedy/
    eval/rl-sampled/

``--seeds N`` repeats step 3-4 with ``N`` training seeds (the start policy and evaluation seeds stay the
same) and reports the mean improvement with a 95% interval over seeds.

Example:
    >>> cfg = quickstart_train_config(QuickstartConfig(out_dir="/tmp/qs", seed=1))
    >>> cfg.seed, cfg.out_dir, cfg.env_kwargs["max_attempts"], cfg.grpo.per_turn
    (1, '/tmp/qs/train', 2, True)
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from turnkit.agents.hf import HFPolicy
from turnkit.configs import check_int, check_str
from turnkit.errors import ConfigError
from turnkit.models import embedded
from turnkit.models.embedded import TinyRecipe, tiny_policy
from turnkit.models.threads import torch_threads
from turnkit.stats import mean_ci, wilson_interval
from turnkit.train.config import TABLES, TrainConfig
from turnkit.train.loop import evaluate_policy, step_sampling_seed, train
from turnkit.train.quickstart_smollm2 import SMOLLM2_TRAIN, SMOLLM2_WARM_START, smollm2_start_policy
from turnkit.train.runlock import RunLock
from turnkit.train.warmstart import WarmStartConfig

QUICKSTART_TRAIN: dict[str, Any] = {
    # two answers per episode: a wrong first answer gets "Incorrect. 1 attempt left." and a retry; the 2-turn
    # limit also caps replies without an answer, so a failed episode cannot fill up with turns
    "env_kwargs": {"difficulty": 1, "kinds": ["arithmetic"], "max_attempts": 2, "max_episode_steps": 2},
    # per-turn credit: a wrong first answer in an episode won on the retry earns gamma * 1, not the full 1
    "grpo": {"group_size": 8, "kl_coef": 0.0, "per_turn": True, "gamma": 0.5},
    "groups_per_step": 16,
    "steps": 300,
    "optim": {"lr": 5e-4},
    "sampling": {"temperature": 1.0, "max_new_tokens": 12},
    "eval": {"temperature": 0.0, "episodes": 300},
    "log": {"checkpoint_every": 100},
}
"""The quickstart's RL recipe (any :class:`~turnkit.train.config.TrainConfig` key); see docs/training.md."""

SINGLE_TURN_TRAIN: dict[str, Any] = {
    **QUICKSTART_TRAIN,
    "env_kwargs": {"difficulty": 1, "kinds": ["arithmetic"], "max_attempts": 1},
    "grpo": {"group_size": 8, "kl_coef": 0.0},
    "steps": 600,
    "log": {"checkpoint_every": 200},
}
"""One answer per episode, 600 steps: the recipe ``studies/critics_quickstart.py`` and
``studies/sft_float_paths.py`` measure (pass it as ``train_overrides``)."""

QUICKSTART_MODELS: dict[str, dict[str, Any]] = {"tiny": QUICKSTART_TRAIN, "smollm2": SMOLLM2_TRAIN}
"""Each start model's RL recipe: the embedded tiny policy, or SmolLM2-135M-Instruct after a LoRA warm start
(:mod:`turnkit.train.quickstart_smollm2`)."""


@dataclass(frozen=True)
class QuickstartConfig:
    """Settings of :func:`run_quickstart`.

    Example:
        >>> QuickstartConfig(steps=0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: QuickstartConfig.steps must be null or an int >= 1, got 0
    """

    out_dir: str = "runs/quickstart"
    """Output folder (``summary.json``, ``quickstart.png``, ``train/``)."""
    model: str = "tiny"
    """The start model, a key of :data:`QUICKSTART_MODELS`: ``tiny`` or ``smollm2``."""
    seed: int = 0
    """RL training seed."""
    eval_episodes: int | None = None
    """Held-out episodes per evaluation (default: the recipe's 300)."""
    steps: int | None = None
    """RL steps (default: the recipe's)."""
    recipe: TinyRecipe | None = None
    """The tiny start policy's recipe (default: :data:`turnkit.models.embedded.DEFAULT_RECIPE`)."""
    warm_start: WarmStartConfig | None = None
    """SmolLM2's warm start (default: :data:`~turnkit.train.quickstart_smollm2.SMOLLM2_WARM_START`)."""
    train_overrides: dict[str, Any] = field(default_factory=dict)
    """Extra :class:`TrainConfig` values on top of the model's recipe (:data:`QUICKSTART_MODELS`)."""
    cache: str | None = None
    """Cache root of the start model (default ``$TURNKIT_CACHE`` or ``~/.cache/turnkit``)."""
    threads: int | None = 1
    """Torch threads (``None``: torch's default). One, for both models: the tiny model gains nothing from more;
    SmolLM2 gains 1.15x from a second thread on a quiet 2-core box and runs 3.2x slower with it when another process
    holds a core (BENCHMARKS.md, "SmolLM2-135M"); and results then do not depend on the machine's core count."""

    def __post_init__(self) -> None:
        check_str(self, "out_dir")
        check_int(self, "seed", low=0)
        check_int(self, "eval_episodes", "steps", "threads", optional=True)
        check_str(self, "cache", optional=True)
        if self.model not in QUICKSTART_MODELS:
            raise ConfigError(f"QuickstartConfig.model must be one of {sorted(QUICKSTART_MODELS)}, got {self.model!r}")
        if self.warm_start is not None and not isinstance(self.warm_start, WarmStartConfig):
            raise ConfigError(f"QuickstartConfig.warm_start must be null or a WarmStartConfig, got {self.warm_start!r}")
        if self.recipe is not None and not isinstance(self.recipe, TinyRecipe):
            raise ConfigError(f"QuickstartConfig.recipe must be null or a TinyRecipe, got {self.recipe!r}")
        if not isinstance(self.train_overrides, dict):
            raise ConfigError(f"QuickstartConfig.train_overrides must be a table, got {self.train_overrides!r}")


def quickstart_train_config(qcfg: QuickstartConfig) -> TrainConfig:
    """The :class:`TrainConfig` of one quickstart run."""
    base = QUICKSTART_MODELS[qcfg.model]
    values = {**base, **qcfg.train_overrides}
    for table in TABLES:  # a partial table overrides keys of the recipe's, not the whole table
        if isinstance(qcfg.train_overrides.get(table), dict) and isinstance(base.get(table), dict):
            values[table] = {**base[table], **qcfg.train_overrides[table]}
    values.update(seed=qcfg.seed, out_dir=str(Path(qcfg.out_dir) / "train"))
    if qcfg.steps is not None:
        values["steps"] = qcfg.steps
    if qcfg.eval_episodes is not None:
        values["eval"] = {**values.get("eval", {}), "episodes": qcfg.eval_episodes}
    return TrainConfig.from_dict(values, source="quickstart")


def retry_stats(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """How episodes were won: with the first answer, or on a retry after ``"Incorrect. N attempts left."``.

    A *recovery* is an episode won after at least one wrong answer (two or more turns with
    ``info["answered"]``). A turn without an answer (``"No answer yet."``) spends no attempt and is no retry.

    Args:
        records: Episodes as ``trajectories.jsonl`` records (:func:`turnkit.rollout.records.trajectory_to_record`).

    Returns:
        ``first_try`` and ``recoveries`` (shares of all episodes, summing to the success rate), the Wilson 95%
        interval of ``recoveries`` and ``mean_turns``.

    Example:
        >>> turn = lambda answered: {"info": {"answered": answered}}
        >>> episodes = [{"success": True, "steps": [turn(True)]},
        ...             {"success": True, "steps": [turn(True), turn(True)]},
        ...             {"success": True, "steps": [turn(True), turn(False), turn(True)]},
        ...             {"success": False, "steps": [turn(True), turn(True)]}]
        >>> s = retry_stats(episodes)
        >>> s["first_try"], s["recoveries"], s["mean_turns"]
        (0.25, 0.5, 2.0)
    """
    n = won_first = recovered = turns = 0
    for rec in records:
        n += 1
        turns += len(rec["steps"])
        answers = sum(bool(step["info"].get("answered")) for step in rec["steps"])
        won_first += bool(rec["success"]) and answers <= 1
        recovered += bool(rec["success"]) and answers >= 2
    lo, hi = wilson_interval(recovered, n)
    return {
        "first_try": won_first / max(n, 1),
        "recoveries": recovered / max(n, 1),
        "recoveries_ci95": [lo, hi],
        "mean_turns": turns / max(n, 1),
    }


def last_step_sampling(policy: HFPolicy, cfg: TrainConfig) -> HFPolicy:
    """The trained policy sampling with its last training step's seed, as the quickstart's tables were measured.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> from turnkit.train.loop import step_sampling_seed
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
        >>> last_step_sampling(policy, TrainConfig(steps=5)).sampling.seed == step_sampling_seed(0, 5)
        True
    """
    return policy.with_sampling(seed=step_sampling_seed(cfg.seed, cfg.steps))


def _evaluate(policy: HFPolicy, cfg: TrainConfig, out_dir: Path, progress: bool) -> dict[str, Any]:
    """One held-out evaluation, kept in ``out_dir``: success with its interval, turns and recoveries."""
    record = evaluate_policy(policy, cfg, progress=progress, out_dir=out_dir)
    with open(out_dir / "trajectories.jsonl", encoding="utf-8") as f:
        retries = retry_stats(json.loads(line) for line in f)
    return {
        "success": record["eval_success"],
        "ci95": [record["eval_success_lo"], record["eval_success_hi"]],
        "episodes": record["eval_episodes"],
        "errors": record["eval_errors"],
        "eval_s": record["eval_s"],
        **retries,
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

    Raises:
        RunLockedError: Another process is using ``qcfg.out_dir`` (its ``train/`` folder has a lock of its own).
    """
    with RunLock(qcfg.out_dir), torch_threads(qcfg.threads):
        return _run_quickstart(qcfg, progress=progress, policy=policy, verbose=verbose)


def _run_quickstart(qcfg: QuickstartConfig, *, progress: bool, policy: HFPolicy | None, verbose: bool) -> dict:
    start = time.perf_counter()
    out = Path(qcfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = quickstart_train_config(qcfg)
    warm_start = None
    if policy is None and qcfg.model == "smollm2":
        policy, warm_start = smollm2_start_policy(
            cache=qcfg.cache, progress=progress, warm_start=qcfg.warm_start or SMOLLM2_WARM_START
        )
    elif policy is None:
        policy = tiny_policy(recipe=qcfg.recipe, cache=qcfg.cache, progress=progress)
    build_s = time.perf_counter() - start
    sampled = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, temperature=cfg.sampling.temperature))
    before = _evaluate(policy, cfg, out / "eval" / "sft-greedy", progress)
    before_sampled = _evaluate(policy, sampled, out / "eval" / "sft-sampled", progress)
    train_start = time.perf_counter()
    result = train(cfg, policy=policy, progress=progress)
    train_wall = time.perf_counter() - train_start
    trained = last_step_sampling(result.policy, cfg)
    after = _evaluate(trained, cfg, out / "eval" / "rl-greedy", progress)
    after_sampled = _evaluate(trained, sampled, out / "eval" / "rl-sampled", progress)
    wall = time.perf_counter() - start
    steps = [r for r in result.history if "reward_mean" in r]
    summary = {
        "env_id": cfg.env_id,
        "env_kwargs": cfg.env_kwargs,
        "split": cfg.split,
        "seed": qcfg.seed,
        "eval_seeds": [cfg.eval.seed, cfg.eval.seed + cfg.eval.episodes - 1],
        "eval_temperature": cfg.eval.temperature,
        "before": before,
        "after": after,
        "improvement": after["success"] - before["success"],
        "sampled": {
            "temperature": cfg.sampling.temperature,
            "before": before_sampled,
            "after": after_sampled,
            "improvement": after_sampled["success"] - before_sampled["success"],
        },
        "wall_s": wall,
        "torch_threads": torch.get_num_threads(),
        "time_s": {
            "build_or_load_policy": build_s,
            "eval_before": before["eval_s"] + before_sampled["eval_s"],
            "train": sum(r["rollout_s"] + r["update_s"] for r in steps),
            "train_wall": train_wall,  # differs from "train" with async rollouts: they overlap the updates
            "train_rollout": sum(r["rollout_s"] for r in steps),
            "train_update": sum(r["update_s"] for r in steps),
            "eval_after": after["eval_s"] + after_sampled["eval_s"],
        },
        "train_config": cfg.to_dict(),
        "model": qcfg.model,
        "recipe": dataclasses.asdict(qcfg.recipe or embedded.DEFAULT_RECIPE) if qcfg.model == "tiny" else None,
        "warm_start": warm_start,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    plot_quickstart(steps, summary, out / "quickstart.png")
    if verbose:
        print(format_table([summary]))
        print(f"wall time {wall:.0f}s -> {out / 'summary.json'}, {out / 'quickstart.png'}")
    return summary


def format_table(summaries: Sequence[dict[str, Any]]) -> str:
    """A before/after table (sampled at the training temperature, and greedy), one line per training seed.

    Besides success: the mean turns per episode and the share of episodes won on a retry, after
    ``"Incorrect."`` feedback (:func:`retry_stats`), before -> after RL.

    Example:
        >>> ev = lambda p, r: {"success": p, "ci95": [p - 0.05, p + 0.05], "episodes": 300, "mean_turns": 2 - p,
        ...                    "recoveries": r}
        >>> s = {"seed": 0, "before": ev(0.8, 0.0), "after": ev(0.8, 0.02), "improvement": 0.0,
        ...      "sampled": {"before": ev(0.5, 0.05), "after": ev(0.7, 0.15), "improvement": 0.2}}
        >>> print(format_table([s]))
        seed  decoding         SFT start                after RL            change   turns/episode  won on a retry
           0  sampled T=1   0.500 [0.450, 0.550]   0.700 [0.650, 0.750]   +0.200   1.50 -> 1.30   0.050 -> 0.150
           0  greedy        0.800 [0.750, 0.850]   0.800 [0.750, 0.850]   +0.000   1.20 -> 1.20   0.000 -> 0.020
    """

    def cell(e: dict[str, Any]) -> str:
        return f"{e['success']:.3f} [{e['ci95'][0]:.3f}, {e['ci95'][1]:.3f}]"

    header = "seed  decoding         SFT start                after RL            change"
    lines = [f"{header}   turns/episode  won on a retry"]
    for s in summaries:
        sampled = f"sampled T={s['sampled'].get('temperature', 1.0):g}"
        for label, part in ((sampled, s["sampled"]), ("greedy", s)):
            b, a = part["before"], part["after"]
            lines.append(
                f"{s['seed']:>4}  {label:<12}  {cell(b)}   {cell(a)}   {part['improvement']:+.3f}   "
                f"{b['mean_turns']:.2f} -> {a['mean_turns']:.2f}   {b['recoveries']:.3f} -> {a['recoveries']:.3f}"
            )
    return "\n".join(lines)


def plot_quickstart(steps: Sequence[dict[str, Any]], summary: dict[str, Any], path: Path) -> None:
    """Training curve (batch success per step) and before/after bars with 95% intervals, in one PNG.

    Each bar splits held-out success into episodes won with the first answer and on a retry (hatched); its
    label gives the mean turns per episode.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [2, 1]})
    xs = [r["step"] for r in steps]
    ys = [r["success_rate"] for r in steps]
    ax1.plot(xs, ys, lw=0.8, alpha=0.45, label="training batch success (sampled)")
    window = max(1, len(ys) // 10)
    smooth = [sum(ys[max(0, i - window + 1) : i + 1]) / len(ys[max(0, i - window + 1) : i + 1]) for i in range(len(ys))]
    ax1.plot(xs, smooth, lw=2.0, label=f"moving average ({window} steps)")
    ax1.set_xlabel("GRPO step")
    ax1.set_ylabel("success rate")
    ax1.set_ylim(0, 1)
    ax1.grid(alpha=0.3)
    ax1.legend(loc="lower right", fontsize=8)
    bars = [
        ("SFT\ngreedy", summary["before"]),
        ("RL\ngreedy", summary["after"]),
        ("SFT\nsampled", summary["sampled"]["before"]),
        ("RL\nsampled", summary["sampled"]["after"]),
    ]
    labels = [f"{label}\n{b['mean_turns']:.2f} turns" for label, b in bars]
    values = [b["success"] for _, b in bars]
    errs = [[v - b["ci95"][0] for v, (_, b) in zip(values, bars, strict=True)],
            [b["ci95"][1] - v for v, (_, b) in zip(values, bars, strict=True)]]  # fmt: skip
    colors = ["#999999", "#3a7bd5"] * 2
    first = [b["first_try"] for _, b in bars]
    ax2.bar(labels, first, color=colors, label="won with the first answer")
    ax2.bar(labels, [b["recoveries"] for _, b in bars], bottom=first, yerr=errs, capsize=5, color=colors, alpha=0.45,
            hatch="//", edgecolor="white", label="won on a retry")  # fmt: skip
    ax2.set_ylim(0, 1.22)  # room for the legend above the bars
    ax2.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax2.tick_params(axis="x", labelsize=8)
    ax2.legend(loc="upper center", ncol=2, fontsize=6.5, handlelength=1.5, columnspacing=0.8)
    ax2.set_title(f"held-out success ({summary['before']['episodes']} episodes, 95% CI)", fontsize=9)
    fig.suptitle(
        f"turnkit quickstart ({summary.get('model', 'tiny')}): {summary['env_id']} {summary['env_kwargs']}, "
        f"seed {summary['seed']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def aggregate_seeds(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean and 95% interval over seeds of the per-seed quickstart summaries (:func:`run_quickstart`'s).

    Runs launched apart (``--seed 0 --seeds 3``, later ``--seed 3 --seeds 2``) merge into one summary this way,
    provided they share the start policy and the evaluation seeds; a mismatch raises.

    Returns:
        ``{"seeds", "wall_s_per_seed", "sampled": {...}, "greedy": {...}, "runs"}``: per decoding the start's
        success, the mean success after RL and the mean change with Student-t 95% intervals, the same for
        episodes won on a retry, and the mean turns per episode.

    Raises:
        ConfigError: No runs, or runs whose start evaluations differ.

    Example:
        >>> def run(seed, after):
        ...     e = lambda s: {"success": s, "recoveries": 0.0, "mean_turns": 1.0}
        ...     decoding = {"before": e(0.5), "after": e(after), "improvement": after - 0.5}
        ...     return {"seed": seed, "wall_s": 60.0, **decoding, "sampled": dict(decoding)}
        >>> agg = aggregate_seeds([run(0, 0.7), run(1, 0.8), run(2, 0.9)])
        >>> agg["seeds"], round(agg["sampled"]["improvement_mean"], 3), agg["greedy"]["before_success"]
        ([0, 1, 2], 0.3, 0.5)
    """
    if not runs:
        raise ConfigError("aggregate_seeds needs at least one run")
    agg: dict[str, Any] = {"seeds": [r["seed"] for r in runs], "wall_s_per_seed": [r["wall_s"] for r in runs]}
    for name, pick in (("sampled", lambda r: r["sampled"]), ("greedy", lambda r: r)):
        if len({_outcome_key(pick(r)["before"]) for r in runs}) > 1:
            raise ConfigError(
                f"runs of seeds {agg['seeds']} start from different {name} evaluations; "
                "only runs of the same start policy and evaluation seeds aggregate"
            )
        mean, lo, hi = mean_ci([pick(r)["improvement"] for r in runs])
        after_mean, after_lo, after_hi = mean_ci([pick(r)["after"]["success"] for r in runs])
        rec_mean, rec_lo, rec_hi = mean_ci([pick(r)["after"]["recoveries"] for r in runs])
        agg[name] = {
            "before_success": pick(runs[0])["before"]["success"],
            "after_success_mean": after_mean,
            "after_success_ci95": [after_lo, after_hi],
            "improvement_mean": mean,
            "improvement_ci95": [lo, hi],
            "recoveries_before": pick(runs[0])["before"]["recoveries"],
            "recoveries_after_mean": rec_mean,
            "recoveries_after_ci95": [rec_lo, rec_hi],
            "mean_turns_before": pick(runs[0])["before"]["mean_turns"],
            "mean_turns_after_mean": sum(pick(r)["after"]["mean_turns"] for r in runs) / len(runs),
        }
    agg["runs"] = list(runs)
    return agg


def _outcome_key(evaluation: dict[str, Any]) -> str:
    """An evaluation's outcome (everything but its timing) as a comparable string."""
    return json.dumps({k: v for k, v in evaluation.items() if k != "eval_s"}, sort_keys=True)


def run_seeds(qcfg: QuickstartConfig, seeds: Sequence[int], *, progress: bool = True) -> dict[str, Any]:
    """Run the quickstart once per training seed (into ``out_dir/seed-N``) and aggregate over seeds.

    Returns:
        ``{"runs": [...per-seed summaries...], "improvement_mean": m, "improvement_ci95": [lo, hi], ...}``,
        also written to ``out_dir/summary.json``.

    Raises:
        RunLockedError: Another process is using ``qcfg.out_dir``.
    """
    if not seeds:
        raise ConfigError("run_seeds needs at least one seed")
    with RunLock(qcfg.out_dir):
        return _run_seeds(qcfg, seeds, progress=progress)


def _run_seeds(qcfg: QuickstartConfig, seeds: Sequence[int], *, progress: bool) -> dict[str, Any]:
    runs = []
    for seed in seeds:
        sub = dataclasses.replace(qcfg, seed=seed, out_dir=str(Path(qcfg.out_dir) / f"seed-{seed}"))
        runs.append(run_quickstart(sub, progress=progress, verbose=False))
    agg = aggregate_seeds(runs)
    out = Path(qcfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(agg, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(format_table(runs))
    for name in ("sampled", "greedy"):
        a = agg[name]
        print(
            f"{name} over {len(agg['seeds'])} seeds: {a['before_success']:.3f} -> {a['after_success_mean']:.3f} "
            f"[{a['after_success_ci95'][0]:.3f}, {a['after_success_ci95'][1]:.3f}], change "
            f"{a['improvement_mean']:+.3f} [{a['improvement_ci95'][0]:+.3f}, {a['improvement_ci95'][1]:+.3f}] "
            "(mean, 95% CI over seeds)"
        )
        print(
            f"{name} won on a retry: {a['recoveries_before']:.3f} -> {a['recoveries_after_mean']:.3f} "
            f"[{a['recoveries_after_ci95'][0]:.3f}, {a['recoveries_after_ci95'][1]:.3f}]; turns per episode "
            f"{a['mean_turns_before']:.2f} -> {a['mean_turns_after_mean']:.2f}"
        )
    print(f"-> {out / 'summary.json'}")
    return agg
