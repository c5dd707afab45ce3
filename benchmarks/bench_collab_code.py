"""CollabCode-v0 throughput: episodes/s with the oracle agent, and the share of time spent in the sandbox.

Configurations, interleaved per trial (ABC ABC ...) so that machine noise hits all alike; medians reported:

* ``persistent``: the env default, a warm persistent ``LocalSandbox`` (fork per execution) for answers; every
  episode is a new task, so each answer costs two sandbox executions (reference + candidate). References run
  where the env runs them: since #37 in the process's trusted sandbox (persistent), before it in the same one.
* ``fresh``: the baseline, ``LocalSandbox(persistent=False)`` for answers: a new bubblewrap sandbox per answer.
* ``persistent-groups``: same-seed groups of 8 episodes (GRPO-style); the reference outcomes are cached by
  content, so a group costs 1 reference + 8 candidate executions.
* ``clarifying``: the scripted clarifying agent (about 3 questions to the rule-based human, then the answer)
  with the persistent sandbox, to show the cost of the dialogue turns.

* ``persistent@REV`` (with ``--baseline REV``): ``persistent`` with the answers' worker running the supervisor of
  git revision REV (as ``bench_worker_ab.py`` does; bubblewrap with one uid), the rest of turnkit this checkout's:
  the worker alone, old against new, interleaved in one process.

Whether asking matters (clarifying vs answer-at-once success) is a study: ``studies/collab_code_asking.py``.

Run:  python benchmarks/bench_collab_code.py --trials 5 --episodes 40 [--baseline fd840f6]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.envs.collab_code.agents import ClarifyingAgent
from turnkit.envs.collab_code.env import CollabCodeEnv
from turnkit.envs.collab_code.grading import GRADING_LIMITS, REFERENCE_CACHE
from turnkit.rollout.collect import collect_batch
from turnkit.sandbox import LocalSandbox


class SandboxClock:
    """Adds up the wall time of every sandbox execution in this process (answers and references alike).

    It wraps :meth:`LocalSandbox._call`, the one round trip every execution of a ``LocalSandbox`` makes (plain,
    Python and native batch), so the env runs its own default grading path untouched, and the same script can
    time an earlier commit's turnkit (``PYTHONPATH=<worktree>``).
    """

    def __init__(self) -> None:
        self.seconds, self.calls = 0.0, 0
        inner = LocalSandbox._call
        clock = self

        def timed(sandbox: LocalSandbox, *args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(sandbox, *args, **kwargs)
            finally:
                clock.seconds += time.perf_counter() - t0
                clock.calls += 1

        LocalSandbox._call = timed  # type: ignore[method-assign]


CLOCK = SandboxClock()


def run_config(name: str, box: LocalSandbox, episodes: int, seed0: int) -> dict[str, float]:
    CLOCK.seconds, CLOCK.calls = 0.0, 0
    REFERENCE_CACHE.clear()  # every configuration starts cold (they play the same seeds)
    t0 = time.perf_counter()
    if name == "persistent-groups":
        trajs = []
        for g in range(episodes // 8):
            trajs += turnkit.collect_group(
                lambda: CollabCodeEnv(sandbox=box), OracleAgent(), seed=seed0 + g, group_size=8
            )
    else:
        agent = ClarifyingAgent() if name == "clarifying" else OracleAgent()
        trajs = collect_batch(
            [CollabCodeEnv(sandbox=box) for _ in range(episodes)], agent, range(seed0, seed0 + episodes)
        )
    wall = time.perf_counter() - t0
    assert all(t.success for t in trajs), [t.error for t in trajs if not t.success][:1]
    return {
        "episodes_per_s": len(trajs) / wall,
        "sandbox_share": CLOCK.seconds / wall,
        "sandbox_calls_per_episode": CLOCK.calls / len(trajs),
        "ms_per_sandbox_call": 1000 * CLOCK.seconds / max(1, CLOCK.calls),
    }


def bench(trials: int, episodes: int, baseline: str | None = None) -> dict[str, dict[str, float]]:
    boxes = {
        "persistent": LocalSandbox(GRADING_LIMITS, persistent=True),
        "fresh": LocalSandbox(GRADING_LIMITS, persistent=False),
        "persistent-groups": LocalSandbox(GRADING_LIMITS, persistent=True),
        "clarifying": LocalSandbox(GRADING_LIMITS, persistent=True),
    }
    if baseline is not None:
        from bench_worker_ab import accept_replies_without_ids, source_at, worker_with

        accept_replies_without_ids()
        boxes[f"persistent@{baseline}"] = worker_with(source_at(baseline), second_uid=False, limits=GRADING_LIMITS)
    for name, box in boxes.items():  # warm-up (starts the persistent workers)
        run_config(name, box, 8, seed0=10**6)
    samples: dict[str, list[dict[str, float]]] = {k: [] for k in boxes}
    for trial in range(trials):
        for name, box in boxes.items():
            samples[name].append(run_config(name, box, episodes, seed0=trial * 10_000))
    for box in boxes.values():
        box.close()
    return {name: {key: statistics.median(s[key] for s in runs) for key in runs[0]} for name, runs in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=40, help="episodes per configuration and trial (x8)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--baseline", help="also run the answers' worker with this git revision's supervisor")
    args = parser.parse_args([a for a in (argv or []) if a != "--"] if argv is not None else None)
    episodes = max(8, args.episodes // 8 * 8)
    result = bench(args.trials, episodes, args.baseline)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    base = result["fresh"]["episodes_per_s"]
    print(f"median of {args.trials} trials, {episodes} episodes each")
    print(f"{'config':<18} {'episodes/s':>10} {'vs fresh':>9} {'sandbox share':>14} {'calls/ep':>9} {'ms/call':>8}")
    for name, r in result.items():
        print(
            f"{name:<18} {r['episodes_per_s']:>10.1f} {r['episodes_per_s'] / base:>8.2f}x "
            f"{r['sandbox_share']:>13.0%} {r['sandbox_calls_per_episode']:>9.2f} {r['ms_per_sandbox_call']:>8.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
