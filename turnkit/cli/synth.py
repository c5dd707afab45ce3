"""The ``turnkit synth`` subcommand: iterative MCTS data synthesis (search -> pairs -> DPO), resumable.

Wire it into the main parser with ``add_commands(subparsers)``. Building the parser imports no torch; the
command imports the training stack when it runs.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="turnkit")
    >>> add_commands(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["synth", "turnkit/MathEpisodes-v0", "--iterations", "3", "--out", "runs/x"])
    >>> args.iterations, args.policy, args.simulations, args.rejected
    (3, 'tiny', 64, 'lowest_q')
"""

from __future__ import annotations

import argparse
from typing import Any

from turnkit.cli.agents import add_sampling_args, sampling_changes, with_sampling
from turnkit.cli.envs import parse_env_kwargs
from turnkit.envs.names import safe_name
from turnkit.search.mcts import MCTSConfig
from turnkit.search.pairs import PairConfig

_MCTS = MCTSConfig()
STEP_DELIMITERS = {"line": "\n", "paragraph": "\n\n"}
"""``--steps`` choices: the delimiter one reasoning step ends with."""


def add_commands(subparsers: Any) -> None:
    """Add ``synth`` to an ``argparse`` subparsers object (``parser.add_subparsers(...)``)."""
    p = subparsers.add_parser(
        "synth",
        help="MCTS data synthesis: search -> step-level preference pairs -> DPO, iterated on-policy",
        description=(
            "Search tasks of ENV_ID with the policy, extract step-level preference pairs, train the policy with "
            "(conservative) DPO, and repeat. Writes trees, pictures, pairs (TRL DPO JSONL) and adapters to --out; "
            "rerun the same command to resume."
        ),
    )
    p.add_argument("env_id", help="a registered env id, e.g. turnkit/MathEpisodes-v0")
    p.add_argument(
        "--policy", default="tiny", help="tiny | smollm2 | hf:PATH (trainable), or oracle/random/... with --no-train"
    )
    p.add_argument("--iterations", type=int, default=2, help="search -> pairs -> DPO rounds")
    p.add_argument("--out", default=None, help="output directory (default runs/synth-ENV-sSEED)")
    p.add_argument("--tasks", type=int, default=32, help="task seeds searched per iteration")
    p.add_argument("--split", default="id")
    p.add_argument("--seed", type=int, default=0, help="task-seed base and policy sampling seed")
    p.add_argument("--env-kwarg", action="append", default=[], metavar="KEY=VALUE", help="extra env argument")
    p.add_argument("--search", choices=("mcts", "best_of_n"), default="mcts")
    p.add_argument("--best-of-n", type=int, default=8, help="episodes per task with --search best_of_n")
    g = p.add_argument_group("MCTS (defaults: MCTS-DPO)")
    g.add_argument("--simulations", type=int, default=_MCTS.iterations, help="simulations per committed turn")
    g.add_argument("--root-multiplier", type=int, default=_MCTS.root_multiplier)
    g.add_argument("--n-actions", type=int, default=_MCTS.n_actions)
    g.add_argument("--root-n-actions", type=int, default=None)
    g.add_argument("--breadth-limit", type=int, default=_MCTS.breadth_limit)
    g.add_argument("--depth-limit", type=int, default=_MCTS.depth_limit)
    g.add_argument("--parallel", type=int, default=_MCTS.parallel, help="simulations per batched policy round")
    g.add_argument("--gamma", type=float, default=_MCTS.gamma)
    g.add_argument("--reward-weight", type=float, default=_MCTS.reward_weight, help="env step reward in edge reward")
    g.add_argument(
        "--steps",
        choices=sorted(STEP_DELIMITERS),
        default=None,
        help="search reasoning steps inside a turn (line or paragraph) instead of whole turns",
    )
    g.add_argument(
        "--final-marker",
        action="append",
        default=None,
        help="with --steps: text that ends a turn (repeatable; default: the env's final_answer_markers)",
    )
    g.add_argument("--max-turn-steps", type=int, default=_MCTS.max_turn_steps, help="with --steps: steps per turn")
    g = p.add_argument_group("pairs and DPO")
    g.add_argument("--rejected", choices=("lowest_q", "random"), default=PairConfig().rejected)
    g.add_argument("--any-outcome", action="store_true", help="also take pairs from trees that failed")
    g.add_argument("--min-q-gap", type=float, default=0.0, help="keep a pair only when Q_w - Q_l exceeds this")
    g.add_argument("--pair-scope", choices=("committed", "all"), default=PairConfig().scope, help="nodes giving pairs")
    g.add_argument(
        "--pair-require-value",
        action="store_true",
        help="compare only turns whose Q rests on a terminal state or a critic score (see PairConfig.require_value)",
    )
    g.add_argument("--beta", type=float, default=None, help="DPO beta (default 0.1)")
    g.add_argument("--standard-dpo", action="store_true", help="plain DPO instead of conservative DPO")
    g.add_argument("--epochs", type=int, default=None)
    g.add_argument("--lr", type=float, default=None)
    g.add_argument("--batch-size", type=int, default=None, help="pairs per DPO step (default 8)")
    g.add_argument("--nll-weight", type=float, default=None, help="RPO NLL term on the chosen side (default 0)")
    g.add_argument(
        "--nll-scope",
        choices=("turn", "suffix"),
        default=None,
        help="what the NLL term covers: the whole chosen turn (default; keeps the answer format) or only the "
        "tokens after the pair's shared prefix",
    )
    g.add_argument("--lora-r", type=int, default=None, help="LoRA rank (alpha = 2 r; default 8)")
    g.add_argument("--lora-targets", default=None, help="comma list of modules the LoRA wraps (default attention)")
    g.add_argument("--no-train", action="store_true", help="only synthesise data (any agent)")
    g = p.add_argument_group("output")
    g.add_argument("--eval-episodes", type=int, default=0, help="held-out episodes evaluated per iteration")
    g.add_argument("--render", type=int, default=2, help="trees per iteration drawn as PNG + HTML")
    g.add_argument("--quiet", action="store_true", help="no progress bars")
    add_sampling_args(p)
    p.set_defaults(func=cmd_synth)


def load_policy(spec: str, *, seed: int = 0, progress: bool = True) -> Any:
    """The agent named by ``spec``: a built-in model (``tiny``, ``smollm2``, ...), ``hf:PATH`` or any agent spec."""
    from turnkit.models.names import load_policy, model_names

    if spec in model_names():
        return load_policy(spec, progress=progress, seed=seed)
    if spec.startswith("hf:"):
        from turnkit.agents.hf import HFPolicy

        return HFPolicy.from_pretrained(spec[3:], seed=seed)
    from turnkit.cli.agents import make_agent

    return make_agent(spec, seed=seed)


def config_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~turnkit.train.synth.SynthConfig` an argument namespace describes."""
    from turnkit.train.dpo import DPOConfig
    from turnkit.train.synth import SynthConfig

    mcts = MCTSConfig(
        iterations=args.simulations,
        root_multiplier=args.root_multiplier,
        n_actions=args.n_actions,
        root_n_actions=args.root_n_actions,
        breadth_limit=args.breadth_limit,
        depth_limit=args.depth_limit,
        parallel=args.parallel,
        gamma=args.gamma,
        reward_weight=args.reward_weight,
        seed=args.seed,
        step_delimiter=STEP_DELIMITERS[args.steps] if args.steps else None,
        final_markers=tuple(args.final_marker) if args.final_marker else None,
        max_turn_steps=args.max_turn_steps,
    )
    pairs = PairConfig(
        rejected=args.rejected,
        require_success=not args.any_outcome,
        min_q_gap=args.min_q_gap,
        scope=args.pair_scope,
        require_value=args.pair_require_value,
    )
    names = ("beta", "epochs", "batch_size", "nll_weight", "nll_scope")
    dpo_changes: dict[str, Any] = {k: getattr(args, k) for k in names if getattr(args, k) is not None}
    lora: dict[str, Any] = {}
    if args.lora_r is not None:
        lora.update(r=args.lora_r, alpha=2 * args.lora_r)
    if args.lora_targets:
        lora["targets"] = tuple(t.strip() for t in args.lora_targets.split(",") if t.strip())
    optim = {"lr": args.lr} if args.lr is not None else {}
    dpo = DPOConfig(conservative=not args.standard_dpo, seed=args.seed, optim=optim, lora=lora, **dpo_changes)
    return SynthConfig(
        env_id=args.env_id,
        iterations=args.iterations,
        tasks_per_iteration=args.tasks,
        seed=args.seed,
        split=args.split,
        env_kwargs=parse_env_kwargs(args.env_kwarg),
        search=args.search,
        best_of_n=args.best_of_n,
        mcts=mcts,
        pairs=pairs,
        dpo=dpo,
        train=not args.no_train,
        render_trees=args.render,
        eval_episodes=args.eval_episodes,
    )


def cmd_synth(args: argparse.Namespace) -> int:
    """Run ``turnkit synth`` (see :mod:`turnkit.train.synth`)."""
    from turnkit.train.synth import synthesize

    config = config_from_args(args)
    out = args.out or f"runs/{safe_name(f'synth-{args.env_id}-s{args.seed}')}"
    from turnkit.models.threads import torch_threads

    with torch_threads(args.threads):
        agent = load_policy(args.policy, seed=args.seed, progress=not args.quiet)
        agent = with_sampling(agent, args.policy, sampling_changes(args))
        result = synthesize(config, agent, out, progress=not args.quiet)
    for m in result.iterations:
        search = m["search"]
        line = (
            f"iter {m['iteration']}: {m['tasks']} tasks, search success {m['search_success_rate']:.3f}, "
            f"{m['pairs']} pairs, {search['policy_contexts']} sampled turns, "
            f"outside-policy time {100 * search['overhead_share']:.1f}%"
        )
        if "dpo" in m and m["dpo"].get("steps"):
            line += f", dpo loss {m['dpo']['first_loss']:.4f} -> {m['dpo']['final_loss']:.4f}"
        if "eval" in m:
            lo, hi = m["eval"]["success_ci95"]
            line += f", held-out success {m['eval']['success_rate']:.3f} ({lo:.3f}-{hi:.3f})"
        print(line)
    print(f"{len(result.pairs)} pairs -> {result.out_dir / 'dataset.jsonl'}")
    return 0
