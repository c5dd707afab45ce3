"""WebShop-v0 learning: SFT on oracle demonstrations, then GRPO; held-out success before and after.

Question (issue #16): does the training stack learn on web tasks? A tiny Llama-style model
(:mod:`turnkit.models.tiny_shopper`: ~0.56M parameters, BPE from WebShop text) is taught by SFT on 400 oracle
episodes (seeds from 1,000,000), then trained with GRPO on the purchase reward. Evaluation: held-out seeds from
1,000,000,000 (never trained on), ``--eval-episodes`` tasks of the ``id`` split, greedy and sampled at T = 1.

Protocol:

* Start: the cached shopper (``TinyShopperRecipe()``; built on one torch thread, so the same bits on one
  machine; another CPU's float path builds a different start, issue #21).
* GRPO: ``turnkit.train`` with ``env_id=turnkit/WebShop-v0``, ``grpo.group_size`` x ``groups_per_step`` episodes per
  step, ``--steps`` steps, lr ``--lr``, per RL seed in ``--seeds`` (the seed draws the training tasks and the
  sampling).
* Reported per RL seed: greedy and sampled success (Wilson 95%) and mean reward (Student-t 95%) before and
  after, and across seeds the mean after - before with its Student-t interval (needs >= 2 seeds).

Writes ``results.json`` (per seed, the summary, the machine record and the command) under ``--out``.

Example::

    python studies/webshop_learning.py --seeds 0 1 2 3 4 --steps 20
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import torch
from common.provenance import write_result

from turnkit.models.recipe import model_folder
from turnkit.models.tiny_shopper import DEFAULT_SHOPPER_RECIPE, tiny_shopper
from turnkit.stats import mean_ci, wilson_interval
from turnkit.train.config import TrainConfig
from turnkit.train.loop import evaluate_policy, train


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The study's command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="GRPO run seeds")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--groups-per-step", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the float path depends on it)")
    parser.add_argument("--runs", default="runs/webshop_learning")
    parser.add_argument("--out", default="studies/results/webshop_learning")
    return parser.parse_args(argv)


def evaluate(policy: Any, cfg: TrainConfig) -> dict[str, Any]:
    """Greedy and sampled held-out success and mean reward, with intervals."""
    out = {}
    for name, temperature in (("greedy", 0.0), ("sampled", 1.0)):
        m = evaluate_policy(
            policy, dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, temperature=temperature))
        )
        n = cfg.eval.episodes
        wins = round(m["eval_success"] * n)
        out[name] = {
            "success": m["eval_success"],
            "success_ci": list(wilson_interval(wins, n)),
            "mean_reward": m["eval_reward"],
            "turns": m["eval_turns"],
            "errors": m["eval_errors"],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    started = time.time()
    folder = model_folder(DEFAULT_SHOPPER_RECIPE)
    tiny_shopper(progress=True)  # builds (once) and caches the SFT start
    runs = []
    for seed in args.seeds:
        cfg = TrainConfig(
            env_id="turnkit/WebShop-v0",
            env_kwargs={},
            model=str(folder),
            grpo={"group_size": args.group_size},
            groups_per_step=args.groups_per_step,
            steps=args.steps,
            seed=seed,
            out_dir=str(Path(args.runs) / f"seed{seed}"),
            optim={"lr": args.lr},
            sampling={"max_new_tokens": DEFAULT_SHOPPER_RECIPE.max_new_tokens},
            eval={"every": 0, "episodes": args.eval_episodes},
            log={"checkpoint_every": max(1, args.steps // 2)},
        )
        t0 = time.time()
        before = evaluate(tiny_shopper(progress=False), cfg)
        result = train(cfg, resume=True, progress=True)
        after = evaluate(result.policy, cfg)
        runs.append({"seed": seed, "before": before, "after": after, "wall_s": time.time() - t0})
        for name in ("greedy", "sampled"):
            b, a = before[name], after[name]
            print(
                f"seed {seed} {name:<8} success {b['success']:.3f} -> {a['success']:.3f}  "
                f"reward {b['mean_reward']:.3f} -> {a['mean_reward']:.3f}"
            )
    summary = {}
    for name in ("greedy", "sampled"):
        for key in ("success", "mean_reward"):
            deltas = [r["after"][name][key] - r["before"][name][key] for r in runs]
            summary[f"{name}_{key}_delta"] = list(mean_ci(deltas))
    path = write_result(
        f"{args.out}/results.json",
        {"runs": runs, "summary": summary, "settings": vars(args), "start_model": str(folder)},
        started=started,
    )
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
