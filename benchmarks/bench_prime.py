"""PRIME's implicit PRM on multi-turn episodes: one pass per episode against one pass per turn, side by side.

The PRM scores every reply token of a rollout batch (a PRM forward and a reference forward) and then takes one
BCE step on it (a PRM forward + backward; the reference log-probs are reused from the scoring). A multi-turn
episode can be scored as one sequence, because every turn's prompt is the token-exact context of the turn
before (:func:`turnkit.critics.prime.episode_layout`); one pass per turn instead re-reads every earlier turn as
the prompt of the next. Both layouts run on the same batch, alternating, from PRMs with the same weights; the
benchmark also checks that they give the same rewards (largest difference printed).

The batch: ``--groups`` x ``--group-size`` MathEpisodes (difficulty 2 arithmetic, 3 attempts, the SmolLM2
recipe's task) sampled at T = 1 from the start policy with token-exact contexts. ``--model smollm2`` is the
warm-started SmolLM2 of ``turnkit quickstart --model smollm2`` (cached warm start, trained on first use);
``--model tiny`` the embedded tiny policy.

Run: HF_HUB_OFFLINE=1 python benchmarks/bench_prime.py [--model smollm2 --groups 4 --group-size 4 --trials 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Sequence
from typing import Any

import gymnasium
import torch

import turnkit.critics.prime as prime
from turnkit.critics.base import CriticContext
from turnkit.critics.prime import ImplicitPRM, PrimeConfig
from turnkit.models.names import load_policy
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect_batch
from turnkit.train.quickstart_smollm2 import ENV_ID, ENV_KWARGS, smollm2_start_policy
from turnkit.types import Trajectory


def rollout_batch(policy: Any, groups: int, group_size: int) -> list[Trajectory]:
    """``groups`` tasks x ``group_size`` sampled episodes, with group ids and token-exact contexts."""
    seeds = [g for g in range(groups) for _ in range(group_size)]
    envs = [gymnasium.make(ENV_ID, **ENV_KWARGS) for _ in seeds]
    try:
        trajs = collect_batch(
            envs, policy.with_sampling(temperature=1.0, seed=0), seeds, chat=ChatDelta(policy.tokenizer)
        )
    finally:
        for env in envs:
            env.close()
    return [dataclasses.replace(t, group=t.seed) for t in trajs]


def processed_tokens(batch: Sequence[Trajectory], *, per_turn: bool) -> int:
    """Tokens one PRM pass reads: each turn's prompt + reply, or each episode's first prompt + everything after."""
    total = 0
    for i, traj in enumerate(batch):
        turns = prime._turn_ids(traj, i)
        layout = None if per_turn else prime.episode_layout(turns)
        total += sum(len(p) + len(c) for p, c in turns) if layout is None else len(layout[0][0]) + len(layout[0][1])
    return total


def timed_pass(prm: ImplicitPRM, batch: Sequence[Trajectory], *, per_turn: bool) -> tuple[float, float, list[Any]]:
    """Score the batch, then one BCE step on it: (score seconds, fit seconds, rewards)."""
    original = prime.episode_layout
    if per_turn:
        prime.episode_layout = lambda turns: None  # every episode falls back to one pass per turn
    try:
        t0 = time.perf_counter()
        rewards = prm.token_rewards(batch)
        t1 = time.perf_counter()
        prm.fit(batch, labels=[float(t.success) for t in batch])
        t2 = time.perf_counter()
    finally:
        prime.episode_layout = original
    return t1 - t0, t2 - t1, rewards


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", choices=["smollm2", "tiny"], default="smollm2")
    parser.add_argument("--groups", type=int, default=4, help="tasks in the batch")
    parser.add_argument("--group-size", type=int, default=4, help="episodes per task")
    parser.add_argument("--trials", type=int, default=3, help="timed passes per layout (alternating)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    policy = smollm2_start_policy(progress=False)[0] if args.model == "smollm2" else load_policy("tiny")
    batch = rollout_batch(policy, args.groups, args.group_size)
    start = CriticContext.from_policy(policy, make_env=lambda: None).start_policy()
    prms = {False: ImplicitPRM.from_policy(start, PrimeConfig()), True: ImplicitPRM.from_policy(start, PrimeConfig())}
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    rewards: dict[bool, list[Any]] = {}
    for trial in range(args.trials):
        for per_turn in (False, True) if trial % 2 == 0 else (True, False):
            score_s, fit_s, rewards[per_turn] = timed_pass(prms[per_turn], batch, per_turn=per_turn)
            times[per_turn].append((score_s, fit_s))
    gap = max(
        float((a - b).abs().max())
        for ep_a, ep_b in zip(rewards[False], rewards[True], strict=True)
        for a, b in zip(ep_a, ep_b, strict=True)
    )
    turns = sum(len(t.steps) for t in batch) / len(batch)
    print(f"{args.model}, {len(batch)} episodes ({turns:.2f} turns each), {args.threads} thread(s), "
          f"medians of {args.trials}; largest reward gap between the layouts {gap:.1e} (last trial)")  # fmt: skip
    print("| layout | tokens per pass | score s | fit s | score + fit s |")
    print("|---|---|---|---|---|")
    totals = {}
    for per_turn, name in ((True, "one pass per turn"), (False, "one pass per episode")):
        score = statistics.median(s for s, _ in times[per_turn])
        fit = statistics.median(f for _, f in times[per_turn])
        totals[per_turn] = statistics.median(s + f for s, f in times[per_turn])
        tokens = processed_tokens(batch, per_turn=per_turn)
        print(f"| {name} | {tokens} | {score:.2f} | {fit:.2f} | {totals[per_turn]:.2f} |")
    print(f"speed-up (per turn / per episode, score + fit): {totals[True] / totals[False]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
