"""Tool-call round trip: ``print(1)`` through an env's ``python`` tool on a warm session, beside the layers below it.

Rows, all in one process and interleaved call by call (ABCDEF, BCDEFA, ...: the order rotates every round) so that
machine noise hits them alike:

* ``env.step`` python tool: ``env.step("<python>print(1)</python>")`` on a ``turnkit/MathEpisodes-v0`` with tools
  (parse, schema check, call log, the session, the env's info): what an agent's tool call costs.
* ``Toolbox.take_turn``: the same message straight to a :class:`~turnkit.tools.Toolbox` (no env around it).
* ``PythonSession.run`` (baseline): the pexpect REPL session the tool drives, in the same kind of sandbox
  (bubblewrap, the tools' default limits), with no tool layer at all.
* ``LocalSandbox(persistent=True).run_python``: a bare sandbox evaluation (fresh globals per call, persistent
  worker), the fastest non-session way to run ``print(1)`` in a sandbox.
* ``env.step`` shell tool ``echo 1`` and ``ShellSession.run("echo 1")``: the same pair for the shell.

Latencies are p50/p90 over all samples after a warm-up; ratios are p50 against the ``PythonSession.run`` p50, so
``env.step python / PythonSession.run`` is the tool layer's overhead. Target: p50 ≤ 10 ms for the env row.

Run:  python benchmarks/bench_tools.py --n 300 --out benchmarks/results/tools/round_trip.json
      (or ``turnkit bench tools -- --n 300``)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium

import turnkit  # noqa: F401  (registers envs)
from turnkit.sandbox import LocalSandbox, PythonSession, ShellSession
from turnkit.tools import Toolbox
from turnkit.tools.sessions import DEFAULT_LIMITS

TIMEOUT_S = 10.0
MANY = 10**9  # no call limit, no time limit: the benchmark makes thousands of calls in one episode
BASELINE = "PythonSession.run (baseline)"


def quantiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p90 (nearest rank) of ``samples``."""
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def checked(call: Callable[[], str], expected: str) -> Callable[[], None]:
    """``call`` with its output checked, so that a broken row cannot look fast."""

    def run() -> None:
        out = call()
        if out != expected:
            raise AssertionError(f"expected {expected!r}, got {out!r}")

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="samples per row")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls per row first")
    parser.add_argument("--out", type=Path, help="also write the results as JSON to this file")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    argv = [a for a in (sys.argv[1:] if argv is None else argv) if a != "--"]
    args = parser.parse_args(argv)

    tools = {"tools": ["python", "shell"], "timeout_s": TIMEOUT_S, "max_calls": MANY}
    env = gymnasium.make("turnkit/MathEpisodes-v0", tools=tools, max_episode_steps=MANY)
    env.reset(seed=0)
    box = Toolbox(["python"], timeout_s=TIMEOUT_S, max_calls=MANY)
    session_box = LocalSandbox(DEFAULT_LIMITS)
    py = PythonSession(session_box, timeout=TIMEOUT_S)
    sh = ShellSession(session_box, timeout=TIMEOUT_S)
    worker = LocalSandbox(DEFAULT_LIMITS, persistent=True)
    rows: dict[str, Callable[[], None]] = {
        "env.step python tool print(1)": checked(lambda: env.step("<python>print(1)</python>")[0], "1\n"),
        "Toolbox.take_turn python print(1)": checked(
            lambda: box.take_turn("<python>print(1)</python>").observation, "1\n"
        ),
        BASELINE: checked(lambda: py.run("print(1)").stdout, "1\n"),
        "bare LocalSandbox(persistent).run_python": checked(lambda: worker.run_python("print(1)").stdout, "1\n"),
        "env.step shell tool echo 1": checked(lambda: env.step("<shell>echo 1</shell>")[0], "1\n"),
        "ShellSession.run echo 1": checked(lambda: sh.run("echo 1").stdout, "1\n"),
    }
    samples: dict[str, list[float]] = {name: [] for name in rows}
    try:
        for _ in range(args.warmup):
            for call in rows.values():
                call()  # starts the sessions and the worker, fills caches
        names = list(rows)
        for i in range(args.n):
            # rotate the order every round: a row must not always follow the shell rows, whose exiting helper
            # processes (bash forks for each call) still compete for the CPUs for a moment
            for name in names[i % len(names) :] + names[: i % len(names)]:
                t0 = time.perf_counter()
                rows[name]()
                samples[name].append(time.perf_counter() - t0)
    finally:
        env.close()
        box.close()
        py.close()
        sh.close()
        session_box.close()
        worker.close()

    base_p50 = statistics.median(samples[BASELINE])
    table: dict[str, dict[str, float]] = {}
    for name, values in samples.items():
        p50, p90 = quantiles(values)
        table[name] = {"p50_ms": 1e3 * p50, "p90_ms": 1e3 * p90, "ratio_to_session": p50 / base_p50}
    env_p50 = table["env.step python tool print(1)"]["p50_ms"]
    result = {
        "command": " ".join(["python benchmarks/bench_tools.py", *argv]),
        "n": args.n,
        "warmup": args.warmup,
        "machine": {"cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0], "python": platform.python_version()},
        "rows": table,
        "tool_layer_overhead_ms": env_p50 - 1e3 * base_p50,
        "target_p50_ms": 10.0,
        "target_met": env_p50 <= 10.0,
    }
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    load = result["machine"]["load_avg_1m"]
    print(f"print(1) / echo 1 round trips, {args.n} interleaved samples per row, load average {load:.2f}")
    print(f"{'row':<42} {'p50 ms':>8} {'p90 ms':>8} {'× session':>10}")
    for name, row in table.items():
        print(f"{name:<42} {row['p50_ms']:>8.3f} {row['p90_ms']:>8.3f} {row['ratio_to_session']:>10.2f}")
    verdict = "met" if result["target_met"] else "NOT met"
    print(f"tool layer overhead (env.step python - PythonSession.run): {result['tool_layer_overhead_ms']:.3f} ms")
    print(f"target env.step python p50 <= 10 ms: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
