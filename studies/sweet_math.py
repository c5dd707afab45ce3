"""SWEET-RL on MathEpisodes with the embedded tiny policy: critic ranking, the privileged-info ablation, and the
policy step against rejection fine-tuning (RFT) and multi-turn trajectory DPO at equal data.

    python studies/sweet_math.py --out /tmp/sweet_study.json                   # multi-turn (3 attempts)
    python studies/sweet_math.py --max-attempts 1 --out /tmp/sweet_single.json  # one answer per episode
    python studies/sweet_math.py --max-attempts 1 --seed 1 --out /tmp/sweet_single_s1.json  # another training seed
    python studies/sweet_math.py --summarize /tmp/sweet_single*.json             # changes over seeds, per path
    python studies/sweet_math.py --check                    # ~3 min: does the one-answer ordering hold here?

What it does (all seeds fixed; training, held-out and evaluation tasks come from disjoint seed ranges, and
none overlaps the SFT demonstrations of the tiny policy, seeds 0..1999):

1. **Offline data.** The SFT start policy ``π_0`` plays ``--train-tasks`` tasks ``--per-task`` times each
   (T = 1). Every method below learns from exactly these trajectories.
2. **Critics.** Two SWEET critics (LoRA on copies of ``π_0``) are trained with the Bradley–Terry loss on the
   same pairs: one reads the reference answer (``Task.privileged["answer"]``), one does not (the paper's
   ablation). Tiny-model settings (measured, see docs/critics/sweet.md): β = 1 instead of the paper's 0.1
   (with 0.1 the loss hardly moves in 600 steps), the reference line at the end of the conversation
   (``placement="suffix"``), LoRA lr 1e-3 (3e-3 diverged on this start policy). On held-out tasks we report
   - trajectory-pair accuracy (all pairs, and pairs with equally many turns: fewer turns already means
     success in this env, so only equal-length pairs test what the critic reads);
   - turn-level ranking accuracy: at held-out turn states, ``--k`` candidate turns sampled from ``π_0`` are
     labelled correct/incorrect by replaying the env from the state, and the critic's advantages rank
     (correct, incorrect) pairs of the same state.
3. **Policies** (each a LoRA on a copy of ``π_0``, the same optimizer steps and batch size):
   - RFT: SFT on every turn of the successful trajectories;
   - multi-turn DPO: same-task trajectory pairs (higher vs lower return), log-ratios summed over turns;
   - SWEET-RL: at the recorded turn states, ``--k`` candidates from ``π_0`` ranked by the privileged critic,
     upper-half vs lower-half pairs, DPO without privileged data.
   DPO is :func:`turnkit.train.dpo.train_dpo` (standard DPO, β = 0.1, plus 0.01 × chosen NLL per token, as in
   the released code; a fixed number of steps of full batches).
4. **Evaluation** on ``--eval-tasks`` held-out tasks at T = 1: success rate (Wilson 95% CI), first-attempt
   accuracy, and paired bootstrap CIs of the difference to ``π_0`` and to RFT (same seeds for every policy).

The results (printed, and written to ``--out``) carry the machine record and the wall time (``machine``,
``wall_s``: :func:`common.provenance.write_result`).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from common.provenance import machine_record, write_result
from common.tinymath import (
    STUDY_RECIPE,
    bootstrap_ci,
    by_float_path,
    collapse_line,
    fresh_policy,
    interval_line,
    pair_outcomes,
    train_pairs,
    train_rft,
    trajectory_pairs,
)

import turnkit  # noqa: F401  (registers the envs)
from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy
from turnkit.critics.prime import group_ranking_accuracy
from turnkit.critics.sweet import SweetConfig, SweetCritic, sweet_pairs
from turnkit.envs.core import restore_env, snapshot_env
from turnkit.models.embedded import tiny_policy
from turnkit.rollout.collect import collect_batch
from turnkit.rollout.demos import turn_messages
from turnkit.stats import wilson_interval
from turnkit.train.dpo import as_segmented
from turnkit.types import AgentTurn, Trajectory

ENV = "turnkit/MathEpisodes-v0"
ENV_KWARGS = {"difficulty": 1}

TRAIN_SEED, HELD_SEED, EVAL_SEED = 100_000, 300_000, 500_000


def log(msg: str, start: float) -> None:
    print(f"[{time.perf_counter() - start:7.1f}s] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------- data


def rollouts(policy: HFPolicy, seed0: int, tasks: int, per_task: int, chunk: int = 512) -> list[Trajectory]:
    seeds = [seed0 + i for i in range(tasks) for _ in range(per_task)]
    groups = [i for i in range(tasks) for _ in range(per_task)]
    envs = [gymnasium.make(ENV, **ENV_KWARGS) for _ in range(min(chunk, len(seeds)))]
    out: list[Trajectory] = []
    for lo in range(0, len(seeds), chunk):
        s, g = seeds[lo : lo + chunk], groups[lo : lo + chunk]
        out.extend(collect_batch(envs[: len(s)], policy, s, groups=g))
    return out


def label_candidates(traj: Trajectory, turn: int, candidates: Sequence[AgentTurn]) -> list[float]:
    """1.0 if the candidate solves the task from the recorded state (env replayed to turn ``turn``), else 0.0."""
    env = gymnasium.make(ENV, **ENV_KWARGS)
    env.reset(seed=traj.seed)
    for step in traj.steps[:turn]:
        env.step(step.action.text)
    snap = snapshot_env(env)
    labels = []
    for cand in candidates:
        restore_env(env, snap)
        _, reward, *_ = env.step(cand.text)
        labels.append(float(reward > 0))
    env.close()
    return labels


def candidate_states(
    policy: HFPolicy, trajs: Sequence[Trajectory], k: int
) -> list[tuple[Trajectory, int, list[AgentTurn], list[float]]]:
    """``k`` samples from ``policy`` at every turn of ``trajs``, with env labels."""
    states = [(t, h) for t in trajs if t.error is None for h in range(len(t.steps))]
    contexts = [
        Context(messages=tuple(turn_messages(t, h)), env_id=t.env_id, turn=h, episode_seed=t.seed)
        for t, h in states
        for _ in range(k)
    ]
    turns = policy.act(contexts)
    out = []
    for i, (t, h) in enumerate(states):
        cands = turns[i * k : (i + 1) * k]
        out.append((t, h, cands, label_candidates(t, h, cands)))
    return out


# ---------------------------------------------------------------------------------------------- stats


def critic_report(
    critic: SweetCritic, held: Sequence[Trajectory], states: Sequence[Any], rng: np.random.Generator
) -> dict[str, Any]:
    pairs = critic.pairs(held, np.random.default_rng(1))
    same_len = [(a, b) for a, b in pairs if len(held[a].steps) == len(held[b].steps)]
    out: dict[str, Any] = {}
    for name, subset in (("pair_acc", pairs), ("pair_acc_equal_turns", same_len)):
        wins = pair_outcomes(critic, held, subset) if subset else []
        out[name] = {
            "n": len(wins),
            "mean": float(np.mean(wins)) if wins else None,
            "ci95": bootstrap_ci(wins, rng) if wins else None,
        }
    per_state, pooled_scores, pooled_labels, pooled_groups = [], [], [], []
    for s, (t, h, cands, labels) in enumerate(states):
        if 0 < sum(labels) < len(labels):
            scores = critic.candidate_advantages(t.task, turn_messages(t, h), cands)
            acc, _ = group_ranking_accuracy(scores, labels, [0] * len(labels))
            per_state.append(acc)
            pooled_scores += scores
            pooled_labels += labels
            pooled_groups += [s] * len(labels)
    pooled, n_pairs = group_ranking_accuracy(pooled_scores, pooled_labels, pooled_groups) if per_state else (None, 0)
    out["turn_rank_acc"] = {
        "states": len(per_state),
        "pairs": n_pairs,
        "pooled": pooled,
        "state_mean": float(np.mean(per_state)) if per_state else None,
        "ci95": bootstrap_ci(per_state, rng) if per_state else None,
    }
    return out


# ---------------------------------------------------------------------------------------------- policies


def evaluate(policy: HFPolicy, tasks: int) -> dict[str, Any]:
    trajs = rollouts(policy.with_sampling(temperature=1.0, seed=12345), EVAL_SEED, tasks, 1)
    success = [float(t.success) for t in trajs]
    first = [float(bool(t.steps) and t.steps[0].reward > 0) for t in trajs]
    wins = int(sum(success))
    return {
        "success": wins / len(trajs),
        "success_ci95": wilson_interval(wins, len(trajs)),
        "first_attempt": float(np.mean(first)),
        "first_attempt_ci95": wilson_interval(int(sum(first)), len(trajs)),
        "_per_task": success,
    }


# ---------------------------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train-tasks", type=int, default=300)
    ap.add_argument("--per-task", type=int, default=4)
    ap.add_argument("--held-tasks", type=int, default=100)
    ap.add_argument("--eval-tasks", type=int, default=500)
    ap.add_argument("--k", type=int, default=8, help="candidates per turn state")
    ap.add_argument("--critic-steps", type=int, default=600)
    ap.add_argument("--critic-lr", type=float, default=1e-3)
    ap.add_argument("--critic-batch", type=int, default=8)
    ap.add_argument("--critic-beta", type=float, default=1.0)
    ap.add_argument(
        "--seed", type=int, default=0, help="training seed: training tasks, LoRA inits, pair sampling, batch order"
    )
    ap.add_argument("--critic-seed", type=int, default=None, help="the critics' seed (default: --seed)")
    ap.add_argument("--placement", default="suffix", choices=("prefix", "suffix"))
    ap.add_argument("--score", default="sum", choices=("sum", "mean"), help="trajectory score of the critic")
    ap.add_argument("--policy-steps", type=int, default=100)
    ap.add_argument("--policy-batch", type=int, default=16)
    ap.add_argument("--policy-lr", type=float, default=2e-4)
    ap.add_argument("--sweet-states", type=int, default=300, help="turn states used for SWEET pairs")
    ap.add_argument("--max-attempts", type=int, default=3, help="MathEpisodes answers allowed per episode")
    ap.add_argument("--stage", default="all", choices=("critic", "all"))
    ap.add_argument("--critics", default="privileged,no_privileged", help="which critics to train (comma list)")
    ap.add_argument("--lora-targets", default="q_proj,k_proj,v_proj,o_proj")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--summarize", type=Path, nargs="+", default=None, help="only merge these result files")
    ap.add_argument("--check", action="store_true", help="~3 min: one seed, one answer; does the ordering hold here?")
    args = ap.parse_args()
    if args.check:
        args.max_attempts, args.seed, args.out = 1, 0, args.out or Path("runs/sweet_math_check.json")
    if args.summarize:
        print("\n".join(summarize([json.loads(p.read_text()) for p in args.summarize])))
        return
    seed = args.seed
    critic_seed = seed if args.critic_seed is None else args.critic_seed
    torch.set_num_threads(1)  # the box is shared: more threads than free cores is several times slower
    ENV_KWARGS["max_attempts"] = args.max_attempts
    started, start = time.time(), time.perf_counter()
    rng = np.random.default_rng(0)
    base = tiny_policy(recipe=STUDY_RECIPE, progress=False, temperature=1.0, max_batch_size=64)
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}

    train = rollouts(base, TRAIN_SEED + 1000 * seed, args.train_tasks, args.per_task)
    held = rollouts(base, HELD_SEED, args.held_tasks, args.per_task)
    results["data"] = {
        "train_episodes": len(train),
        "train_success": float(np.mean([t.success for t in train])),
        "held_episodes": len(held),
    }
    log(f"rollouts: {results['data']}", start)
    held_first = [t for t in held if t.group is not None and t is next(u for u in held if u.group == t.group)]
    states = candidate_states(base, held_first, args.k)
    log(f"held-out candidate states: {len(states)} ({sum(0 < sum(s[3]) < len(s[3]) for s in states)} mixed)", start)

    critics = {}
    for name, key in (("privileged", "answer"), ("no_privileged", None)):
        if name not in args.critics.split(","):
            continue
        cfg = SweetConfig(
            reference_key=key,
            placement=args.placement,
            trajectory_score=args.score,
            beta=args.critic_beta,
            lora={"targets": tuple(args.lora_targets.split(","))},
            steps=args.critic_steps,
            optim={"lr": args.critic_lr},
            batch_size=args.critic_batch,
            seed=critic_seed,
        )
        critic = SweetCritic.from_policy(base, cfg)
        fit = critic.fit(train)
        results[f"critic_{name}"] = {"fit": fit, **critic_report(critic, held, states, rng)}
        critics[name] = critic
        log(f"critic {name}: {json.dumps(results[f'critic_{name}'])}", start)
    if args.stage == "critic":
        _finish(results, args.out, started)
        return

    policies = {"sft_start": base}
    rft = fresh_policy(base, 1 + 10 * seed)
    results["train_rft"] = train_rft(rft, train, args.policy_steps, args.policy_batch, args.policy_lr)
    policies["rft"] = rft
    log(f"rft: {results['train_rft']}", start)
    mt = fresh_policy(base, 2 + 10 * seed)
    results["train_mt_dpo"] = train_pairs(
        mt, trajectory_pairs(train, 4, seed), args.policy_steps, args.policy_batch, args.policy_lr, seed=seed
    )
    policies["mt_dpo"] = mt
    log(f"multi-turn dpo: {results['train_mt_dpo']}", start)
    state_trajs = [t for t in train if t.error is None]
    order = np.random.default_rng(3 + 10 * seed).permutation(len(state_trajs))
    chosen_trajs, n_states = [], 0
    for i in order:
        if n_states >= args.sweet_states:
            break
        chosen_trajs.append(state_trajs[i])
        n_states += len(state_trajs[i].steps)
    prefs = sweet_pairs(critics["privileged"], base, chosen_trajs, num_candidates=args.k, pairs_per_state=4, seed=seed)
    sw = fresh_policy(base, 3 + 10 * seed)
    side_pairs = [as_segmented(p) for p in prefs]
    results["train_sweet"] = {
        "states": n_states,
        **train_pairs(sw, side_pairs, args.policy_steps, args.policy_batch, args.policy_lr, seed=seed),
    }
    policies["sweet"] = sw
    log(f"sweet: {results['train_sweet']}", start)

    evals = {name: evaluate(p, args.eval_tasks) for name, p in policies.items()}
    for name, ev in evals.items():
        for ref in ("sft_start", "rft"):
            if name != ref:
                diff = np.asarray(ev["_per_task"]) - np.asarray(evals[ref]["_per_task"])
                ev[f"diff_vs_{ref}"] = {"mean": float(diff.mean()), "ci95": bootstrap_ci(diff, rng)}
    results["eval"] = {n: {k: v for k, v in e.items() if not k.startswith("_")} for n, e in evals.items()}
    log(f"eval: {json.dumps(results['eval'])}", start)
    _finish(results, args.out, started)
    if args.check:
        print(check_line(results["eval"]))


def check_line(evals: dict[str, Any]) -> str:
    """The one-answer claim on five seeds × two float paths: SWEET's policy step lowers success, below RFT's.

    Example:
        >>> check_line({"rft": {"diff_vs_sft_start": {"mean": 0.01}}, "sweet": {"diff_vs_sft_start": {"mean": -0.07}}})
        'SWEET - pi_0 = -0.070 < 0 and < RFT - pi_0 = +0.010: holds here'
    """
    sweet, rft = evals["sweet"]["diff_vs_sft_start"]["mean"], evals["rft"]["diff_vs_sft_start"]["mean"]
    verdict = "holds here" if sweet < 0 and sweet < rft else "does NOT hold here"
    return f"SWEET - pi_0 = {sweet:+.3f} < 0 and < RFT - pi_0 = {rft:+.3f}: {verdict}"


def summarize(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Each method's success change over ``π_0`` across training seeds (Student-t 95% interval), per float path.

    Runs are grouped by their machine record's float path; within a path every run evaluates on the same
    held-out tasks, so the per-seed changes are paired with that seed's ``π_0`` (the same policy every time).
    Each method's collapse count (success below half of ``π_0``'s) is a result of its own (issue #21).
    """
    lines = []
    for path, group in by_float_path(runs).items():
        seeds = [r["args"].get("seed", "0") for r in group]
        start = group[0]["eval"]["sft_start"]["success"]
        lines.append(f"{path}: seeds {', '.join(seeds)}; pi_0 success {start:.3f}")
        for method in ("rft", "mt_dpo", "sweet"):
            changes = [r["eval"][method]["diff_vs_sft_start"]["mean"] for r in group]
            lines.append(interval_line(f"  {method:>6} - pi_0", changes))
        for method in ("rft", "mt_dpo", "sweet"):
            successes = [r["eval"][method]["success"] for r in group]
            lines.append(collapse_line(f"  {method:>6}", successes, seeds, start))
        for metric, key in (("pair accuracy", "pair_acc"), ("turn ranking", "turn_rank_acc")):
            field = "mean" if key == "pair_acc" else "state_mean"
            diffs = [r["critic_privileged"][key][field] - r["critic_no_privileged"][key][field] for r in group]
            lines.append(interval_line(f"  critic {metric}, privileged - not", diffs))
    return lines


def _finish(results: dict[str, Any], out: Path | None, started: float) -> None:
    """Print ``results`` with the machine record and the wall time, and write them to ``out`` when given."""
    if out is not None:
        print(write_result(out, results, started=started).read_text(encoding="utf-8"), end="")
        return
    print(json.dumps({**results, "machine": machine_record(), "wall_s": round(time.time() - started, 1)}, indent=2))


if __name__ == "__main__":
    main()
