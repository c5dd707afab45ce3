"""SWEET-RL's policy step on CollabCode with a trained tiny agent, against RFT and multi-turn DPO at equal data.

    D=studies/results/sweet_collab_policy/avx512    # and .../default with ATEN_CPU_CAPABILITY=default
    python studies/sweet_collab_policy.py --methods pi0,rft,mt_dpo --seeds 0,1,2,3,4 --out-dir $D &   # two
    python studies/sweet_collab_policy.py --methods sweet,sweet_no_priv --seeds 0,1,2,3,4 --out-dir $D  # processes
    python studies/sweet_collab_policy.py --summarize --out-dir $D     # summary.json, policies.png, the docs' table
    python studies/sweet_collab_policy.py --check     # ~10 min: one seed of π_0, RFT, SWEET; does the ordering hold?
    python studies/sweet_collab_policy.py --train-tasks 8 --eval-tasks 8 --held-tasks 4 --critic-steps 3 \
        --policy-steps 3 --sweet-states 8 --methods pi0,rft,mt_dpo,sweet --out-dir /tmp/scp      # smoke run

The MathEpisodes comparison of ``sweet_math.py`` (whose functions this reuses) on ``turnkit/CollabCode-v0``:

1. ``π_0`` = :func:`~turnkit.models.tiny_agent.tiny_code_agent` (imitates a scripted mixture of
   partial clarifiers; trained on seeds >= 1,000,000), sampled at ``T = 1``. Offline data: ``--per-task``
   rollouts of each of ``--train-tasks`` tasks (seeds ``0 ..``); held-out critic data: tasks from 100,000.
   Rollouts are deterministic (seeded), so separate processes see the same data.
2. Critics: LoRA on a copy of ``π_0`` (same tokenizer), Bradley–Terry on same-task pairs (β 1, lr 1e-3,
   ``placement="suffix"``, ``require_success=None``, <= 4 pairs per task), with the hidden facts
   (``reference_key="facts"``, for ``sweet``) and without (``sweet_no_priv``, the paper's ablation). The critic
   reads the conversation with the env's constant instruction paragraph replaced by the bare request (as
   ``sweet_collab.strip_instructions``); the policy always sees the full prompt. Every critic segment is
   checked against the model's positions.
3. Policies, each a fresh LoRA on ``π_0`` trained with the same optimizer steps x batch and lr on the same
   rollouts: **RFT** (SFT on every turn of the fully correct episodes), **multi-turn DPO** (same-task episode
   pairs, higher vs lower reward, sides summed over turns, + 0.01 NLL), **SWEET** (at ``--sweet-states`` turn
   states of those rollouts, ``K`` policy samples ranked by the critic, 4 top-vs-bottom pairs per state,
   DPO + 0.01 NLL; the policy's prompts never hold the facts).
4. Evaluation: every policy on the same ``--eval-tasks`` held-out tasks (seeds from 500,000), one episode each
   at ``T = 1`` (a fixed sampling seed for all policies) and greedy: mean reward (share of hidden tests
   passed) and success (all passed), bootstrap / Wilson 95% CIs, and paired differences vs ``π_0`` and vs
   RFT (paired bootstrap over tasks). Each training seed (``--seeds``) changes the LoRA init, batch order and
   pair subsampling; ``--summarize`` merges the run files and gives ``turnkit.stats.mean_ci`` over seeds.

Run files and ``summary.json`` carry the machine record and the wall time (``machine``, ``wall_s``:
:func:`common.provenance.write_result`); the summary's ``runs`` keep each run's record.
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
from common.provenance import write_result
from common.tinymath import bootstrap_ci, fresh_policy, pair_outcomes, train_pairs, train_rft, trajectory_pairs
from sweet_collab import CONDITIONS
from sweet_collab import data_report as mixture_data_report

import turnkit  # noqa: F401  (registers the envs)
from turnkit.agents.hf import HFPolicy
from turnkit.critics.sweet import SweetConfig, SweetCritic, outcome_pairs, sweet_pairs
from turnkit.models.tiny_agent import tiny_code_agent
from turnkit.rollout.collect import collect_batch
from turnkit.stats import mean_ci, wilson_interval
from turnkit.train.dpo import as_segmented
from turnkit.types import Message, Task, Trajectory

ENV = "turnkit/CollabCode-v0"
TRAIN_SEED, HELD_SEED, EVAL_SEED = 0, 100_000, 500_000
TEMPLATE = CONDITIONS["privileged"][1]
"""The fact line of the privileged critic, as in ``sweet_collab.py``."""
METHODS = ("rft", "mt_dpo", "sweet", "sweet_no_priv")


def log(msg: str, start: float) -> None:
    print(f"[{time.perf_counter() - start:7.1f}s] {msg}", flush=True)


class StrippedCritic(SweetCritic):
    """A :class:`SweetCritic` that reads the first message as the bare request (the instructions are constant)."""

    def critic_messages(self, task: Task | None, messages: Sequence[Message]) -> list[Message]:
        out = list(messages)
        if out and task is not None and out[0].role == "user":
            out[0] = Message("user", task.prompt)
        return super().critic_messages(task, out)


def rollouts(policy: HFPolicy, seed0: int, tasks: int, per_task: int, chunk: int = 256) -> list[Trajectory]:
    """``per_task`` episodes of each of ``tasks`` tasks (seeds ``seed0 ..``), grouped by task."""
    seeds = [seed0 + i for i in range(tasks) for _ in range(per_task)]
    groups = [i for i in range(tasks) for _ in range(per_task)]
    envs = [gymnasium.make(ENV) for _ in range(min(chunk, len(seeds)))]
    out: list[Trajectory] = []
    for lo in range(0, len(seeds), chunk):
        s, g = seeds[lo : lo + chunk], groups[lo : lo + chunk]
        out.extend(collect_batch(envs[: len(s)], policy, s, groups=g))
    for env in envs:
        env.close()
    return out


def data_report(trajs: Sequence[Trajectory]) -> dict[str, Any]:
    """``sweet_collab.data_report`` plus how many tasks have a reward spread (what pairs are made of)."""
    spread = sum(len({t.total_reward for t in trajs if t.group == g}) > 1 for g in {t.group for t in trajs})
    return {**mixture_data_report(trajs), "tasks_with_spread": int(spread)}


def critic_report(critic: SweetCritic, held: Sequence[Trajectory], rng: np.random.Generator) -> dict[str, Any]:
    keep = [t for t in held if t.error is None and t.steps]
    pairs = outcome_pairs([t.total_reward for t in keep], [t.group for t in keep], max_pairs_per_group=None)
    wins = pair_outcomes(critic, keep, pairs) if pairs else []
    equal = [w for w, (a, b) in zip(wins, pairs, strict=True) if len(keep[a].steps) == len(keep[b].steps)]
    turns = [float(np.sign(len(keep[a].steps) - len(keep[b].steps)) + 1) / 2 for a, b in pairs]
    out: dict[str, Any] = {"more_turns_heuristic": float(np.mean(turns)) if turns else None}
    for name, w in (("pair_acc", wins), ("pair_acc_equal_turns", equal)):
        out[name] = {"n": len(w), "mean": float(np.mean(w)) if w else None, "ci95": bootstrap_ci(w, rng) if w else None}
    return out


def evaluate(policy: HFPolicy, tasks: int, rng: np.random.Generator) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode, view in (
        ("t1", policy.with_sampling(temperature=1.0, seed=12345)),
        ("greedy", policy.with_sampling(temperature=0.0)),
    ):
        trajs = rollouts(view, EVAL_SEED, tasks, 1)
        reward = [t.total_reward for t in trajs]
        success = [float(t.success) for t in trajs]
        out[mode] = {
            "mean_reward": float(np.mean(reward)),
            "mean_reward_ci95": bootstrap_ci(reward, rng),
            "success": float(np.mean(success)),
            "success_ci95": wilson_interval(int(sum(success)), len(success)),
            "errors": sum(t.error is not None for t in trajs),
            "turns_hist": np.bincount([len(t.steps) for t in trajs]).tolist(),
            "_reward": reward,
            "_success": success,
        }
    return out


def paired(ev: dict[str, Any], ref: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    out = {}
    for mode in ("t1", "greedy"):
        for key in ("reward", "success"):
            diff = np.asarray(ev[mode][f"_{key}"]) - np.asarray(ref[mode][f"_{key}"])
            out[f"{mode}_{key}"] = {"mean": float(diff.mean()), "ci95": bootstrap_ci(diff, rng)}
    return out


def public(ev: dict[str, Any]) -> dict[str, Any]:
    return {m: {k: v for k, v in e.items() if not k.startswith("_")} for m, e in ev.items()}


def sweet_states(train: Sequence[Trajectory], budget: int) -> tuple[list[Trajectory], int]:
    """Whole episodes, in a seeded random order, until ``budget`` turn states are covered."""
    clean = [t for t in train if t.error is None and t.steps]
    chosen, n = [], 0
    for i in np.random.default_rng(3).permutation(len(clean)):
        if n >= budget:
            break
        chosen.append(clean[i])
        n += len(clean[i].steps)
    return chosen, n


def train_method(
    method: str, base: HFPolicy, train: Sequence[Trajectory], prefs: dict[str, Any], args: argparse.Namespace, seed: int
) -> tuple[HFPolicy, dict[str, Any]]:
    policy = fresh_policy(base, 1000 * seed + METHODS.index(method) + 1)
    steps, batch, lr = args.policy_steps, args.policy_batch, args.policy_lr
    if method == "rft":
        info = train_rft(policy, train, steps, batch, lr)
    elif method == "mt_dpo":
        info = train_pairs(policy, trajectory_pairs(train, 4, seed), steps, batch, lr, seed=seed)
    else:
        info = train_pairs(policy, prefs[method], steps, batch, lr, seed=seed)
    return policy, info


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--train-tasks", type=int, default=150)
    ap.add_argument("--per-task", type=int, default=4)
    ap.add_argument("--held-tasks", type=int, default=50)
    ap.add_argument("--eval-tasks", type=int, default=300)
    ap.add_argument("--k", type=int, default=8, help="candidates per turn state")
    ap.add_argument("--critic-steps", type=int, default=200)
    ap.add_argument("--critic-batch", type=int, default=8)
    ap.add_argument("--critic-lr", type=float, default=1e-3)
    ap.add_argument("--critic-beta", type=float, default=1.0)
    ap.add_argument("--policy-steps", type=int, default=100)
    ap.add_argument("--policy-batch", type=int, default=16)
    ap.add_argument("--policy-lr", type=float, default=2e-4)
    ap.add_argument("--sweet-states", type=int, default=300, help="turn states used for SWEET pairs")
    ap.add_argument("--methods", default="pi0,rft,mt_dpo,sweet", help=f"comma list of pi0 and {METHODS}")
    ap.add_argument("--seeds", default="0", help="comma list of training seeds per method")
    ap.add_argument("--summarize", action="store_true", help="only merge the run files of --out-dir")
    ap.add_argument("--out-dir", type=Path, help="run files and summary (default for --check: runs/scp_check)")
    ap.add_argument("--check", action="store_true", help="one seed of pi0,rft,sweet: does the ordering hold here?")
    args = ap.parse_args(argv)
    if args.check:
        args.methods, args.seeds = "pi0,rft,sweet", "0"
        args.out_dir = args.out_dir or Path("runs/scp_check")
    if args.out_dir is None:
        ap.error("--out-dir is required")
    return args


def main() -> None:
    args = parse_args()
    if args.summarize:
        write_summary(args.out_dir)
        return
    torch.set_num_threads(1)  # the box is shared
    started, start = time.time(), time.perf_counter()
    rng = np.random.default_rng(0)
    methods = args.methods.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    base = tiny_code_agent(progress=False, temperature=1.0, max_batch_size=64)
    results["pi0_parameters"] = int(sum(p.numel() for p in base.model.parameters()))

    train = rollouts(base, TRAIN_SEED, args.train_tasks, args.per_task)
    held = rollouts(base, HELD_SEED, args.held_tasks, args.per_task)
    results["data"] = {"train": data_report(train), "held": data_report(held)}
    log(f"rollouts: {json.dumps(results['data'])}", start)

    critics: dict[str, SweetCritic] = {}
    for method, name in (("sweet", "privileged"), ("sweet_no_priv", "no_privileged")):
        if method not in methods:
            continue
        cfg = SweetConfig(
            reference_key="facts" if name == "privileged" else None,
            template=TEMPLATE,
            placement="suffix",
            beta=args.critic_beta,
            optim={"lr": args.critic_lr},
            steps=args.critic_steps,
            batch_size=args.critic_batch,
            require_success=None,
            seed=0,
        )
        critic = StrippedCritic.from_policy(base, cfg)
        longest = max(len(p) + len(c) for t in train + held for p, c in critic.turn_segments(t))
        limit = int(base.model.config.max_position_embeddings)
        if longest > limit:
            raise SystemExit(f"a critic segment has {longest} tokens, over the model's {limit}")
        fit = critic.fit(train)
        results[f"critic_{name}"] = {"fit": fit, "longest_segment": longest, **critic_report(critic, held, rng)}
        critics[method] = critic
        log(f"critic {name}: {json.dumps(results[f'critic_{name}'])}", start)

    evals: dict[str, dict[int, dict[str, Any]]] = {}
    if "pi0" in methods:
        evals["pi0"] = {0: evaluate(base, args.eval_tasks, rng)}
        log(f"pi0 eval: {json.dumps(public(evals['pi0'][0]))}", start)
    chosen, n_states = sweet_states(train, args.sweet_states)
    results["train"], results["evals"] = {}, evals
    path = args.out_dir / f"run_{'-'.join(methods)}_s{'-'.join(map(str, seeds))}.json"
    for seed in seeds:
        prefs = {
            m: [as_segmented(p) for p in sweet_pairs(c, base, chosen, num_candidates=args.k, seed=seed)]
            for m, c in critics.items()
        }
        if prefs:
            log(f"seed {seed}: sweet pairs from {n_states} states: { {m: len(p) for m, p in prefs.items()} }", start)
        for m in (m for m in METHODS if m in methods):
            policy, info = train_method(m, base, train, prefs, args, seed)
            results["train"].setdefault(m, {})[seed] = {**info, **({"states": n_states} if m in prefs else {})}
            evals.setdefault(m, {})[seed] = evaluate(policy, args.eval_tasks, rng)
            log(f"seed {seed} {m}: train {json.dumps(info)} eval {json.dumps(public(evals[m][seed]))}", start)
        write_result(path, results, started=started)  # after every seed: a cut-short run keeps its finished seeds
        log(f"wrote {path} (seeds up to {seed})", start)
    if args.check:
        print(check_line(write_summary(args.out_dir)))


def write_summary(out_dir: Path) -> dict[str, Any]:
    """Merge every ``run_*.json`` of ``out_dir`` into ``summary.json`` and ``policies.png``."""
    started = time.time()
    evals: dict[str, dict[int, dict[str, Any]]] = {}
    runs = {}
    paths = sorted(out_dir.glob("run_*.json"))
    if not paths:
        raise SystemExit(f"no run_*.json in {out_dir}: run the study with --out-dir {out_dir} first")
    for path in paths:
        run = json.loads(path.read_text(encoding="utf-8"))
        runs[path.name] = {k: run[k] for k in run if k != "evals"}
        for m, by_seed in run["evals"].items():
            evals.setdefault(m, {}).update({int(s): ev for s, ev in by_seed.items()})
    summary = {"runs": runs, "eval": summarize(evals, np.random.default_rng(0))}
    write_result(out_dir / "summary.json", summary, started=started)
    plot(summary["eval"], out_dir / "policies.png")
    print("\n".join(table_rows(summary["eval"])))
    return summary["eval"]


def check_line(summary: dict[str, Any]) -> str:
    """``--check``'s verdict on the documented ordering: SWEET's policy step does not beat RFT (T = 1 reward).

    Example:
        >>> check_line({"sweet": {"vs_rft": {"t1_reward": {"mean": -0.008}}}})
        'SWEET - RFT = -0.008 reward at T = 1 (documented: <= +0.020 on every seed and path): holds here'
    """
    diff = summary["sweet"]["vs_rft"]["t1_reward"]["mean"]
    verdict = "holds here" if diff <= CHECK_MARGIN else "does NOT hold here"
    claim = f"documented: <= +{CHECK_MARGIN:.3f} on every seed and path"
    return f"SWEET - RFT = {diff:+.3f} reward at T = 1 ({claim}): {verdict}"


CHECK_MARGIN = 0.02
"""``--check``: SWEET's policy may beat RFT by at most this much T = 1 reward for the documented ordering to hold
(the largest per-seed SWEET − RFT over 5 seeds on two float paths was +0.011)."""


def summarize(evals: dict[str, dict[int, dict[str, Any]]], rng: np.random.Generator) -> dict[str, Any]:
    """Per method: mean over training seeds (``mean_ci``) and paired differences vs ``π_0`` and vs RFT.

    Paired differences are per seed (bootstrap over tasks), then averaged over the seeds both methods share.
    """
    pi0 = evals["pi0"][0] if "pi0" in evals else None
    out: dict[str, Any] = {}
    for m, runs in evals.items():
        seeds = sorted(runs)
        block: dict[str, Any] = {"seeds": seeds, "per_seed": {s: public(runs[s]) for s in seeds}}
        for mode in ("t1", "greedy"):
            for key in ("mean_reward", "success"):
                vals = [runs[s][mode][key] for s in seeds]
                block[f"{mode}_{key}"] = dict(zip(("mean", "lo", "hi"), mean_ci(vals), strict=True))
        refs = {"pi0": {s: pi0 for s in seeds} if pi0 is not None and m != "pi0" else {}}
        refs["rft"] = {s: evals["rft"][s] for s in seeds if m not in ("pi0", "rft") and s in evals.get("rft", {})}
        for ref, by_seed in refs.items():
            if not by_seed:
                continue
            per = {s: paired(runs[s], r, rng) for s, r in by_seed.items()}
            block[f"vs_{ref}_per_seed"] = per
            keys = next(iter(per.values()))
            block[f"vs_{ref}"] = {
                k: dict(zip(("mean", "lo", "hi"), mean_ci([p[k]["mean"] for p in per.values()]), strict=True))
                for k in keys
            }
            block[f"vs_{ref}_pooled"] = pooled_diff([runs[s] for s in by_seed], list(by_seed.values()), rng)
        out[m] = block
    return out


COLLAPSE = 0.5
"""A policy run collapsed when its held-out mean reward (T = 1 or greedy) fell below this share of ``π_0``'s."""


def collapsed_seeds(block: dict[str, Any], pi0: dict[str, Any]) -> list[int]:
    """The seeds of one method's summary block whose T = 1 or greedy mean reward collapsed (:data:`COLLAPSE`).

    Example:
        >>> pi0 = {"t1": {"mean_reward": 0.4}, "greedy": {"mean_reward": 0.6}}
        >>> per_seed = {0: {"t1": {"mean_reward": 0.39}, "greedy": {"mean_reward": 0.6}},
        ...             1: {"t1": {"mean_reward": 0.01}, "greedy": {"mean_reward": 0.5}}}
        >>> collapsed_seeds({"per_seed": per_seed}, pi0)
        [1]
    """
    return [
        int(s)
        for s, ev in block["per_seed"].items()
        if any(ev[m]["mean_reward"] < COLLAPSE * pi0[m]["mean_reward"] for m in ("t1", "greedy"))
    ]


def table_rows(summary: dict[str, Any]) -> list[str]:
    """The docs' table: per method, mean reward over seeds, differences vs ``π_0`` and RFT, per-seed values, collapses.

    Differences: mean over seeds of the per-seed paired differences, with the Student-t interval over seeds and,
    after the slash, the pooled bootstrap interval over tasks (both must exclude 0 for a measurable effect).
    """

    def cell(block: dict[str, Any], ref: str, key: str) -> str:
        if f"vs_{ref}" not in block:
            return ""
        seeds, pooled = block[f"vs_{ref}"][key], block[f"vs_{ref}_pooled"][key]["ci95"]
        return f"{seeds['mean']:+.3f} [{seeds['lo']:+.3f}, {seeds['hi']:+.3f}] / [{pooled[0]:+.3f}, {pooled[1]:+.3f}]"

    pi0 = summary["pi0"]["per_seed"][next(iter(summary["pi0"]["per_seed"]))] if "pi0" in summary else None
    rows = [
        "| policy | seeds | reward T=1 | Δ vs π_0 (seeds / tasks) | Δ vs RFT (seeds / tasks) | per seed, T=1 "
        "| reward greedy | Δ greedy vs π_0 | collapsed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, block in summary.items():
        t1, greedy = block["t1_mean_reward"], block["greedy_mean_reward"]
        per_seed = ", ".join(f"{ev['t1']['mean_reward']:.3f}" for ev in block["per_seed"].values())
        gone = "" if pi0 is None or name == "pi0" else f"{len(collapsed_seeds(block, pi0))} of {len(block['seeds'])}"
        rows.append(
            f"| {name} | {len(block['seeds'])} | {t1['mean']:.3f} | {cell(block, 'pi0', 't1_reward')} "
            f"| {cell(block, 'rft', 't1_reward')} | {per_seed} | {greedy['mean']:.3f} "
            f"| {cell(block, 'pi0', 'greedy_reward')} | {gone} |"
        )
    return rows


def pooled_diff(
    evs: Sequence[dict[str, Any]], refs: Sequence[dict[str, Any]], rng: np.random.Generator
) -> dict[str, Any]:
    """Per-task differences averaged over the seeds, then a bootstrap over tasks (task-sampling uncertainty)."""
    out = {}
    for mode in ("t1", "greedy"):
        for key in ("reward", "success"):
            diff = np.mean(
                [
                    np.asarray(e[mode][f"_{key}"]) - np.asarray(r[mode][f"_{key}"])
                    for e, r in zip(evs, refs, strict=True)
                ],
                axis=0,
            )
            out[f"{mode}_{key}"] = {"mean": float(diff.mean()), "ci95": bootstrap_ci(diff, rng)}
    return out


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary)
    fig, ax = plt.subplots(figsize=(6, 3))
    for j, mode in enumerate(("t1", "greedy")):
        vals = [summary[n][f"{mode}_mean_reward"] for n in names]
        x = np.arange(len(names)) + (j - 0.5) * 0.38
        err = [[v["mean"] - v["lo"] for v in vals], [v["hi"] - v["mean"] for v in vals]]
        ax.bar(x, [v["mean"] for v in vals], 0.38, yerr=err, label=f"{mode} (mean over seeds, 95% CI)")
    ax.set_xticks(np.arange(len(names)), names)
    ax.set_ylabel("held-out mean reward")
    ax.set_title("CollabCode: policies trained from the tiny agent")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
