"""MCTS-DPO vs best-of-N DPO vs the SFT start on held-out MathEpisodes: does search-derived preference data help?

Per training seed: the embedded tiny SFT policy runs ``--iterations`` on-policy rounds of ``turnkit.train.synth``
(search ``--tasks`` fresh tasks -> step-level pairs -> DPO -> search again with the new policy), once with MCTS
and once with best-of-N search at the same number of sampled turns (policy calls). Every policy of a seed is
scored on the same held-out episodes (seeds from 10**9, never used for synthesis), sampled at T = 1 and greedy.
``--methods`` / ``--bon-n`` run the two data sources in separate processes; ``--merge`` pools per-seed (or
per-method) result files into the mean and 95% CI over seeds (``turnkit.stats.mean_ci``) of each policy and
of the paired differences.

Run:  python studies/mcts_dpo.py --seeds 0 --name s0 ...      (one seed; the flags of every table are in
      docs/synth.md "Results" and studies/README.md)
      python studies/mcts_dpo.py --check       (3 seeds of the quickstart-task run: does its ordering hold here?)
      python studies/mcts_dpo.py --merge runs/mcts_dpo/s0.json runs/mcts_dpo/s1.json ... --name all \
          --out studies/results/mcts_dpo

The result file (printed too) carries the machine record and the wall time (``machine``, ``wall_s``:
:func:`common.provenance.write_result`); a merged file also keeps each part's record (``machine_per_part``,
``None`` for files written before records existed).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from common.provenance import write_result

import turnkit  # noqa: F401  (registers the built-in envs)
from turnkit.search.mcts import MCTSConfig
from turnkit.search.pairs import PairConfig
from turnkit.stats import mean_ci

MATH = "turnkit/MathEpisodes-v0"
HELD_OUT_SEED = 10**9
"""First held-out evaluation seed (synth task seeds stay below 10**8)."""


def _env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"difficulty": args.difficulty, "max_attempts": args.max_attempts}
    if args.kinds:
        kwargs["kinds"] = tuple(args.kinds.split(","))
    return kwargs


def study(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from turnkit.models.embedded import DEFAULT_RECIPE
    from turnkit.models.embedded import tiny_policy as build
    from turnkit.rollout.evaluate import evaluate
    from turnkit.train.dpo import DPOConfig
    from turnkit.train.synth import SynthConfig, synthesize

    torch.set_num_threads(1)  # the box is shared: run seeds as separate processes instead
    recipe = (
        DEFAULT_RECIPE
        if args.sft_steps is None
        else replace(DEFAULT_RECIPE, sft=replace(DEFAULT_RECIPE.sft, steps=args.sft_steps))
    )
    env_kwargs = _env_kwargs(args)

    def tiny_policy(**kwargs: Any) -> Any:
        return build(recipe=recipe, progress=False, max_new_tokens=args.max_new_tokens, **kwargs)

    out_dir = Path(args.out) / args.name
    mcts = MCTSConfig(
        iterations=args.simulations,
        root_multiplier=args.root_multiplier,
        n_actions=args.n_actions,
        root_n_actions=args.root_n_actions,
        depth_limit=args.depth_limit,
        gamma=args.gamma,
    )
    dpo = DPOConfig(
        epochs=args.epochs,
        optim={"lr": args.lr},
        batch_size=args.batch_size,
        beta=args.beta,
        nll_weight=args.nll_weight,
        nll_scope=args.nll_scope,
        conservative=not args.standard_dpo,
        lora={"r": args.lora_r, "alpha": 2 * args.lora_r, "targets": tuple(args.lora_targets.split(","))},
    )
    base = SynthConfig(
        MATH,
        iterations=args.iterations,
        tasks_per_iteration=args.tasks,
        env_kwargs=env_kwargs,
        mcts=mcts,
        pairs=PairConfig(
            rejected=args.rejected, min_q_gap=args.min_q_gap, scope=args.scope, require_value=args.require_value
        ),
        dpo=dpo,
        render_trees=1,
        batch_tasks=args.batch_tasks,
    )

    def held_out(policy: Any, where: Path) -> dict[str, float]:
        out = {}
        for name, view in (
            ("sampled", policy.with_sampling(temperature=1.0)),
            ("greedy", policy.with_sampling(temperature=0.0)),
        ):
            s = evaluate(
                MATH,
                view,
                episodes=args.eval_episodes,
                seed=HELD_OUT_SEED,
                env_kwargs=env_kwargs,
                batch_size=64,
                out_dir=where / name,
                progress=False,
            )
            out[name] = s.success_rate
            out[f"{name}_turns"] = s.mean_turns
            fmt = answer_format(where / name / "trajectories.jsonl")
            out.update({f"{name}_{key}": value for key, value in fmt.items()})
        return out

    methods = args.methods.split(",")
    runs = []
    t_start = time.perf_counter()
    for seed in args.seeds:
        row: dict[str, Any] = {"seed": seed}
        sft = tiny_policy(seed=seed)
        row["sft"] = held_out(sft, out_dir / f"eval-s{seed}" / "sft")
        print(json.dumps({"seed": seed, "sft": row["sft"], "t": time.perf_counter() - t_start}), flush=True)
        cfg = replace(base, seed=seed, mcts=replace(mcts, seed=seed), dpo=replace(dpo, seed=seed))
        ctx = None
        if "mcts" in methods:
            policy = tiny_policy(seed=seed)
            res = synthesize(cfg, policy, out_dir / f"mcts-s{seed}", progress=False)
            row["mcts_dpo"] = held_out(policy, out_dir / f"eval-s{seed}" / "mcts_dpo")
            ctx = sum(m["search"]["policy_contexts"] for m in res.iterations)
            row["mcts_dpo"].update(sampled_turns=ctx, pairs=len(res.pairs), per_iteration=_iter_summary(res))
            print(
                json.dumps({"seed": seed, "mcts_dpo": row["mcts_dpo"], "t": time.perf_counter() - t_start}), flush=True
            )
        if "bon" in methods:
            # best-of-N at the same number of sampled turns: n episodes of ~mean_turns turns per task
            if ctx is None:
                n = args.bon_n
            else:
                n = max(2, round(ctx / (args.iterations * args.tasks * row["sft"]["sampled_turns"])))
            policy = tiny_policy(seed=seed)
            res = synthesize(
                replace(cfg, search="best_of_n", best_of_n=n), policy, out_dir / f"bon-s{seed}", progress=False
            )
            row["bon_dpo"] = held_out(policy, out_dir / f"eval-s{seed}" / "bon_dpo")
            row["bon_dpo"].update(
                sampled_turns=sum(m["search"]["policy_contexts"] for m in res.iterations),
                pairs=len(res.pairs),
                n=n,
                per_iteration=_iter_summary(res),
            )
            print(json.dumps({"seed": seed, "bon_dpo": row["bon_dpo"], "t": time.perf_counter() - t_start}), flush=True)
        runs.append(row)
    return {
        "config": {k: v for k, v in vars(args).items()},
        "env_kwargs": {k: list(v) if isinstance(v, tuple) else v for k, v in env_kwargs.items()},
        "runs": runs,
        "summary": summarize(runs),
    }


def _iter_summary(res: Any) -> list[dict[str, Any]]:
    return [
        {
            "pairs": m["pairs"],
            "search_success": m["search_success_rate"],
            "dpo_final_loss": m.get("dpo", {}).get("final_loss"),
            "dpo_final_accuracy": m.get("dpo", {}).get("final_accuracy"),
            "seconds": m["seconds"],
        }
        for m in res.iterations
    ]


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and 95% CI over seeds (``turnkit.stats.mean_ci``) of each method and of paired differences.

    Example:
        >>> runs = [{"sft": {"sampled": 0.5, "greedy": 0.8}, "mcts_dpo": {"sampled": 0.6 + d, "greedy": 0.8}}
        ...         for d in (0.0, 0.01, 0.02)]
        >>> s = summarize(runs)
        >>> round(s["sampled"]["mcts_dpo - sft"]["mean"], 3), s["greedy"]["mcts_dpo - sft"]["per_seed"]
        (0.11, [0.0, 0.0, 0.0])
    """
    out: dict[str, Any] = {}
    methods = [m for m in ("sft", "mcts_dpo", "bon_dpo") if all(m in r for r in runs)]
    for mode in ("sampled", "greedy"):
        part: dict[str, Any] = {}
        for method in methods:
            m, lo, hi = mean_ci([r[method][mode] for r in runs])
            part[method] = {"mean": m, "ci95_over_seeds": [lo, hi], "per_seed": [r[method][mode] for r in runs]}
        for a, b in (("mcts_dpo", "sft"), ("bon_dpo", "sft"), ("mcts_dpo", "bon_dpo")):
            if a in methods and b in methods:
                diffs = [r[a][mode] - r[b][mode] for r in runs]
                m, lo, hi = mean_ci(diffs)
                part[f"{a} - {b}"] = {"mean": m, "ci95_over_seeds": [lo, hi], "per_seed": diffs}
        out[mode] = part
    out["format"] = format_summary(runs, methods)
    return out


FORMAT_LOSS_FIRST = 0.05
"""Share of greedy held-out episodes whose *first* reply has no answer line above which a policy has lost the
answer format. First replies only: the SFT start answers every first turn, but after a wrong answer its
retries often drop the ``ANSWER:`` prefix (``": 5"``), so later turns would flag the start itself."""

FORMAT_LOSS_TURNS = 1.0 + FORMAT_LOSS_FIRST
"""The same threshold for result files from before ``*_unanswered_first`` was recorded, all with one attempt per
episode: there an answered first reply ends the episode, and every reply without an answer line adds a turn."""


def answer_format(path: str | Path) -> dict[str, float]:
    r"""Replies without an answer line in an evaluation's ``trajectories.jsonl``.

    Returns ``unanswered`` (such turns per episode) and ``unanswered_first`` (share of episodes whose first
    reply is one).

    Example:
        >>> import tempfile
        >>> step = lambda answered: {"info": {"answered": answered}}
        >>> path = Path(tempfile.mkdtemp()) / "trajectories.jsonl"
        >>> _ = path.write_text(json.dumps({"steps": [step(True), step(False), step(False)]}) + "\n"
        ...                     + json.dumps({"steps": [step(False), step(True)]}) + "\n")
        >>> answer_format(path)
        {'unanswered': 1.5, 'unanswered_first': 0.5}
    """
    episodes = [json.loads(line)["steps"] for line in Path(path).read_text(encoding="utf-8").splitlines() if line]
    if not episodes:
        return {"unanswered": 0.0, "unanswered_first": 0.0}
    missing = sum(step["info"].get("answered") is False for steps in episodes for step in steps)
    first = sum(bool(steps) and steps[0]["info"].get("answered") is False for steps in episodes)
    return {"unanswered": missing / len(episodes), "unanswered_first": first / len(episodes)}


def lost_format(row: dict[str, Any]) -> bool:
    """Whether one method's held-out row shows format loss (:data:`FORMAT_LOSS_FIRST`).

    Example:
        >>> lost_format({"greedy_unanswered_first": 0.0, "greedy_turns": 2.4}), lost_format({"greedy_turns": 1.3})
        (False, True)
    """
    if "greedy_unanswered_first" in row:
        return row["greedy_unanswered_first"] > FORMAT_LOSS_FIRST
    return row.get("greedy_turns", 1.0) > FORMAT_LOSS_TURNS


def format_summary(runs: list[dict[str, Any]], methods: list[str]) -> dict[str, Any]:
    """Per method, the seeds whose policy lost the answer format, and those that collapsed.

    Format loss: :func:`lost_format` (greedy turns without an answer line). Collapse: greedy success below half
    the SFT start's. Both are results of their own, beside the means (issue #21: collapse rates).

    Example:
        >>> runs = [{"sft": {"greedy": 0.8, "greedy_turns": 1.0}, "m": {"greedy": g, "greedy_turns": t}}
        ...         for g, t in ((0.85, 1.0), (0.05, 9.3), (0.7, 1.2))]
        >>> format_summary(runs, ["m"])["m"]
        {'format_loss': 2, 'collapse': 1, 'seeds': 3, 'format_loss_seeds': [1, 2], 'collapse_seeds': [1]}
    """
    out: dict[str, Any] = {}
    for method in methods:
        lost = [i for i, r in enumerate(runs) if lost_format(r[method])]
        collapsed = [i for i, r in enumerate(runs) if r[method]["greedy"] < 0.5 * r["sft"]["greedy"]]
        out[method] = {
            "format_loss": len(lost),
            "collapse": len(collapsed),
            "seeds": len(runs),
            "format_loss_seeds": [runs[i].get("seed", i) for i in lost],
            "collapse_seeds": [runs[i].get("seed", i) for i in collapsed],
        }
    return out


# ---------------------------------------------------------------------------------------------- main


def merge(files: list[str]) -> dict[str, Any]:
    """Pool result files: rows of the same seed are joined, so per-method files (``--methods``) combine too."""
    parts = [json.loads(Path(f).read_text()) for f in files]
    by_seed: dict[int, dict[str, Any]] = {}
    for part in parts:
        for row in part["runs"]:
            by_seed.setdefault(row["seed"], {}).update(row)
    runs = list(by_seed.values())
    return {
        "config": parts[0]["config"] | {"seeds": [r["seed"] for r in runs]},
        "env_kwargs": parts[0]["env_kwargs"],
        "merged_from": files,
        "runs": runs,
        "summary": summarize(runs),
        "wall_s_per_seed": [part["wall_s"] for part in parts if "wall_s" in part],
        "machine_per_part": [part.get("machine") for part in parts],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/mcts_dpo", help="folder of the result file (and of the synth runs)")
    p.add_argument("--name", default="study", help="sub-folder of --out and result file name")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--methods", default="mcts,bon")
    p.add_argument("--merge", nargs="+", default=None, help="result JSON files (one seed or method each) to pool")
    p.add_argument("--tasks", type=int, default=32, help="fresh tasks per iteration")
    p.add_argument("--iterations", type=int, default=2)
    p.add_argument("--batch-tasks", type=int, default=64, help="trees searched in lockstep")
    p.add_argument("--difficulty", type=int, default=1)
    p.add_argument("--max-attempts", type=int, default=3)
    p.add_argument("--kinds", default="", help="comma list of problem kinds (default: all of the difficulty)")
    p.add_argument("--max-new-tokens", type=int, default=12, help="answers are ~5 tokens; caps degenerate turns")
    p.add_argument("--sft-steps", type=int, default=None, help="SFT steps of the start policy (default: the recipe's)")
    p.add_argument("--simulations", type=int, default=8)
    p.add_argument("--root-multiplier", type=int, default=2)
    p.add_argument("--n-actions", type=int, default=2)
    p.add_argument("--root-n-actions", type=int, default=4)
    p.add_argument("--depth-limit", type=int, default=3)
    p.add_argument("--gamma", type=float, default=0.9, help="< 1: an early success beats a late one (retries)")
    p.add_argument("--bon-n", type=int, default=4, help="best-of-N width when MCTS is not run")
    p.add_argument("--rejected", default="lowest_q")
    p.add_argument("--min-q-gap", type=float, default=0.0)
    p.add_argument("--scope", default="committed", choices=("committed", "all"))
    p.add_argument("--require-value", action="store_true", help="PairConfig.require_value: no pairs on Q = 0 guesses")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--beta", type=float, default=0.1)
    p.add_argument("--standard-dpo", action="store_true", help="epsilon = 0 instead of conservative DPO")
    p.add_argument("--nll-weight", type=float, default=0.5, help="RPO NLL term on the chosen side (0: pure DPO)")
    p.add_argument(
        "--nll-scope",
        default="turn",
        choices=("suffix", "turn"),
        help="what the RPO NLL term covers: the whole chosen turn (default) or the tokens after the divergence",
    )
    p.add_argument("--lora-r", type=int, default=8)
    p.add_argument("--lora-targets", default="q_proj,k_proj,v_proj,o_proj")
    p.add_argument("--eval-episodes", type=int, default=256)
    p.add_argument("--check", action="store_true", help="a few minutes: does the documented ordering hold here?")
    args = p.parse_args(argv)
    if args.check:
        args = p.parse_args([*CHECK_ARGS, "--out", args.out, "--name", "check"])
    started = time.time()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    result = merge(args.merge) if args.merge else study(args)
    path = write_result(Path(args.out) / f"{args.name}.json", result, started=started)
    if args.name == "check":
        print("\n".join(check_lines(result)))
    else:
        print(path.read_text(encoding="utf-8"), end="")
    return 0


CHECK_ARGS = (
    *("--seeds", "0", "1", "2", "--methods", "mcts", "--kinds", "arithmetic", "--max-attempts", "1"),
    *("--tasks", "256", "--iterations", "3", "--simulations", "4", "--root-multiplier", "1"),
    *("--root-n-actions", "4", "--depth-limit", "1", "--lr", "5e-4", "--epochs", "4", "--nll-weight", "1.0"),
    *("--nll-scope", "turn", "--lora-targets", "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"),
    *("--eval-episodes", "300"),
)
"""``--check``: three seeds of the documented quickstart-task run (docs/synth.md), MCTS only (about 2 minutes)."""


def check_lines(result: dict[str, Any]) -> list[str]:
    """The documented claims, seed by seed: MCTS-DPO beats the SFT start (sampled), and keeps the format.

    Example:
        >>> runs = [{"seed": 0, "sft": {"sampled": 0.4, "greedy": 0.8},
        ...          "mcts_dpo": {"sampled": 0.5, "greedy": 0.85, "greedy_turns": 1.0}}]
        >>> check_lines({"runs": runs})[-1]
        'MCTS-DPO - SFT > 0 (sampled) on every seed, format kept on every seed: holds here'
    """
    lines, holds = [], True
    for row in result["runs"]:
        gain = row["mcts_dpo"]["sampled"] - row["sft"]["sampled"]
        kept = not lost_format(row["mcts_dpo"])
        holds &= gain > 0 and kept
        lines.append(
            f"seed {row['seed']}: sampled {row['sft']['sampled']:.3f} -> {row['mcts_dpo']['sampled']:.3f} "
            f"({gain:+.3f}), greedy turns {row['mcts_dpo'].get('greedy_turns', 1.0):.2f}"
        )
    verdict = "holds here" if holds else "does NOT hold here"
    lines.append(f"MCTS-DPO - SFT > 0 (sampled) on every seed, format kept on every seed: {verdict}")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
