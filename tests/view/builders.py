"""Small real folders for the viewer, written by turnkit's own writers (Run, EpisodeSink, write_jsonl, SearchTree).

Used by tests/view and by benchmarks/viewer_screenshots.py (the docs' pictures).
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

from turnkit.rollout.evaluate import EpisodeSink, summarize, write_evaluation
from turnkit.rollout.records import trajectory_to_record, write_jsonl
from turnkit.search.pairs import PairConfig, tree_pairs, write_pairs
from turnkit.search.tree import SearchTree
from turnkit.train.run import Run
from turnkit.types import AgentTurn, ErrorCause, Step, Task, Trajectory, TrajectoryError


def episode(seed: int, *, error: bool = False) -> Trajectory:
    """A math-like episode: a python tool call, then an answer; odd seeds answer wrong, seed % 7 == 3 errors."""
    a, b = seed % 10, seed % 7
    task = Task(f"t-{seed}", f"What is {a}+{b}?", privileged={"answer": str(a + b), "hidden_tests": [f"{a}+{b}"]},
                family="math")  # fmt: skip
    answer = a + b if seed % 2 == 0 else a + b + 1
    tool = Step(
        f"What is {a}+{b}? Reply with ANSWER: <value>.",
        AgentTurn(f"<python>print({a}+{b})</python>", (11, 12, 13), (-0.1, -0.2, -0.3)),
        0.0,
        info={"tool": {"name": "python", "status": "ok"}, "turn": 1},
    )
    last = Step(
        f"{a + b}\n",
        AgentTurn(f"ANSWER: {answer}", (21, 22), (-0.05, -0.4)),
        1.0 if answer == a + b else 0.0,
        terminated=True,
        info={"success": answer == a + b, "turn": 2},
    )
    steps = (tool,) if error else (tool, last)
    return Trajectory(
        env_id="turnkit/MathEpisodes-v0",
        seed=seed,
        steps=steps,
        initial_observation=tool.observation,
        final_observation="" if error else ("Correct." if answer == a + b else "Wrong."),
        task=task,
        error=TrajectoryError(ErrorCause.TIMEOUT, "episode exceeded its 30 s budget", step=1) if error else None,
    )


def episodes(n: int, first: int = 0) -> list[Trajectory]:
    """``n`` episodes with seeds ``first ..``; seeds with ``seed % 7 == 3`` errored."""
    return [episode(s, error=s % 7 == 3) for s in range(first, first + n)]


def write_run(folder: Path, steps: int = 12) -> Path:
    """A training run folder as the GRPO loop writes it: config.json, metrics.jsonl (with evaluations), checkpoints."""
    config = {"env_id": "turnkit/MathEpisodes-v0", "lr": 5e-4, "steps": steps, "critic": {"length": {}}}
    with Run(folder, config) as run:
        run.start(lambda ckpt, state: None, resume=False)
        for step in range(1, steps + 1):
            run.log({"step": step, "reward_mean": step / steps, "success_rate": min(1.0, 0.2 + step / steps),
                     "loss": 1.0 / step, "approx_kl": 1e-3 * step, "policy_lag": step % 2,
                     "length/total": -0.01 * step})  # fmt: skip
            if step % 6 == 0:
                success = min(0.9, 0.3 + step / 40)
                run.log({"step": step, "eval_success": success, "eval_success_lo": round(success - 0.1, 6),
                         "eval_success_hi": round(min(1.0, success + 0.1), 6), "eval_reward": 0.3, "eval_episodes": 100,
                         "eval_errors": 1, "eval_turns": 2.0})  # fmt: skip
                run.save(step, lambda tmp: (tmp / "model.txt").write_text("weights"))
    return folder


def write_eval(folder: Path, n: int = 60) -> Path:
    """An eval folder as ``turnkit eval`` writes it (EpisodeSink), with its summary."""
    trajs = episodes(n)
    sink = EpisodeSink(folder)
    sink(trajs)
    sink.finish(summarize("turnkit/MathEpisodes-v0", "id", 0, trajs, 1.0))
    return folder


def write_privileged_eval(folder: Path, n: int = 6) -> Path:
    """Episodes written with their privileged data and token ids (``write_jsonl(include_privileged=True)``)."""
    folder.mkdir(parents=True, exist_ok=True)
    trajs = episodes(n)
    write_evaluation(folder, trajs, summarize("turnkit/MathEpisodes-v0", "id", 0, trajs, 1.0))
    write_jsonl(str(folder / "trajectories.jsonl"), trajs, include_privileged=True, tokens=True)
    return folder


def search_tree(seed: int) -> SearchTree:
    """A searched tree: two first turns (one right, one wrong), the right one expanded twice, committed."""
    tree = SearchTree(env_id="turnkit/MathEpisodes-v0", seed=seed, observation="What is 2+2?", meta={"search": "mcts"})
    think = tree.add_child(0, AgentTurn("<python>print(2+2)</python>"), observation="4")
    wrong = tree.add_child(0, AgentTurn("ANSWER: 5"), observation="Wrong.", terminal=True, info={"success": False})
    good = tree.add_child(think, AgentTurn("ANSWER: 4"), observation="Correct.", env_reward=1.0, terminal=True,
                          info={"success": True})  # fmt: skip
    bad = tree.add_child(think, AgentTurn("ANSWER: 3"), observation="Wrong.", terminal=True, info={"success": False})
    for node, q, visits in ((0, 0.4, 10), (think, 0.6, 7), (wrong, -1.0, 3), (good, 1.0, 5), (bad, -1.0, 2)):
        tree.node(node).update(q=q, visits=visits, value=q)
    tree.commit(good)
    return tree


def write_synth(folder: Path, seeds: tuple[int, ...] = (0, 1)) -> Path:
    """A synth folder as ``turnkit synth`` lays it out: state.json, config.json, iter_000/trees, pairs.jsonl."""
    iteration = folder / "iter_000"
    pairs = []
    for seed in seeds:
        tree = search_tree(seed)
        tree.save(iteration / "trees" / f"seed_{seed}.json")
        pairs.extend(tree_pairs(tree, PairConfig()))
    write_pairs(pairs, iteration / "pairs.jsonl")
    write_pairs(pairs, folder / "dataset.jsonl")
    metrics = {"iteration": 0, "tasks": len(seeds), "pairs": len(pairs), "search_success_rate": 1.0}
    (iteration / "metrics.json").write_text(json.dumps(metrics))
    config = {"env_id": "turnkit/MathEpisodes-v0", "iterations": 1}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "state.json").write_text(json.dumps({"version": 1, "config": config, "iterations": [metrics]}))
    return folder


def write_broken(folder: Path) -> Path:
    """A run whose metrics.jsonl ends in a cut line, an eval file with a bad line in the middle, a cut tree."""
    write_run(folder / "cut-run", steps=3)
    with open(folder / "cut-run" / "metrics.jsonl", "a", encoding="utf-8") as f:
        f.write('{"step": 4, "reward_me')
    write_eval(folder / "bad-eval", n=5)
    path = folder / "bad-eval" / "trajectories.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(2, "this is not JSON\n")
    path.write_text("".join(lines), encoding="utf-8")
    (folder / "no-metrics").mkdir(parents=True)
    (folder / "no-metrics" / "config.json").write_text('{"lr": 0.1}')
    write_synth(folder / "cut-tree")
    tree = folder / "cut-tree" / "iter_000" / "trees" / "seed_1.json"
    text = tree.read_text(encoding="utf-8")
    tree.write_text(text[: text.index('"ANSWER: 4"') + 5], encoding="utf-8")  # cut inside a string
    return folder


def write_run_with_rollouts(folder: Path, steps: tuple[int, ...] = (2, 4)) -> Path:
    """A training run that kept its rollouts of ``steps`` (``rollouts/step-NNNNNN/``), as ``turnkit train`` does."""
    write_run(folder, steps=max(steps))
    for step in steps:
        write_scored_rollouts(folder / "rollouts" / f"step-{step:06d}")
    return folder


def write_scored_rollouts(folder: Path, n: int = 4) -> Path:
    """Training rollouts with what the learner saw per turn: each critic's reward, the advantage, the trained mask.

    The records are ``trajectory_to_record(tokens=True, include_privileged=True)`` rows plus the per-step keys
    docs/viewer.md describes (``critic_rewards``, ``advantage``, ``mask``); the last token of every turn is left
    untrained.
    """
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "trajectories.jsonl", "w", encoding="utf-8") as f:
        for t in episodes(n):
            rec = trajectory_to_record(t, tokens=True, include_privileged=True)
            for k, step in enumerate(rec["steps"]):
                step["critic_rewards"] = {"env": step["reward"], "length": -0.01 * len(step["action"])}
                step["advantage"] = round(0.5 - 0.25 * k, 3)
                step["mask"] = [1] * (len(step["token_ids"]) - 1) + [0]
            f.write(json.dumps(rec) + "\n")
    return folder


def write_png(path: Path, width: int, height: int, rgb: tuple[int, int, int] = (47, 111, 214)) -> Path:
    """A plain one-colour RGB PNG of ``width`` x ``height`` pixels (a stand-in for a run's matplotlib picture)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = (b"\x00" + bytes(rgb) * width) * height
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def write_quickstart_like(folder: Path, *, rollouts: int = 34, picture_width: int = 2310) -> Path:
    """A folder laid out as ``turnkit quickstart`` writes it, without training a model.

    ``summary.json`` (before/after RL, greedy and sampled) with a ``quickstart.png`` as wide as matplotlib draws
    it, four held-out evaluations under ``eval/``, and ``train/``: a run with its ``curves.png`` and ``rollouts``
    kept steps (``rollouts/step-NNNNNN``, every 10 steps as ``rollouts_every`` keeps them).
    """

    def result(success: float) -> dict[str, object]:
        return {"success": success, "ci95": [round(success - 0.1, 3), round(success + 0.1, 3)], "episodes": 60,
                "errors": 9, "mean_turns": 1.85}  # fmt: skip

    summary = {"env_id": "turnkit/MathEpisodes-v0", "seed": 0, "before": result(0.35), "after": result(0.6),
               "sampled": {"temperature": 1.0, "before": result(0.3), "after": result(0.55)}}  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    write_png(folder / "quickstart.png", picture_width, 700)
    for name in ("sft-greedy", "sft-sampled", "rl-greedy", "rl-sampled"):
        write_eval(folder / "eval" / name, n=12)
    write_run(folder / "train", steps=12)
    write_png(folder / "train" / "curves.png", picture_width, 600, rgb=(224, 123, 31))
    for k in range(1, rollouts + 1):
        write_scored_rollouts(folder / "train" / "rollouts" / f"step-{10 * k:06d}", n=2)
    return folder
