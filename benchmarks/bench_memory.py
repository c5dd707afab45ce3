"""Where the memory of a SmolLM2 GRPO run goes: peak RSS per phase, at the quickstart recipe's batch shapes.

One process walks the phases of ``turnkit quickstart --model smollm2`` once: load the converted model, a warm
start (the recipe's SFT batch, ``--warm-steps`` steps into a temporary cache), a held-out evaluation (one batch of
64 greedy episodes, as ``evaluate_policy`` batches them), one rollout (the recipe's 4 groups x 4 episodes through
:func:`turnkit.train.rollouts.rollout`), reference log-probs (no gradient, the adapter disabled, over the step's
whole batch), then the update split into its forward (loss with graph), backward and optimizer step, part by part
as :func:`turnkit.train.loop.update` runs them.

A sampling thread reads ``VmRSS`` from ``/proc/self/status`` every 2 ms; before each phase ``malloc_trim(0)``
hands freed heap back to the system, so a phase's ``peak - start`` is the memory that phase itself needed (not
hidden by pages an earlier phase left in the allocator). ``--profile`` adds the update's largest allocations by
operator (``torch.profiler`` with ``profile_memory``).

``--plain`` measures the update as the branch before issue #54 ran it: full ``[B, T, V]`` logits through
``model(...).logits`` and :func:`~turnkit.rollout.batch.gather_token_logprobs`, all rows in one pass. The default
measures the current loop: :func:`~turnkit.learners.logprobs.model_token_logprobs` (hidden states, then the
vocabulary in checkpointed chunks) over ``micro_batch_tokens``-token parts.

Run: TURNKIT_CACHE=/tmp/tk_cache_mem python benchmarks/bench_memory.py [--plain] [--profile] [--threads 1]
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch

from turnkit.learners.grpo import aggregation_share, policy_loss
from turnkit.learners.learner import Learner
from turnkit.learners.logprobs import model_token_logprobs
from turnkit.models.names import load_policy
from turnkit.rollout.batch import build_turn_batch, gather_token_logprobs
from turnkit.train.config import TrainConfig
from turnkit.train.loop import (
    _reference_logprobs,
    evaluate_policy,
    prepare_policy,
    sample_task_seeds,
    step_advantages,
    step_sampling_seed,
    token_exact_chat,
)
from turnkit.train.quickstart_smollm2 import ENV_ID, ENV_KWARGS, MODEL, SMOLLM2_TRAIN, SMOLLM2_WARM_START
from turnkit.train.rollouts import rollout
from turnkit.train.warmstart import warm_start

GB = 1e9


def rss() -> int:
    """This process's resident set size in bytes (``VmRSS``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


class PeakSampler:
    """A daemon thread that keeps the highest RSS seen since the last :meth:`reset`."""

    def __init__(self, every_s: float = 0.002) -> None:
        self.peak = rss()
        self._every = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss())
            time.sleep(self._every)

    def reset(self) -> int:
        self.peak = now = rss()
        return now

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


_LIBC = ctypes.CDLL("libc.so.6")
ROWS: list[dict[str, Any]] = []


@contextmanager
def phase(name: str, sampler: PeakSampler) -> Iterator[None]:
    """Record ``name``'s start RSS, peak RSS and seconds (accumulated over repeated entries)."""
    _LIBC.malloc_trim(0)
    start = sampler.reset()
    t0 = time.perf_counter()
    yield
    sampler.peak = max(sampler.peak, rss())
    row = next((r for r in ROWS if r["phase"] == name), None)
    if row is None:
        ROWS.append({"phase": name, "start": start, "peak": sampler.peak, "s": time.perf_counter() - t0})
    else:
        if sampler.peak - start > row["peak"] - row["start"]:
            row.update(start=start, peak=sampler.peak)
        row["s"] += time.perf_counter() - t0


def update_phases(learner: Learner, batch: Any, cfg: TrainConfig, sampler: PeakSampler, *, plain: bool):
    """One optimizer step on ``batch`` as the loop takes it, timed and measured per phase."""
    grpo = cfg.loss_config()
    policy = learner.policy
    policy.model.train()
    learner.zero_grad()
    parts = [batch] if plain else list(batch.token_slices(cfg.micro_batch_tokens, cfg.micro_batch_rows))
    for part in parts:
        with phase("update forward", sampler):
            if plain:
                logits = policy.model(input_ids=part.input_ids, attention_mask=part.attention_mask).logits
                logp = gather_token_logprobs(logits, part.input_ids, part.loss_mask, temperature=cfg.temperature)
            else:
                logp = model_token_logprobs(
                    policy.model, part.input_ids, part.attention_mask, part.loss_mask, temperature=cfg.temperature
                )
            loss, _ = policy_loss(logp, part.old_logprobs, part.advantages, part.loss_mask, grpo)
            share = aggregation_share(part.loss_mask, batch.loss_mask, grpo.loss_agg)
        with phase("backward", sampler):
            (loss * share).backward()
            del loss, logp
            logits = None
    with phase("optimizer step", sampler):
        learner.step()
    policy.model.eval()
    return len(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plain", action="store_true", help="the branch-start update: full logits, one pass")
    parser.add_argument("--profile", action="store_true", help="top allocations of the update (torch profiler)")
    parser.add_argument("--warm-steps", type=int, default=2, help="warm-start SFT steps to measure")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = TrainConfig(**{**SMOLLM2_TRAIN, "seed": args.seed, "eval_episodes": 64})
    sampler = PeakSampler()
    base = rss()
    with phase("load model", sampler):
        policy = load_policy(MODEL, progress=False, temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens)
    with phase("warm start (SFT)", sampler), tempfile.TemporaryDirectory() as cache:
        warm = dataclasses.replace(SMOLLM2_WARM_START, steps=args.warm_steps)
        warm_start(policy, model_id=MODEL, env_id=ENV_ID, env_kwargs=ENV_KWARGS, cfg=warm, cache=cache,
                   progress=False)  # fmt: skip
    learner = prepare_policy(policy, cfg)
    with phase("evaluation (64 greedy)", sampler):
        metrics = evaluate_policy(policy, cfg)
    chat = token_exact_chat(policy, cfg)
    envs = [gymnasium.make(ENV_ID, **ENV_KWARGS) for _ in range(cfg.grpo.group_size * cfg.groups_per_step)]
    seeds = sample_task_seeds(np.random.default_rng(args.seed), cfg.groups_per_step, cfg)
    policy.sampling = dataclasses.replace(policy.sampling, seed=step_sampling_seed(cfg.seed, 1))
    with phase("rollout (16 sampled)", sampler):
        trajs, _ = rollout(policy, envs, cfg, seeds, chat=chat)
    advantages = step_advantages(trajs, cfg)
    # every row trains here (a tied group would be skipped by the loop): the shape the issue measured
    batch = build_turn_batch(trajs, pad_id=int(policy.pad_token_id), advantages=advantages)
    with phase("reference log-probs", sampler), torch.no_grad():
        if args.plain:
            with policy.reference():
                logits = policy.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
                gather_token_logprobs(logits, batch.input_ids, batch.loss_mask)
            del logits
        else:
            _reference_logprobs(learner, batch, cfg)
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            parts = update_phases(learner, batch, cfg, sampler, plain=args.plain)
    else:
        parts = update_phases(learner, batch, cfg, sampler, plain=args.plain)
    sampler.close()
    tokens = int(batch.attention_mask.sum())
    mode = "plain one-pass" if args.plain else f"chunked, micro_batch_tokens {cfg.micro_batch_tokens}"
    print(f"# SmolLM2 fp32 LoRA r8, {mode} update; threads {args.threads}; base RSS {base / GB:.2f} GB; "
          f"eval success {metrics['eval_success']:.2f}")  # fmt: skip
    print(f"# update batch: {len(batch)} rows x {batch.input_ids.shape[1]} (padded), {tokens} tokens, "
          f"{batch.num_loss_tokens} loss tokens, {parts} part(s)")  # fmt: skip
    print("| phase | RSS at start (GB) | peak RSS (GB) | peak - start (GB) | seconds |")
    print("|---|---:|---:|---:|---:|")
    for r in ROWS:
        print(f"| {r['phase']} | {r['start'] / GB:.2f} | {r['peak'] / GB:.2f} | {(r['peak'] - r['start']) / GB:.2f} "
              f"| {r['s']:.1f} |")  # fmt: skip
    print(f"| **whole run** | | **{max(r['peak'] for r in ROWS) / GB:.2f}** | | |")
    if args.profile:
        events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_memory_usage, reverse=True)[:10]
        print("\n| operator (update) | allocated, self (GB) | calls |\n|---|---:|---:|")
        for e in events:
            print(f"| {e.key} | {e.self_cpu_memory_usage / GB:.2f} | {e.count} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
