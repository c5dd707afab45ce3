"""The ``turnkit train`` and ``turnkit quickstart`` commands (torch is imported only when they run).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="turnkit")
    >>> add_commands(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["train", "--set", "optim.lr=0.01", "--set", "steps=2", "--resume"])
    >>> args.overrides, args.resume, args.threads
    (['optim.lr=0.01', 'steps=2'], True, None)
    >>> args = parser.parse_args(["quickstart"])
    >>> args.model, args.threads
    ('tiny', 1)
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any


def run_config(args: argparse.Namespace) -> Any:
    """The run's :class:`~turnkit.train.config.TrainConfig` from ``--config``, ``--set`` and ``--out``.

    A built-in model's own defaults (:mod:`turnkit.train.model_defaults`: SmolLM2's batch) fill the keys that
    neither the file nor ``--set`` names. With ``--resume`` and a run folder that has a ``config.json``, that
    saved config is the base and the flags only change what they name (the loop refuses changes a resumed run
    may not make); ``--config`` is then an error, since the run already has one.

    Raises:
        ConfigError: ``--resume`` with ``--config`` on a run that has a saved config, or a bad config/override.
    """
    from pathlib import Path

    from turnkit.configs import apply_overrides, load_config, read_config_file
    from turnkit.errors import ConfigError
    from turnkit.train.config import TrainConfig
    from turnkit.train.model_defaults import given_keys, with_model_defaults

    overrides = list(args.overrides)
    if args.out:
        overrides.append(f"out_dir={args.out}")
    cfg = apply_overrides(load_config(args.config, TrainConfig) if args.config else TrainConfig(), overrides)
    saved = Path(cfg.out_dir) / "config.json"
    if not (args.resume and saved.is_file()):
        written = read_config_file(args.config, "TrainConfig") if args.config else {}
        return with_model_defaults(cfg, given=given_keys(written, overrides))
    if args.config:
        raise ConfigError(
            f"--resume reads the run's saved config {saved}; drop --config (use --set to change what may change)"
        )
    return apply_overrides(load_config(saved, TrainConfig), overrides)


def cmd_train(args: argparse.Namespace) -> int:
    """Run (or resume) a GRPO/RLOO training run from a config file and ``--set`` overrides."""
    cfg = run_config(args)  # a bad key fails here, before torch and the model code load

    from turnkit.models.threads import torch_threads
    from turnkit.train.loop import train
    from turnkit.train.model_defaults import model_threads

    with torch_threads(args.threads if args.threads is not None else model_threads(cfg.model, cfg.device)):
        result = train(cfg, resume=args.resume, progress=not args.quiet)
    last = next((r for r in reversed(result.history) if "reward_mean" in r), None)
    line = f"trained {result.steps_done} steps -> {result.run_dir}"
    if last is not None:
        line += f"; last step reward {last['reward_mean']:.3f}, success {last['success_rate']:.3f}"
    if result.final_eval is not None:
        line += "; " + eval_line(result.final_eval)
    print(line)
    return 0


def eval_line(record: dict[str, Any], what: str = "held-out success") -> str:
    """A final evaluation record (``EvalSummary.metrics()``) as one line of a command's report.

    Example:
        >>> eval_line({"eval_success": 0.5, "eval_success_lo": 0.3, "eval_success_hi": 0.7, "eval_episodes": 20})
        'held-out success 0.500 (95% CI 0.300-0.700, 20 episodes)'
    """
    return (
        f"{what} {record['eval_success']:.3f} (95% CI {record['eval_success_lo']:.3f}-"
        f"{record['eval_success_hi']:.3f}, {record['eval_episodes']} episodes)"
    )


def cmd_quickstart(args: argparse.Namespace) -> int:
    """SFT start policy -> held-out eval -> GRPO -> held-out eval, with a before/after table and plot."""
    from turnkit.configs import apply_overrides
    from turnkit.train.quickstart import (
        QuickstartConfig,
        quickstart_train_config,
        run_quickstart,
        run_seeds,
    )

    qcfg = QuickstartConfig(
        out_dir=args.out,
        seed=args.seed,
        eval_episodes=args.eval_episodes,
        steps=args.steps,
        threads=args.threads,
        model=args.model,
    )
    if args.overrides:  # e.g. --set rollout.async=true: recipe keys changed on top of the quickstart's
        base = quickstart_train_config(qcfg).to_dict()
        changed = apply_overrides(quickstart_train_config(qcfg), args.overrides).to_dict()
        qcfg = dataclasses.replace(qcfg, train_overrides={k: v for k, v in changed.items() if base[k] != v})
    if args.seeds > 1:
        run_seeds(qcfg, list(range(args.seed, args.seed + args.seeds)), progress=not args.quiet)
    else:
        run_quickstart(qcfg, progress=not args.quiet)
    return 0


def _threads(text: str) -> int:
    """``--threads`` values: an int >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--threads must be an int >= 1, got {text!r}")
    return value


def add_commands(sub: Any) -> None:
    """Add ``train`` and ``quickstart`` to the ``turnkit`` sub-command parser (no heavy imports here)."""
    tr = sub.add_parser("train", help="train a policy with GRPO/RLOO (see docs/training.md)")
    tr.add_argument("--config", default=None, help="a .toml or .json file of TrainConfig keys")
    tr.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a config key"
    )
    tr.add_argument("--out", default=None, help="run directory (same as --set out_dir=...)")
    tr.add_argument(
        "--resume", action="store_true", help="continue from the run dir's newest checkpoint with its saved config"
    )
    tr.add_argument("--quiet", action="store_true", help="no progress bars")
    tr.add_argument(
        "--threads",
        type=_threads,
        default=None,
        help="torch CPU threads (default: the model's, e.g. 1 for smollm2 on a CPU; else torch's own)",
    )
    tr.set_defaults(func=cmd_train)

    qs = sub.add_parser("quickstart", help="the main job: SFT start policy -> RL -> before/after table")
    qs.add_argument(
        "--model", choices=["tiny", "smollm2"], default="tiny",
        help="tiny: the embedded tiny policy (a few minutes); smollm2: SmolLM2-135M-Instruct, LoRA warm start "
        "then GRPO (about 20 minutes on 2 cores)",
    )  # fmt: skip
    qs.add_argument("--out", default="runs/quickstart", help="output directory")
    qs.add_argument("--seed", type=int, default=0, help="training seed (the first one with --seeds)")
    qs.add_argument("--seeds", type=int, default=1, help="repeat with this many training seeds and aggregate")
    qs.add_argument("--steps", type=int, default=None, help="RL steps (default: the quickstart recipe's)")
    qs.add_argument("--eval-episodes", type=int, default=None, help="held-out episodes per evaluation")
    qs.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="change a key of the RL recipe (TrainConfig), e.g. --set rollout.async=true",
    )  # fmt: skip
    qs.add_argument("--quiet", action="store_true", help="no progress bars")
    qs.add_argument(
        "--threads", type=_threads, default=1,
        help="torch CPU threads (default 1: a second thread gains little on 2 cores and collapses on a busy box)",
    )  # fmt: skip
    qs.set_defaults(func=cmd_quickstart)
