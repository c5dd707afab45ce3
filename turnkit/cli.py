"""The ``turnkit`` command line: ``list``, ``play``, ``eval``, ``bench``, ``train``, ``quickstart``, ``synth``.

Example:
    >>> main(["list"])  # doctest: +ELLIPSIS
    turnkit/CollabCode-v0 ...
    turnkit/MathEpisodes-v0 ...
    0
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium

import turnkit
from turnkit.errors import ConfigError, TurnkitError


def _registered_ids() -> list[str]:
    return sorted(i for i in gymnasium.registry if i.startswith("turnkit/"))


def _describe(env_id: str) -> str:
    spec = gymnasium.spec(env_id)
    module, _, name = str(spec.entry_point).partition(":")
    cls = getattr(importlib.import_module(module), name)
    doc = (cls.__doc__ or "").strip().splitlines()
    return doc[0] if doc else ""


def parse_env_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    """Parse ``--env-kwarg KEY=VALUE`` pairs; values are JSON when they parse, else strings.

    Example:
        >>> parse_env_kwargs(["difficulty=3", "kinds=[\\"word\\"]", "split=ood"])
        {'difficulty': 3, 'kinds': ['word'], 'split': 'ood'}
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--env-kwarg expects KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw  # a bare string
    return out


def cmd_list(args: argparse.Namespace) -> int:
    """Print every registered turnkit env id with its one-line description."""
    ids = _registered_ids()
    width = max(len(i) for i in ids)
    for env_id in ids:
        print(f"{env_id:<{width}}  {_describe(env_id)}")
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    """Let a person play an env in the terminal."""
    env = gymnasium.make(args.env_id, split=args.split, **parse_env_kwargs(args.env_kwarg))
    obs, info = env.reset(seed=args.seed)
    print(f"== {args.env_id} [{args.split}] seed={args.seed} (end a line with '\\' to continue it; Ctrl-D quits)")
    total = 0.0
    while True:
        print(f"\n[env] {obs}")
        lines: list[str] = []
        try:
            while True:
                line = input("> " if not lines else ". ")
                if line.endswith("\\"):
                    lines.append(line[:-1])
                    continue
                lines.append(line)
                break
        except EOFError:
            print("\nbye")
            return 0
        obs, reward, terminated, truncated, info = env.step("\n".join(lines))
        total += float(reward)
        extra = f" invalid={info['invalid_action']}" if "invalid_action" in info else ""
        print(f"[reward {reward:+.3f}, total {total:+.3f}]{extra}")
        if terminated or truncated:
            print(f"\n[env] {obs}")
            result = "success" if info.get("success") else "failure"
            print(f"== episode over ({'truncated' if truncated else 'terminated'}): {result}, return {total:.3f}")
            return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Evaluate an agent and write trajectories + a summary."""
    from turnkit.agents.registry import make_agent
    from turnkit.rollout.evaluate import evaluate

    out_dir = args.out or f"runs/eval-{args.env_id.replace('/', '_')}-{args.split}-s{args.seed}"
    summary = evaluate(
        args.env_id,
        make_agent(args.agent, seed=args.seed),
        episodes=args.episodes,
        seed=args.seed,
        split=args.split,
        batch_size=args.batch_size,
        env_kwargs=parse_env_kwargs(args.env_kwarg),
        out_dir=out_dir,
        progress=not args.quiet,
    )
    lo, hi = summary.success_ci95
    print(
        f"{args.env_id} [{args.split}] agent={args.agent} episodes={summary.episodes}: "
        f"success {summary.success_rate:.3f} (95% CI {lo:.3f}-{hi:.3f}), mean reward {summary.mean_reward:.3f}, "
        f"errors {summary.errors or 0}, {summary.wall_s:.1f}s -> {out_dir}"
    )
    return 0


def _benchmarks_dir() -> Path:
    for base in (Path.cwd(), Path(turnkit.__file__).resolve().parent.parent):
        if (base / "benchmarks").is_dir():
            return base / "benchmarks"
    raise ConfigError("no benchmarks/ directory found: run `turnkit bench` from a turnkit source checkout")


def cmd_bench(args: argparse.Namespace) -> int:
    """Run ``benchmarks/bench_NAME.py``'s ``main(argv)``."""
    bench_dir = _benchmarks_dir()
    available = sorted(p.stem.removeprefix("bench_") for p in bench_dir.glob("bench_*.py"))
    if args.name not in available:
        raise ConfigError(f"unknown benchmark {args.name!r}; available: {', '.join(available)}")
    path = bench_dir / f"bench_{args.name}.py"
    spec = importlib.util.spec_from_file_location(f"turnkit_bench_{args.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return int(module.main(args.bench_args) or 0)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``turnkit`` command."""
    parser = argparse.ArgumentParser(
        prog="turnkit", description="Text environments, sandboxes and learners for multi-turn LLM agents."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="list registered envs").set_defaults(func=cmd_list)

    def env_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("env_id", help="a registered env id, e.g. turnkit/MathEpisodes-v0")
        p.add_argument("--split", default="id", help="task split (id, ood, combo, ...)")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--env-kwarg", action="append", default=[], metavar="KEY=VALUE", help="extra env argument")

    play = sub.add_parser("play", help="play an env yourself in the terminal")
    env_args(play)
    play.set_defaults(func=cmd_play)

    ev = sub.add_parser("eval", help="evaluate an agent on seeded episodes")
    env_args(ev)
    ev.add_argument(
        "--agent",
        default="oracle",
        help="oracle | random | scripted:TEXT | hf:PATH | tiny | openai:URL#MODEL",
    )
    ev.add_argument("--episodes", type=int, default=100)
    ev.add_argument("--batch-size", type=int, default=16)
    ev.add_argument("--out", default=None, help="output directory (default runs/eval-...)")
    ev.add_argument("--quiet", action="store_true", help="no progress bar")
    ev.set_defaults(func=cmd_eval)

    bench = sub.add_parser("bench", help="run a benchmark from benchmarks/ (e.g. envs, sandbox)")
    bench.add_argument("name")
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(func=cmd_bench)

    # Training and synthesis commands; torch is imported only when one of them runs.
    from turnkit.search.cli import add_commands as add_search_commands
    from turnkit.train.cli import add_commands as add_train_commands

    add_train_commands(sub)
    add_search_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``turnkit`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (TurnkitError, gymnasium.error.Error) as exc:
        print(f"turnkit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
