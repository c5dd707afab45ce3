"""turnkit/MiniWoB-v0: scripted-solver and random-action success per task, env speed, and the curation check.

Modes (combine freely):

* ``--solvers N``: each scripted solver (:mod:`turnkit.envs.web.miniwob.solvers`) on page seeds 1..N of its
  task; success rate with a 95% Wilson interval (:func:`turnkit.stats.wilson_interval`).
* ``--random N``: the random-action baseline (:class:`~turnkit.envs.web.miniwob.baselines.RandomWebAgent`: a
  valid action on a uniformly chosen element) on page seeds 1..N of every curated task, 12 turns at most.
* ``--speed N``: env resets/s and steps/s of N episodes of random actions on a few tasks (one warm Chromium;
  the time inside ``reset`` and ``step`` only, medians over tasks).
* ``--check``: :func:`turnkit.check_env` (every check, cross-process included, seeds 0-2) on every curated task.
* ``--versus-browsergym N``: reset and step time of turnkit's MiniWoB-v0 side by side with BrowserGym's MiniWoB port
  (``browsergym/miniwob.<task>``, needs ``pip install browsergym-miniwob``), N random episodes per task and side
  per trial, ``--trials`` trials in one process, the sides in rotating order (turnkit, BrowserGym as shipped,
  BrowserGym with ``slow_mo=0`` and ``pre_observation_delay=0``), one side's browsers alive at a time. BrowserGym
  runs on turnkit's Chromium (:func:`~turnkit.browser.process.find_chromium`) and the ``miniwob`` wheel's pages
  (``MINIWOB_URL`` = ``file://`` URL of ``miniwob/html/miniwob/`` unless set): nothing from the network.

Run:  python benchmarks/bench_miniwob.py --solvers 100 --random 100 --speed 30 --check \
          --out benchmarks/results/miniwob.json
      python benchmarks/bench_miniwob.py --versus-browsergym 10 --trials 3 \
          --out benchmarks/results/miniwob_vs_browsergym.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

import turnkit
from turnkit.agents.base import Context
from turnkit.agents.oracle import OracleAgent
from turnkit.browser.process import find_chromium
from turnkit.envs.web.miniwob.baselines import RandomWebAgent, random_reply
from turnkit.envs.web.miniwob.env import MiniWoBEnv
from turnkit.envs.web.miniwob.solvers import SOLVERS
from turnkit.envs.web.miniwob.tasks import CURATED
from turnkit.rollout.collect import collect_batch
from turnkit.stats import wilson_interval
from turnkit.types import Message

SPEED_TASKS = ("click-button", "enter-text", "click-checkboxes", "click-dialog", "choose-list")


def success_rates(env: MiniWoBEnv, agent: Any, names: Sequence[str], n: int) -> dict[str, dict[str, Any]]:
    """Success of ``agent`` on page seeds 1..n of each task (max 12 turns), with Wilson intervals."""
    out = {}
    for name in names:
        wins, rewards, steps = 0, [], 0
        start = time.perf_counter()
        for seed in range(1, n + 1):
            task = env.make_task(name, seed)
            (traj,) = collect_batch([env], agent, [None], max_turns=12, reset_options=[{"task": task}])
            if traj.error is not None:
                raise RuntimeError(f"{name} seed {seed}: {traj.error}")
            wins += bool(traj.success)
            rewards.append(traj.total_reward)
            steps += len(traj.steps)
        lo, hi = wilson_interval(wins, n)
        out[name] = {
            "n": n,
            "success": wins / n,
            "ci95": [round(lo, 3), round(hi, 3)],
            "mean_raw_reward": round(statistics.fmean(rewards), 3),
            "steps_per_episode": round(steps / n, 2),
            "seconds": round(time.perf_counter() - start, 1),
        }
        print(f"  {name:28s} {wins:3d}/{n} [{lo:.2f}, {hi:.2f}]  steps/ep {steps / n:.1f}", flush=True)
    return out


def speed(n: int) -> dict[str, Any]:
    """Resets/s and steps/s (time inside reset/step only) of random episodes on :data:`SPEED_TASKS`."""
    per_task = {}
    env = MiniWoBEnv(task=list(SPEED_TASKS))
    env.reset(seed=0)  # start Chromium outside the timing
    agent = RandomWebAgent()
    for name in SPEED_TASKS:
        reset_s, step_s, steps = [], 0.0, 0
        for seed in range(1, n + 1):
            t = time.perf_counter()
            task = env.make_task(name, seed)
            obs, _ = env.reset(options={"task": task})
            reset_s.append(time.perf_counter() - t)
            ctx_messages = [Message("user", obs)]
            for turn in range(12):
                action = agent.act([Context(tuple(ctx_messages), turn=turn, episode_seed=seed)])[0].text
                t = time.perf_counter()
                obs, _, terminated, _, _ = env.step(action)
                step_s += time.perf_counter() - t
                steps += 1
                ctx_messages += [Message("assistant", action), Message("user", obs)]
                if terminated:
                    break
        per_task[name] = {
            "resets_per_s": round(1 / statistics.median(reset_s), 2),
            "steps_per_s": round(steps / step_s, 2),
            "steps": steps,
        }
        rates = per_task[name]
        print(f"  {name:20s} resets/s {rates['resets_per_s']:6.2f}  steps/s {rates['steps_per_s']:6.2f}", flush=True)
    env.close()
    return {
        "per_task": per_task,
        "median_resets_per_s": statistics.median(v["resets_per_s"] for v in per_task.values()),
        "median_steps_per_s": statistics.median(v["steps_per_s"] for v in per_task.values()),
    }


VERSUS_TASKS = SPEED_TASKS
MAX_TURNS = 12  # turnkit/MiniWoB-v0's max_episode_steps, used on both sides
BROWSERGYM_SIDES: dict[str, dict[str, Any]] = {
    "browsergym": {},  # as registered: the MiniWoB task's slow_mo=100 ms, pre_observation_delay=0.5 s
    "browsergym_nodelay": {"slow_mo": 0, "pre_observation_delay": 0.0},
}
_BG_TEXT_ROLES = ("textbox", "searchbox", "spinbutton")


def _setup_browsergym() -> str:
    """Import BrowserGym's MiniWoB tasks, pointed at the ``miniwob`` wheel's pages and the system Chromium.

    ``BrowserEnv`` takes launch options for the task browser (``pw_chromium_kwargs``), but its chat window
    (``browsergym.core.chat.Chat``) launches a second browser with none, i.e. Playwright's own download
    (``~/.cache/ms-playwright/chromium-1117``, which ``playwright install`` fetches from playwright.azureedge.net).
    So the shared Playwright instance's ``chromium.launch`` gets ``executable_path`` as a default.
    """
    import miniwob

    pages = Path(miniwob.__file__).parent / "html" / "miniwob"
    os.environ.setdefault("MINIWOB_URL", pages.as_uri() + "/")
    try:
        import browsergym.miniwob  # noqa: F401  (registers browsergym/miniwob.*)
        from browsergym.core import _get_global_playwright
    except ImportError as exc:
        raise SystemExit(f"--versus-browsergym needs `pip install browsergym-miniwob` ({exc})") from exc

    executable = find_chromium()
    chromium = _get_global_playwright().chromium
    if not getattr(chromium, "_turnkit_patched", False):
        launch = chromium.launch

        def launch_system_chromium(**kwargs: Any) -> Any:
            kwargs.setdefault("executable_path", executable)
            return launch(**kwargs)

        chromium.launch = launch_system_chromium
        chromium._turnkit_patched = True
    return executable


def browsergym_random_action(obs: dict[str, Any], rng: np.random.Generator) -> str:
    """A valid BrowserGym action on a uniformly chosen element, as :func:`random_action` does for turnkit.

    The elements: AXTree nodes with a bid that are visible and clickable or interactive (BrowserGym's
    ``set_of_marks``). Text fields get ``fill`` with a random word of the goal, lists ``select_option`` with a
    random option, the rest ``click``.
    """
    props = obs["extra_element_properties"]
    nodes = obs["axtree_object"]["nodes"]
    by_id = {n["nodeId"]: n for n in nodes}
    elements = []
    for n in nodes:
        bid = n.get("browsergym_id")
        p = props.get(bid) if bid is not None else None
        if p and not n.get("ignored") and p["visibility"] >= 0.5 and (p["clickable"] or p["set_of_marks"]):
            elements.append(n)
    if not elements:
        return "noop()"
    n = elements[int(rng.integers(len(elements)))]
    bid, role = n["browsergym_id"], n.get("role", {}).get("value", "")
    if role in _BG_TEXT_ROLES:
        words = str(obs["goal"]).replace('"', " ").split() or ["x"]
        return f"fill({bid!r}, {words[int(rng.integers(len(words)))].strip('.,')!r})"
    if role == "combobox":
        options = []
        stack = list(n.get("childIds", []))
        while stack:
            child = by_id.get(stack.pop(0))
            if child is None:
                continue
            if child.get("role", {}).get("value") == "option":
                options.append(str(child.get("name", {}).get("value", "")))
            stack.extend(child.get("childIds", []))
        if options:
            return f"select_option({bid!r}, {options[int(rng.integers(len(options)))]!r})"
    return f"click({bid!r})"


def _time_turnkit(names: Sequence[str], n: int) -> dict[str, dict[str, Any]]:
    """Seconds inside make_task+reset and step of n random episodes per task (one warm Chromium)."""
    out = {}
    env = MiniWoBEnv(task=list(names))
    try:
        env.reset(seed=0)  # start Chromium outside the timing
        agent = RandomWebAgent()
        for name in names:
            rec: dict[str, Any] = {"reset_s": [], "step_s": [], "successes": 0, "invalid_actions": 0}
            for seed in range(1, n + 1):
                t = time.perf_counter()
                task = env.make_task(name, seed)
                obs, _ = env.reset(options={"task": task})
                rec["reset_s"].append(time.perf_counter() - t)
                messages = [Message("user", obs)]
                for turn in range(MAX_TURNS):
                    action = agent.act([Context(tuple(messages), turn=turn, episode_seed=seed)])[0].text
                    t = time.perf_counter()
                    obs, _, terminated, truncated, info = env.step(action)
                    rec["step_s"].append(time.perf_counter() - t)
                    rec["invalid_actions"] += "invalid_action" in info
                    messages += [Message("assistant", action), Message("user", obs)]
                    if terminated or truncated:
                        rec["successes"] += bool(info.get("success"))
                        break
            out[name] = rec
    finally:
        env.close()
    return out


def _time_browsergym(names: Sequence[str], n: int, settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Seconds inside reset and step of n random episodes per task of ``browsergym/miniwob.<task>``."""
    out = {}
    for k, name in enumerate(names):
        env = gymnasium.make(f"browsergym/miniwob.{name}", disable_env_checker=True, **settings)
        try:
            env.reset(seed=0)  # start Playwright's driver outside the timing
            rec: dict[str, Any] = {"reset_s": [], "step_s": [], "successes": 0, "invalid_actions": 0}
            for seed in range(1, n + 1):
                t = time.perf_counter()
                obs, _ = env.reset(seed=seed)
                rec["reset_s"].append(time.perf_counter() - t)
                for turn in range(MAX_TURNS):
                    action = browsergym_random_action(obs, np.random.default_rng([k, seed, turn]))
                    t = time.perf_counter()
                    obs, reward, terminated, truncated, _ = env.step(action)
                    rec["step_s"].append(time.perf_counter() - t)
                    rec["invalid_actions"] += bool(obs["last_action_error"])
                    if terminated or truncated:
                        rec["successes"] += reward > 0
                        break
            out[name] = rec
        finally:
            env.close()
    return out


def versus_browsergym(n: int, trials: int, names: Sequence[str] = VERSUS_TASKS) -> dict[str, Any]:
    """Median reset and step time of turnkit's MiniWoB-v0 and BrowserGym's MiniWoB on the same tasks.

    ``trials`` rounds in one process; in each, every side runs n random episodes per task, the sides' order
    rotating between rounds (so load drift hits all alike). Times are pooled over the rounds; the ratio is
    turnkit's median over BrowserGym's.
    """
    import logging

    executable = _setup_browsergym()
    logging.getLogger("browsergym").setLevel(logging.ERROR)  # the slow_mo override warning, once per reset
    sides = ["turnkit", *BROWSERGYM_SIDES]
    pooled: dict[str, dict[str, dict[str, Any]]] = {s: {} for s in sides}
    per_trial: list[dict[str, Any]] = []
    for trial in range(trials):
        order = sides[trial % len(sides) :] + sides[: trial % len(sides)]
        print(f"  trial {trial + 1}/{trials}: {' -> '.join(order)}", flush=True)
        trial_out: dict[str, Any] = {"order": order}
        for side in order:
            start = time.perf_counter()
            settings = BROWSERGYM_SIDES.get(side)
            got = _time_turnkit(names, n) if settings is None else _time_browsergym(names, n, settings)
            trial_out[side] = {
                name: {"reset_ms": _ms(rec["reset_s"]), "step_ms": _ms(rec["step_s"])} for name, rec in got.items()
            }
            for name, rec in got.items():
                into = pooled[side].setdefault(
                    name, {"reset_s": [], "step_s": [], "successes": 0, "invalid_actions": 0}
                )
                for key in ("reset_s", "step_s"):
                    into[key] += rec[key]
                for key in ("successes", "invalid_actions"):
                    into[key] += rec[key]
            print(f"    {side:20s} {time.perf_counter() - start:6.1f} s", flush=True)
        per_trial.append(trial_out)
    table: dict[str, Any] = {}
    print(
        f"  {'task':18s} {'turnkit reset/step ms':>22s} {'BrowserGym':>16s} {'BG no delay':>16s}"
        "  step ratio tk/BG (no delay)"
    )
    for name in names:
        row: dict[str, Any] = {}
        for side in sides:
            rec = pooled[side][name]
            row[side] = {
                "reset_ms": _ms(rec["reset_s"]),
                "step_ms": _ms(rec["step_s"]),
                "episodes": n * trials,
                "steps": len(rec["step_s"]),
                "successes": rec["successes"],
                "invalid_actions": rec["invalid_actions"],
            }
        for side in BROWSERGYM_SIDES:
            row[f"ratio_vs_{side}"] = {
                key: round(row["turnkit"][key] / row[side][key], 3) for key in ("reset_ms", "step_ms")
            }
        table[name] = row
        cells = [f"{row[s]['reset_ms']:7.1f} / {row[s]['step_ms']:6.1f}" for s in sides]
        ratios = f"{row['ratio_vs_browsergym']['step_ms']:.3f} ({row['ratio_vs_browsergym_nodelay']['step_ms']:.3f})"
        print(f"  {name:18s} {cells[0]:>22s} {cells[1]:>16s} {cells[2]:>16s}  {ratios}", flush=True)
    summary = {
        side: {key: statistics.median(table[name][side][key] for name in names) for key in ("reset_ms", "step_ms")}
        for side in sides
    }
    return {
        "episodes_per_task_per_trial": n,
        "trials": trials,
        "max_turns": MAX_TURNS,
        "chromium": executable,
        "browsergym_sides": BROWSERGYM_SIDES,
        "per_task": table,
        "median_over_tasks": summary,
        "per_trial": per_trial,
    }


def _ms(seconds: Sequence[float]) -> float:
    return round(1000 * statistics.median(seconds), 1)


def check_all() -> dict[str, Any]:
    """Full check_env (seeds 0-2, cross-process included) on every curated task."""
    out = {}
    for name in sorted(CURATED):
        env = gymnasium.make("turnkit/MiniWoB-v0", task=name)
        policy = None if name in SOLVERS else random_reply
        start = time.perf_counter()
        report = turnkit.check_env(env, seeds=(0, 1, 2), raise_on_failure=False, policy=policy)
        env.close()
        out[name] = {"ok": report.ok, "seconds": round(time.perf_counter() - start, 1)}
        if not report.ok:
            out[name]["report"] = str(report)
        print(f"  {name:28s} {'passed' if report.ok else 'FAILED'} in {out[name]['seconds']} s", flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected measurements and print (and optionally save) the results."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--solvers", type=int, default=0, help="episodes per solved task")
    p.add_argument("--random", type=int, default=0, help="episodes per curated task for the random baseline")
    p.add_argument("--speed", type=int, default=0, help="random episodes per task for the speed measurement")
    p.add_argument("--check", action="store_true", help="run check_env on every curated task")
    p.add_argument(
        "--versus-browsergym", type=int, default=0, help="random episodes per task, side and trial vs BrowserGym"
    )
    p.add_argument("--trials", type=int, default=3, help="interleaved trials of --versus-browsergym")
    p.add_argument("--tasks", nargs="+", default=list(VERSUS_TASKS), help="tasks of --versus-browsergym")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    args = p.parse_args(argv)
    results: dict[str, Any] = {"argv": sys.argv[1:]}
    env = MiniWoBEnv()
    try:
        if args.solvers:
            print(f"scripted solvers, {args.solvers} page seeds each:")
            results["solvers"] = success_rates(env, OracleAgent(), sorted(SOLVERS), args.solvers)
        if args.random:
            print(f"random-action baseline, {args.random} page seeds each:")
            results["random"] = success_rates(env, RandomWebAgent(), sorted(CURATED), args.random)
    finally:
        env.close()
    if args.speed:
        print(f"speed, {args.speed} random episodes per task:")
        results["speed"] = speed(args.speed)
    if args.versus_browsergym:
        print(f"versus BrowserGym, {args.versus_browsergym} random episodes per task, side and trial:")
        results["versus_browsergym"] = versus_browsergym(args.versus_browsergym, args.trials, args.tasks)
    if args.check:
        print("check_env on every curated task:")
        results["check"] = check_all()
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    failed = [k for k, v in results.get("check", {}).items() if not v["ok"]]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
