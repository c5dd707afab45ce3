"""The SWEET-RL critic on CollabCode: does it rank held-out same-task trajectory pairs above chance, and better
with the hidden facts than without (the paper's ablation)?

    python studies/sweet_collab.py --out-dir studies/results/sweet_collab             # 2 x 3 runs, 2 at a time
    python studies/sweet_collab.py --condition privileged --seed 0 --out-dir /tmp/sc  # one run
    python studies/sweet_collab.py --merge --out-dir /tmp/sc                          # summary.json of its runs
    python studies/sweet_collab.py --check      # seed 0 of both conditions (~13 min): do the findings hold here?
    python studies/sweet_collab.py --unasked guess --per-task 8 --critic-base agent \
        --conditions privileged privileged_code no_privileged --out-dir /tmp/sc_guess       # guessing mixture

What it does (all seeds fixed):

1. **Trajectories.** A scripted mixture makes the spread of quality (known, so the study does not depend on a
   policy): :class:`~turnkit.envs.collab_code.agents.PartialClarifier` ``r`` (``r = 0..per_task-1``, one rollout
   each per task) draws, from the episode seed and ``r``, an ask-probability ``q ~ U(0, 1)``, asks the family's
   question for each hidden parameter with probability ``q`` (``q`` small: answer at once with defaults; ``q``
   near 1: the full clarifying agent), and when answering "forgets" each learned value with probability
   ``--slip``. What it writes for a value it does not know is the family default (``--unasked default``) or a
   guess among the parameter's values (``--unasked guess``): then two episodes that asked the same questions
   differ only in lucky or unlucky constants, which only a critic that knows the hidden facts can tell apart.
   Training tasks are ``turnkit/CollabCode-v0`` seeds ``0..train_tasks-1``; held-out tasks seeds from 100000
   (disjoint). Reward: share of the 10 hidden tests passed.
2. **Truncation.** The env's fixed instruction paragraph (identical in every episode, ~250 of ~350 prompt
   tokens) is replaced by the bare request in the first observation before the critic reads it; the scripted
   agents ask at most one question per hidden parameter (<= 5 turns), so every critic segment stays far below
   the tiny model's 1024 positions (checked).
3. **Critic.** A LoRA on a copy of the tiny policy pinned in ``sweet_math.py`` (``STUDY_RECIPE``; 0.56M
   parameters, BPE tokenizer, math only; ``--critic-base math``) or of the tiny CollabCode agent
   (:func:`~turnkit.models.tiny_agent.tiny_code_agent`, same size, trained on CollabCode dialogues;
   ``--critic-base agent``), trained with the Bradley–Terry loss on same-task pairs (<= 4 per task, every
   task, since not all have a perfect rollout). ``privileged``: the critic reads the task's hidden facts
   (``Task.privileged["facts"]``, e.g. ``late_fee.grace = 0; late_fee.per_day = 0.25``) right before the scored
   turn; ``privileged_code``: the reference solution instead (what the paper's critic reads on backend
   tasks); ``no_privileged``: the same critic without either. β = 1, LoRA lr 1e-3, as measured for the tiny critic in
   ``sweet_math.py``.
4. **Held-out evaluation.** Every same-task pair with different rewards: pair accuracy (ties ½), also on
   pairs with equally many turns (asking more already predicts a better outcome here, and a summed
   trajectory score can count turns), on pairs that asked exactly the same questions (they differ only in the
   final code), and the "more turns wins" heuristic on the same pairs.

Runs differ by the critic seed (LoRA init, pair subsampling, batch order); the data are the same in every run.
``summary.json`` gives per-condition means over seeds with ``turnkit.stats.mean_ci`` 95% CIs and the paired
(same seed) difference of each privileged condition − no_privileged. Every run file and ``summary.json`` carry
the machine record and the wall time (``machine``, ``wall_s``: :func:`common.provenance.write_result`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from common.provenance import write_result
from common.tinymath import STUDY_RECIPE, bootstrap_ci, pair_outcomes

import turnkit
from turnkit.critics.sweet import SweetConfig, SweetCritic, outcome_pairs
from turnkit.envs.collab_code.agents import PartialClarifier
from turnkit.models.embedded import tiny_policy
from turnkit.models.tiny_agent import tiny_code_agent
from turnkit.stats import mean_ci
from turnkit.types import Trajectory

ENV = "turnkit/CollabCode-v0"
TRAIN_SEED, HELD_SEED = 0, 100_000
CONDITIONS: dict[str, tuple[str | None, str]] = {
    "privileged": ("facts", "Hidden facts: {reference}."),
    "privileged_code": ("reference", "Reference solution:\n{reference}"),
    "no_privileged": (None, "{reference}"),
}
"""Condition -> (``Task.privileged`` key the critic reads, the line it is rendered into)."""
CRITIC_BASES = {
    "math": lambda: tiny_policy(recipe=STUDY_RECIPE, progress=False, max_batch_size=64),
    "agent": lambda: tiny_code_agent(progress=False, max_batch_size=64),
}
"""Models a critic can start from: the math-only tiny policy of ``sweet_math.py``, or the tiny CollabCode agent."""
METRICS = ("pair_acc", "pair_acc_equal_turns", "pair_acc_same_dialogue")
CHECK_MARGIN = 0.05
"""``--check``: the hidden facts "help" if the privileged critic's pair accuracy beats the plain one's by more
than this (per-seed differences in the recorded runs: −0.029 to +0.038 natively, +0.009 to +0.022 on DEFAULT)."""


def strip_instructions(traj: Trajectory) -> Trajectory:
    """The trajectory with its first observation cut to the task request (the instructions are constant)."""
    first = dataclasses.replace(traj.steps[0], observation=traj.task.prompt)
    return dataclasses.replace(traj, steps=(first, *traj.steps[1:]), initial_observation=traj.task.prompt)


def rollouts(seed0: int, tasks: int, per_task: int, slip: float, unasked: str = "default") -> list[Trajectory]:
    """``per_task`` mixture rollouts of each of ``tasks`` tasks, grouped by task."""
    env = gymnasium.make(ENV)
    out = []
    for i in range(tasks):
        for v in range(per_task):
            traj = turnkit.collect(env, PartialClarifier(v, slip, unasked), seed=seed0 + i)  # type: ignore[arg-type]
            out.append(dataclasses.replace(strip_instructions(traj), group=i))
    env.close()
    return out


def data_report(trajs: Sequence[Trajectory]) -> dict[str, Any]:
    rewards = [t.total_reward for t in trajs]
    return {
        "episodes": len(trajs),
        "errors": sum(t.error is not None for t in trajs),
        "mean_reward": float(np.mean(rewards)),
        "success": float(np.mean([r == 1.0 for r in rewards])),
        "turns_hist": np.bincount([len(t.steps) for t in trajs]).tolist(),
    }


def same_dialogue(a: Trajectory, b: Trajectory) -> bool:
    """Whether two episodes asked the same questions (so they differ only in the final code)."""
    return [s.action for s in a.steps[:-1]] == [s.action for s in b.steps[:-1]]


def held_pairs(trajs: Sequence[Trajectory]) -> list[tuple[int, int]]:
    """Every same-task pair with different rewards (no cap, no success filter)."""
    return outcome_pairs([t.total_reward for t in trajs], [t.group for t in trajs], max_pairs_per_group=None)


def acc_block(wins: Sequence[float], rng: np.random.Generator) -> dict[str, Any]:
    return {
        "n": len(wins),
        "mean": float(np.mean(wins)) if wins else None,
        "ci95": bootstrap_ci(wins, rng) if wins else None,
    }


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(1)
    start = time.perf_counter()
    train = rollouts(TRAIN_SEED, args.train_tasks, args.per_task, args.slip, args.unasked)
    held = rollouts(HELD_SEED, args.held_tasks, args.per_task, args.slip, args.unasked)
    base = CRITIC_BASES[args.critic_base]()
    cfg = SweetConfig(
        reference_key=CONDITIONS[args.condition][0],
        template=CONDITIONS[args.condition][1],
        placement="suffix",
        beta=args.beta,
        optim={"lr": args.lr},
        steps=args.steps,
        batch_size=args.batch,
        require_success=None,
        seed=args.seed,
    )
    critic = SweetCritic.from_policy(base, cfg)
    longest = max(len(p) + len(c) for t in train + held for p, c in critic.turn_segments(t))
    limit = base.model.config.max_position_embeddings
    if longest > limit:
        raise SystemExit(f"a critic segment has {longest} tokens, over the model's {limit}")
    fit = critic.fit(train)
    pairs = held_pairs(held)
    wins = pair_outcomes(critic, held, pairs)
    equal = [k for k, (a, b) in enumerate(pairs) if len(held[a].steps) == len(held[b].steps)]
    same = [k for k, (a, b) in enumerate(pairs) if same_dialogue(held[a], held[b])]
    turns = [float(np.sign(len(held[a].steps) - len(held[b].steps)) + 1) / 2 for a, b in pairs]
    rng = np.random.default_rng(0)
    return {
        "condition": args.condition,
        "seed": args.seed,
        "data": {"train": data_report(train), "held": data_report(held), "longest_segment_tokens": longest},
        "fit": fit,
        "pair_acc": acc_block(wins, rng),
        "pair_acc_equal_turns": acc_block([wins[k] for k in equal], rng),
        "pair_acc_same_dialogue": acc_block([wins[k] for k in same], rng),
        "more_turns_heuristic": {"all": float(np.mean(turns)), "equal_turns": 0.5 if equal else None},
        "wall_s": time.perf_counter() - start,
    }


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-condition means over seeds (Student-t 95% CIs) and paired differences to ``no_privileged``."""
    out: dict[str, Any] = {}
    metrics = [k for k in METRICS if all(k in r for r in runs)]  # older run files lack the newer metrics
    by = {c: sorted((r for r in runs if r["condition"] == c), key=lambda r: r["seed"]) for c in CONDITIONS}
    by = {c: rs for c, rs in by.items() if rs}
    for c, rs in by.items():
        out[c] = {
            key: dict(zip(("mean", "lo", "hi"), mean_ci([r[key]["mean"] for r in rs]), strict=True)) for key in metrics
        }
        out[c]["per_seed"] = {r["seed"]: [r[key]["mean"] for key in metrics] for r in rs}
        out[c]["train_acc"] = float(np.mean([r["fit"]["accuracy"] for r in rs]))
    for c in (c for c in by if c != "no_privileged" and "no_privileged" in by):
        seeds = sorted({r["seed"] for r in by[c]} & {r["seed"] for r in by["no_privileged"]})
        for key in metrics:
            diffs = [
                next(r for r in by[c] if r["seed"] == s)[key]["mean"]
                - next(r for r in by["no_privileged"] if r["seed"] == s)[key]["mean"]
                for s in seeds
            ]
            if diffs:  # the paper's ablation: this privileged condition minus the critic without it, same seed
                out[f"diff_{c}_{key}"] = dict(zip(("mean", "lo", "hi"), mean_ci(diffs), strict=True))
    if runs:
        out["n_pairs"] = {k: runs[0][k]["n"] for k in metrics}
        out["more_turns_heuristic"] = runs[0]["more_turns_heuristic"]
        out["data"] = runs[0]["data"]
    return out


def check_lines(summary: dict[str, Any]) -> list[str]:
    """The documented findings at check size: both critics rank above chance, the hidden facts do not help.

    Example:
        >>> acc = lambda x: {"pair_acc": {"mean": x}}
        >>> summary = {"privileged": acc(0.84), "no_privileged": acc(0.86), "more_turns_heuristic": {"all": 0.82},
        ...            "diff_privileged_pair_acc": {"mean": -0.02}}
        >>> print("\\n".join(check_lines(summary)))
        pair accuracy: privileged 0.840, no_privileged 0.860 (more turns wins 0.820); above 0.5: holds here
        privileged - no_privileged: -0.020 (paired mean); facts help by > 0.05: no, as documented: holds here
    """
    accs = {c: summary[c]["pair_acc"]["mean"] for c in ("privileged", "no_privileged")}
    above = "holds here" if min(accs.values()) > 0.5 else "does NOT hold here"
    heuristic = summary["more_turns_heuristic"]["all"]
    diff = summary["diff_privileged_pair_acc"]["mean"]
    helps = "yes: does NOT hold here" if diff > CHECK_MARGIN else "no, as documented: holds here"
    return [
        f"pair accuracy: privileged {accs['privileged']:.3f}, no_privileged {accs['no_privileged']:.3f} "
        f"(more turns wins {heuristic:.3f}); above 0.5: {above}",
        f"privileged - no_privileged: {diff:+.3f} (paired mean); facts help by > {CHECK_MARGIN}: {helps}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--condition", choices=tuple(CONDITIONS), default=None, help="one run (default: all runs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--conditions", nargs="+", choices=tuple(CONDITIONS), default=["privileged", "no_privileged"])
    ap.add_argument("--seeds", type=int, default=3, help="critic seeds per condition (all-runs mode)")
    ap.add_argument("--jobs", type=int, default=2, help="runs in parallel (all-runs mode)")
    ap.add_argument("--train-tasks", type=int, default=150)
    ap.add_argument("--held-tasks", type=int, default=100)
    ap.add_argument("--per-task", type=int, default=4)
    ap.add_argument("--slip", type=float, default=0.2)
    ap.add_argument(
        "--unasked",
        choices=("default", "guess"),
        default="default",
        help="what the mixture writes for unlearned values",
    )
    ap.add_argument("--critic-base", choices=tuple(CRITIC_BASES), default="math", help="model the critic starts from")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--beta", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--out-dir", type=Path, help="result folder (required unless --check)")
    ap.add_argument("--merge", action="store_true", help="only write summary.json of the run files in --out-dir")
    ap.add_argument("--check", action="store_true", help="seed 0 of both conditions: do the findings hold here?")
    args = ap.parse_args()
    if args.check:
        args.seeds, args.conditions = 1, ["privileged", "no_privileged"]
        args.out_dir = args.out_dir or Path(f"runs/sweet_collab_check/{int(time.time())}")
    elif args.out_dir is None:
        ap.error("--out-dir is required (unless --check)")
    started = time.time()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.condition is not None:
        result = {"args": {k: str(v) for k, v in vars(args).items()}, **run_one(args)}
        write_result(args.out_dir / f"{args.condition}_seed{args.seed}.json", result, started=started)
        print(json.dumps({k: result[k] for k in ("condition", "seed", "fit", *METRICS)}))
        return
    passthrough = [
        f"--{k.replace('_', '-')}={getattr(args, k)}"
        for k in (
            "train_tasks",
            "held_tasks",
            "per_task",
            "slip",
            "unasked",
            "critic_base",
            "steps",
            "batch",
            "beta",
            "lr",
            "out_dir",
        )
    ]
    jobs = [] if args.merge else [(c, s) for s in range(args.seeds) for c in args.conditions]
    running: list[subprocess.Popen[bytes]] = []
    for c, s in jobs:
        while len(running) >= args.jobs:
            running[0].wait()
            running = [p for p in running if p.poll() is None]
        cmd = [sys.executable, __file__, f"--condition={c}", f"--seed={s}", *passthrough]
        running.append(subprocess.Popen(cmd))
    for p in running:
        p.wait()
    runs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(args.out_dir.glob("*_seed*.json"))]
    if not runs:
        raise SystemExit(f"no run files (<condition>_seed<K>.json) in {args.out_dir}")
    summary = summarize(runs)
    write_result(args.out_dir / "summary.json", summary, started=started)
    print("\n".join(check_lines(summary)) if args.check else json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
