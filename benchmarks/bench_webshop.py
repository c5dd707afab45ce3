"""WebShop-v0 env cost per step: the text renderer, the Chromium renderer, and the bare HTTP round trip under both.

Each episode replays the oracle's actions (recorded once, so no agent cost is timed) on ``render="text"`` and
``render="chromium"``; trials interleave the two (ABAB) so machine noise hits both alike, and we report
medians over trials. The floor is a keep-alive ``GET`` of the same server pages without parsing
(``http_floor``).

Run:  python benchmarks/bench_webshop.py --trials 5 --episodes 40
      (or ``turnkit bench webshop -- --trials 5``)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import gymnasium

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.envs.web.webshop.client import ShopClient


def oracle_actions(episodes: int, seed0: int) -> dict[int, list[str]]:
    """The oracle's actions per seed (played once on the text renderer)."""
    env = gymnasium.make("turnkit/WebShop-v0")
    plans = {
        s: [st.action.text for st in turnkit.collect(env, OracleAgent(), seed=s).steps]
        for s in range(seed0, seed0 + episodes)
    }
    env.close()
    return plans


def time_render(env: gymnasium.Env, plans: dict[int, list[str]]) -> tuple[float, float, list[str]]:
    """Mean ms per reset and per step over the planned episodes, and the server paths visited."""
    t_reset = t_step = 0.0
    steps = 0
    paths: list[str] = []
    for seed, actions in plans.items():
        t0 = time.perf_counter()
        env.reset(seed=seed)
        t_reset += time.perf_counter() - t0
        for action in actions:
            t0 = time.perf_counter()
            env.step(action)
            t_step += time.perf_counter() - t0
            steps += 1
            paths.append(env.unwrapped.page_path)
    return 1000 * t_reset / len(plans), 1000 * t_step / steps, paths


def http_floor(paths: list[str], seed: int) -> float:
    """Mean ms of a keep-alive GET of each visited page (no parsing), on a fresh session of one shop."""
    client = ShopClient()
    sid = client.new_session(seed=seed, split="id")
    t0 = time.perf_counter()
    for path in paths:
        client.get(f"/s/{sid}/search?q=lamp&p=1" if "/buy" in path else f"/s/{sid}{path}")
    out = 1000 * (time.perf_counter() - t0) / len(paths)
    client.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--no-chromium", action="store_true", help="time the text renderer only")
    parser.add_argument("--json", help="write the medians here")
    args = parser.parse_args(argv)

    plans = oracle_actions(args.episodes, args.seed)
    renders = ["text"] if args.no_chromium else ["text", "chromium"]
    envs = {r: gymnasium.make("turnkit/WebShop-v0", render=r) for r in renders}
    envs[renders[-1]].reset(seed=0)  # start Chromium outside the timed trials
    rows: dict[str, list[tuple[float, float]]] = {r: [] for r in renders}
    floors: list[float] = []
    for trial in range(args.trials):
        for r in renders if trial % 2 == 0 else reversed(renders):
            reset_ms, step_ms, paths = time_render(envs[r], plans)
            rows[r].append((reset_ms, step_ms))
        floors.append(http_floor(paths, args.seed))
    for env in envs.values():
        env.close()

    result = {
        "episodes": args.episodes,
        "trials": args.trials,
        "steps_per_episode": sum(map(len, plans.values())) / len(plans),
    }
    print(f"WebShop-v0, {args.episodes} oracle episodes x {args.trials} trials (medians over trials)")
    print(f"{'render':<10} {'reset ms':>9} {'step ms':>9} {'steps/s':>9}")
    for r in renders:
        reset_ms = statistics.median(x for x, _ in rows[r])
        step_ms = statistics.median(y for _, y in rows[r])
        result[r] = {"reset_ms": reset_ms, "step_ms": step_ms, "steps_per_s": 1000 / step_ms}
        print(f"{r:<10} {reset_ms:9.3f} {step_ms:9.3f} {1000 / step_ms:9.0f}")
    result["http_floor_ms"] = statistics.median(floors)
    print(f"keep-alive GET of the same pages, no parsing: {result['http_floor_ms']:.3f} ms")
    if "chromium" in result:
        result["chromium_over_text"] = result["chromium"]["step_ms"] / result["text"]["step_ms"]
        print(f"chromium / text step time: {result['chromium_over_text']:.1f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
