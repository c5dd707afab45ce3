"""The GRPO update alone on SmolLM2-135M (fp32, rank-8 LoRA): where its time goes, and the row layout A/B.

One rollout batch is sampled once (``--source grpo``: bench_smollm2_grpo.py's prompts x group size, completions up
to ``--max-new-tokens``; ``--source math``: MathEpisodes difficulty 2 turns as ``turnkit quickstart --model
smollm2`` trains them, of uneven lengths), then :func:`turnkit.train.loop.update` runs on it again and again:

* ``--pairs`` alternating pairs of the update with the rows in rollout order (``as-is``, the layout before
  issue #54's item 3) and sorted by length inside each minibatch (``sorted``, the loop's layout), each
  on the same policy and optimizer (the weights move a little between updates; the work does not). Printed:
  median seconds of each, wall and this process's CPU time (``time.process_time``: with one torch thread the
  work itself, less sensitive to a loaded box than the wall clock), the median of per-pair ratios of each,
  and the padded tokens each layout runs;
* ``--profile``: then one more update under ``torch.profiler`` (CPU), the operators with the most self time.

Run: HF_HUB_OFFLINE=1 python benchmarks/bench_update.py [--source grpo|math] [--pairs 5] [--profile]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch

import turnkit.train.loop as loop
from turnkit.agents.base import Context
from turnkit.rollout.batch import TurnBatch, build_turn_batch
from turnkit.train import update_layout
from turnkit.train.config import TrainConfig
from turnkit.train.quickstart_smollm2 import ENV_ID, ENV_KWARGS
from turnkit.train.rollouts import RolloutJob, play
from turnkit.types import Message, Trajectory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_smollm2_grpo import LORA, LR, PROMPTS, one_turn_trajectories


def config(args: argparse.Namespace, out_dir: str) -> TrainConfig:
    return TrainConfig(
        model="smollm2",
        env_id=ENV_ID,
        env_kwargs=ENV_KWARGS,
        lora_r=LORA["r"],
        lora_alpha=LORA["alpha"],
        lora_targets=LORA["targets"],
        grpo={"group_size": args.group_size, "kl_coef": 0.0, "clip_eps": 0.2},
        groups_per_step=args.prompts,
        lr=LR,
        out_dir=out_dir,
        sampling={"max_new_tokens": args.max_new_tokens},
        update={"skip_zero_advantage": False},
    )


def sample(policy: Any, cfg: TrainConfig, source: str) -> list[Trajectory]:
    """One step's trajectories, sampled once."""
    policy.sampling = dataclasses.replace(policy.sampling, seed=loop.step_sampling_seed(cfg.seed, 1))
    k, g = cfg.groups_per_step, cfg.grpo.group_size
    if source == "math":
        envs = [gymnasium.make(ENV_ID, **ENV_KWARGS) for _ in range(k * g)]
        seeds = loop.sample_task_seeds(np.random.default_rng(cfg.seed), k, cfg)
        job = RolloutJob(1, seeds, policy.sampling.seed, g)
        trajs, _ = play(policy, envs, job, max_turns=cfg.max_turns, chat=loop.token_exact_chat(policy, cfg))
        return list(trajs)
    contexts = [
        Context(messages=(Message("user", PROMPTS[i % len(PROMPTS)]),), episode_seed=i)
        for i in range(k)
        for _ in range(g)
    ]
    return one_turn_trajectories(contexts, policy.act(contexts), g)


@contextmanager
def layout(name: str) -> Iterator[None]:
    """Run the loop's update with the rows ``as-is`` (rollout order) or ``sorted`` (its own layout)."""
    if name == "sorted":
        yield
        return
    original = loop.length_sorted
    loop.length_sorted = lambda batch: batch  # type: ignore[assignment]
    try:
        yield
    finally:
        loop.length_sorted = original  # type: ignore[assignment]


def padded_tokens(batch: TurnBatch, cfg: TrainConfig) -> int:
    return sum(
        part.input_ids.numel()
        for part in batch.token_slices(cfg.update.micro_batch_tokens, cfg.update.micro_batch_rows)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", choices=("grpo", "math"), default="grpo")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(args, tmp)
        policy = loop.build_policy(cfg, progress=False)
        loop.prepare_policy(policy, cfg)
        optimizer = torch.optim.AdamW(loop.trainable_parameters(policy), lr=LR, weight_decay=0.0)
        trajs = sample(policy, cfg, args.source)
    advantages = loop.step_advantages(trajs, cfg)
    batch = build_turn_batch(trajs, pad_id=int(policy.pad_token_id), advantages=advantages)
    tokens = int(batch.attention_mask.sum())
    padded = {"as-is": padded_tokens(batch, cfg), "sorted": padded_tokens(update_layout.length_sorted(batch), cfg)}
    passes = {
        "as-is": len(list(batch.token_slices(cfg.update.micro_batch_tokens))),
        "sorted": len(list(update_layout.length_sorted(batch).token_slices(cfg.update.micro_batch_tokens))),
    }
    print(f"# {args.source}: {len(batch)} rows, {tokens} tokens, {batch.num_loss_tokens} loss tokens; padded tokens "
          f"per update: {padded}, passes {passes}; load {os.getloadavg()[0]:.1f}")  # fmt: skip
    loop.update(policy, optimizer, trajs, cfg, advantages=advantages)  # warm-up
    wall: dict[str, list[float]] = {"as-is": [], "sorted": []}
    cpu: dict[str, list[float]] = {"as-is": [], "sorted": []}
    for i in range(args.pairs):
        for name in ("as-is", "sorted") if i % 2 == 0 else ("sorted", "as-is"):
            with layout(name):
                start, cpu_start = time.perf_counter(), time.process_time()
                loop.update(policy, optimizer, trajs, cfg, advantages=advantages)
                wall[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - cpu_start)
        print(f"  pair {i + 1}: as-is {wall['as-is'][-1]:.2f} s ({cpu['as-is'][-1]:.2f} CPU s), sorted "
              f"{wall['sorted'][-1]:.2f} s ({cpu['sorted'][-1]:.2f} CPU s)", flush=True)  # fmt: skip
    print("| layout | median update s | median update CPU s | tok/CPU s |\n|---|---:|---:|---:|")
    for name in wall:
        c = statistics.median(cpu[name])
        print(f"| {name} | {statistics.median(wall[name]):.2f} | {c:.2f} | {tokens / c:.0f} |")
    for what, times in (("wall", wall), ("CPU", cpu)):
        ratio = statistics.median(a / s for a, s in zip(times["as-is"], times["sorted"], strict=True))
        print(f"sorted is {ratio:.2f}x as fast ({what} time, median of {args.pairs} per-pair ratios)")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            loop.update(policy, optimizer, trajs, cfg, advantages=advantages)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))
    return 0


if __name__ == "__main__":
    sys.exit(main())
