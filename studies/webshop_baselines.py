"""WebShop-v0 scripted baselines: how far do the oracle, WebShop's rule baseline and random clicking get?

Question (issue #16): on 200 held-out tasks per split, what success rate and mean reward do the reference
policies reach? These anchor the learning study (``studies/webshop_learning.py``): a policy below the rule
baseline has learned less than "search the instruction and buy the first hit".

Protocol (no torch: the numbers do not depend on the float path):

* Env ``turnkit/WebShop-v0`` (text renderer, 15-step limit), splits ``id``, ``ood``, ``combo``; seeds
  ``--seed0 .. --seed0 + N - 1`` (default 20,000..20,199), the same seeds for every agent.
* Agents: :class:`~turnkit.agents.oracle.OracleAgent` (reads the goal), and without privileged data
  :class:`~turnkit.envs.web.webshop.baselines.SearchThenBuy` (WebShop's rule baseline),
  ``SearchThenBuy(pick_options=True)`` (also clicks the option values the instruction names) and
  :class:`~turnkit.envs.web.webshop.baselines.RandomClicker`.
* Reported per agent and split: success (reward 1) with its Wilson 95% interval, mean reward with a
  Student-t 95% interval, mean steps, and episodes that ended with an infrastructure error (must be 0).

Writes ``results.json`` (with the machine record and the command) under ``--out``.

Example::

    python studies/webshop_baselines.py --episodes 200
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import gymnasium
from common.provenance import write_result

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.envs.web.webshop.baselines import RandomClicker, SearchThenBuy
from turnkit.stats import mean_ci, wilson_interval

AGENTS = {
    "oracle": OracleAgent,
    "rule": SearchThenBuy,
    "rule+options": lambda: SearchThenBuy(pick_options=True),
    "random": RandomClicker,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The study's command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=200, help="tasks per split")
    parser.add_argument("--seed0", type=int, default=20_000)
    parser.add_argument("--splits", nargs="+", default=["id", "ood", "combo"])
    parser.add_argument("--out", default="studies/results/webshop")
    return parser.parse_args(argv)


def run_cell(agent_name: str, split: str, args: argparse.Namespace) -> dict[str, Any]:
    """Play ``args.episodes`` seeded tasks of ``split`` with one agent."""
    env = gymnasium.make("turnkit/WebShop-v0", split=split)
    agent = AGENTS[agent_name]()
    trajs = [turnkit.collect(env, agent, seed=args.seed0 + i) for i in range(args.episodes)]
    env.close()
    n, wins = len(trajs), sum(t.success for t in trajs)
    rewards = [t.total_reward for t in trajs]
    lo, hi = wilson_interval(wins, n)
    mean, r_lo, r_hi = mean_ci(rewards)
    return {
        "agent": agent_name,
        "split": split,
        "episodes": n,
        "success": wins / n,
        "success_ci": [lo, hi],
        "mean_reward": mean,
        "mean_reward_ci": [r_lo, r_hi],
        "mean_steps": sum(len(t.steps) for t in trajs) / n,
        "errors": sum(t.error is not None for t in trajs),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.time()
    cells = []
    print(f"{'agent':<13} {'split':<6} {'success [95% CI]':<24} {'mean reward [95% CI]':<26} steps errors")
    for agent_name in AGENTS:
        for split in args.splits:
            c = run_cell(agent_name, split, args)
            cells.append(c)
            ci, rci = c["success_ci"], c["mean_reward_ci"]
            print(
                f"{agent_name:<13} {split:<6} {c['success']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]     "
                f"{c['mean_reward']:.3f} [{rci[0]:.3f}, {rci[1]:.3f}]       {c['mean_steps']:.2f}  {c['errors']}"
            )
    path = write_result(f"{args.out}/results.json", {"cells": cells, "seed0": args.seed0}, started=started)
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
