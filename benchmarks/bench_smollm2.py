"""SmolLM2-135M-Instruct on the CPU: HFPolicy generation against `model.generate`, and one training step.

Generation: both sample (temperature 1) from the converted `smollm2` folder (or `smollm2-bf16`) with the same
chat-template prompts, left padding and `max_new_tokens`; HFPolicy also returns per-token log-probs and uses
per-context generators. Tokens/s counts generated tokens up to and including each row's first `<|im_end|>`.
Each setting runs `--repeats` times after one warm-up, HFPolicy and `generate` alternating; medians are printed.

Training: one forward + backward + AdamW step of the policy loss's shape (token log-probs of a batch of
`--train-rows` rows of `--train-tokens` tokens, mean NLL) with a rank-8 LoRA on the attention projections
(`turnkit train`'s default for smollm2) and with every weight trained; tokens/s is rows x tokens / step time,
median of `--repeats` steps after one warm-up.

The weights are the Q4_1 GGUF dequantised (an approximation of the released bf16 model).

Run: python benchmarks/bench_smollm2.py [--threads 1] [--batch-sizes 1 8] [--dtypes float32 bfloat16]
     turnkit bench smollm2 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

import torch

from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.models.names import load_policy
from turnkit.types import Message

PROMPTS = [
    "Dev has $5 and earns $3. How many dollars does Dev have now?\nReply with ANSWER: <value>.",
    "What is 12 plus 7?\nReply with ANSWER: <value>.",
    "Write a short poem about the sea.",
    "Explain what a binary search does, in two sentences.",
]


def contexts(batch: int, round_: int) -> list[Context]:
    return [
        Context(messages=(Message("user", PROMPTS[i % len(PROMPTS)]),), episode_seed=1000 * round_ + i)
        for i in range(batch)
    ]


def run_policy(policy: HFPolicy, batch: int, round_: int) -> tuple[int, float]:
    start = time.perf_counter()
    turns = policy.act(contexts(batch, round_))
    return sum(len(t.token_ids) for t in turns), time.perf_counter() - start


def run_generate(policy: HFPolicy, batch: int, round_: int, max_new_tokens: int) -> tuple[int, float]:
    tok = policy.tokenizer
    prompts = [chat_prompt_ids(tok, c.messages) for c in contexts(batch, round_)]
    enc = tok.pad({"input_ids": prompts}, return_tensors="pt", padding_side="left")
    torch.manual_seed(round_)
    start = time.perf_counter()
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
    elapsed = time.perf_counter() - start
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
        rows.append(f"| {batch} | {mp:.0f} | {mg:.0f} | {mp / mg:.2f} |")
    return rows


def train_step_rate(policy: HFPolicy, rows: int, tokens: int, repeats: int) -> float:
    """Tokens/s of forward + backward + AdamW over ``rows x tokens`` (median of ``repeats`` after a warm-up)."""
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    ids = torch.randint(100, 40_000, (rows, tokens), generator=torch.Generator().manual_seed(0))
    policy.model.train()
    times = []
    for r in range(repeats + 1):
        start = time.perf_counter()
        logits = policy.model(input_ids=ids).logits[:, :-1].float()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if r:
            times.append(time.perf_counter() - start)
    policy.model.eval()
    return rows * tokens / statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 is steadiest on a shared box)")
    parser.add_argument("--train-rows", type=int, default=8)
    parser.add_argument("--train-tokens", type=int, default=128)
    parser.add_argument("--no-train", action="store_true", help="skip the training-step rows")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(
        f"SmolLM2-135M-Instruct (Q4_1 dequantised), torch {torch.__version__}, {args.threads} thread(s), "
        f"max_new_tokens={args.max_new_tokens}, medians of {args.repeats}"
    )
    for dtype in args.dtypes:
        name = "smollm2" if dtype == "float32" else "smollm2-bf16"
        policy = load_policy(name, progress=False, max_new_tokens=args.max_new_tokens, temperature=1.0)
        print(f"\n{name} ({dtype}) generation\n")
        print("| batch | HFPolicy tok/s | `generate` tok/s | ratio |\n|---|---|---|---|")
        print("\n".join(generation_rows(policy, args.batch_sizes, args.repeats, args.max_new_tokens)))
        if args.no_train:
            continue
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
