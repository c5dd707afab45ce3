"""Sandbox latency per backend for "define a function + run 10 test calls", beside a bare ``python3 -c``.

Rows: the bare ``python3 -c`` baseline (no isolation at all), LocalSandbox as a fresh process per call and as
a persistent worker (a pre-forked child per call; also running ``pass``, and the same work as one ``run_batch``:
define once, ten calls with a result and an alarm each), DockerSandbox as a ``docker exec``
per call and as a persistent worker, and a warm docker pool (acquire a pre-started container, run, release).
Also: container start time, evaluations per second at concurrency 2 (two threads, one sandbox each), and the
fork limit: forking a warm sandboxed interpreter, exiting and reaping the child, measured inside a sandbox once
per round.

Samples interleave the backends round-robin so machine noise hits all alike; latencies are p50/p95 over
all samples, ratios are p50 against the baseline's p50.

Run:  python benchmarks/bench_sandbox.py --n 40
      (or ``turnkit bench sandbox -- --n 40``; ``--no-docker`` skips the Docker rows)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import threading
import time
from collections.abc import Callable

from turnkit.sandbox import DockerSandbox, Limits, LocalSandbox, SandboxPool, docker_available, run_batch

TASK = "def square(x):\n    return x * x\n\nfor i in range(10):\n    assert square(i) == i * i\nprint('ok')\n"
PYTHON = "/usr/bin/python3"  # the interpreter the sandboxes run, so the baseline does the same work
LIMITS = Limits(wall_time_s=30)


def bare_python() -> None:
    out = subprocess.run([PYTHON, "-c", TASK], capture_output=True, text=True, check=True)
    assert out.stdout == "ok\n"


def via(sandbox, code: str = TASK, expect: str = "ok\n") -> Callable[[], None]:
    def call() -> None:
        r = sandbox.run_python(code, timeout=30)
        assert r.ok and r.stdout == expect, r

    return call


FORK_LIMIT = (
    "import os, statistics, time\nxs = []\nfor _ in range(20):\n    t = time.perf_counter()\n    pid = os.fork()\n"
    "    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\n    xs.append(time.perf_counter() - t)\n"
    "print(statistics.median(xs))\n"
)
"""The floor of a fork-per-call design: fork a warm sandboxed interpreter, exit the child, reap it (20 times)."""


SETUP = "def square(x):\n    return x * x\n"
CALLS = [f"square({i})" for i in range(10)]


def via_batch(sandbox) -> Callable[[], None]:
    def call() -> None:
        batch = run_batch(sandbox, SETUP, CALLS)
        assert batch.ok and [c.value for c in batch.calls] == [["int", str(i * i)] for i in range(10)], batch

    return call


def fork_limit(sandbox) -> float:
    r = sandbox.run_python(FORK_LIMIT, timeout=30)
    assert r.ok, r
    return float(r.stdout)


def via_pool(pool: SandboxPool) -> Callable[[], None]:
    def call() -> None:
        with pool.acquire() as sb:
            r = sb.run_python(TASK, timeout=30)
        assert r.ok and r.stdout == "ok\n", r

    return call


def quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


def throughput(make_call: Callable[[], Callable[[], None]], evals: int) -> float:
    """Evaluations per second with two threads, each with its own sandbox (or the bare baseline)."""
    calls = [make_call() for _ in range(2)]
    for call in calls:
        call()  # warm up (starts persistent workers)
    start = time.perf_counter()
    threads = [threading.Thread(target=lambda c=c: [c() for _ in range(evals)]) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 2 * evals / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="latency samples per backend")
    parser.add_argument("--starts", type=int, default=5, help="container start samples")
    parser.add_argument("--evals", type=int, default=20, help="evaluations per thread for throughput")
    parser.add_argument("--no-docker", action="store_true", help="skip the Docker backends")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(None if argv is None else [a for a in argv if a != "--"])
    use_docker = not args.no_docker and docker_available()

    opened: list = []

    def keep(sb):
        opened.append(sb)
        return sb

    backends: dict[str, Callable[[], None]] = {
        "bare python3 -c (baseline)": bare_python,
        "local fresh process": via(keep(LocalSandbox(LIMITS))),
        "local persistent worker": via(keep(LocalSandbox(LIMITS, persistent=True))),
        "local persistent worker: pass": via(keep(LocalSandbox(LIMITS, persistent=True)), "pass", ""),
        "local persistent worker: run_batch": via_batch(keep(LocalSandbox(LIMITS, persistent=True))),
    }
    fork_box = keep(LocalSandbox(LIMITS, persistent=True))
    forks: list[float] = []
    pool = None
    if use_docker:
        backends["docker exec"] = via(keep(DockerSandbox(LIMITS)))
        backends["docker persistent worker"] = via(keep(DockerSandbox(LIMITS, persistent=True)))
        pool = SandboxPool(lambda: DockerSandbox(LIMITS), size=1)
        backends["docker warm pool (acquire+run)"] = via_pool(pool)
    rows: dict[str, dict[str, float]] = {}
    try:
        samples: dict[str, list[float]] = {name: [] for name in backends}
        for call in backends.values():
            call()  # warm-up: start workers, fill caches
        for _ in range(args.n):
            for name, call in backends.items():
                if pool is not None and name.startswith("docker warm pool"):
                    pool.wait_ready(timeout=120)  # measure a warm pool, not the refill behind it
                t0 = time.perf_counter()
                call()
                samples[name].append(time.perf_counter() - t0)
            forks.append(fork_limit(fork_box))
        base_p50 = statistics.median(samples["bare python3 -c (baseline)"])
        for name, values in samples.items():
            p50, p95 = quantiles(values)
            rows[name] = {"p50_ms": 1e3 * p50, "p95_ms": 1e3 * p95, "ratio_to_baseline": p50 / base_p50}

        thr: dict[str, float] = {"bare python3 -c (baseline)": throughput(lambda: bare_python, args.evals)}
        thr["local fresh process"] = throughput(lambda: via(keep(LocalSandbox(LIMITS))), args.evals)
        thr["local persistent worker"] = throughput(
            lambda: via(keep(LocalSandbox(LIMITS, persistent=True))), args.evals
        )
        thr["local persistent worker: run_batch"] = throughput(
            lambda: via_batch(keep(LocalSandbox(LIMITS, persistent=True))), args.evals
        )
        if use_docker:
            thr["docker exec"] = throughput(lambda: via(keep(DockerSandbox(LIMITS))), args.evals)
            thr["docker persistent worker"] = throughput(
                lambda: via(keep(DockerSandbox(LIMITS, persistent=True))), args.evals
            )
        for name, value in thr.items():
            rows[name]["evals_per_s_at_2"] = value

        extra: dict[str, float] = {
            "fork_limit_p50_ms": 1e3 * statistics.median(forks),
            "test_calls_per_s_at_2_run_batch": len(CALLS) * thr["local persistent worker: run_batch"],
        }
        if use_docker:
            starts = []
            for _ in range(args.starts):
                t0 = time.perf_counter()
                sb = DockerSandbox(LIMITS)
                starts.append(time.perf_counter() - t0)
                sb.close()
            extra["container_start_p50_s"], extra["container_start_p95_s"] = quantiles(starts)
            extra["docker_exec_over_local_persistent_p50"] = (
                rows["docker exec"]["p50_ms"] / rows["local persistent worker"]["p50_ms"]
            )
    finally:
        for sb in opened:
            sb.close()
        if pool is not None:
            pool.close()

    if args.json:
        print(json.dumps({"rows": rows, **extra}, indent=2))
        return 0
    print(f"'define a function + 10 test calls' ('pass' where named), {args.n} interleaved samples per backend")
    print(f"{'backend':<36} {'p50 ms':>8} {'p95 ms':>8} {'× base':>7} {'evals/s @2':>11}")
    for name, row in rows.items():
        rate = row.get("evals_per_s_at_2")
        rate_text = f"{rate:>11.1f}" if rate is not None else f"{'-':>11}"
        print(f"{name:<36} {row['p50_ms']:>8.2f} {row['p95_ms']:>8.2f} {row['ratio_to_baseline']:>7.2f} {rate_text}")
    for key, value in extra.items():
        print(f"{key}: {value:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
