"""The oracle-credit ceiling on CollabCode: outcome-only GRPO vs GRPO + perfect per-turn credit (issue #51).

Question: on a task where the turns before the answer carry what the outcome cannot tell apart (CollabCode: the
questions that uncover the hidden facts), does perfect step-wise credit (the oracle critic,
:func:`turnkit.critics.oracle.collab_code_values`: the share of hidden facts told so far) make the tiny
CollabCode agent better than outcome-only GRPO, seed for seed? ``dense_credit.py`` measured the same ceiling on
SmolLM2's math retries, where the outcome already marks the winning turn.

Protocol:

* Start: the tiny CollabCode agent (``model = "tiny-agent"``, :mod:`turnkit.models.tiny_agent`, built locally
  once and cached under ``$TURNKIT_CACHE``), fully fine-tuned, sampled at T = 1.
* Arms (:data:`ARMS`), each :data:`RECIPE` plus one critic table and one ``grpo.estimator``:

  - ``grpo``: the env's reward only (the share of hidden tests passed, on the answer turn);
  - ``oracle``: the oracle critic (weight 1) through ``pav`` (each turn credited with its own gain, on top of
    the outcome's RLOO advantage), as ``dense_credit.py``'s oracle arm;
  - ``oracle-mrt``: the same credit through ``mrt`` (gains summed from each turn on).

* :data:`RECIPE`: 30 steps of 8 groups x 4 at T = 1, lr 5e-4 (the tiny quickstart's), 128 new tokens a turn,
  episodes cut after 6 turns (``max_turns``; cut = no answer, reward 0). The cut keeps every prompt inside the
  agent's 1024 positions: with the env's 10 turns a trained agent that asks on and on reached a 1035-id prompt,
  generated nothing, and the loop's batch builder stopped the run (``results/collab_credit/earlier-10turns/``).
* RL seeds 0-4 (task draws, sampling, update order); the loop keeps the held-out seeds out of training.
* Held-out: :data:`EVAL_EPISODES` tasks (seeds from :data:`EVAL_SEED`; the agent's SFT data are seeds from
  1,000,000), one episode each, greedy and at T = 1 (a fixed sampling seed), before RL (``start.json``) and after
  each seed: success (every test passed), mean reward, questions asked (turns before the answer) and the share
  of hidden facts uncovered. Per arm the seed means, and the paired difference ``oracle - grpo`` per measure
  (mean and Student-t 95% interval over the seeds both arms have).

Commands (one heavy process at a time on a 2-core box; ``run`` resumes, skipping the files that exist)::

    python studies/collab_credit.py run --arms grpo oracle --seeds 0 1 2 3 4 --path native
    ATEN_CPU_CAPABILITY=default TURNKIT_CACHE=/tmp/tk_default_collab \\
        python studies/collab_credit.py run --path default
    python studies/collab_credit.py report          # summary.json and the table
    python studies/collab_credit.py check           # toy size end to end: one step per arm, 4 episodes

Each unit writes ``--out/<path>/<arm>/seed-N.json`` (and ``--out/<path>/start.json``) with its machine record.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from common.provenance import write_result
from common.seeds import load_seeds, paired
from common.seeds import pending as seeds_pending

import turnkit  # noqa: F401  (registers the envs)
from turnkit.critics.oracle import collab_code_values
from turnkit.rollout.collect import collect_batch
from turnkit.train.config import TrainConfig
from turnkit.train.loop import build_policy, train
from turnkit.types import Trajectory

CONTROL = "grpo"
"""The outcome-only arm every other arm is paired with, seed for seed."""

ARMS: dict[str, tuple[dict[str, Any] | None, str]] = {
    CONTROL: (None, "grpo"),
    "oracle": ({"oracle": {"weight": 1.0}}, "pav"),
    "oracle-mrt": ({"oracle": {"weight": 1.0}}, "mrt"),
}
"""Arm name -> (its ``critic`` table, its ``grpo.estimator``)."""

DECODINGS = ("greedy", "sampled")
MEASURES = ("success", "reward", "questions", "facts")
"""Per-episode measures: all tests passed, share of tests passed, turns before the answer, share of facts told."""

EVAL_SEED = 500_000
"""First held-out task seed (as ``sweet_collab_policy.py``): below the agent's SFT seeds (1,000,000 ..)."""
EVAL_EPISODES = 200
SAMPLING_SEED = 12345
"""The held-out T = 1 sampling seed, the same for every policy."""

RECIPE: dict[str, Any] = {
    "env_id": "turnkit/CollabCode-v0",
    "env_kwargs": {},
    "split": "id",
    "max_turns": 6,
    "model": "tiny-agent",
    "steps": 30,
    "groups_per_step": 8,
    "grpo": {"group_size": 4},
    "optim": {"lr": 5e-4},
    "sampling": {"temperature": 1.0, "max_new_tokens": 128},
    "eval": {"every": 0, "seed": EVAL_SEED, "episodes": EVAL_EPISODES},
    "log": {"checkpoint_every": 30, "rollouts_every": 0},
}
"""The shared RL recipe (step 0 of the write-up sizes it to the shared box)."""

CHECK_OUT = "/tmp/collab_credit_check"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The study's command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["run", "report", "check"])
    parser.add_argument("--arms", nargs="+", default=[CONTROL, "oracle"], choices=list(ARMS), help="arms to run")
    parser.add_argument("--path", default="native", help="float path label of this process (native, default)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="RL seeds")
    parser.add_argument("--eval-episodes", type=int, default=EVAL_EPISODES, help="held-out episodes per decoding")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the recipe's)")
    parser.add_argument("--out", default="studies/results/collab_credit")
    parser.add_argument("--runs", default="runs/collab_credit", help="training run folders")
    return parser.parse_args(argv)


def arm_config(
    arm: str,
    seed: int,
    out_dir: str,
    *,
    eval_episodes: int = EVAL_EPISODES,
    steps: int | None = None,
    base: Mapping[str, Any] = RECIPE,
) -> TrainConfig:
    """The recipe ``base`` with the arm's critic and estimator; ``eval.episodes`` is the held-out range the loop
    keeps out of training.

    Example:
        >>> cfg = arm_config("oracle", 3, "/tmp/x")
        >>> cfg.critic, cfg.grpo.estimator, cfg.seed, cfg.model, cfg.eval.seed
        ({'oracle': {'weight': 1.0}}, 'pav', 3, 'tiny-agent', 500000)
        >>> arm_config("grpo", 0, "/tmp/x", steps=2).steps, arm_config("oracle-mrt", 0, "/tmp/x").grpo.estimator
        (2, 'mrt')
        >>> arm_config("orcale", 0, "/tmp/x")
        Traceback (most recent call last):
        ...
        ValueError: unknown arm 'orcale'; the arms are grpo, oracle, oracle-mrt
    """
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; the arms are {', '.join(ARMS)}")
    critic, estimator = ARMS[arm]
    values = {**base, "seed": seed, "out_dir": out_dir, "critic": critic}
    values["grpo"] = {**base.get("grpo", {}), "estimator": estimator}
    values["eval"] = {**base.get("eval", {}), "episodes": eval_episodes}
    if steps is not None:
        values.update(steps=steps, log={**base.get("log", {}), "checkpoint_every": steps})
    return TrainConfig.from_dict(values, source=f"collab_credit:{arm}")


def episode_measures(trajectory: Trajectory) -> dict[str, float]:
    """One episode's :data:`MEASURES`: success, reward, questions asked (turns before the last) and the share of
    the task's hidden facts the human's replies told (the oracle's final value).

    Example:
        >>> from turnkit.types import AgentTurn, Step, Task
        >>> facts = [{"keywords": ["cutoff"], "text": "The cutoff is 7."}, {"keywords": ["round"], "text": "Round up."}]
        >>> task = Task("t", "Write f.", {"facts": facts}, family="collab_code")
        >>> steps = (Step("Write f.", AgentTurn("Which cutoff?"), 0.0),
        ...          Step("The cutoff is 7.", AgentTurn("I WANT TO ANSWER: ..."), 0.5, terminated=True,
        ...               info={"success": False}))
        >>> episode_measures(Trajectory("d", 0, steps, final_observation="Passed 5 of 10.", task=task))
        {'success': 0.0, 'reward': 0.5, 'questions': 1.0, 'facts': 0.5}
    """
    return {
        "success": float(trajectory.success),
        "reward": float(trajectory.total_reward),
        "questions": float(max(len(trajectory.steps) - 1, 0)),
        "facts": float(collab_code_values(trajectory)[-1]),
    }


def evaluate(policy: Any, episodes: int, max_turns: int | None = None, batch: int = 64) -> dict[str, Any]:
    """Held-out episodes (seeds ``EVAL_SEED ..``), greedy and at T = 1, cut after ``max_turns`` turns as in
    training: each measure's mean, the errors and the share of episodes cut before an answer."""
    out: dict[str, Any] = {}
    views = {
        "greedy": policy.with_sampling(temperature=0.0),
        "sampled": policy.with_sampling(temperature=1.0, seed=SAMPLING_SEED),
    }
    for decoding in DECODINGS:
        view = views[decoding]
        envs = [gymnasium.make(RECIPE["env_id"], split=RECIPE["split"]) for _ in range(min(batch, episodes))]
        trajs: list[Trajectory] = []
        for lo in range(0, episodes, len(envs)):
            seeds = [EVAL_SEED + i for i in range(lo, min(lo + len(envs), episodes))]
            trajs.extend(collect_batch(envs[: len(seeds)], view, seeds, max_turns=max_turns))
        for env in envs:
            env.close()
        clean = [t for t in trajs if t.error is None]
        rows = [episode_measures(t) for t in clean]
        out[decoding] = {
            "episodes": len(trajs),
            "errors": len(trajs) - len(clean),
            **{m: float(np.mean([r[m] for r in rows])) for m in MEASURES},
            "asked_any": float(np.mean([r["questions"] > 0 for r in rows])),
            "cut": float(np.mean([t.steps[-1].truncated for t in clean])),
        }
    return out


STEP_KEYS = ("step", "reward_mean", "success_rate", "turns_mean", "tied_frac", "optimizer_steps", "critic_s")
"""The training step record's numbers a seed file keeps (plus the oracle's own, ``oracle/...``)."""


def step_keys(record: Mapping[str, Any]) -> dict[str, Any]:
    """The kept part of one training step record.

    Example:
        >>> step_keys({"step": 1, "tied_frac": 0.25, "oracle/total": 0.4, "lr": 2e-4})
        {'step': 1, 'tied_frac': 0.25, 'oracle/total': 0.4}
    """
    return {k: v for k, v in record.items() if k in STEP_KEYS or k.startswith("oracle/")}


def seed_file(out: str | Path, path: str, arm: str, seed: int) -> Path:
    """Where one arm's seed on one float path writes its result.

    Example:
        >>> seed_file("r", "native", "oracle", 2).as_posix()
        'r/native/oracle/seed-2.json'
    """
    return Path(out) / path / arm / f"seed-{seed}.json"


def pending(out: str | Path, arms: Sequence[str], path: str, seeds: Sequence[int]) -> list[tuple[str, int]]:
    """The (arm, seed) units without a result file, seed by seed (every arm's seed 0 before any seed 1).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     seed_file(d, "native", "grpo", 0).parent.mkdir(parents=True)
        ...     _ = seed_file(d, "native", "grpo", 0).write_text("{}")
        ...     pending(d, ["grpo", "oracle"], "native", [0, 1])
        [('oracle', 0), ('grpo', 1), ('oracle', 1)]
    """
    return seeds_pending(arms, seeds, done=lambda arm, seed: seed_file(out, path, arm, seed).is_file())


def run_start(args: argparse.Namespace) -> None:
    """The start policy's held-out numbers, once per float path (``start.json``)."""
    file = Path(args.out) / args.path / "start.json"
    if file.is_file():
        return
    started = time.time()
    cfg = arm_config(CONTROL, 0, str(Path(args.runs) / args.path / "start"), eval_episodes=args.eval_episodes)
    policy = build_policy(cfg, progress=False)
    result = {"model": cfg.model, "eval": evaluate(policy, args.eval_episodes, cfg.max_turns)}
    write_result(file, result, started=started)
    print(f"start {args.path}: {json.dumps(result['eval'])}", flush=True)


def run_seed(args: argparse.Namespace, arm: str, seed: int) -> None:
    """Train arm ``arm`` with RL seed ``seed`` from the start policy, then the held-out evaluation."""
    started = time.time()
    out_dir = str(Path(args.runs) / args.path / arm / f"seed-{seed}")
    cfg = arm_config(arm, seed, out_dir, eval_episodes=args.eval_episodes, steps=args.steps)
    run = train(cfg, progress=False)
    train_s = time.time() - started
    t0 = time.time()
    result = {
        "arm": arm,
        "seed": seed,
        "train_config": cfg.to_dict(),
        "steps": [step_keys(r) for r in run.history if "tied_frac" in r],
        "train_s": round(train_s, 1),
        "eval": evaluate(run.policy, args.eval_episodes, cfg.max_turns),
        "eval_s": round(time.time() - t0, 1),
    }
    write_result(seed_file(args.out, args.path, arm, seed), result, started=started)
    print(f"{arm} {args.path} seed {seed}: train {train_s:.0f} s, {json.dumps(result['eval'])}", flush=True)


def summarize_path(folder: Path) -> dict[str, Any]:
    """One float path's summary: the start's numbers, and per arm its seeds and per decoding each measure's mean
    over seeds, its per-seed values and (other arms) the paired difference to :data:`CONTROL` on the seeds both
    have.

    Example:
        >>> import tempfile
        >>> ev = lambda s, q: {d: {"success": s, "reward": s, "questions": q, "facts": q / 4, "asked_any": 1.0,
        ...                        "episodes": 4, "errors": 0} for d in DECODINGS}
        >>> with tempfile.TemporaryDirectory() as d:
        ...     root = Path(d)
        ...     for arm, seed, s, q in (("grpo", 0, 0.2, 1.0), ("grpo", 1, 0.4, 1.0), ("oracle", 0, 0.3, 2.0)):
        ...         (root / arm).mkdir(exist_ok=True)
        ...         _ = (root / arm / f"seed-{seed}.json").write_text(json.dumps({"seed": seed, "eval": ev(s, q)}))
        ...     summary = summarize_path(root)
        >>> o = summary["arms"]["oracle"]
        >>> o["seeds"], round(o["sampled"]["success"]["delta"]["mean"], 3), o["sampled"]["questions"]["delta"]
        ([0], 0.1, {'mean': 1.0, 'ci95': [None, None], 'per_seed': [1.0]})
        >>> summary["arms"]["grpo"]["seeds"], round(summary["arms"]["grpo"]["greedy"]["success"]["mean"], 3)
        ([0, 1], 0.3)
    """
    start = folder / "start.json"
    summary: dict[str, Any] = {"start": json.loads(start.read_text())["eval"] if start.is_file() else None}
    runs = {arm: load_seeds(folder / arm) for arm in ARMS if (folder / arm).is_dir()}
    control = runs.get(CONTROL, {})
    summary["arms"] = {}
    for arm, by_seed in runs.items():
        if not by_seed:
            continue
        entry: dict[str, Any] = {"seeds": sorted(by_seed)}
        both = [s for s in sorted(by_seed) if s in control]
        for decoding in DECODINGS:
            entry[decoding] = {}
            for m in MEASURES:
                values = [by_seed[s]["eval"][decoding][m] for s in entry["seeds"]]
                cell: dict[str, Any] = {"mean": float(np.mean(values)), "per_seed": values}
                if arm != CONTROL and both:
                    diffs = [by_seed[s]["eval"][decoding][m] - control[s]["eval"][decoding][m] for s in both]
                    cell["delta"] = {**paired(diffs), "per_seed": diffs}
                entry[decoding][m] = cell
        summary["arms"][arm] = entry
    return summary


def summarize(out: Path) -> dict[str, Any]:
    """Every float path's :func:`summarize_path` (each subfolder of ``out`` with arms), by path."""
    return {p.name: summarize_path(p) for p in sorted(out.iterdir()) if p.is_dir() and any(p.glob("*/seed-*.json"))}


def _delta(cell: Mapping[str, Any]) -> str:
    d = cell.get("delta")
    if d is None:
        return ""
    lo, hi = d["ci95"]
    return f"{d['mean']:+.3f} n = 1" if lo is None else f"{d['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def table(summary: Mapping[str, Any]) -> str:
    """Per float path, decoding and arm (the start first): each measure's seed mean, and the paired difference
    to the control with its interval.

    Example:
        >>> cell = lambda m, d=None: {"mean": m, "per_seed": [m], **({"delta": d} if d else {})}
        >>> d = {"mean": 0.1, "ci95": [-0.05, 0.25]}
        >>> arm = {"seeds": [0], **{k: {m: cell(0.5, d) for m in MEASURES} for k in DECODINGS}}
        >>> start = {k: {m: 0.4 for m in MEASURES} for k in DECODINGS}
        >>> lines = table({"native": {"start": start, "arms": {"oracle": arm}}}).splitlines()
        >>> lines[2]
        '| native | greedy | start (before RL) | | 0.400 | 0.400 | 0.40 | 0.400 |'
        >>> lines[3]
        '| native | greedy | oracle | 0 | 0.500 +0.100 [-0.050, +0.250] | 0.500 +0.100 [-0.050, +0.250] \
| 0.50 +0.100 [-0.050, +0.250] | 0.500 +0.100 [-0.050, +0.250] |'
    """
    lines = [
        "| path | decoding | arm | seeds | success (− GRPO [95% CI]) | mean reward | questions | facts uncovered |",
        "|---|---|---|---|---|---|---|---|",
    ]
    fmt = {"success": "{:.3f}", "reward": "{:.3f}", "questions": "{:.2f}", "facts": "{:.3f}"}
    for path, s in summary.items():
        for decoding in DECODINGS:
            if s.get("start"):
                cells = " | ".join(fmt[m].format(s["start"][decoding][m]) for m in MEASURES)
                lines.append(f"| {path} | {decoding} | start (before RL) | | {cells} |")
            for arm, e in s["arms"].items():
                cells = " | ".join(
                    f"{fmt[m].format(e[decoding][m]['mean'])} {_delta(e[decoding][m])}".strip() for m in MEASURES
                )
                lines.append(f"| {path} | {decoding} | {arm} | {' '.join(map(str, e['seeds']))} | {cells} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    if args.action == "check":
        args.out, args.runs, args.seeds, args.steps, args.eval_episodes = (
            CHECK_OUT, f"{CHECK_OUT}/runs", [0], 1, 4
        )  # fmt: skip
    if args.action in ("run", "check"):
        run_start(args)
        for arm, seed in pending(args.out, args.arms, args.path, args.seeds):
            run_seed(args, arm, seed)
    summary = summarize(Path(args.out))
    if args.action == "report":
        write_result(Path(args.out) / "summary.json", {"paths": summary}, started=time.time())
    print(table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
