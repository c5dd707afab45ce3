"""How fast `turnkit view` opens a 10,000-episode eval folder (issue #41: well under 2 s).

The folder is written by turnkit's own EpisodeSink from real Trajectory objects: 100 episodes of
turnkit/MathEpisodes-v0 played by the random agent (10 turns each) and 100 by the oracle (1 turn), repeated
with fresh seeds to 10,000 episodes (every 50th one marked as timed out).

Each trial starts a fresh server (a cold index) and measures over real loopback HTTP:

* baseline: reading and parsing the whole file at once (`turnkit.jsonl.json_lines`), what a viewer without an
  index would do before it could show anything;
* open: `/api/sources` + the first page of 50 episodes (the index is built here);
* next page, sorted by return, filtered to errors, one whole episode (the index is warm);
* the page in turnkit's Chromium: from navigation to the rendered episode list (`--no-browser` skips it).

    python benchmarks/bench_view.py --episodes 10000 --trials 5

Numbers are medians over trials; the ratio column divides by the baseline of the same trial.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import gymnasium

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import turnkit  # noqa: F401  (registers the built-in envs)
from turnkit.agents.oracle import OracleAgent
from turnkit.agents.scripted import RandomAgent
from turnkit.jsonl import json_lines
from turnkit.rollout.collect import collect_batch
from turnkit.rollout.evaluate import EpisodeSink
from turnkit.types import ErrorCause, Trajectory, TrajectoryError
from turnkit.view import make_server

ENV = "turnkit/MathEpisodes-v0"


def real_episodes() -> list[Trajectory]:
    """100 random-agent and 100 oracle episodes of MathEpisodes-v0."""
    envs = [gymnasium.make(ENV) for _ in range(20)]
    out: list[Trajectory] = []
    for agent in (RandomAgent(seed=0), OracleAgent()):
        for first in range(0, 100, 20):
            out += collect_batch(envs, agent, list(range(first, first + 20)))
    for env in envs:
        env.close()
    return out


def write_folder(folder: Path, n: int) -> Path:
    base = real_episodes()
    sink = EpisodeSink(folder)
    block = []
    for i in range(n):
        t = dataclasses.replace(base[i % len(base)], seed=i)
        if i % 50 == 49:
            t = dataclasses.replace(t, error=TrajectoryError(ErrorCause.TIMEOUT, "episode budget exceeded", step=0))
        block.append(t)
        if len(block) == 500:
            sink(block)
            block = []
    sink(block)
    return folder / "trajectories.jsonl"


def fetch(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as reply:
        return json.loads(reply.read())


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


WAIT = """new Promise((ok, fail) => { const t0 = Date.now(); (function poll() {
  if (document.querySelectorAll('#episode-list tr[data-index]').length === 50) ok(true);
  else if (Date.now() - t0 > 30000) fail(new Error('no list')); else setTimeout(poll, 5); })(); })"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = write_folder(root / "eval", args.episodes)
        size = path.stat().st_size
        print(f"{args.episodes} episodes, {size / 1e6:.1f} MB ({size / args.episodes / 1e3:.1f} kB per episode)")
        tab = None
        if not args.no_browser:
            from tests.view.conftest import forward
            from turnkit.browser import Tab

            tab = Tab(forward, viewport=(1280, 860), timeout_s=60.0)
        try:
            for trial in range(args.trials):
                t, _ = timed(lambda: sum(1 for _ in json_lines(path)))
                rows.setdefault("baseline: parse the whole file (json_lines)", []).append(t)
                for browser in [False, True] if tab is not None else [False]:
                    server = make_server(root, port=0)
                    thread = threading.Thread(target=server.serve_forever, daemon=True)
                    thread.start()
                    url = server.url + "api/"
                    try:
                        if browser:
                            assert tab is not None
                            tab.goto(server.url + "?warm#runs")  # Chromium and the page's files, not the index
                            t0 = time.perf_counter()
                            tab.evaluate("location.hash = 'episodes?id=eval'")
                            tab.evaluate(WAIT, await_promise=True)
                            rows.setdefault("page in Chromium: open the episode list (cold index)", []).append(
                                time.perf_counter() - t0
                            )
                            continue
                        t_open, page = timed(
                            lambda u=url: (fetch(u + "sources"), fetch(u + "episodes?id=eval&limit=50"))
                        )
                        assert page[1]["total"] == args.episodes, page[1]["total"]
                        rows.setdefault("open: sources + first page of 50 (cold index)", []).append(t_open)
                        for name, query in (
                            ("next page", "episodes?id=eval&offset=50&limit=50"),
                            ("sorted by return, descending", "episodes?id=eval&sort=return&order=desc&limit=50"),
                            ("filtered to errored episodes", "episodes?id=eval&error=timeout&limit=50"),
                            ("one whole episode (the last)", f"episode?id=eval&i={args.episodes - 1}"),
                        ):
                            t, _ = timed(lambda q=query, u=url: fetch(u + q))
                            rows.setdefault(name + " (warm index)", []).append(t)
                    finally:
                        server.shutdown()
                        server.server_close()
                print(f"trial {trial + 1}/{args.trials} done", flush=True)
        finally:
            if tab is not None:
                tab.close()
    base = statistics.median(rows["baseline: parse the whole file (json_lines)"])
    print("\n| step | median ms | min ms | × baseline |\n|---|---|---|---|")
    for name, values in rows.items():
        med = statistics.median(values)
        print(f"| {name} | {med * 1e3:.1f} | {min(values) * 1e3:.1f} | {med / base:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
