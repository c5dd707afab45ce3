"""IQLearn's overhead: one IQLearn update against one SFT update on the same batch (issue #17, target <= 1.2x).

One *update* is what a training step does: forward of the policy over a collated batch of demonstration rows,
the loss, backward, one AdamW step (``zero_grad`` included). The two sides differ only in the loss:

* SFT: :func:`~turnkit.rollout.batch.gather_token_logprobs` + :func:`~turnkit.learners.sft.sft_loss`;
* IQLearn: :func:`~turnkit.learners.irl.token_q_values` + :func:`~turnkit.learners.irl.iqlearn_loss`
  (``λ = --lam``, ``γ = 1``, bootstrapped ``V(s')`` with gradients, the paper's offline setting).

The model is the embedded policy's size (``TinyModelConfig(128, 2 layers, 4 heads, 384)``) built from config
with random weights (timing does not depend on the weights); each side has its own copy (same seed) and its own
AdamW. The batch is the first ``--batch`` oracle demonstration rows of ``turnkit/MathEpisodes-v0`` (difficulty
1). Both sides are warmed up, then run alternately, A/B then B/A, ``--repeats`` times; the table gives each
side's median (and quartiles) of ms per update and the median of the paired IQLearn/SFT ratios. A second table
times the losses alone (loss + backward into fixed logits), which is where the two sides differ.

What IQLearn *learns* versus MLE (held-out success, diversity, reward correlation) is a study, not a speed
measurement.

Run:  python benchmarks/bench_irl.py --repeats 30 --batch 32 --threads 1
      (or ``turnkit bench irl -- --repeats 30``)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor

from turnkit.learners.irl import iqlearn_loss, token_q_values
from turnkit.learners.sft import sft_loss
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from turnkit.rollout.batch import TurnBatch, collate, gather_token_logprobs
from turnkit.rollout.demos import collect_demos, demo_rows

ENV = "turnkit/MathEpisodes-v0"
EMBEDDED_SIZE = TinyModelConfig(hidden_size=128, num_layers=2, num_heads=4, intermediate_size=384)

LossFn = Callable[[Tensor, TurnBatch], Tensor]


def sft(logits: Tensor, batch: TurnBatch) -> Tensor:
    logprobs = gather_token_logprobs(logits, batch.input_ids, batch.loss_mask)
    return sft_loss(logprobs, batch.loss_mask)[0]


def iqlearn(lam: float, gamma: float) -> LossFn:
    def loss(logits: Tensor, batch: TurnBatch) -> Tensor:
        q, v = token_q_values(logits, batch.input_ids, batch.loss_mask)
        return iqlearn_loss(q, v, batch.loss_mask, lam=lam, gamma=gamma)[0]

    return loss


def demo_batch(tokenizer, size: int) -> TurnBatch:
    demos = collect_demos(ENV, episodes=size, seed=0, env_kwargs={"difficulty": 1})
    rows = demo_rows(demos.trajectories, tokenizer)
    if len(rows) < size:
        raise SystemExit(f"only {len(rows)} demonstration rows from {size} episodes; asked for a batch of {size}")
    return collate(rows[:size], pad_id=tokenizer.pad_token_id)


class Update:
    """One side of the A/B: its own model copy and AdamW."""

    def __init__(self, tokenizer, loss: LossFn, lr: float) -> None:
        self.model = build_tiny_model(tokenizer, EMBEDDED_SIZE, seed=0)
        self.model.train()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self.loss = loss

    def __call__(self, batch: TurnBatch) -> float:
        """Seconds for forward + loss + backward + AdamW step."""
        start = time.perf_counter()
        logits = self.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        loss = self.loss(logits, batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return time.perf_counter() - start


def loss_only(loss: LossFn, logits: Tensor, batch: TurnBatch) -> float:
    """Seconds for the loss and its backward into fixed logits (no model)."""
    leaf = logits.detach().requires_grad_(True)
    start = time.perf_counter()
    loss(leaf, batch).backward()
    return time.perf_counter() - start


def interleaved(sides: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """``repeats`` paired trials, alternating the order (A, B then B, A) so drift and order hit both sides."""
    names = list(sides)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            times[name].append(sides[name]())
    return times


def summary(times: dict[str, list[float]], base: str, other: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, values in times.items():
        q1, median, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else (values[0],) * 3
        out[f"{name}_ms"], out[f"{name}_p25_ms"], out[f"{name}_p75_ms"] = 1e3 * median, 1e3 * q1, 1e3 * q3
    ratios = [o / b for o, b in zip(times[other], times[base], strict=True)]
    r1, r_med, r3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    out["ratio_median"], out["ratio_p25"], out["ratio_p75"] = r_med, r1, r3
    out["ratio_of_medians"] = out[f"{other}_ms"] / out[f"{base}_ms"]
    return out


def command(args: argparse.Namespace) -> str:
    return shlex.join(
        [
            "python",
            "benchmarks/bench_irl.py",
            f"--repeats={args.repeats}",
            f"--batch={args.batch}",
            f"--threads={args.threads}",
            f"--lam={args.lam}",
            f"--warmup={args.warmup}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30, help="paired A/B trials (medians over these)")
    parser.add_argument("--batch", type=int, default=32, help="demonstration rows per update")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (default 1: on the shared 2-core box, 2 threads stall on each other's barriers "
        "whenever another job runs, and the spread swamps the difference)",
    )
    parser.add_argument("--lam", type=float, default=0.1, help="IQLearn's TD weight λ")
    parser.add_argument("--warmup", type=int, default=3, help="untimed updates per side first")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown tables")
    args = parser.parse_args([a for a in (argv or []) if a != "--"])
    if args.repeats < 2 or args.batch < 1 or args.threads < 1 or args.warmup < 0:
        parser.error("need --repeats >= 2, --batch >= 1, --threads >= 1, --warmup >= 0")
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()

    tokenizer = build_tiny_tokenizer()
    batch = demo_batch(tokenizer, args.batch)
    lam, gamma = args.lam, 1.0
    sides = {"sft": Update(tokenizer, sft, lr=1e-4), "iqlearn": Update(tokenizer, iqlearn(lam, gamma), lr=1e-4)}
    params = sum(p.numel() for p in sides["sft"].model.parameters())
    for _ in range(args.warmup):
        for update in sides.values():
            update(batch)
    full = interleaved({name: partial(update, batch) for name, update in sides.items()}, args.repeats)

    with torch.no_grad():
        logits = sides["sft"].model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    losses = {"sft": sft, "iqlearn": iqlearn(lam, gamma)}
    for loss in losses.values():
        loss_only(loss, logits, batch)
    kernel = interleaved({name: partial(loss_only, loss, logits, batch) for name, loss in losses.items()}, args.repeats)
    load_after = os.getloadavg()
    update_summary, kernel_summary = summary(full, "sft", "iqlearn"), summary(kernel, "sft", "iqlearn")

    results: dict[str, object] = {
        "command": command(args),
        "params": params,
        "batch_rows": len(batch),
        "batch_shape": list(batch.input_ids.shape),
        "loss_tokens": batch.num_loss_tokens,
        "threads": args.threads,
        "repeats": args.repeats,
        "lam": lam,
        "gamma": gamma,
        "load_before": load_before,
        "load_after": load_after,
        "update": update_summary,
        "loss_only": kernel_summary,
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return 0

    def table(title: str, s: dict[str, float]) -> None:
        print(f"\n{title}\n")
        print("| side | median ms | p25 ms | p75 ms | × SFT (median of paired ratios, p25-p75) | × SFT (of medians) |")
        print("|---|---|---|---|---|---|")
        print(
            f"| SFT: gather_token_logprobs + sft_loss | {s['sft_ms']:.2f} | {s['sft_p25_ms']:.2f} | "
            f"{s['sft_p75_ms']:.2f} | 1.00 | 1.00 |"
        )
        print(
            f"| IQLearn λ={lam:g} γ={gamma:g}: token_q_values + iqlearn_loss | {s['iqlearn_ms']:.2f} | "
            f"{s['iqlearn_p25_ms']:.2f} | {s['iqlearn_p75_ms']:.2f} | "
            f"{s['ratio_median']:.3f} ({s['ratio_p25']:.3f}-{s['ratio_p75']:.3f}) | {s['ratio_of_medians']:.3f} |"
        )

    shape = "x".join(map(str, batch.input_ids.shape))
    print(f"`{results['command']}`")
    print(
        f"\ntiny model {params / 1e6:.2f}M parameters (embedded size, random weights), batch {len(batch)} MathEpisodes "
        f"demo rows ({shape} ids, {batch.num_loss_tokens} loss tokens), torch threads {args.threads}, "
        f"{args.repeats} interleaved A/B trials; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
    )
    table("One update (forward + loss + backward + AdamW step), ms:", update_summary)
    table("The loss alone (loss + backward into fixed logits), ms:", kernel_summary)
    ratio = update_summary["ratio_median"]
    print(f"\nTarget: IQLearn update <= 1.2x SFT update: {'met' if ratio <= 1.2 else 'NOT met'} ({ratio:.3f}x).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(__import__("sys").argv[1:]))
