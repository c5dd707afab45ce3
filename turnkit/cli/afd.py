"""The ``turnkit afd`` command: fit AfD reward models (torch loads only when it runs).

``turnkit afd --data init_sft init_demo sft_demo --out runs/afd`` builds (or loads) the SFT and initial tiny
policies, samples both on the training prompts, collects demonstrations, fits one reward model per data choice
(saved to ``<out>/rm/<choice>/``, what ``critic.afd.model=<out>/rm/<choice>`` loads) and writes
``<out>/summary.json`` (see :mod:`turnkit.train.afd`). Judging the reward models by best-of-N is the study
``python studies/irl_afd.py``.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="turnkit")
    >>> add_commands(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["afd", "--data", "init_sft", "sft_demo", "--train-episodes", "64"])
    >>> cfg = afd_config(args)
    >>> cfg.data, cfg.train_episodes
    (('init_sft', 'sft_demo'), 64)
"""

from __future__ import annotations

import argparse
from typing import Any

DATA_CHOICES = ("init_sft", "init_demo", "sft_demo")
"""The same as :data:`turnkit.train.afd.DATA_CHOICES` (repeated here so ``--help`` does not import torch)."""


def afd_config(args: argparse.Namespace) -> Any:
    """The :class:`~turnkit.train.afd.AfDRunConfig` of parsed ``turnkit afd`` arguments."""
    from turnkit.train.afd import AfDRunConfig

    env_kwargs = {"difficulty": args.difficulty, "max_attempts": args.max_attempts}
    return AfDRunConfig(
        out_dir=args.out,
        data=tuple(args.data),
        env_kwargs=env_kwargs,
        train_episodes=args.train_episodes,
        init_sft_steps=args.init_sft_steps,
        temperature=args.temperature,
        rm_steps=args.rm_steps,
        rm_batch_size=args.rm_batch_size,
        rm_lr=args.rm_lr,
        rm_lora_r=args.rm_lora_r,
        seed=args.seed,
    )


def cmd_afd(args: argparse.Namespace) -> int:
    """Run :func:`~turnkit.train.afd.train_afd` and print the fit of each reward model."""
    from turnkit.models.threads import torch_threads
    from turnkit.train.afd import train_afd

    cfg = afd_config(args)
    with torch_threads(args.threads):
        summary = train_afd(cfg, progress=not args.quiet).summary
    data = summary["train_data"]
    print(
        f"training samples: init success {data['init']['success']:.3f}, SFT success {data['sft']['success']:.3f}, "
        f"{data['demonstrations']:.0f} demonstrations"
    )
    for choice, m in summary["rm"].items():
        print(f"reward model {choice}: accuracy {m['accuracy']:.3f}, loss {m['loss']:.3f} -> {cfg.out_dir}/rm/{choice}")
    print(f"use one in training: --set critic.afd.model={cfg.out_dir}/rm/<choice>; best-of-N: studies/irl_afd.py")
    print(f"summary -> {cfg.out_dir}/summary.json")
    return 0


def _positive_int(text: str) -> int:
    """An int >= 1 (for sizes and counts)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {text!r}")
    return value


def add_commands(sub: Any) -> None:
    """Add ``afd`` to the ``turnkit`` sub-command parser (no heavy imports here)."""
    p = sub.add_parser(
        "afd",
        help="Alignment from Demonstrations: fit IRL reward models (critic=afd loads them)",
        description="Fit AfD discriminator reward models on the embedded tiny world (MathEpisodes), one per data "
        "choice, saved to <out>/rm/<choice>/ for critic=afd. Best-of-N evaluation: python studies/irl_afd.py.",
    )
    p.add_argument(
        "--data",
        nargs="+",
        choices=DATA_CHOICES,
        default=["init_sft"],
        help="reward-model training data, one model per choice: init_sft = init vs SFT samples (the paper's "
        "best), init_demo = init samples vs demonstrations, sft_demo = SFT samples vs demonstrations",
    )
    p.add_argument(
        "--train-episodes", type=_positive_int, default=512, help="prompts for the reward model (default 512)"
    )
    p.add_argument("--out", default="runs/afd", help="output folder: rm/<choice>/ and summary.json")
    p.add_argument("--init-sft-steps", type=_positive_int, default=40, help="SFT steps of the initial policy")
    p.add_argument("--difficulty", type=_positive_int, default=1, help="MathEpisodes difficulty (default 1)")
    p.add_argument("--max-attempts", type=_positive_int, default=1, help="answers allowed per episode (default 1)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of every policy sample")
    p.add_argument("--rm-steps", type=_positive_int, default=300, help="reward-model optimizer steps")
    p.add_argument("--rm-batch-size", type=_positive_int, default=64, help="reward-model samples per step")
    p.add_argument("--rm-lr", type=float, default=3e-4, help="reward-model learning rate")
    p.add_argument("--rm-lora-r", type=int, default=0, help="LoRA rank of the reward model (0: full fine-tuning)")
    p.add_argument("--seed", type=int, default=0, help="sampling and reward-model seed")
    p.add_argument("--threads", type=_positive_int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_afd)
