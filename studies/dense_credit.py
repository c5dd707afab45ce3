"""Dense credit on SmolLM2-135M, each method through its paper's estimator, vs outcome-only GRPO (issue #51, item 3).

Question: with each dense-credit method's own advantage estimator (``grpo.estimator``; rewards kept by source,
no group ``sigma``), does step-wise credit make SmolLM2 better at multi-turn MathEpisodes than outcome-only GRPO,
and how much of the way to perfect step-wise credit (the oracle critic) does each learned or rolled-out
critic get?

Protocol: everything as in ``smollm2_grpo.py`` and ``smollm2_prime.py``, seed for seed:

* Start: the warm-started SmolLM2 of each float path
  (:func:`~turnkit.train.quickstart_smollm2.smollm2_start_policy`, cached under ``$TURNKIT_CACHE``).
* Arms (:data:`ARMS`), each :data:`~turnkit.train.quickstart_smollm2.SMOLLM2_TRAIN` plus one critic read
  through one estimator:

  - ``grpo``: outcome-only GRPO, the control; its seeds are ``smollm2_grpo.py``'s files, and it is run here
    only at another length (``--steps``, into its own ``--out``, which then is its own ``--control``).
  - ``oracle``: the oracle credit critic (:mod:`turnkit.critics.oracle`, the ceiling of step-wise credit)
    through ``pav``: a progress source read through ``prime`` or ``mrt`` telescopes (the first turn gets
    ``V_end - V_0``), through ``pav`` each turn is credited with its own gain (docs/training.md).
  - ``oracle-binary``: the same with binary credit (``partial = false``: only the turn with the right answer
    gains), which tells the partial credit's effect (a close wrong answer is paid) from the estimator's.
  - ``prime``: PRIME's implicit PRM through ``prime`` (RLOO on each source).
  - ``prime-outcome``: ``prime``'s estimator with no critic (RLOO on the outcome, PRIME's prompt filter):
    ``prime`` without its PRM, which tells the PRM's effect from the estimator's.
  - ``prime-turn``: the same PRM trained on each turn's own reward instead of the episode's outcome
    (``labels = "turn"``): with retries, a won episode's wrong attempts are otherwise labelled right.
  - ``prime-norm``: ``prime`` with PRIME's own process scale (``norm = "batch"``, its code's
    ``prime_norm = batch_norm``): the process rewards divided by the batch's largest process return-to-go.
  - ``mrt``: MRT's progress (live-policy one-turn samples) through ``mrt`` (progress as rewards-to-go).
  - ``pav``: PAV's prover advantage (frozen-start rollouts) through ``pav``.

* RL seeds 0-4, 20 steps of 4 groups x 4, lr 3e-4, the policy update in micro-batches of 8 rows (as
  ``smollm2_prime.py``; the same sum of gradients). The loop draws training task seeds outside the held-out
  ones, so every arm draws the control's tasks seed for seed.
* Held-out: 200 episodes greedy and 200 at T = 1 (seeds 10^9 ..). Per arm, float path and decoding: success
  (mean over seeds), the paired difference to the control (mean, Student-t 95% interval), first-answer
  success, episodes won on a retry, turns per episode.

Commands (one heavy process at a time on a 2-core box)::

    python studies/dense_credit.py run --arms oracle prime --seeds 0 1 --path native
    ATEN_CPU_CAPABILITY=default TURNKIT_CACHE=/tmp/tk_default python studies/dense_credit.py run --path default
    python studies/dense_credit.py report      # summary.json, dense_credit.png and the table
    python studies/dense_credit.py check       # toy size end to end (minutes): one step per arm, 4 episodes

Each run writes ``--out/<arm>/<path>/seed-N.json`` with its machine record; ``run`` skips those that exist, so an
interrupted study resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from common.credit_agreement import run_agreement
from common.provenance import machine_record, write_result
from common.seeds import load_seeds, paired
from common.seeds import pending as seeds_pending
from smollm2_grpo import STEP_KEYS, evaluate

from turnkit.train.config import TrainConfig
from turnkit.train.loop import train
from turnkit.train.quickstart_smollm2 import SMOLLM2_TRAIN, smollm2_start_policy

CONTROL = "grpo"
"""The arm whose seeds are ``smollm2_grpo.py``'s: every other arm is compared with it, seed for seed."""

ARMS: dict[str, tuple[dict[str, Any] | None, str]] = {
    CONTROL: (None, "grpo"),
    "oracle": ({"oracle": {"weight": 1.0}}, "pav"),
    "oracle-binary": ({"oracle": {"weight": 1.0, "partial": False}}, "pav"),
    "prime": ({"prime": {"weight": 1.0}}, "prime"),
    "prime-outcome": (None, "prime"),
    "prime-turn": ({"prime": {"weight": 1.0, "labels": "turn"}}, "prime"),
    "prime-norm": ({"prime": {"weight": 1.0, "norm": "batch"}}, "prime"),
    "mrt": ({"mrt": {"weight": 1.0}}, "mrt"),
    "pav": ({"pav": {"weight": 1.0}}, "pav"),
}
"""Arm name -> (its ``critic`` table, its ``grpo.estimator``)."""

DECODINGS = ("greedy", "sampled")

MICRO_BATCH_ROWS = 8
"""Rows per forward + backward of the policy update, as ``smollm2_prime.py`` (PRIME's PRM also sits in memory)."""

CHECK_OUT = "/tmp/dense_credit_check"
"""Where ``check`` writes: seed 0 of each arm, one step, 4 held-out episodes."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The study's command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["run", "seed", "agree", "report", "check"])
    parser.add_argument("--arms", nargs="+", default=[a for a in ARMS if a != CONTROL], help="arms to run")
    parser.add_argument("--path", default="native", help="float path label of this process (native, default)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="RL seeds")
    parser.add_argument("--seed", type=int, default=0, help="the RL seed of `seed`")
    parser.add_argument("--eval-episodes", type=int, default=200, help="held-out episodes per decoding")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the recipe's)")
    parser.add_argument("--control", default="studies/results/smollm2_grpo", help="smollm2_grpo.py's results")
    parser.add_argument("--out", default="studies/results/dense_credit")
    parser.add_argument("--runs", default="runs/dense_credit", help="training run folders")
    args = parser.parse_args(argv)
    check_arms(args.arms, runnable=args.action in ("run", "seed", "check"), steps=args.steps)
    return args


def check_arms(arms: Sequence[str], *, runnable: bool, steps: int | None = None) -> None:
    """Refuse an unknown arm, and the control where arms are run at the recipe's length (its seeds are
    ``smollm2_grpo.py``'s); at another length (``steps``) the control runs here too.

    Example:
        >>> check_arms(["oracle", "prime"], runnable=True)
        >>> check_arms(["orcale"], runnable=True)
        Traceback (most recent call last):
        ...
        SystemExit: unknown arm 'orcale'; the arms are grpo, oracle, oracle-binary, prime, prime-outcome, ...
        >>> check_arms(["grpo"], runnable=True)
        Traceback (most recent call last):
        ...
        SystemExit: the grpo arm is run here only with --steps: at the recipe's length its seeds are smollm2_grpo.py's
        >>> check_arms(["grpo", "oracle"], runnable=True, steps=40)
    """
    for arm in arms:
        if arm not in ARMS:
            raise SystemExit(f"unknown arm {arm!r}; the arms are {', '.join(ARMS)}")
        if runnable and arm == CONTROL and steps is None:
            raise SystemExit(
                f"the {CONTROL} arm is run here only with --steps: at the recipe's length its seeds are "
                "smollm2_grpo.py's"
            )


def arm_config(
    arm: str,
    seed: int,
    out_dir: str,
    *,
    eval_episodes: int = 200,
    steps: int | None = None,
    base: Mapping[str, Any] = SMOLLM2_TRAIN,
) -> TrainConfig:
    """The recipe ``base`` with the arm's critic and estimator, the update in micro-batches.

    ``eval_episodes`` is the study's held-out count: the loop draws training task seeds outside
    ``[10^9, 10^9 + eval_episodes)``, so it must equal the control's for the arms to draw the same tasks.

    Example:
        >>> cfg = arm_config("oracle", 3, "/tmp/x")
        >>> cfg.critic, cfg.grpo.estimator, cfg.seed, cfg.update.micro_batch_rows, cfg.eval.episodes
        ({'oracle': {'weight': 1.0}}, 'pav', 3, 8, 200)
        >>> arm_config("prime", 0, "/tmp/x", steps=2).steps
        2
    """
    critic, estimator = ARMS[arm]
    values = {**base, "seed": seed, "out_dir": out_dir, "critic": critic}
    values["grpo"] = {**base.get("grpo", {}), "estimator": estimator}
    values["update"] = {**base.get("update", {}), "micro_batch_rows": MICRO_BATCH_ROWS}
    values["eval"] = {**base.get("eval", {}), "episodes": eval_episodes}
    if steps is not None:
        values.update(steps=steps, log={**base.get("log", {}), "checkpoint_every": steps})
    return TrainConfig.from_dict(values, source=f"dense_credit:{arm}")


def critic_keys(record: Mapping[str, Any], arm: str) -> dict[str, Any]:
    """The step record's own numbers plus the arm's critic's (``<critic>/...``, ``critic_s``).

    Example:
        >>> critic_keys({"step": 1, "oracle/total": 0.4, "prime/x": 1, "critic_s": 2.0, "lr": 1e-4}, "oracle")
        {'step': 1, 'oracle/total': 0.4, 'critic_s': 2.0}
    """
    names = tuple(ARMS[arm][0] or ())
    return {k: v for k, v in record.items() if k in STEP_KEYS or k == "critic_s" or k.split("/", 1)[0] in names}


def train_and_evaluate(arm: str, cfg: TrainConfig, policy: Any, eval_episodes: int) -> dict[str, Any]:
    """Train ``policy`` with ``cfg``, then the held-out evaluation (greedy and T = 1): one seed's numbers."""
    t0 = time.time()
    run = train(cfg, progress=False, policy=policy)
    train_s = time.time() - t0
    t0 = time.time()
    return {
        "arm": arm,
        "seed": cfg.seed,
        "train_config": cfg.to_dict(),
        "steps": [critic_keys(r, arm) for r in run.history if "tied_frac" in r],
        "train_s": round(train_s, 1),
        "eval": evaluate(run.policy, eval_episodes, sampling_seed=0),
        "eval_s": round(time.time() - t0, 1),
    }


def critic_agreement(arm: str, run_dir: Path) -> dict[str, Any] | None:
    """How often the arm's critic orders two turns of a group as the oracle does, on the run's logged rollouts
    (:mod:`common.credit_agreement`); ``None`` for the control, which has no critic.

    Example:
        >>> critic_agreement("grpo", Path("runs/x")) is None
        True
    """
    critics, estimator = ARMS[arm]
    if not critics:
        return None
    (name,) = critics
    return run_agreement(run_dir, name, progress=estimator in ("mrt", "pav"))


def seed_file(out: str | Path, arm: str, path: str, seed: int) -> Path:
    """Where one arm's seed on one float path writes its result."""
    return Path(out) / arm / path / f"seed-{seed}.json"


def run_seed(args: argparse.Namespace, arm: str) -> None:
    """Arm ``arm`` from the warm start with RL seed ``args.seed``, then the held-out evaluation."""
    started = time.time()
    policy, info = smollm2_start_policy(progress=False)
    out_dir = str(Path(args.runs) / arm / args.path / f"seed-{args.seed}")
    cfg = arm_config(arm, args.seed, out_dir, eval_episodes=args.eval_episodes, steps=args.steps)
    result = {
        "warm_start_key": Path(info["adapter_dir"]).name,
        "warm_start_from_cache": info["from_cache"],
        **train_and_evaluate(arm, cfg, policy, args.eval_episodes),
        "critic_agreement": critic_agreement(arm, Path(out_dir)),
    }
    write_result(seed_file(args.out, arm, args.path, args.seed), result, started=started)
    start = seed_file(args.out, arm, args.path, args.seed).with_name("start.json")
    if arm == CONTROL and not start.is_file():  # a control run here is the other arms' --control
        write_result(start, {"warm_start": info}, started=started)


def backfill_agreement(args: argparse.Namespace) -> None:
    """Add ``critic_agreement`` to the seed files of ``--arms`` that lack it, from their run folders' rollouts."""
    for arm in args.arms:
        for file in sorted((Path(args.out) / arm / args.path).glob("seed-*.json")):
            data = json.loads(file.read_text())
            run_dir = Path(args.runs) / arm / args.path / file.stem
            if "critic_agreement" in data or not (run_dir / "rollouts").is_dir():
                continue
            data["critic_agreement"] = critic_agreement(arm, run_dir)
            started = time.time() - float(data.get("wall_s", 0.0))  # the run's own wall time and machine stay
            write_result(file, data, started=started, record=data.get("machine"))
            print(f"{arm} {args.path} {file.stem}: {data['critic_agreement']}")


def pending(out: str | Path, arms: Sequence[str], path: str, seeds: Sequence[int]) -> list[tuple[str, int]]:
    """The (arm, seed) units without a result file, seed by seed (every arm's seed 0 before any seed 1).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     seed_file(d, "oracle", "native", 0).parent.mkdir(parents=True)
        ...     _ = seed_file(d, "oracle", "native", 0).write_text("{}")
        ...     pending(d, ["oracle", "prime"], "native", [0, 1])
        [('prime', 0), ('oracle', 1), ('prime', 1)]
    """
    return seeds_pending(arms, seeds, done=lambda arm, seed: seed_file(out, arm, path, seed).is_file())


def run_all(args: argparse.Namespace) -> None:
    """The warm start first (cached once), then each pending unit in its own process, one at a time."""
    smollm2_start_policy(progress=True)
    common = ["--path", args.path, "--eval-episodes", str(args.eval_episodes), "--out", args.out]
    common += ["--runs", args.runs] + (["--steps", str(args.steps)] if args.steps else [])
    failed = []
    for arm, seed in pending(args.out, args.arms, args.path, args.seeds):
        logs = Path(args.out) / arm / args.path / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / f"seed-{seed}.log", "w", encoding="utf-8") as log:
            unit = [sys.executable, __file__, "seed", "--arms", arm, "--seed", str(seed), *common]
            code = subprocess.call(unit, stdout=log, stderr=subprocess.STDOUT)
        print(f"{arm} {args.path}: seed {seed} finished (exit {code})", flush=True)
        if code != 0:
            failed.append(f"{arm} seed {seed}")
    if failed:
        raise SystemExit(f"failed: {failed}; see the logs under {args.out}/<arm>/{args.path}/logs")


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _finite(x: float) -> float | None:
    return None if math.isnan(x) else x


def summarize(out: Path, control: Path) -> dict[str, Any]:
    """Per arm and float path: the seeds in, and per decoding the mean success, the paired difference to the
    control (seeds that both have), won on a retry, first-answer success and turns per episode (seed means).

    Raises:
        SystemExit: A seed without its control, or one trained from another warm start than the control's.

    Example:
        Two oracle seeds next to a control with three (the control's entry keeps all of its own):

        >>> import tempfile
        >>> ev = lambda s, r: {d: {"success": s, "episodes": 200, "recoveries": r, "first_answer_success": s,
        ...                        "turns_mean": 2.0} for d in DECODINGS}
        >>> def write_json(path, data):  # a seed file as the runs write it, less the machine record
        ...     path.parent.mkdir(parents=True, exist_ok=True)
        ...     _ = path.write_text(json.dumps(data))
        >>> with tempfile.TemporaryDirectory() as d:
        ...     root = Path(d)
        ...     for s, x in enumerate((0.40, 0.50, 0.45)):
        ...         write_json(root / "c" / "native" / f"seed-{s}.json", {"seed": s, "eval": ev(x, 10)})
        ...     write_json(root / "c" / "native" / "start.json", {"warm_start": {"adapter_dir": "/a/k1"}})
        ...     for s, x in enumerate((0.45, 0.60)):
        ...         write_json(seed_file(root / "o", "oracle", "native", s),
        ...                        {"seed": s, "warm_start_key": "k1", "eval": ev(x, 20)})
        ...     summary = summarize(root / "o", root / "c")
        >>> o = summary["oracle"]["native"]
        >>> o["seeds"], round(o["sampled"]["success"], 3), o["sampled"]["won_on_retry"]
        ([0, 1], 0.525, 0.1)
        >>> [round(x, 3) for x in o["sampled"]["delta_vs_grpo"]["per_seed"]]
        [0.05, 0.1]
        >>> summary["grpo"]["native"]["seeds"], summary["grpo"]["native"]["greedy"]["delta_vs_grpo"]["mean"]
        ([0, 1, 2], 0.0)
    """
    arms: dict[str, Any] = {}
    control_paths = {p.name: load_seeds(p) for p in sorted(control.iterdir()) if (p / "start.json").is_file()}
    arms[CONTROL] = {path: _entry(runs, runs) for path, runs in control_paths.items() if runs}
    for arm in (a for a in ARMS if a != CONTROL and (out / a).is_dir()):
        for path_dir in sorted(p for p in (out / arm).iterdir() if p.is_dir() and any(p.glob("seed-*.json"))):
            runs = load_seeds(path_dir)
            grpo = control_paths.get(path_dir.name, {})
            start = json.loads((control / path_dir.name / "start.json").read_text()) if grpo else {}
            for seed, run in runs.items():
                if seed not in grpo:
                    raise SystemExit(f"no control for {arm} {path_dir.name} seed {seed}: run smollm2_grpo.py first")
                if run["warm_start_key"] != Path(start["warm_start"]["adapter_dir"]).name:
                    key = run["warm_start_key"]
                    raise SystemExit(f"{arm} {path_dir.name} seed {seed}: warm start {key} is not the control's")
            arms.setdefault(arm, {})[path_dir.name] = _entry(runs, grpo)
    return arms


def pooled_agreement(runs: Mapping[int, Any]) -> dict[str, Any] | None:
    """The seeds' ``critic_agreement`` pooled over their turn pairs; ``None`` where no seed has one.

    Example:
        >>> pooled_agreement({0: {"critic_agreement": {"pairs": 30, "agreement": 0.6}},
        ...                   1: {"critic_agreement": {"pairs": 10, "agreement": 1.0}}, 2: {}})
        {'seeds': [0, 1], 'pairs': 40, 'agreement': 0.7}
    """
    have = {s: r["critic_agreement"] for s, r in sorted(runs.items()) if (r.get("critic_agreement") or {}).get("pairs")}
    if not have:
        return None
    pairs = sum(a["pairs"] for a in have.values())
    agreement = sum(a["pairs"] * a["agreement"] for a in have.values()) / pairs
    return {"seeds": list(have), "pairs": pairs, "agreement": round(agreement, 6)}


def _entry(runs: Mapping[int, Any], control: Mapping[int, Any]) -> dict[str, Any]:
    seeds = sorted(runs)
    entry: dict[str, Any] = {"seeds": seeds, "critic_agreement": pooled_agreement(runs)}
    for decoding in DECODINGS:
        ev = [runs[s]["eval"][decoding] for s in seeds]
        diffs = [e["success"] - control[s]["eval"][decoding]["success"] for s, e in zip(seeds, ev, strict=True)]
        won = [e["recoveries"] / e["episodes"] for e in ev]
        control_won = [
            control[s]["eval"][decoding]["recoveries"] / control[s]["eval"][decoding]["episodes"] for s in seeds
        ]
        won_diffs = [w - c for w, c in zip(won, control_won, strict=True)]
        entry[decoding] = {
            "success": _mean([e["success"] for e in ev]),
            "delta_vs_grpo": {**paired(diffs), "per_seed": diffs},
            "won_on_retry": _mean(won),
            "won_on_retry_delta_vs_grpo": {**paired(won_diffs), "per_seed": won_diffs},
            "first_answer_success": _mean([e["first_answer_success"] for e in ev]),
            "turns": _mean([e["turns_mean"] for e in ev]),
            "success_per_seed": [e["success"] for e in ev],
        }
    return entry


def _ci(d: Mapping[str, Any]) -> str:
    lo, hi = d["ci95"]
    return "n = 1" if lo is None else f"[{lo:+.3f}, {hi:+.3f}]"


def table(summary: Mapping[str, Any]) -> str:
    """Per float path, decoding and arm: seeds, success per seed and mean, the paired difference to GRPO with
    its interval, first-answer success, won on a retry and turns (seed means).

    Example:
        >>> d = {"success": 0.5, "delta_vs_grpo": {"mean": 0.1, "ci95": [None, None]}, "won_on_retry": 0.05,
        ...      "won_on_retry_delta_vs_grpo": {"mean": 0.02, "ci95": [None, None]},
        ...      "first_answer_success": 0.45, "turns": 2.1, "success_per_seed": [0.5]}
        >>> print(table({"oracle": {"native": {"seeds": [0], "greedy": d, "sampled": d}}}).splitlines()[2])
        | native | greedy | oracle | 0 | 0.500 | 0.500 | +0.100 n = 1 | 0.450 | 0.050 | +0.020 n = 1 | 2.10 |
    """
    lines = [
        "| path | decoding | arm | seeds | success per seed | mean | − GRPO [95% CI] | first answer | won on retry "
        "| − GRPO [95% CI] | turns |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    paths = sorted({p for per_path in summary.values() for p in per_path})
    for path in paths:
        for decoding in DECODINGS:
            for arm, per_path in summary.items():
                if path not in per_path:
                    continue
                e, d = per_path[path], per_path[path][decoding]
                diff = "" if arm == CONTROL else f"{d['delta_vs_grpo']['mean']:+.3f} {_ci(d['delta_vs_grpo'])}"
                won = d.get("won_on_retry_delta_vs_grpo")
                won_diff = "" if arm == CONTROL or won is None else f"{won['mean']:+.3f} {_ci(won)}"
                lines.append(
                    f"| {path} | {decoding} | {arm} | {' '.join(map(str, e['seeds']))} | "
                    f"{' '.join(f'{x:.3f}' for x in d['success_per_seed'])} | {d['success']:.3f} | {diff} | "
                    f"{d['first_answer_success']:.3f} | {d['won_on_retry']:.3f} | {won_diff} | {d['turns']:.2f} |"
                )
    return "\n".join(lines)


def agreement_table(summary: Mapping[str, Any]) -> str:
    """Per arm and float path: how often its critic orders two turns of a group as the oracle does.

    Example:
        >>> agree = {"seeds": [0], "pairs": 63, "agreement": 0.587}
        >>> print(agreement_table({"prime": {"native": {"critic_agreement": agree}}}).splitlines()[2])
        | prime | native | 0 | 63 | 0.587 |
    """
    lines = ["| arm | path | seeds | turn pairs | agreement with the oracle |", "|---|---|---|---|---|"]
    for arm, per_path in summary.items():
        for path, entry in sorted(per_path.items()):
            a = entry.get("critic_agreement")
            if a:
                seeds = " ".join(map(str, a["seeds"]))
                lines.append(f"| {arm} | {path} | {seeds} | {a['pairs']} | {a['agreement']:.3f} |")
    return "\n".join(lines)


def plot(summary: Mapping[str, Any], path: Path) -> None:
    """Held-out success per arm (bar: mean over the arm's seeds, dots: its seeds), per float path and decoding;
    open circles are the control's values on the same seeds, the pairs each difference is taken over."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = sorted({p for per_path in summary.values() for p in per_path}, key=lambda p: (p != "native", p))
    most = max(sum(p in per_path for per_path in summary.values()) for p in paths)
    width = max(10.0, 1.5 * most)  # room for every arm's name under its bar
    fig, axes = plt.subplots(len(paths), 2, figsize=(width, 3.6 * len(paths)), squeeze=False, sharey=True)
    colors = {
        "grpo": "#3a7bd5", "oracle": "#2ca02c", "oracle-binary": "#17becf",
        "prime": "#d5793a", "prime-turn": "#e8a33d", "prime-norm": "#b5462a", "prime-outcome": "#f2c28f",
        "mrt": "#9467bd", "pav": "#8c564b",
    }  # fmt: skip
    for row, fpath in zip(axes, paths, strict=True):
        for ax, decoding in zip(row, DECODINGS, strict=True):
            names = [a for a in summary if fpath in summary[a]]
            control = summary.get(CONTROL, {}).get(fpath)
            for i, arm in enumerate(names):
                e, d = summary[arm][fpath], summary[arm][fpath][decoding]
                ax.bar([i], [d["success"]], color=colors.get(arm, "#999999"))
                ax.scatter([i] * len(e["seeds"]), d["success_per_seed"], color="black", s=10, zorder=3)
                if arm != CONTROL and control is not None:
                    by_seed = dict(zip(control["seeds"], control[decoding]["success_per_seed"], strict=True))
                    same = [by_seed[s] for s in e["seeds"] if s in by_seed]
                    label = "GRPO, same seeds" if i == 1 else None
                    ax.scatter([i + 0.15] * len(same), same, facecolors="none", edgecolors="black", s=18, label=label)
            ax.set_xticks(range(len(names)))
            labels = [f"{a}\n(n={len(summary[a][fpath]['seeds'])})" for a in names]
            ax.set_xticklabels(labels, fontsize=8, rotation=30, ha="right")
            ax.set_title(f"{fpath}, {decoding}", fontsize=9)
            ax.grid(axis="y", alpha=0.3)
            if len(names) > 1:
                ax.legend(fontsize=7, loc="lower right")
        row[0].set_ylabel("held-out success")
    fig.suptitle("SmolLM2-135M, multi-turn MathEpisodes: dense credit through each paper's estimator", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(out: Path, control: Path) -> dict[str, Any]:
    """Write ``summary.json`` and ``dense_credit.png`` under ``out``; return the summary."""
    summary = summarize(out, control)
    write_result(out / "summary.json", {"arms": summary}, started=time.time(), record=machine_record())
    plot(summary, out / "dense_credit.png")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    if args.action == "check":
        args.out, args.runs, args.seeds, args.steps, args.eval_episodes = (
            CHECK_OUT, f"{CHECK_OUT}/runs", [0], 1, 4
        )  # fmt: skip
        args.action = "run"
    if args.action == "seed":
        if len(args.arms) != 1:
            raise SystemExit(f"`seed` runs one arm, got --arms {' '.join(args.arms)}")
        run_seed(args, args.arms[0])
        return 0
    if args.action == "agree":
        backfill_agreement(args)
        return 0
    if args.action == "run":
        run_all(args)
    if args.out == CHECK_OUT:
        for arm in args.arms:
            data = json.loads(seed_file(args.out, arm, args.path, 0).read_text())
            print(arm, data["steps"], {d: data["eval"][d]["success"] for d in DECODINGS})
        return 0
    summary = report(Path(args.out), Path(args.control))
    print(table(summary), agreement_table(summary), sep="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
