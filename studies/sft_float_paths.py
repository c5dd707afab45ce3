"""Why the embedded default's SFT start moves with the float path, and whether float64 SFT moves it less.

Issue #21: the same :data:`~turnkit.models.embedded.DEFAULT_RECIPE` builds a start policy of greedy success
0.763 natively on an AVX-512 machine and 0.847 under ``ATEN_CPU_CAPABILITY=default``. This study measures where
that comes from and tries one change of the recipe.

Protocol (all seeded, one torch thread everywhere, every process a fresh interpreter):

1. **Train** (one child process per float path and SFT dtype): exactly the recipe's build
   (:func:`turnkit.models.embedded.train_tiny`'s tokenizer, initialisation, oracle demonstrations and
   :func:`~turnkit.models.sft.train_sft`), with the parameters held in ``float32`` (the recipe) or ``float64``
   during SFT; the result is cast to ``float32`` (the policy's dtype) and saved. Parameter snapshots at steps
   0, 1, 2, 5, 10, 20, 50, 100, 200 and 400 go to an ``.npz`` in the work folder.
2. **Evaluate** every trained model in every float path (so weights and evaluation kernels are separated): the
   quickstart's held-out evaluation (300 episodes from seed 10⁹, greedy and sampled at T = 1), and per greedy
   episode the reply and its *margin*, the smallest top-1 − top-2 logit gap over the reply's tokens.
3. **Compare**: the relative parameter distance ``‖θ_a − θ_b‖ / ‖θ_b‖`` between float paths at each snapshot
   (how rounding differences grow during SFT); how many greedy replies differ between paths, and their margins.

Writes ``results.json`` (with the machine record and wall time) and ``divergence.png`` under ``--out``; the
models and snapshots stay in ``--work`` (not committed).

Example (the run recorded in docs/training.md, about 18 min on the loaded 2-core box)::

    python studies/sft_float_paths.py --out studies/results/sft_float_paths

The ``--check`` mode (about 5 min) trains float32 only, on the native and DEFAULT paths, and prints whether
the greedy replies of the two starts differ on more than a few percent of the episodes (the documented finding).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

SNAPSHOT_STEPS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 400, 800, 1200, 1600)
PATHS = {"native": None, "avx2": "avx2", "default": "default"}
"""Float paths by name: the ``ATEN_CPU_CAPABILITY`` each child runs under (``None``: the CPU's own)."""


def relative_distance(a: np.ndarray, b: np.ndarray) -> float:
    """``‖a − b‖ / ‖b‖`` (0 when both are zero vectors).

    Example:
        >>> relative_distance(np.array([3.0, 4.0]), np.array([3.0, 4.0]))
        0.0
        >>> relative_distance(np.array([3.0, 5.0]), np.array([3.0, 4.0]))
        0.2
    """
    norm = float(np.linalg.norm(b))
    diff = float(np.linalg.norm(a - b))
    return 0.0 if norm == 0.0 and diff == 0.0 else diff / norm


def reply_margin(logits: Any) -> float:
    """Smallest top-1 − top-2 gap over a greedy reply's positions (``logits``: ``[T, V]``, one row per token).

    The reply's greedy token at a position is the top-1 there, so a gap near 0 is a near tie that another float
    path's rounding can flip.

    Example:
        >>> import torch
        >>> reply_margin(torch.tensor([[0.0, 3.0, 1.0], [2.0, 2.5, 0.0]]))
        0.5
    """
    top2 = logits.float().topk(2, dim=-1).values
    return float((top2[:, 0] - top2[:, 1]).min())


def disagreement(replies_a: list[str], replies_b: list[str]) -> float:
    """Fraction of episodes whose greedy replies differ.

    Example:
        >>> disagreement(["1", "2", "3", "4"], ["1", "2", "5", "4"])
        0.25
    """
    if len(replies_a) != len(replies_b):
        raise ValueError(f"{len(replies_a)} vs {len(replies_b)} replies: not the same episodes")
    return sum(a != b for a, b in zip(replies_a, replies_b, strict=True)) / len(replies_a)


# ------------------------------------------------------------------------------------------ child: train


def run_name(path: str, dtype: str, seed: int) -> str:
    """The work-folder name of one build: ``<path>_<dtype>``, plus ``_seed<k>`` for another recipe seed.

    Example:
        >>> run_name("native", "float32", 0), run_name("native", "float32", 3)
        ('native_float32', 'native_float32_seed3')
    """
    return f"{path}_{dtype}" + (f"_seed{seed}" if seed else "")


def train_child(work: Path, path: str, dtype: str, seed: int, sft_steps: int) -> None:
    """Build the recipe (with ``seed``) with SFT in ``dtype``; save the model and the parameter snapshots."""
    import dataclasses

    import torch
    from common.provenance import write_result

    from turnkit.models.embedded import DEFAULT_RECIPE, MATH_ENV, build_tiny_tokenizer_for
    from turnkit.models.sft import train_sft
    from turnkit.models.tiny import build_tiny_model, save_tiny
    from turnkit.rollout.demos import collect_demos, demo_rows

    started = time.time()
    torch.set_num_threads(1)
    recipe = dataclasses.replace(
        DEFAULT_RECIPE, seed=seed, sft=dataclasses.replace(DEFAULT_RECIPE.sft, steps=sft_steps)
    )
    name = run_name(path, dtype, seed)
    tokenizer = build_tiny_tokenizer_for(recipe)
    model = build_tiny_model(tokenizer, recipe.model_config(), seed=recipe.seed)
    if dtype == "float64":
        model = model.double()
    demos = collect_demos(MATH_ENV, episodes=recipe.demo_episodes, seed=0, env_kwargs=recipe.env_kwargs)
    rows = demo_rows(demos.trajectories, tokenizer)

    def flat() -> np.ndarray:
        return torch.cat([p.detach().reshape(-1).double() for p in model.parameters()]).numpy().copy()

    snapshots = {0: flat()}

    def on_step(record: dict[str, Any]) -> None:
        if record["step"] in SNAPSHOT_STEPS or record["step"] == sft_steps:
            snapshots[record["step"]] = flat()

    history = train_sft(model, rows, recipe.sft_config(), pad_id=int(tokenizer.pad_token_id), progress=False,
                        on_step=on_step)  # fmt: skip
    save_tiny(model.float(), tokenizer, work / f"model_{name}")
    np.savez(work / f"snapshots_{name}.npz", **{str(k): v for k, v in snapshots.items()})
    losses = [h["loss"] for h in history]
    write_result(work / f"train_{name}.json", {"final_loss": losses[-1], "losses": losses}, started=started)


# --------------------------------------------------------------------------------------- child: evaluate


def evaluate_child(work: Path, models: list[str], out: Path) -> None:
    """Evaluate each saved model under this process's float path (the quickstart's held-out protocol)."""
    import dataclasses

    import gymnasium
    import torch
    from common.provenance import write_result

    import turnkit  # noqa: F401  (registers the envs)
    from turnkit.agents.hf import HFPolicy
    from turnkit.models.embedded import DEFAULT_RECIPE
    from turnkit.models.tiny import load_tiny
    from turnkit.rollout.collect import collect_batch
    from turnkit.train.loop import evaluate_policy
    from turnkit.train.quickstart import SINGLE_TURN_TRAIN, QuickstartConfig, quickstart_train_config

    started = time.time()
    torch.set_num_threads(1)
    cfg = quickstart_train_config(QuickstartConfig(train_overrides=SINGLE_TURN_TRAIN))
    seeds = list(range(cfg.eval.seed, cfg.eval.seed + cfg.eval.episodes))
    results: dict[str, Any] = {}
    for model_name in models:
        model, tokenizer = load_tiny(work / model_name)
        policy = HFPolicy(model, tokenizer, max_new_tokens=DEFAULT_RECIPE.max_new_tokens, max_batch_size=64)
        sampled = evaluate_policy(
            policy, dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, temperature=cfg.sampling.temperature))
        )
        # greedy: the quickstart's evaluation (same seeds, blocks of 64), played here to keep replies and margins
        envs = [gymnasium.make(cfg.env_id, split=cfg.split, **cfg.env_kwargs) for _ in range(64)]
        replies, margins, success = [], [], []
        for i in range(0, len(seeds), len(envs)):
            block = seeds[i : i + len(envs)]
            for traj in collect_batch(envs[: len(block)], policy.with_sampling(temperature=0.0), block):
                turn = traj.steps[0].action
                ids = torch.tensor([list(turn.prompt_token_ids) + list(turn.token_ids)])
                with torch.no_grad():
                    logits = model(input_ids=ids).logits[0]
                start = len(turn.prompt_token_ids) - 1  # logits at t predict token t + 1
                replies.append(turn.text)
                margins.append(reply_margin(logits[start : start + len(turn.token_ids)]))
                success.append(bool(traj.success))
        results[model_name] = {
            "greedy_success": float(np.mean(success)),
            "sampled_success": sampled["eval_success"],
            "replies": replies,
            "margins": margins,
            "success": success,
        }
    write_result(out, {"models": results}, started=started)


# ----------------------------------------------------------------------------------------------- driver


def child(args: list[str], path: str) -> None:
    """Run this script in a fresh interpreter under float path ``path``; raise if it fails."""
    env = dict(os.environ)
    env.pop("ATEN_CPU_CAPABILITY", None)
    if PATHS[path] is not None:
        env["ATEN_CPU_CAPABILITY"] = PATHS[path]
    subprocess.run([sys.executable, __file__, *args], env=env, check=True)


def summarise(work: Path, paths: list[str], dtypes: list[str], seeds: list[int]) -> dict[str, Any]:
    """Distances between paths per snapshot, success per (weights, kernels), reply disagreement and margins; the
    recipe's other seeds on the reference path (float32) for comparison."""
    ref = paths[0]
    evals = {p: json.loads((work / f"eval_{p}.json").read_text())["models"] for p in paths}
    out: dict[str, Any] = {"reference_path": ref, "dtypes": {}}
    by_seed = {k: evals[ref][f"model_{run_name(ref, 'float32', k)}"] for k in [0, *seeds]}
    greedy_by_seed = [m["greedy_success"] for m in by_seed.values()]
    out["recipe_seeds_on_reference"] = {
        "per_seed": {
            str(k): {key: m[key] for key in ("greedy_success", "sampled_success")} for k, m in by_seed.items()
        },
        "greedy_success_spread": max(greedy_by_seed) - min(greedy_by_seed),
        "reply_disagreement_with_seed0": {
            str(k): disagreement(by_seed[0]["replies"], m["replies"]) for k, m in by_seed.items() if k
        },
    }
    for dtype in dtypes:
        snaps = {p: np.load(work / f"snapshots_{p}_{dtype}.npz") for p in paths}
        distance = {
            p: {s: relative_distance(snaps[p][s], snaps[ref][s]) for s in sorted(snaps[ref].files, key=int)}
            for p in paths[1:]
        }
        table = {
            f"weights={w} kernels={k}": {
                key: evals[k][f"model_{w}_{dtype}"][key] for key in ("greedy_success", "sampled_success")
            }
            for w in paths
            for k in paths
        }
        own = {p: evals[p][f"model_{p}_{dtype}"] for p in paths}  # each path's start, evaluated on its own path
        replies = {p: own[p]["replies"] for p in paths}
        margins = np.array(own[ref]["margins"])
        differs = {p: [a != b for a, b in zip(replies[ref], replies[p], strict=True)] for p in paths[1:]}
        any_diff = np.array([any(d[i] for d in differs.values()) for i in range(len(margins))])
        same_weights = {  # the reference's weights under each path's kernels: the evaluation's own share
            k: disagreement(evals[ref][f"model_{ref}_{dtype}"]["replies"], evals[k][f"model_{ref}_{dtype}"]["replies"])
            for k in paths[1:]
        }
        out["dtypes"][dtype] = {
            "relative_distance_to_reference": distance,
            "success": table,
            "own_start": {p: {k: own[p][k] for k in ("greedy_success", "sampled_success")} for p in paths},
            "greedy_success_spread": max(o["greedy_success"] for o in own.values())
            - min(o["greedy_success"] for o in own.values()),
            "reply_disagreement_with_reference": {p: disagreement(replies[ref], replies[p]) for p in paths[1:]},
            "reply_disagreement_same_weights_other_kernels": same_weights,
            "reference_margin_median": {
                "where_paths_agree": float(np.median(margins[~any_diff])) if (~any_diff).any() else None,
                "where_a_path_differs": float(np.median(margins[any_diff])) if any_diff.any() else None,
            },
            "reference_margin_below_1": float(np.mean(margins < 1.0)),
            "final_loss": {p: json.loads((work / f"train_{p}_{dtype}.json").read_text())["final_loss"] for p in paths},
        }
    return out


def plot(summary: dict[str, Any], path: Path) -> None:
    """Relative parameter distance to the reference path vs SFT step (log scale), one line per path and dtype."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for dtype, d in summary["dtypes"].items():
        for p, by_step in d["relative_distance_to_reference"].items():
            steps = [int(s) for s in by_step if int(s) > 0]
            label = f"{p} vs {summary['reference_path']}, SFT in {dtype}"
            style = "-" if dtype == "float32" else "--"
            ax.plot(steps, [max(by_step[str(s)], 1e-18) for s in steps], marker="o", ls=style, label=label)
    ax.set(xscale="log", yscale="log", xlabel="SFT step", ylabel="‖θ_path − θ_ref‖ / ‖θ_ref‖")
    ax.set_title("Embedded default SFT: how far float paths drift apart")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def verdict(summary: dict[str, Any]) -> str:
    """One line: do the float32 starts' greedy replies differ between paths on more than 2% of episodes?

    Example:
        >>> s = {"dtypes": {"float32": {"reply_disagreement_with_reference": {"default": 0.12}}}}
        >>> verdict(s)
        'HOLDS: the float32 starts differ from the reference path on 12.0% of greedy replies (default)'
    """
    dis = summary["dtypes"]["float32"]["reply_disagreement_with_reference"]
    holds = all(v > 0.02 for v in dis.values())
    parts = ", ".join(f"{v:.1%} of greedy replies ({p})" for p, v in dis.items())
    return f"{'HOLDS' if holds else 'DOES NOT HOLD'}: the float32 starts differ from the reference path on {parts}"


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--paths", nargs="+", choices=list(PATHS), default=["native", "avx2", "default"])
    parser.add_argument("--dtypes", nargs="+", choices=["float32", "float64"], default=["float32", "float64"])
    parser.add_argument("--work", default="runs/sft_float_paths", help="models and snapshots (not committed)")
    parser.add_argument("--out", default="studies/results/sft_float_paths")
    parser.add_argument("--check", action="store_true", help="float32 only, native and DEFAULT paths (~5 min)")
    seeds_help = "other recipe seeds, built on the first path in float32 (the seed-to-seed spread)"
    parser.add_argument("--recipe-seeds", type=int, nargs="*", default=[1, 2, 3, 4], help=seeds_help)
    parser.add_argument("--sft-steps", type=int, default=400, help="SFT steps of every build (the recipe's: 400)")
    parser.add_argument("--train-child", nargs=3, metavar=("PATH", "DTYPE", "SEED"), help=argparse.SUPPRESS)
    parser.add_argument("--eval-child", nargs="+", metavar="MODEL", help=argparse.SUPPRESS)
    parser.add_argument("--eval-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    work = Path(args.work)
    if args.train_child:
        path, dtype, seed = args.train_child
        train_child(work, path, dtype, int(seed), args.sft_steps)
        return None
    if args.eval_child:
        evaluate_child(work, args.eval_child, Path(args.eval_out))
        return None
    if args.check:  # fresh builds in a folder of its own: the documented run's models must not be reused
        args.paths, args.dtypes, args.recipe_seeds = ["native", "default"], ["float32"], []
        work = Path("runs/sft_float_paths_check")
        shutil.rmtree(work, ignore_errors=True)
    started = time.time()
    work.mkdir(parents=True, exist_ok=True)
    common = ["--work", str(work), "--sft-steps", str(args.sft_steps)]
    ref = args.paths[0]
    builds = [(p, d, 0) for d in args.dtypes for p in args.paths] + [(ref, "float32", k) for k in args.recipe_seeds]
    for p, dtype, seed in builds:
        if (work / f"train_{run_name(p, dtype, seed)}.json").is_file():  # built by an earlier, interrupted run
            continue
        print(f"train: {p} path, SFT in {dtype}, recipe seed {seed}", flush=True)
        child([*common, "--train-child", p, dtype, str(seed)], p)
    models = [f"model_{p}_{d}" for d in args.dtypes for p in args.paths]
    for p in args.paths:
        extra = [f"model_{run_name(p, 'float32', k)}" for k in args.recipe_seeds] if p == ref else []
        print(f"evaluate every start on the {p} path", flush=True)
        child([*common, "--eval-child", *models, *extra, "--eval-out", str(work / f"eval_{p}.json")], p)
    summary = summarise(work, args.paths, args.dtypes, args.recipe_seeds)
    print(verdict(summary))
    if args.check:
        return summary
    from common.provenance import write_result

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plot(summary, out / "divergence.png")
    write_result(out / "results.json", {"args": vars(args), **summary}, started=started)
    for dtype, d in summary["dtypes"].items():
        starts = ", ".join(
            f"{p} {o['greedy_success']:.3f} / {o['sampled_success']:.3f}" for p, o in d["own_start"].items()
        )
        print(f"SFT in {dtype}: greedy / sampled start {starts}; spread {d['greedy_success_spread']:.3f}")
    return summary


if __name__ == "__main__":
    main()
