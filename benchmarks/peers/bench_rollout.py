"""Rollout throughput of turnkit's ``collect_batch`` vs verifiers' rollout helper, against one shared model server.

Both sides talk to the same real HTTP server on 127.0.0.1: turnkit's ``AgentServer`` (OpenAI-compatible chat
completions, requests arriving together batched into one ``act``) over a policy that is identical for both, so
the model's cost per request is the same and what differs is each rollout layer:

* policy ``scripted`` (default): reads the task from the prompt and answers ``ANSWER: x`` after ``--model-ms`` of
  simulated generation per batch (a sleep, like a model served elsewhere);
  ``tiny``: turnkit's embedded tiny HF model generating on this CPU (answers mostly wrong; same for both).
* turnkit: ``collect_batch(envs, OpenAIAgent(server), seeds)`` over MathEpisodes-v0 envs made once, on an
  in-memory list of one-digit arithmetic tasks (``max_attempts=1``: one turn per episode, as on the other
  side), with ``OpenAIAgent(max_workers=--concurrency)``. Per episode: reset, one HTTP chat request, step
  (answer extraction + equivalence check), the Trajectory.
* verifiers 0.4 (``verifiers.v1``): ``Agent.run(task)`` (what ``SingleAgentEnv`` runs per episode), at most
  ``--concurrency`` at once, on the same tasks and prompt text (turnkit's first observation) with an
  ``@vf.reward`` that checks the ``ANSWER:`` line with verifiers' math scorer (``verify_boxed_math_answer``);
  the ``null`` harness (a plain chat loop) in the ``subprocess`` runtime: per episode, a fresh chat-program
  process (a ``uv``-managed script environment, built once and cached), verifiers' interception server
  between it and the model server (it streams; the shared server frames the same reply as SSE for it),
  the trace's message graph and scoring. The programs may cache bytecode (the script unsets
  ``PYTHONDONTWRITEBYTECODE``), as on a usual machine.

Reported per side: episodes/s and the rollout layer's overhead share, 1 - (time the server's policy was busy /
wall time), medians over interleaved trials (turnkit first on even trials); for verifiers also the median
spans of its own trace timing (setup, agent = program start + model call + exit, scoring). One untimed
warm-up trial comes first (it builds verifiers' script environment on the first run).

Needs: the peers virtualenv (README.md here) and ``uv`` on PATH or in that virtualenv (verifiers runs its
harness programs with ``uv``; building their environment fetches openai, mcp and httpx from PyPI once).

Run:  .venv-peers/bin/python benchmarks/peers/bench_rollout.py --trials 5 --episodes 32
      (``--policy tiny`` for the embedded tiny model instead of the scripted one)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

import gymnasium
import numpy as np

import turnkit  # noqa: F401  (registers envs)
from turnkit.agents.base import Context
from turnkit.agents.openai import OpenAIAgent
from turnkit.agents.serve import AgentServer
from turnkit.envs.math.env import FORMAT_LINE
from turnkit.envs.math.generator import generate
from turnkit.rollout.collect import collect_batch
from turnkit.types import AgentTurn, Task

ENV_ID = "turnkit/MathEpisodes-v0"
MODEL = "bench"
KEY_VAR = "TURNKIT_BENCH_KEY"


class TimedPolicy:
    """The shared policy: adds up the seconds spent in ``act`` (the model's busy time, as the server sees it)."""

    def __init__(self, inner: Any, model_ms: float = 0.0) -> None:
        self.inner, self.model_s = inner, model_ms / 1000
        self.busy = 0.0
        self.calls = 0
        self._lock = threading.Lock()

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        start = time.perf_counter()
        try:
            if self.model_s:
                time.sleep(self.model_s)
            return self.inner.act(contexts)
        finally:
            with self._lock:
                self.busy += time.perf_counter() - start
                self.calls += 1


def scripted_answers(tasks: list[Task]) -> Any:
    from turnkit.agents.scripted import ScriptedAgent

    answers = {t.prompt: str(t.privileged["answer"]) for t in tasks}

    def reply(ctx: Context) -> str:
        text = next((m.content for m in reversed(ctx.messages) if m.role == "user"), "")
        for prompt, answer in answers.items():
            if text.startswith(prompt):
                return f"So the result is\nANSWER: {answer}"
        return "I do not know."

    return ScriptedAgent(reply)


def serve_sse(server: AgentServer) -> None:
    """Let ``server`` answer ``stream=true`` chat requests too: the same reply, framed as SSE chunks.

    verifiers' chat program always streams and ``AgentServer`` answers whole replies only; the policy call is
    the same (``server.complete``), so the model cost per request does not depend on the side.
    """
    base: type[BaseHTTPRequestHandler] = server._httpd.RequestHandlerClass  # type: ignore[assignment]

    class Handler(base):  # type: ignore[valid-type,misc]
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            body = json.loads(raw or b"null")
            if self.path.rstrip("/") != "/v1/chat/completions" or not (isinstance(body, dict) and body.get("stream")):
                socket_file, self.rfile = self.rfile, _Replay(raw)  # AgentServer's own handler answers it
                try:
                    super().do_POST()
                finally:
                    self.rfile = socket_file
                return
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            reply = server.complete({k: v for k, v in body.items() if k not in ("stream", "stream_options")})
            choice = reply["choices"][0]
            head = {k: reply[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
            delta = {"role": "assistant", "content": choice["message"]["content"]}
            events = [
                head | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                head | {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
            ]
            if include_usage:
                events.append(head | {"choices": [], "usage": reply["usage"]})
            data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server._httpd.RequestHandlerClass = Handler


class _Replay:
    """A request body already read, offered again to the handler that reads it."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, n: int = -1) -> bytes:
        out, self.data = (self.data, b"") if n < 0 else (self.data[:n], self.data[n:])
        return out


# --------------------------------------------------------------------------------------------- sides


class TurnkitSide:
    name = "turnkit collect_batch + OpenAIAgent"

    def __init__(self, base_url: str, tasks: list[Task], episodes: int, concurrency: int, max_tokens: int) -> None:
        self.tasks = tasks
        self.envs = [gymnasium.make(ENV_ID, tasks=tasks, max_attempts=1) for _ in range(episodes)]
        self.agent = OpenAIAgent(base_url, MODEL, max_workers=concurrency, max_tokens=max_tokens, retries=0)

    def run(self, seed0: int) -> dict[str, Any]:
        n = len(self.envs)
        seeds = list(range(seed0, seed0 + n))
        options = [{"task_index": s % len(self.tasks)} for s in seeds]
        trajs = collect_batch(self.envs, self.agent, seeds, reset_options=options)
        errors = [str(t.error) for t in trajs if t.error is not None]
        return {"success": sum(bool(t.success) for t in trajs) / n, "errors": errors[:3]}


class VerifiersSide:
    name = "verifiers Agent.run (null harness, subprocess)"

    def __init__(self, base_url: str, tasks: list[Task], episodes: int, concurrency: int, max_tokens: int) -> None:
        import verifiers.v1 as vf
        from verifiers.v1.harnesses.null.harness import NullHarnessConfig

        class MathData(vf.TaskData):
            answer: str

        class MathTask(vf.Task[MathData, vf.State, vf.TaskConfig]):
            @vf.reward
            async def correct(self, task: MathData, trace: vf.Trace) -> float:
                # the last ANSWER: line (the format both sides ask for), checked by verifiers' math scorer
                _, marker, tail = trace.last_reply.rpartition("ANSWER:")
                lines = tail.strip().splitlines()
                if not marker or not lines:
                    return 0.0
                return vf.verify_boxed_math_answer(f"\\boxed{{{lines[0]}}}", task.answer)

        self.dataset = [  # the prompt is turnkit's first observation, so the policy sees the same text
            MathTask(MathData(idx=i, prompt=f"{t.prompt}\n{FORMAT_LINE}", answer=str(t.privileged["answer"])))
            for i, t in enumerate(tasks)
        ]
        self.episodes, self.concurrency = episodes, concurrency
        os.environ.setdefault(KEY_VAR, "unused")
        config = vf.AgentConfig(
            harness=NullHarnessConfig(id="null"),
            runtime=vf.SubprocessConfig(),
            model=MODEL,
            client=vf.EvalClientConfig(base_url=base_url, api_key_var=KEY_VAR),
            sampling=vf.SamplingConfig(max_tokens=max_tokens),
        )
        self.loop = asyncio.new_event_loop()
        self.agent = vf.Agent(config)
        self.loop.run_until_complete(self.agent.__aenter__())

    def run(self, seed0: int) -> dict[str, Any]:
        return self.loop.run_until_complete(self._run(seed0))

    async def _run(self, seed0: int) -> dict[str, Any]:
        gate = asyncio.Semaphore(self.concurrency)

        async def one(i: int) -> Any:
            async with gate:
                return await self.agent.run(self.dataset[i % len(self.dataset)])

        traces = await asyncio.gather(*(one(i) for i in range(seed0, seed0 + self.episodes)))
        spans: dict[str, list[float]] = {}
        for trace in traces:
            for name in ("setup", "agent", "scoring"):
                span = getattr(trace.timing, name)
                if span.start and span.end:
                    spans.setdefault(name, []).append(span.end - span.start)
        errors = [e.message[:200] for t in traces for e in t.errors]
        return {
            "success": sum(t.reward for t in traces) / len(traces),
            "errors": errors[:3],
            "spans_ms": {k: 1000 * statistics.median(v) for k, v in spans.items()},
        }

    def close(self) -> None:
        self.loop.run_until_complete(self.agent.__aexit__(None, None, None))
        self.loop.close()


# --------------------------------------------------------------------------------------------- main


def build_policy(kind: str, tasks: list[Task]) -> Any:
    if kind == "scripted":
        return scripted_answers(tasks)
    from turnkit.models.embedded import tiny_policy

    return tiny_policy(progress=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=32, help="episodes per side per trial")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight per side")
    parser.add_argument("--policy", choices=("scripted", "tiny"), default="scripted")
    parser.add_argument("--model-ms", type=float, default=20.0, help="simulated generation ms per batch (scripted)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--torch-threads", type=int, default=1, help="for --policy tiny")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args([a for a in argv if a != "--"])
    logging.basicConfig(level=logging.ERROR)
    if shutil.which("uv") is None:  # verifiers launches its harness programs with uv: use the venv's
        os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    # The harness programs inherit this environment: let them cache bytecode as on a usual machine (with
    # PYTHONDONTWRITEBYTECODE=1, as on the project's boxes, every program recompiles openai and mcp: ~2x slower).
    dont_write_bytecode = os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None
    if args.policy == "tiny":
        import torch

        torch.set_num_threads(args.torch_threads)

    tasks = [generate(np.random.default_rng(i), split="id", kinds=("arithmetic",), difficulty=1) for i in range(512)]
    timed = TimedPolicy(build_policy(args.policy, tasks), args.model_ms if args.policy == "scripted" else 0.0)
    server = AgentServer(timed, model_name=MODEL, max_batch=64)  # type: ignore[arg-type]
    serve_sse(server)
    server.start()
    sides: list[Any] = [
        TurnkitSide(server.base_url, tasks, args.episodes, args.concurrency, args.max_tokens),
        VerifiersSide(server.base_url, tasks, args.episodes, args.concurrency, args.max_tokens),
    ]
    results: dict[str, dict[str, list[Any]]] = {
        s.name: {"eps": [], "overhead": [], "calls": [], "info": []} for s in sides
    }
    load_before = os.getloadavg()
    try:
        for trial in range(args.trials + 1):  # trial 0: untimed warm-up
            order = sides if trial % 2 == 0 else sides[::-1]
            for side in order:
                busy0, calls0 = timed.busy, timed.calls
                start = time.perf_counter()
                info = side.run(seed0=10_000 + trial * args.episodes)
                wall = time.perf_counter() - start
                if trial:
                    res = results[side.name]
                    res["eps"].append(args.episodes / wall)
                    res["overhead"].append(1 - (timed.busy - busy0) / wall)
                    res["calls"].append(timed.calls - calls0)
                    res["info"].append(info)
    finally:
        sides[1].close()
        server.close()
    load_after = os.getloadavg()

    med = statistics.median
    rows = []
    for side in sides:
        res = results[side.name]
        last = res["info"][-1] if res["info"] else {}
        rows.append(
            {
                "side": side.name,
                "episodes_per_s": med(res["eps"]),
                "overhead_share": med(res["overhead"]),
                "policy_calls_per_trial": med(res["calls"]),
                "success": med(i["success"] for i in res["info"]),
                "errors": last.get("errors", []),
                "spans_ms": {k: med(i["spans_ms"][k] for i in res["info"]) for k in last.get("spans_ms", {})},
            }
        )
    ratio = rows[0]["episodes_per_s"] / rows[1]["episodes_per_s"]
    per_trial = [a / b for a, b in zip(results[sides[0].name]["eps"], results[sides[1].name]["eps"], strict=True)]
    meta = {
        "trials": args.trials,
        "episodes": args.episodes,
        "concurrency": args.concurrency,
        "policy": args.policy,
        "model_ms": args.model_ms if args.policy == "scripted" else None,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "cpus": os.cpu_count(),
        "unset_PYTHONDONTWRITEBYTECODE": dont_write_bytecode,
        "ratio_turnkit_over_verifiers": ratio,
        "ratio_min_max": [min(per_trial), max(per_trial)],
    }
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=2))
        return 0
    policy = f"scripted, {args.model_ms:g} ms per batch" if args.policy == "scripted" else "tiny HF model"
    print(
        f"{args.episodes} one-turn episodes per side per trial, {args.concurrency} in flight, policy {policy}; "
        f"medians of {args.trials} interleaved trials; load average before {load_before[0]:.2f} / after "
        f"{load_after[0]:.2f} (1 min), {os.cpu_count()} CPUs"
    )
    print()
    print("| side | episodes/s | rollout-layer overhead share | policy calls per trial | mean reward |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['side']} | {r['episodes_per_s']:.1f} | {100 * r['overhead_share']:.1f}% | "
            f"{r['policy_calls_per_trial']:.0f} | {r['success']:.2f} |"
        )
    print(f"\nturnkit / verifiers episodes/s: {ratio:.1f}x (per trial {min(per_trial):.1f}-{max(per_trial):.1f}x)")
    spans = rows[1]["spans_ms"]
    if spans:
        print("verifiers trace spans per episode (median ms): " + ", ".join(f"{k} {v:.1f}" for k, v in spans.items()))
    for r in rows:
        if r["errors"]:
            print(f"{r['side']} errors (last trial): {r['errors']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
