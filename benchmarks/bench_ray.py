"""Distributed collection on Ray: episodes/s with 1, 2, 4, 8 env workers, as ratios to one worker and to local.

Two workloads, each timed against local collection (:func:`~turnkit.rollout.collect.collect_batch` in this
process, the same agent) side by side:

* ``io``: I/O-bound. MathEpisodes (3 answers per episode, all wrong, so 3 turns) played by an
  :class:`~turnkit.agents.openai.OpenAIAgent` against an :class:`~turnkit.agents.serve.AgentServer` on
  loopback that answers every request after a fixed ``--latency-ms`` (a served model's reply time). Each
  worker's client sends at most ``--client-concurrency`` requests at once (a connection pool), so one process
  waits through ``episodes / concurrency`` reply times per round; workers add concurrent clients.
* ``collab``: sandbox-bound. CollabCode with the scripted clarifying agent; every answer runs the hidden
  tests in a bubblewrap sandbox, so the work is CPU on this machine's cores.

Each worker count gets a fresh collector (its workers start and make their envs in a warm-up rollout, not
timed), then ``--repeats`` timed rollouts of ``--episodes`` episodes, each on fresh seeds (the same seed blocks
for every run, so no run meets answers it has graded before); we report medians. Ray's overhead per
episode is (1 worker − local) / episodes.

Run:  python benchmarks/bench_ray.py --workload io --workers 1 2 4 8 --episodes 96 --repeats 3
      python benchmarks/bench_ray.py --workload collab --workers 1 2 4 --episodes 32 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from typing import Any

import gymnasium

import turnkit  # noqa: F401  (registers the envs)
from turnkit.agents.openai import OpenAIAgent
from turnkit.distributed import EnvSpec, RayCollector, RayConfig
from turnkit.rollout.collect import collect_batch

MATH = "turnkit/MathEpisodes-v0"
COLLAB = "turnkit/CollabCode-v0"


def machine_record(command: list[str]) -> dict[str, Any]:
    """Where the numbers came from: CPU, cores, Python and library versions, and the command (the benchmarks keep
    their own record; the studies' fuller one, with torch's float path, is ``studies/common/provenance.py``)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    models = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    cpu = models[0] if models else platform.processor() or "unknown"

    def version(package: str) -> str | None:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None

    return {
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        **{name: version(name) for name in ("ray", "turnkit", "gymnasium")},
        "command": shlex.join(command),
    }


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # socketserver's default backlog (5) drops connects in a burst: 1 s SYN retries


class FixedLatencyServer:
    """An OpenAI-compatible ``/chat/completions`` on loopback answering every request after ``latency_s``.

    Each request is served on its own thread, so the latency is the same however many are in flight (a served
    model with spare batch capacity); the reply is a wrong answer.
    """

    def __init__(self, latency_s: float) -> None:
        latency = latency_s

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                time.sleep(latency)
                body = json.dumps(
                    {
                        "id": "fixed",
                        "object": "chat.completion",
                        "model": "fixed",
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": "ANSWER: 0.123"},
                             "finish_reason": "stop"}
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ClientFactory:
    """Each worker's agent: an OpenAI-compatible client with a bounded number of requests in flight."""

    def __init__(self, base_url: str, concurrency: int) -> None:
        self.base_url, self.concurrency = base_url, concurrency

    def __call__(self, index: int) -> Any:
        return OpenAIAgent(self.base_url, "fixed", max_workers=self.concurrency, token_ids=False, max_tokens=16)


class ClarifyingFactory:
    """Each worker's agent for CollabCode: the scripted clarifying agent."""

    def __call__(self, index: int) -> Any:
        from turnkit.envs.collab_code.agents import ClarifyingAgent

        return ClarifyingAgent()


def time_local(env_id: str, agent: Any, warmup: list[int], blocks: list[list[int]]) -> list[float]:
    envs = [gymnasium.make(env_id) for _ in warmup]
    try:
        collect_batch(envs, agent, warmup)  # warm-up: imports, sandboxes
        times = []
        for seeds in blocks:
            start = time.perf_counter()
            trajs = collect_batch(envs, agent, seeds)
            times.append(time.perf_counter() - start)
            assert all(t.error is None for t in trajs), [t.error for t in trajs if t.error][:1]
        return times
    finally:
        for env in envs:
            env.close()


def time_ray(
    env_id: str, factory: Callable[[int], Any], warmup: list[int], blocks: list[list[int]], workers: int
) -> list[float]:
    with RayCollector(EnvSpec(env_id), factory, RayConfig(address="local", workers=workers)) as collector:
        collector.collect(warmup)  # warm-up: workers start, make envs
        times = []
        for seeds in blocks:
            start = time.perf_counter()
            trajs = collector.collect(seeds)
            times.append(time.perf_counter() - start)
            assert all(t.error is None for t in trajs), [t.error for t in trajs if t.error][:1]
        return times


def run(workload: str, args: argparse.Namespace) -> dict[str, Any]:
    # Fresh seeds for the warm-up and for every repeat (the same blocks for every run): no result caches help.
    n = args.episodes
    warmup, blocks = (
        list(range(10_000, 10_000 + n)),
        [list(range(20_000 + r * n, 20_000 + (r + 1) * n)) for r in range(args.repeats)],
    )
    server = None
    if workload == "io":
        server = FixedLatencyServer(args.latency_ms / 1000)
        env_id, factory = MATH, ClientFactory(server.base_url, args.client_concurrency)
    else:
        env_id, factory = COLLAB, ClarifyingFactory()
    try:
        rows = {"local": time_local(env_id, factory(0), warmup, blocks)}
        for w in args.workers:
            rows[f"ray-{w}"] = time_ray(env_id, factory, warmup, blocks, w)
            print(f"{workload}: {w} worker(s): median {statistics.median(rows[f'ray-{w}']):.2f} s", file=sys.stderr)
    finally:
        if server is not None:
            server.close()
    med = {k: statistics.median(v) for k, v in rows.items()}
    one = med.get("ray-1")
    table = {
        k: {
            "median_s": m,
            "episodes_per_s": args.episodes / m,
            "x_local": med["local"] / m,
            **({"x_one_worker": one / m} if one else {}),
        }
        for k, m in med.items()
    }
    out: dict[str, Any] = {"workload": workload, "env": env_id, "episodes": args.episodes, "times_s": rows}
    out["table"] = table
    if one:
        out["ray_overhead_ms_per_episode"] = 1000 * (one - med["local"]) / args.episodes
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=["io", "collab", "both"], default="both")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--episodes", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--client-concurrency", type=int, default=4)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args([a for a in argv if a != "--"])
    start = time.perf_counter()
    results = [run(w, args) for w in (["io", "collab"] if args.workload == "both" else [args.workload])]
    for res in results:
        print(f"\n{res['workload']} ({res['env']}, {res['episodes']} episodes, median of {args.repeats})")
        print("| run | median s | episodes/s | × local | × 1 worker |\n|---|---|---|---|---|")
        for name, row in res["table"].items():
            one = f"{row['x_one_worker']:.2f}" if "x_one_worker" in row else "-"
            print(f"| {name} | {row['median_s']:.2f} | {row['episodes_per_s']:.1f} | {row['x_local']:.2f} | {one} |")
        if "ray_overhead_ms_per_episode" in res:
            print(f"Ray overhead per episode (1 worker - local): {res['ray_overhead_ms_per_episode']:.1f} ms")
    if args.out:
        record = machine_record(command=["python", "benchmarks/bench_ray.py", *argv])
        record["wall_s"] = time.perf_counter() - start
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)}, "results": results,
                                        "machine": record}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
