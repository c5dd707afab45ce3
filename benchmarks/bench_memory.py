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

``--model-shape 360m`` swaps the model for a randomly initialised one of SmolLM2-360M's shape (LlamaConfig:
hidden 960, 32 layers, 15 heads, 5 KV heads, intermediate 2560, SmolLM2's 49,152-token vocabulary, tied
embeddings), built locally with SmolLM2's tokenizer; ``135m`` (the default) is the converted SmolLM2-135M. With the
same LoRA and batch settings the two give the scaling points of docs/training.md. ``--quick`` leaves out the warm
start, the evaluation and the reference pass (a random model learns no format from two SFT steps, its evaluation
measures nothing new, and the recipe trains without a KL term), so each run is the step's phases: rollout, then
the update; ``--groups`` sets the step's groups (of 4 episodes; default the recipe's 4).

``--device cuda`` runs the model on a GPU and adds each phase's allocated GPU memory at its start and its peak
(``torch.cuda.max_memory_allocated``, reset per phase); ``.ci/gpu_check.sh`` (part ``memory``) runs it so.

Run: TURNKIT_CACHE=/tmp/tk_cache_mem python benchmarks/bench_memory.py [--plain] [--profile] [--threads 1]
     [--model-shape 135m|360m] [--quick] [--groups N] [--device cuda]
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
    place_policy,
    prepare_policy,
    sample_task_seeds,
    step_advantages,
    step_sampling_seed,
    token_exact_chat,
)
from turnkit.train.quickstart_smollm2 import ENV_ID, ENV_KWARGS, MODEL, SMOLLM2_TRAIN, SMOLLM2_WARM_START
from turnkit.train.rollouts import RolloutJob, play
from turnkit.train.update_layout import length_sorted
from turnkit.train.warmstart import warm_start

GB = 1e9
SHAPES: dict[str, dict[str, int] | None] = {
    "135m": None,  # the converted SmolLM2-135M-Instruct (hidden 576, 30 layers, 9 heads, 3 KV heads, 1536)
    "360m": {
        "hidden_size": 960,
        "num_hidden_layers": 32,
        "num_attention_heads": 15,
        "num_key_value_heads": 5,
        "intermediate_size": 2560,
    },
}
"""``--model-shape`` choices: changes to SmolLM2-135M's LlamaConfig (``None``: the real model)."""


def shaped_policy(shape: str, cfg: TrainConfig) -> Any:
    """The policy of ``--model-shape``: SmolLM2-135M itself, or a random model of a bigger shape, same tokenizer."""
    policy = load_policy(
        MODEL, progress=False, temperature=cfg.sampling.temperature, max_new_tokens=cfg.sampling.max_new_tokens
    )
    changes = SHAPES[shape]
    if changes is None:
        return policy
    from transformers import LlamaConfig, LlamaForCausalLM

    from turnkit.agents.hf import HFPolicy

    config = LlamaConfig.from_dict({**policy.model.config.to_dict(), **changes, "tie_word_embeddings": True})
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).float()
    del policy.model
    return HFPolicy(
        model,
        policy.tokenizer,
        temperature=cfg.sampling.temperature,
        max_new_tokens=cfg.sampling.max_new_tokens,
        max_batch_size=64,
    )


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


CUDA = {"on": False}
"""Whether the model runs on CUDA (``--device cuda``): phases then also record the GPU's allocated peak."""


@contextmanager
def phase(name: str, sampler: PeakSampler) -> Iterator[None]:
    """Record ``name``'s start RSS, peak RSS and seconds (accumulated over repeated entries); on CUDA also the
    allocated GPU memory at its start and its peak (``torch.cuda.max_memory_allocated``)."""
    _LIBC.malloc_trim(0)
    if CUDA["on"]:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    gpu_start = torch.cuda.memory_allocated() if CUDA["on"] else 0
    start = sampler.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    yield
    if CUDA["on"]:
        torch.cuda.synchronize()
    gpu_peak = torch.cuda.max_memory_allocated() if CUDA["on"] else 0
    sampler.peak = max(sampler.peak, rss())
    row = next((r for r in ROWS if r["phase"] == name), None)
    if row is None:
        ROWS.append({"phase": name, "start": start, "peak": sampler.peak, "s": time.perf_counter() - t0,
                     "cpu_s": time.process_time() - c0, "gpu_start": gpu_start, "gpu_peak": gpu_peak})  # fmt: skip
    else:
        if sampler.peak - start > row["peak"] - row["start"]:
            row.update(start=start, peak=sampler.peak)
        if gpu_peak - gpu_start > row["gpu_peak"] - row["gpu_start"]:
            row.update(gpu_start=gpu_start, gpu_peak=gpu_peak)
        row["s"] += time.perf_counter() - t0
        row["cpu_s"] += time.process_time() - c0


def update_phases(learner: Learner, batch: Any, cfg: TrainConfig, sampler: PeakSampler, *, plain: bool):
    """One optimizer step on ``batch`` as the loop takes it, timed and measured per phase."""
    grpo = cfg.loss_config()
    policy = learner.policy
    policy.model.train()
    learner.zero_grad()
    parts = [batch] if plain else list(batch.token_slices(cfg.update.micro_batch_tokens, cfg.update.micro_batch_rows))
    if len(parts) > 1:  # the loop's layout: a split minibatch runs its rows longest first
        parts = list(length_sorted(batch).token_slices(cfg.update.micro_batch_tokens, cfg.update.micro_batch_rows))
    for part in parts:
        with phase("update forward", sampler):
            if plain:
                logits = policy.model(input_ids=part.input_ids, attention_mask=part.attention_mask).logits
                logp = gather_token_logprobs(
                    logits, part.input_ids, part.loss_mask, temperature=cfg.sampling.temperature
                )
            else:
                logp = model_token_logprobs(
                    policy.model,
                    part.input_ids,
                    part.attention_mask,
                    part.loss_mask,
                    temperature=cfg.sampling.temperature,
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
    parser.add_argument("--model-shape", choices=sorted(SHAPES), default="135m", help="the model's size")
    parser.add_argument(
        "--quick", action="store_true", help="no warm start, evaluation or reference pass: the step only"
    )
    parser.add_argument("--device", default="cpu", help="where the model runs: cpu, cuda, cuda:N")
    parser.add_argument("--groups", type=int, default=SMOLLM2_TRAIN["groups_per_step"], help="groups per step")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    keys = {"seed": args.seed, "device": args.device, "groups_per_step": args.groups}
    keys["eval"] = {**SMOLLM2_TRAIN["eval"], "episodes": 64}
    cfg = TrainConfig(**{**SMOLLM2_TRAIN, **keys})
    CUDA["on"] = args.device.startswith("cuda")
    sampler = PeakSampler()
    base = rss()
    with phase("load model", sampler):
        policy = shaped_policy(args.model_shape, cfg)
        place_policy(policy, cfg.device)
    params = sum(p.numel() for p in policy.model.parameters())
    if not args.quick:
        with phase("warm start (SFT)", sampler), tempfile.TemporaryDirectory() as cache:
            warm = dataclasses.replace(SMOLLM2_WARM_START, steps=args.warm_steps)
            warm_start(policy, model_id=MODEL, env_id=ENV_ID, env_kwargs=ENV_KWARGS, cfg=warm, cache=cache,
                       progress=False)  # fmt: skip
    learner = prepare_policy(policy, cfg)
    lora = sum(p.numel() for p in learner.params)
    metrics = {"eval_success": float("nan")}
    if not args.quick:
        with phase("evaluation (64 greedy)", sampler):
            metrics = evaluate_policy(policy, cfg)
    chat = token_exact_chat(policy, cfg)
    envs = [gymnasium.make(ENV_ID, **ENV_KWARGS) for _ in range(cfg.grpo.group_size * cfg.groups_per_step)]
    seeds = sample_task_seeds(np.random.default_rng(args.seed), cfg.groups_per_step, cfg)
    policy.sampling = dataclasses.replace(policy.sampling, seed=step_sampling_seed(cfg.seed, 1))
    with phase(f"rollout ({len(envs)} sampled)", sampler):
        job = RolloutJob(1, seeds, policy.sampling.seed, cfg.grpo.group_size)
        trajs, _ = play(policy, envs, job, max_turns=cfg.max_turns, chat=chat)
    generated = sum(len(s.action.token_ids) for t in trajs for s in t.steps)
    advantages = step_advantages(trajs, cfg)
    # every row trains here (a tied group would be skipped by the loop): the shape the issue measured
    batch = build_turn_batch(trajs, pad_id=int(policy.pad_token_id), advantages=advantages).to(policy.device)
    if not args.quick:  # the recipe has no KL term: the loop runs no reference pass
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
    mode = "plain one-pass" if args.plain else f"chunked, micro_batch_tokens {cfg.update.micro_batch_tokens}"
    print(f"# SmolLM2 fp32 LoRA r8, {mode} update; threads {args.threads}; base RSS {base / GB:.2f} GB; "
          f"eval success {metrics['eval_success']:.2f}")  # fmt: skip
    print(f"# model shape {args.model_shape}: {params:,} parameters, {lora:,} trained (LoRA); "
          f"{generated} tokens generated in the rollout")  # fmt: skip
    print(f"# update batch: {len(batch)} rows x {batch.input_ids.shape[1]} (padded), {tokens} tokens, "
          f"{batch.num_loss_tokens} loss tokens, {parts} part(s)")  # fmt: skip
    gpu = "| GPU at start (GB) | GPU peak (GB) | GPU peak - start (GB) " if CUDA["on"] else ""
    print(f"| phase | RSS at start (GB) | peak RSS (GB) | peak - start (GB) {gpu}| seconds | CPU seconds |")
    print("|---|---:|---:|---:|" + ("---:|---:|---:|" if CUDA["on"] else "") + "---:|---:|")
    for r in ROWS:
        cells = [r["start"], r["peak"], r["peak"] - r["start"]]
        if CUDA["on"]:
            cells += [r["gpu_start"], r["gpu_peak"], r["gpu_peak"] - r["gpu_start"]]
        print(
            f"| {r['phase']} | " + " | ".join(f"{c / GB:.2f}" for c in cells) + f" | {r['s']:.1f} | {r['cpu_s']:.1f} |"
        )
    gpu_peak = f" GPU peak **{max(r['gpu_peak'] for r in ROWS) / GB:.2f}** GB" if CUDA["on"] else ""
    print(f"| **whole run** | | **{max(r['peak'] for r in ROWS) / GB:.2f}** |{gpu_peak} | |")
    if args.profile:
        events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_memory_usage, reverse=True)[:10]
        print("\n| operator (update) | allocated, self (GB) | calls |\n|---|---:|---:|")
        for e in events:
            print(f"| {e.key} | {e.self_cpu_memory_usage / GB:.2f} | {e.count} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
