"""Training throughput of the embedded tiny policy on CPU, and the rollout layer's own overhead.

Measures, with medians over ``--repeats`` trials:

* generation tokens/s of ``HFPolicy.act`` (T = 1) over MathEpisodes prompts at batch sizes 1, 16 and 64;
* training tokens/s of one GRPO update (forward + backward + AdamW over a real rollout batch);
* rollout overhead: the share of ``collect_batch`` wall time spent outside the policy for one GRPO step's
  batch (16 groups x 8 episodes, token-exact contexts as in the training loop, no critic), split into the
  envs' own reset/step time and the collector's bookkeeping (the rest, which includes the chat template's
  ids between turns). Target: <= 5%. The baseline it is a ratio against is the wall time of the same run.

What the quickstart's GRPO run learns (success before/after, over training seeds) is a study, run by
``turnkit quickstart --seeds N``; see studies/README.md.

Run:  python benchmarks/bench_training.py --repeats 5
      (or ``turnkit bench training -- --repeats 5``)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import gymnasium
import torch

import turnkit  # noqa: F401  (registers envs)
from turnkit.agents.base import Context
from turnkit.agents.timed import TimedAgent
from turnkit.models.embedded import tiny_policy
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect_batch
from turnkit.train.config import TrainConfig
from turnkit.train.loop import prepare_policy, update
from turnkit.types import Message

ENV = "turnkit/MathEpisodes-v0"


def prompts(n: int) -> list[Context]:
    env = gymnasium.make(ENV, difficulty=1)
    out = []
    for i in range(n):
        obs, _ = env.reset(seed=10_000 + i)
        out.append(Context(messages=(Message("user", obs),), episode_seed=10_000 + i))
    return out


def generation_tps(policy, batch: int, repeats: int) -> float:
    ctxs = prompts(batch)
    policy.act(ctxs[:1])  # warm-up
    rates = []
    for r in range(repeats):
        view = policy.with_sampling(seed=r)
        start = time.perf_counter()
        turns = view.act(ctxs)
        rates.append(sum(len(t.token_ids) for t in turns) / (time.perf_counter() - start))
    return statistics.median(rates)


class TimedEnv(gymnasium.Wrapper):
    """Adds up the wall time spent in the wrapped env's reset and step."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.seconds = 0.0

    def reset(self, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.env.reset(**kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    def step(self, action: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.env.step(action)
        finally:
            self.seconds += time.perf_counter() - start


def rollout_overhead(
    policy, repeats: int, groups: int = 16, group_size: int = 8, *, token_exact: bool = True
) -> dict[str, Any]:
    envs = [TimedEnv(gymnasium.make(ENV, difficulty=1)) for _ in range(groups * group_size)]
    fractions, env_fractions, walls, trajs = [], [], [], []
    chat = ChatDelta(policy.tokenizer) if token_exact else None  # the loop passes ChatDelta
    for r in range(repeats):
        agent = TimedAgent(policy.with_sampling(seed=r))
        seeds = [s for s in range(20_000 + r * groups, 20_000 + (r + 1) * groups) for _ in range(group_size)]
        groups_ids = [i // group_size for i in range(len(seeds))]
        for env in envs:
            env.seconds = 0.0
        start = time.perf_counter()
        trajs = collect_batch(envs, agent, seeds, groups=groups_ids, chat=chat)
        wall = time.perf_counter() - start
        fractions.append((wall - agent.seconds) / wall)
        env_fractions.append(sum(env.seconds for env in envs) / wall)
        walls.append(wall)
    return {
        "overhead_frac": statistics.median(fractions),
        "env_frac": statistics.median(env_fractions),
        "rollout_s": statistics.median(walls),
        "trajs": trajs,
    }


def training_tps(policy, trajs, repeats: int) -> float:
    cfg = TrainConfig(grpo={"group_size": 8}, optim={"lr": 1e-6}, update={"skip_zero_advantage": False})
    learner = prepare_policy(policy, cfg)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        metrics = update(learner, trajs, cfg)
        rates.append(metrics["update_tokens"] / (time.perf_counter() - start))
    return statistics.median(rates)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (the target machine has 2 cores)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args([a for a in (argv or []) if a != "--"])
    torch.set_num_threads(args.threads)
    results: dict[str, object] = {"threads": args.threads, "repeats": args.repeats}
    policy = tiny_policy(progress=False, temperature=1.0)
    params = sum(p.numel() for p in policy.model.parameters())
    results["params"] = params
    for batch in (1, 16, 64):
        results[f"gen_tokens_per_s_b{batch}"] = generation_tps(policy, batch, args.repeats)
    base = rollout_overhead(policy, args.repeats, token_exact=False)  # baseline: contexts re-rendered from text
    over = rollout_overhead(policy, args.repeats)
    results["rollout_overhead_frac_rerendered"] = base["overhead_frac"]
    results["rollout_overhead_frac"] = over["overhead_frac"]
    results["rollout_env_frac"] = over["env_frac"]
    results["rollout_s_128_episodes"] = over["rollout_s"]
    results["train_tokens_per_s"] = training_tps(policy, over["trajs"], args.repeats)
    if not args.json:
        print(f"tiny policy: {params / 1e6:.2f}M parameters, torch threads {args.threads}, medians of {args.repeats}")
        for batch in (1, 16, 64):
            print(f"  generation, batch {batch:>2}:  {results[f'gen_tokens_per_s_b{batch}']:>9.0f} tokens/s")
        print(f"  GRPO update (fwd+bwd+AdamW): {results['train_tokens_per_s']:>9.0f} tokens/s")
        print(
            f"  rollout of 128 episodes: {over['rollout_s']:.2f}s, outside the policy "
            f"{100 * over['overhead_frac']:.2f}% (target <= 5%): env reset/step "
            f"{100 * over['env_frac']:.2f}%, collector bookkeeping "
            f"{100 * (over['overhead_frac'] - over['env_frac']):.2f}%"
        )
        print(
            f"  baseline, contexts re-rendered from text: {base['rollout_s']:.2f}s, outside the policy "
            f"{100 * base['overhead_frac']:.2f}% (bookkeeping {100 * (base['overhead_frac'] - base['env_frac']):.2f}%)"
        )
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(__import__("sys").argv[1:]))
