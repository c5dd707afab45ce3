"""SmolLM2-135M-Instruct: HFPolicy generation against `model.generate`, log-prob honesty, threads, a training step.

Generation (``--what generation``): both sample (temperature 1) from the converted `smollm2` folder (or
`smollm2-bf16`) with the same chat-template prompts, left padding and `max_new_tokens`; HFPolicy also returns
per-token log-probs and uses per-context generators (the smollm2 recipe's ``max_batch_size=64``, so batch 64 is
one forward per token). Tokens/s counts generated tokens up to and including each row's first `<|im_end|>`.
Each setting runs `--repeats` times after one warm-up, HFPolicy and `generate` alternating; the table gives both
medians, their ratio, and the median of the per-round ratios (the two runs of a round are moments apart, so
that ratio is steadier when the load changes). With ``--device cuda`` both run on the GPU, CUDA synchronised
before each clock read.

Log-prob honesty (``--what logprobs``): one batch sampled by HFPolicy, then each recorded ``AgentTurn.logprobs``
against a fresh full forward pass over the same tokens (:meth:`HFPolicy.sequence_logprobs`) in the same dtype,
and for bf16 also against the fp32 model. ``ratio`` is ``exp(fresh - recorded)``, the PPO ratio a learner sees
at its first epoch (1 when the recorded values are honest); ``> clip`` counts tokens it would push outside
``1 ± 0.2``.

Threads under load (``--what threads``): HFPolicy generation (fp32, the first ``--batch-sizes`` entry) with 1 and
2 torch threads, alternating, on the box as it is and again while a spinning Python subprocess (started here,
same niceness) keeps one core busy; also prints torch's default thread count, which `turnkit train` uses.

Where generation's time goes (``--what profile``): ``cProfile`` of one ``HFPolicy.act`` over the first
``--batch-sizes`` entry of contexts with a rank-8 LoRA attached (as in training), after one warm-up; prints the
share of the call's time of the functions that take the most of it (own time).

Training (``--what train``): one forward + backward + AdamW step of the policy loss's shape (token log-probs of a
batch of `--train-rows` rows of `--train-tokens` tokens, mean NLL) with a rank-8 LoRA on the attention
projections (`turnkit train`'s default for smollm2) and with every weight trained; tokens/s is rows x tokens /
step time, median of `--repeats` steps after one warm-up. The GRPO step against TRL is bench_smollm2_grpo.py.

The weights are the Q4_1 GGUF dequantised (an approximation of the released bf16 model).

Run: python benchmarks/bench_smollm2.py [--threads 1] [--batch-sizes 1 8] [--dtypes float32 bfloat16]
     python benchmarks/bench_smollm2.py --what generation --batch-sizes 16 32 64 --max-new-tokens 16 --repeats 2
     python benchmarks/bench_smollm2.py --what logprobs threads --batch-sizes 8 --max-new-tokens 32
     python benchmarks/bench_smollm2.py --what profile --dtypes float32 --batch-sizes 16 --max-new-tokens 32
     python benchmarks/bench_smollm2.py --device cuda --batch-sizes 1 16 64
     turnkit bench smollm2 --threads 2
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.models.names import load_policy
from turnkit.types import Message

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `turnkit bench` loads this file by path
from bench_generation import clock

TORCH_DEFAULT_THREADS = torch.get_num_threads()
"""torch's own intra-op thread count in a fresh process (what `turnkit train` runs with unless --threads)."""

PROMPTS = [
    "Dev has $5 and earns $3. How many dollars does Dev have now?\nReply with ANSWER: <value>.",
    "What is 12 plus 7?\nReply with ANSWER: <value>.",
    "Write a short poem about the sea.",
    "Explain what a binary search does, in two sentences.",
]
CLIP = 0.2
"""PPO clip range used to count log-prob mismatches that a learner would clip."""


def contexts(batch: int, round_: int) -> list[Context]:
    return [
        Context(messages=(Message("user", PROMPTS[i % len(PROMPTS)]),), episode_seed=1000 * round_ + i)
        for i in range(batch)
    ]


def run_policy(policy: HFPolicy, batch: int, round_: int) -> tuple[int, float]:
    start = clock(policy.device)
    turns = policy.act(contexts(batch, round_))
    return sum(len(t.token_ids) for t in turns), clock(policy.device) - start


def run_generate(policy: HFPolicy, batch: int, round_: int, max_new_tokens: int) -> tuple[int, float]:
    tok = policy.tokenizer
    prompts = [chat_prompt_ids(tok, c.messages) for c in contexts(batch, round_)]
    enc = tok.pad({"input_ids": prompts}, return_tensors="pt", padding_side="left").to(policy.device)
    torch.manual_seed(round_)
    start = clock(policy.device)
    out = policy.model.generate(
        **enc,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_new_tokens=max_new_tokens,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    elapsed = clock(policy.device) - start
    n = 0
    for row in out[:, enc["input_ids"].shape[1] :].tolist():
        n += row.index(tok.eos_token_id) + 1 if tok.eos_token_id in row else len(row)
    return n, elapsed


def generation_rows(policy: HFPolicy, batches: Sequence[int], repeats: int, max_new_tokens: int) -> list[str]:
    rows = []
    for batch in batches:
        rates: dict[str, list[float]] = {"policy": [], "generate": []}
        for r in range(repeats + 1):  # round 0 is a warm-up
            n_p, t_p = run_policy(policy, batch, r)
            n_g, t_g = run_generate(policy, batch, r, max_new_tokens)
            if r:
                rates["policy"].append(n_p / t_p)
                rates["generate"].append(n_g / t_g)
        mp, mg = statistics.median(rates["policy"]), statistics.median(rates["generate"])
        per_round = statistics.median(p / g for p, g in zip(rates["policy"], rates["generate"], strict=True))
        rows.append(f"| {batch} | {mp:.0f} | {mg:.0f} | {mp / mg:.2f} | {per_round:.2f} |")
    return rows


def logprob_gaps(recorded: torch.Tensor, fresh: torch.Tensor, mask: torch.Tensor) -> str:
    """``recorded`` vs ``fresh`` log-probs over the ``mask``ed tokens: mean/max gap, ratio spread, clipped share."""
    gap = (fresh - recorded)[mask]
    ratio = gap.exp()
    clipped = ((ratio < 1 - CLIP) | (ratio > 1 + CLIP)).float().mean().item()
    return (
        f"mean |Δ| {gap.abs().mean().item():.2e}, max |Δ| {gap.abs().max().item():.2e}, "
        f"ratio {ratio.min().item():.4f}-{ratio.max().item():.4f}, > clip {100 * clipped:.2f}% of {gap.numel()}"
    )


def logprob_check(policy: HFPolicy, reference: HFPolicy | None, batch: int) -> list[str]:
    """Recorded log-probs of one sampled batch against fresh forwards (same dtype; fp32 ``reference`` if given)."""
    turns = policy.act(contexts(batch, 0))
    prompts = [t.prompt_token_ids for t in turns]
    completions = [t.token_ids for t in turns]
    width = max(len(c) for c in completions)
    recorded = torch.zeros(batch, width)
    mask = torch.zeros(batch, width, dtype=torch.bool)
    for i, t in enumerate(turns):
        recorded[i, : len(t.logprobs)] = torch.tensor(t.logprobs)
        mask[i, : len(t.logprobs)] = True
    same = _fresh(policy, prompts, completions)
    lines = [f"recorded vs fresh forward, same dtype: {logprob_gaps(recorded, same, mask)}"]
    if reference is not None:
        fresh32 = _fresh(reference, prompts, completions)
        lines.append(f"recorded vs fresh forward, fp32 model: {logprob_gaps(recorded, fresh32, mask)}")
        lines.append(f"fresh same-dtype forward vs fp32 model: {logprob_gaps(same, fresh32, mask)}")
    return lines


def _fresh(policy: HFPolicy, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]) -> torch.Tensor:
    policy.model.eval()
    return policy.sequence_logprobs(prompts, completions).float().cpu()


def thread_rows(policy: HFPolicy, batch: int, repeats: int) -> list[str]:
    """HFPolicy tokens/s at 1 and 2 threads (alternating, order flipped each round), without and with a busy core."""
    rows = []
    before = torch.get_num_threads()
    for busy in (False, True):
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
        try:
            rates: dict[int, list[float]] = {1: [], 2: []}
            for r in range(repeats + 1):  # round 0 is a warm-up
                for threads in (1, 2) if r % 2 else (2, 1):
                    torch.set_num_threads(threads)
                    n, t = run_policy(policy, batch, r)
                    if r:
                        rates[threads].append(n / t)
        finally:
            if spinner is not None:
                spinner.kill()
                spinner.wait()
        one, two = statistics.median(rates[1]), statistics.median(rates[2])
        per_round = statistics.median(b / a for a, b in zip(rates[1], rates[2], strict=True))
        what = "one core kept busy by a spinning process" if busy else "box as it is"
        rows.append(f"| {what} | {batch} | {one:.0f} | {two:.0f} | {two / one:.2f} | {per_round:.2f} |")
    torch.set_num_threads(before)
    return rows


def train_step_rate(policy: HFPolicy, rows: int, tokens: int, repeats: int) -> float:
    """Tokens/s of forward + backward + AdamW over ``rows x tokens`` (median of ``repeats`` after a warm-up)."""
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    ids = torch.randint(100, 40_000, (rows, tokens), generator=torch.Generator().manual_seed(0)).to(policy.device)
    policy.model.train()
    times = []
    for r in range(repeats + 1):
        start = clock(policy.device)
        logits = policy.model(input_ids=ids).logits[:, :-1].float()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if r:
            times.append(clock(policy.device) - start)
    policy.model.eval()
    return rows * tokens / statistics.median(times)


def generation_profile(policy: HFPolicy, batch: int, top: int = 8) -> list[str]:
    """Table rows: the functions with the most own time in one ``act`` over ``batch`` contexts, as shares."""
    contexts = [Context(messages=(Message("user", PROMPTS[i % len(PROMPTS)]),), episode_seed=i) for i in range(batch)]
    policy.act(contexts)  # warm-up
    profiler = cProfile.Profile()
    profiler.enable()
    policy.act(contexts)
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(own for _, _, own, _, _ in stats.values())
    ranked = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    return [
        f"| `{name}` ({Path(file).name}:{line}) | {calls} | {own:.2f} | {own / total:.0%} |"
        for (file, line, name), (_, calls, own, _, _) in ranked
    ]


def load(dtype: str, device: str, max_new_tokens: int) -> HFPolicy:
    name = "smollm2" if dtype == "float32" else "smollm2-bf16"
    policy = load_policy(name, progress=False, max_new_tokens=max_new_tokens, temperature=1.0)
    policy.model.to(device)
    return policy


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--what",
        nargs="+",
        default=["generation", "train"],
        choices=["generation", "train", "logprobs", "threads", "profile"],
        help="which measurements (default: generation and train)",
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 is steadiest on a shared box)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--train-rows", type=int, default=8)
    parser.add_argument("--train-tokens", type=int, default=128)
    parser.add_argument("--no-train", action="store_true", help="skip the training-step rows (same as no 'train')")
    args = parser.parse_args(argv)
    what = set(args.what) - ({"train"} if args.no_train else set())
    torch.set_num_threads(args.threads)
    where = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else f"{args.threads} thread(s)"
    print(
        f"SmolLM2-135M-Instruct (Q4_1 dequantised), torch {torch.__version__}, {args.device} ({where}), "
        f"max_new_tokens={args.max_new_tokens}, medians of {args.repeats}"
    )
    if "threads" in what:
        policy = load("float32", args.device, args.max_new_tokens)
        print(f"\nsmollm2 (float32) generation by thread count; torch's default here: {TORCH_DEFAULT_THREADS}\n")
        print("| load | batch | 1 thread tok/s | 2 threads tok/s | 2 / 1 | 2 / 1 per round |")
        print("|---|---|---|---|---|---|")
        print("\n".join(thread_rows(policy, args.batch_sizes[0], args.repeats)), flush=True)
        torch.set_num_threads(args.threads)
    for dtype in args.dtypes if what & {"generation", "logprobs", "train", "profile"} else []:
        name = "smollm2" if dtype == "float32" else "smollm2-bf16"
        policy = load(dtype, args.device, args.max_new_tokens)
        if "generation" in what:
            print(f"\n{name} ({dtype}) generation\n")
            print("| batch | HFPolicy tok/s | `generate` tok/s | ratio | ratio per round |\n|---|---|---|---|---|")
            print("\n".join(generation_rows(policy, args.batch_sizes, args.repeats, args.max_new_tokens)), flush=True)
        if "profile" in what:
            with_lora = load(dtype, args.device, args.max_new_tokens)
            with_lora.attach_lora(r=8, alpha=16)
            print(f"\n{name} ({dtype}) generation profile, batch {args.batch_sizes[0]}, LoRA r=8\n")
            print("| function | calls | own s | share |\n|---|---|---|---|")
            print("\n".join(generation_profile(with_lora, args.batch_sizes[0])), flush=True)
            del with_lora
        if "logprobs" in what:
            batch = max(args.batch_sizes)
            print(f"\n{name} ({dtype}) log-probs, batch {batch}, {args.max_new_tokens} new tokens:")
            reference = None if dtype == "float32" else load("float32", args.device, args.max_new_tokens)
            for line in logprob_check(policy, reference, batch):
                print(f"  {line}")
            del reference
        if "train" in what:
            full = train_step_rate(policy, args.train_rows, args.train_tokens, args.repeats)
            policy.attach_lora(r=8, alpha=16)
            lora = train_step_rate(policy, args.train_rows, args.train_tokens, args.repeats)
            trainable = sum(p.numel() for p in policy.model.parameters() if p.requires_grad)
            print(
                f"\n{name} training step ({args.train_rows} rows x {args.train_tokens} tokens): LoRA r=8 "
                f"({trainable / 1e6:.2f}M trainable) {lora:.0f} tok/s, full fine-tuning {full:.0f} tok/s, "
                f"ratio {lora / full:.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
