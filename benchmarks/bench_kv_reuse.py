"""Multi-turn rollouts with and without KV reuse across turns (``HFPolicy(reuse_kv=True)``), side by side.

Each pair plays the same batch of MathEpisodes episodes (token-exact contexts, ``--max-turns`` turns at most)
twice with one model, once encoding every turn's whole conversation and once feeding only what follows the
kept cache, in alternating order. Printed per pair and as medians: wall seconds, prompt tokens the model was
fed, and the ratio. With a sampling temperature the two runs may part ways after a near-tie (other float
rounding), so the fed tokens are reported beside the time: a ratio is only fair where the work is alike.

Run: python benchmarks/bench_kv_reuse.py --model smollm2 --episodes 16 --pairs 3
     python benchmarks/bench_kv_reuse.py --model tiny --episodes 32 --pairs 5
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium
import torch

import turnkit  # noqa: F401  (registers the envs)
from turnkit.agents.hf import HFPolicy
from turnkit.models.names import load_policy
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect_batch


def play(policy: HFPolicy, episodes: int, max_turns: int, seed: int) -> dict[str, float]:
    """One batch of episodes: wall seconds, turns, generated tokens and prompt tokens fed to the model."""
    envs = [gymnasium.make("turnkit/MathEpisodes-v0") for _ in range(episodes)]
    reused = policy.kv.reused_tokens if policy.kv is not None else 0
    start = time.perf_counter()
    trajs = collect_batch(
        envs, policy, [seed + i for i in range(episodes)], chat=ChatDelta(policy.tokenizer), max_turns=max_turns
    )
    wall = time.perf_counter() - start
    turns = [step.action for traj in trajs for step in traj.steps]
    prompt = sum(len(t.prompt_token_ids) for t in turns)
    kept = (policy.kv.reused_tokens - reused) if policy.kv is not None else 0
    return {
        "wall_s": wall,
        "turns": len(turns),
        "generated": sum(len(t.token_ids) for t in turns),
        "fed": prompt - kept,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="a built-in model name or a local HF folder")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--max-turns", type=int, default=10)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    base = load_policy(args.model, progress=False, max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    policies = {
        reuse: HFPolicy(
            base.model,
            base.tokenizer,
            temperature=args.temperature,
            max_new_tokens=args.max_new_tokens,
            stop_token_ids=sorted(base.stop_token_ids),
            reuse_kv=reuse,
        )
        for reuse in (False, True)
    }
    play(policies[True], 2, 2, seed=10_000)  # warm-up (allocator, first-call costs)
    ratios, rows = [], []
    for pair in range(args.pairs):
        order = (False, True) if pair % 2 == 0 else (True, False)
        seed = pair * args.episodes
        got = {reuse: play(policies[reuse], args.episodes, args.max_turns, seed) for reuse in order}
        ratio = got[False]["wall_s"] / got[True]["wall_s"]
        ratios.append(ratio)
        rows.append(got)
        print(
            f"pair {pair}: without {got[False]['wall_s']:.1f} s ({got[False]['fed']} tokens fed, "
            f"{got[False]['generated']} generated), with {got[True]['wall_s']:.1f} s ({got[True]['fed']} fed, "
            f"{got[True]['generated']} generated): {ratio:.2f}x",
            flush=True,
        )
    print(
        f"median over {args.pairs} pairs ({args.model}, {args.episodes} episodes, <= {args.max_turns} turns, "
        f"{args.max_new_tokens} new tokens, {args.threads} thread(s)): without "
        f"{statistics.median(r[False]['wall_s'] for r in rows):.1f} s, with "
        f"{statistics.median(r[True]['wall_s'] for r in rows):.1f} s, speed-up {statistics.median(ratios):.2f}x"
    )


if __name__ == "__main__":
    main()
