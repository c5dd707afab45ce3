"""Repeated prompts prefilled once (``HFPolicy(share_prefill=True)``) against once per row, side by side.

Two workloads repeat a prompt within one batch:

* ``prover``: MRT's critic. ``--episodes`` MathEpisodes episodes are played once (token-exact contexts, the
  quickstart's three attempts), then MRT's value estimate runs over them: ``--samples`` answers of the policy,
  forced to answer, from every turn boundary (:class:`~turnkit.critics.progress.RolloutValue` with
  ``max_turns=1``, temperature 0.6), all boundaries in one batch. Every boundary's prompt is repeated
  ``--samples`` times.
* ``group``: a GRPO rollout. ``--groups`` groups of ``--group-size`` episodes of one task each
  (:func:`~turnkit.rollout.collect.collect_batch` with repeated seeds), up to three turns: every group's first
  prompt is repeated ``--group-size`` times.

Each pair runs the same work twice with one model, once per setting, alternating which goes first; printed per
pair and as medians: wall seconds, rows fed by prefill passes (forwards of more than one token), and the ratio. The two
settings differ in float rounding only, so after a near-tie a sampled run may part ways; the generated token
counts are printed beside the time.

Run: python benchmarks/bench_shared_prefill.py --model smollm2 --what prover group --pairs 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import torch

import turnkit  # noqa: F401  (registers the envs)
from turnkit.agents.hf import HFPolicy
from turnkit.critics.progress import RolloutValue, force_answer
from turnkit.models.names import load_policy
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect_batch
from turnkit.types import Trajectory

ENV_KWARGS = {"difficulty": 2, "max_attempts": 3}
"""The quickstart's multi-turn MathEpisodes (``turnkit quickstart --model smollm2``)."""


def make_env() -> gymnasium.Env:
    """One MathEpisodes env of the quickstart's recipe."""
    return gymnasium.make("turnkit/MathEpisodes-v0", **ENV_KWARGS)


def play(policy: HFPolicy, seeds: Sequence[int], max_turns: int) -> list[Trajectory]:
    """One batch of episodes, one env per seed (repeated seeds: one group)."""
    envs = [make_env() for _ in seeds]
    return collect_batch(envs, policy, list(seeds), chat=ChatDelta(policy.tokenizer), max_turns=max_turns)


def count_prefill_rows(policy: HFPolicy) -> Callable[[], int]:
    """Hook the model: rows fed by every forward pass that feeds more than one token (a prefill)."""
    fed = [0]

    def hook(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
        ids = kwargs.get("input_ids")
        if ids is not None and ids.shape[1] > 1:
            fed[0] += int(ids.shape[0])

    policy.model.register_forward_pre_hook(hook, with_kwargs=True)
    return lambda: fed[0]


def prover_work(policy: HFPolicy, trajs: list[Trajectory], samples: int) -> Callable[[], int | None]:
    """MRT's value estimate over ``trajs``; returns a call that runs it (its branches are not returned)."""
    view = policy.with_sampling(temperature=0.6)
    values = RolloutValue(make_env(), view, samples=samples, max_turns=1, force=force_answer())

    def run() -> None:
        values.values_batch(trajs)

    return run


def group_work(policy: HFPolicy, groups: int, group_size: int, seed: int) -> Callable[[], int | None]:
    """A GRPO rollout batch; returns a call that plays it and gives the tokens generated."""
    seeds = [seed + g for g in range(groups) for _ in range(group_size)]

    def run() -> int:
        return sum(len(s.action.token_ids) for t in play(policy, seeds, 3) for s in t.steps)

    return run


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="a built-in model name or a local HF folder")
    parser.add_argument("--what", nargs="+", default=["prover", "group"], choices=["prover", "group"])
    parser.add_argument("--episodes", type=int, default=4, help="prover: episodes whose boundaries are valued")
    parser.add_argument("--samples", type=int, default=8, help="prover: answers per boundary (MRT's K)")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    base = load_policy(args.model, progress=False, max_new_tokens=args.max_new_tokens)
    policies = {
        share: HFPolicy(
            base.model,
            base.tokenizer,
            max_new_tokens=args.max_new_tokens,
            stop_token_ids=sorted(base.stop_token_ids),
            share_prefill=share,
        )
        for share in (False, True)
    }
    prefilled = count_prefill_rows(base)
    for what in args.what:
        ratios, walls = [], {False: [], True: []}
        for pair in range(args.pairs):
            seed = 1000 * pair
            if what == "prover":
                trajs = play(policies[False], range(seed, seed + args.episodes), 3)
                work = {s: prover_work(policies[s], trajs, args.samples) for s in (False, True)}
            else:
                work = {s: group_work(policies[s], args.groups, args.group_size, seed) for s in (False, True)}
            got = {}
            for share in (False, True) if pair % 2 == 0 else (True, False):
                rows, start = prefilled(), time.perf_counter()
                generated = work[share]()
                got[share] = (time.perf_counter() - start, prefilled() - rows, generated)
                walls[share].append(got[share][0])
            ratios.append(got[False][0] / got[True][0])
            generated = "" if got[False][2] is None else f"; generated {got[False][2]} / {got[True][2]} tokens"
            print(
                f"{what} pair {pair}: once per row {got[False][0]:.1f} s ({got[False][1]} rows prefilled), "
                f"shared {got[True][0]:.1f} s ({got[True][1]} rows prefilled){generated}: {ratios[-1]:.2f}x",
                flush=True,
            )
        print(
            f"{what}: median over {args.pairs} pairs ({args.model}, {args.threads} thread(s)): once per row "
            f"{statistics.median(walls[False]):.1f} s, shared {statistics.median(walls[True]):.1f} s, "
            f"speed-up {statistics.median(ratios):.2f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
