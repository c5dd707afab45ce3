"""CollabCode-v0: does asking matter? The scripted clarifying agent vs answering at once, per split.

Both agents play the same seeded tasks (seeds ``0 .. tasks-1`` of each split, with the rule-based human):
:class:`~turnkit.envs.collab_code.agents.ClarifyingAgent` asks about every hidden parameter, then answers;
:class:`~turnkit.envs.collab_code.agents.AnswerAtOnceAgent` answers the bare request with the family
defaults. Reported per split and agent: success rate with its Wilson 95% CI, mean share of hidden tests
passed with its 95% CI (``turnkit.stats.mean_ci``), and mean turns. The oracle's 100%
(``tests/envs/collab_code``) is the ceiling.

Run:  python studies/collab_code_asking.py --tasks 200
      python studies/collab_code_asking.py --tasks 200 --json > studies/results/collab_code_asking/results.json

``--json`` prints ``{"rows": [...], "machine": ..., "wall_s": ...}``: the rows with the machine record
(:func:`common.provenance.machine_record`) and the wall time. Files written before the record existed hold
the bare list of rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from common.provenance import machine_record

from turnkit.envs.collab_code.agents import AnswerAtOnceAgent, ClarifyingAgent
from turnkit.envs.collab_code.env import CollabCodeEnv
from turnkit.rollout.collect import collect_batch
from turnkit.stats import mean_ci, wilson_interval

SPLITS = ("id", "ood", "combo")


def study(n: int) -> list[dict[str, Any]]:
    rows = []
    for split in SPLITS:
        for label, agent in (("clarifying", ClarifyingAgent()), ("answer-at-once", AnswerAtOnceAgent())):
            trajs = collect_batch([CollabCodeEnv(split=split) for _ in range(n)], agent, list(range(n)))
            assert all(t.error is None for t in trajs)
            wins = sum(t.success for t in trajs)
            mean, lo, hi = mean_ci([t.total_reward for t in trajs])
            rows.append(
                {
                    "split": split,
                    "agent": label,
                    "n": n,
                    "success": wins / n,
                    "success_ci": wilson_interval(wins, n),
                    "tests_passed": mean,
                    "tests_passed_ci": (lo, hi),
                    "turns": statistics.mean(len(t.steps) for t in trajs),
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks per split (seeds 0 .. tasks-1)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    started = time.time()
    rows = study(args.tasks)
    if args.json:
        record = {"rows": rows, "machine": machine_record(), "wall_s": round(time.time() - started, 1)}
        print(json.dumps(record, indent=2))
        return 0
    print(f"{'split':<6} {'agent':<15} {'success [95% CI]':<24} {'tests passed [95% CI]':<24} turns")
    for r in rows:
        s_lo, s_hi = r["success_ci"]
        t_lo, t_hi = r["tests_passed_ci"]
        success = f"{r['success']:.3f} [{s_lo:.3f}, {s_hi:.3f}]"
        tests = f"{r['tests_passed']:.3f} [{t_lo:.3f}, {t_hi:.3f}]"
        print(f"{r['split']:<6} {r['agent']:<15} {success:<24} {tests:<24} {r['turns']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
