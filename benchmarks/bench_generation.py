"""Generation throughput of HFPolicy on the tiny model, against transformers' `generate` side by side.

Both sample (temperature 1) from the same random-weight tiny model (TinyModelConfig defaults, ~3.3M
parameters) with the same prompts, left padding and `max_new_tokens`; HFPolicy also returns per-token
log-probs and uses per-context generators. Tokens/s counts generated tokens (stop tokens included), so
early stops do not inflate the rate. Each setting runs `--repeats` times after one warm-up; medians are
printed.

With `--device cuda` both run on the GPU (CUDA is synchronised before each clock read); `--hidden-size` and
`--layers` grow the model (head size 64), since the default tiny model leaves a GPU idle between kernel launches.

Run: python benchmarks/bench_generation.py [--batch-sizes 1 16] [--max-new-tokens 64] [--repeats 5]
     python benchmarks/bench_generation.py --device cuda --batch-sizes 1 16 64 --hidden-size 512 --layers 8
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch

from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from turnkit.types import Message

PROMPTS = [
    "Dev has $5 and earns $3. How many dollars does Dev have now? Reply with ANSWER: <value>.",
    "What is 12*(3+4)?",
    "Solve 2x + 3 = 11 for x.",
    "A ball falls for 2 s from rest. How far does it fall (g = 9.8)?",
]


def contexts(batch: int, round_: int) -> list[Context]:
    return [
        Context(messages=(Message("user", PROMPTS[i % len(PROMPTS)]),), episode_seed=1000 * round_ + i)
        for i in range(batch)
    ]


def clock(device: torch.device) -> float:
    """Seconds since an arbitrary start, after the device's queued work has finished."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


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
    new = out[:, enc["input_ids"].shape[1] :]
    # count up to and including each row's first EOS, as HFPolicy does
    n = 0
    for row in new.tolist():
        n += row.index(tok.eos_token_id) + 1 if tok.eos_token_id in row else len(row)
    return n, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 is steadiest on a shared box)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--hidden-size", type=int, default=None, help="model width (default: TinyModelConfig's)")
    parser.add_argument("--layers", type=int, default=None, help="model depth (default: TinyModelConfig's)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tok = build_tiny_tokenizer()
    config = TinyModelConfig()
    if args.hidden_size is not None:
        width = args.hidden_size
        config = dataclasses.replace(
            config, hidden_size=width, num_heads=max(1, width // 64), intermediate_size=4 * width
        )
    if args.layers is not None:
        config = dataclasses.replace(config, num_layers=args.layers)
    model = build_tiny_model(tok, config, seed=0).to(args.device)
    policy = HFPolicy(model, tok, max_new_tokens=args.max_new_tokens)
    params = sum(p.numel() for p in model.parameters())
    where = torch.cuda.get_device_name(policy.device) if policy.device.type == "cuda" else f"{args.threads} threads"
    print(
        f"model: {params / 1e6:.2f}M params ({config.hidden_size} wide, {config.num_layers} layers), "
        f"torch {torch.__version__}, {policy.device} ({where}), max_new_tokens={args.max_new_tokens}, "
        f"repeats={args.repeats} (medians)"
    )
    print(f"{'batch':>5} {'HFPolicy tok/s':>15} {'generate tok/s':>15} {'ratio':>6}")
    for batch in args.batch_sizes:
        rates: dict[str, list[float]] = {"policy": [], "generate": []}
        for r in range(args.repeats + 1):  # round 0 is a warm-up
            n_p, t_p = run_policy(policy, batch, r)
            n_g, t_g = run_generate(policy, batch, r, args.max_new_tokens)
            if r:
                rates["policy"].append(n_p / t_p)
                rates["generate"].append(n_g / t_g)
        mp, mg = statistics.median(rates["policy"]), statistics.median(rates["generate"])
        print(f"{batch:>5} {mp:>15.0f} {mg:>15.0f} {mp / mg:>6.2f}")


if __name__ == "__main__":
    main()
