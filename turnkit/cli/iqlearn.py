"""The ``turnkit iqlearn`` command: IQLearn (TD-regularised MLE) on demonstrations (torch imported only to run).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="turnkit")
    >>> add_commands(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["iqlearn", "--set", "lam=1.0", "--set", "demos=demos.jsonl", "--resume"])
    >>> args.overrides, args.resume
    (['lam=1.0', 'demos=demos.jsonl'], True)
"""

from __future__ import annotations

import argparse
from typing import Any

from turnkit.cli.train import _threads, eval_line


def iqlearn_config(args: argparse.Namespace) -> Any:
    """The run's :class:`~turnkit.train.iqlearn.IQLearnConfig` from ``--config``, ``--set`` and ``--out``.

    With ``--resume`` and a run folder holding a ``config.json``, that config is the base and the flags change
    only what they name.
    """
    from pathlib import Path

    from turnkit.configs import apply_overrides, load_config
    from turnkit.errors import ConfigError
    from turnkit.train.iqlearn import IQLearnConfig

    overrides = list(args.overrides) + ([f"out_dir={args.out}"] if args.out else [])
    base = load_config(args.config, IQLearnConfig) if args.config else IQLearnConfig()
    cfg = apply_overrides(base, overrides)
    saved = Path(cfg.out_dir) / "config.json"
    if not (args.resume and saved.is_file()):
        return cfg
    if args.config:
        raise ConfigError(f"--resume reads the run's saved config {saved}; drop --config")
    return apply_overrides(load_config(saved, IQLearnConfig), overrides)


def cmd_iqlearn(args: argparse.Namespace) -> int:
    """Run (or resume) an IQLearn run and print where it went and how it did."""
    from turnkit.models.threads import torch_threads
    from turnkit.train.iqlearn import train_iqlearn

    cfg = iqlearn_config(args)
    with torch_threads(args.threads):
        result = train_iqlearn(cfg, resume=args.resume, progress=not args.quiet)
    last = next((r for r in reversed(result.history) if "nll" in r), None)
    line = f"trained {result.steps_done} steps -> {result.run_dir}"
    if last is not None:
        line += f"; last step nll {last['nll']:.3f}, td² {last['td_sq']:.3f}"
    if result.final_eval is not None:
        line += "; " + eval_line(result.final_eval, "held-out greedy success")
    print(line)
    return 0


def add_commands(sub: Any) -> None:
    """Add ``iqlearn`` to the ``turnkit`` sub-command parser (no heavy imports here)."""
    p = sub.add_parser(
        "iqlearn", help="imitate demonstrations with IQLearn (TD-regularised MLE; see docs/learners/irl.md)"
    )
    p.add_argument("--config", default=None, help="a .toml or .json file of IQLearnConfig keys")
    p.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a config key"
    )
    p.add_argument("--out", default=None, help="run directory (same as --set out_dir=...)")
    p.add_argument("--resume", action="store_true", help="continue from the run dir's newest checkpoint")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--threads", type=_threads, default=None, help="torch CPU threads (default: torch's own)")
    p.set_defaults(func=cmd_iqlearn)
