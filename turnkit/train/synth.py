"""The iterative on-policy synthesis loop of MCTS-DPO: search -> pairs -> DPO -> search with the new policy.

Iteration ``i``:

1. **search**: for ``tasks_per_iteration`` fresh task seeds, run :class:`~turnkit.search.mcts.MCTS` (or
   best-of-N, for baselines) with the *current* policy (on-policy);
2. **pairs**: extract step-level preference pairs (:func:`~turnkit.search.pairs.tree_pairs`);
3. **DPO**: train the policy's LoRA adapter on this iteration's pairs
   (:func:`~turnkit.train.dpo.train_dpo`; the reference stays the adapter-disabled start policy);
4. optionally evaluate on held-out seeds.

Everything lands in the output directory, so a run can be inspected, shared and resumed::

    DIR/turnkit.lock                held while a run uses DIR (see turnkit.train.run and turnkit.train.runlock)
    DIR/config.json                 the config (as in state.json)
    DIR/state.json                  config, completed iterations and their metrics (written atomically)
    DIR/state.prev.json             the state before the last completed iteration (a fallback)
    DIR/dataset.jsonl               all pairs so far (TRL conversational DPO format)
    DIR/iter_000/trees/seed_S.json  every search tree (node-link JSON, see turnkit.search.tree)
    DIR/iter_000/pictures/seed_S.png / .html   pictures of the first few trees
    DIR/iter_000/pairs.jsonl        this iteration's pairs
    DIR/iter_000/adapter/           the LoRA adapter after this iteration's DPO (+ MANIFEST.json)
    DIR/iter_000/metrics.json       search, pair, DPO and eval numbers

Rerunning the same command resumes: finished iterations are skipped (the last adapter is loaded), and
inside an unfinished iteration the trees already on disk are reused. A different config for the same
directory is refused (except a larger ``iterations``), and so is a second process while the first still runs
(:class:`~turnkit.errors.RunLockedError`).

Damaged resume state is skipped with a :class:`~turnkit.errors.CheckpointWarning` naming the file and why:
an unreadable ``state.json`` falls back to ``state.prev.json`` (one iteration is redone); a damaged adapter
(checked against its manifest and read before use) falls back to the newest intact one, redoing the
iterations after it (their trees are reused); a damaged tree is searched again. Only when neither state
file is readable does the run stop, with a :class:`~turnkit.errors.CheckpointError` naming both.

Example:
    >>> import tempfile
    >>> from turnkit.agents.oracle import OracleAgent
    >>> cfg = SynthConfig("turnkit/MathEpisodes-v0", iterations=1, tasks_per_iteration=2, train=False,
    ...                   mcts=MCTSConfig(iterations=2, root_multiplier=1, n_actions=1), render_trees=0)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     result = synthesize(cfg, OracleAgent(), d, progress=False)
    >>> result.iterations[0]["search_success_rate"], result.iterations[0]["pairs"]  # one child per node: no pairs
    (1.0, 0)
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import gymnasium

from turnkit.agents.base import Agent
from turnkit.checkpoint import check_manifest, reading, stage_dir, write_json
from turnkit.configs import check_choice, check_int, from_dict
from turnkit.envs import registration as _registration  # noqa: F401  (registers the built-in env ids)
from turnkit.errors import CheckpointError, CheckpointWarning, ConfigError, DataError
from turnkit.search.best_of_n import best_of_n_many
from turnkit.search.expand import SearchStats
from turnkit.search.mcts import MCTS, MCTSConfig
from turnkit.search.pairs import PairConfig, PreferencePair, read_pairs, tree_pairs, write_pairs
from turnkit.search.render import render_html, render_png
from turnkit.search.tree import SearchTree, jsonable
from turnkit.search.values import ValueFn
from turnkit.train.dpo import DPOConfig, upgrade_dpo_config
from turnkit.train.run import Run, config_diff

STATE_VERSION = 1
STATE, PREV_STATE = "state.json", "state.prev.json"
SearchKind = Literal["mcts", "best_of_n"]


@dataclass(frozen=True)
class SynthConfig:
    """Settings of :func:`synthesize`. Validated on construction.

    Example:
        >>> SynthConfig("turnkit/MathEpisodes-v0", search="beam")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: SynthConfig.search must be one of ['mcts', 'best_of_n'], got 'beam'
    """

    env_id: str
    """The registered env id."""
    iterations: int = 2
    """Search -> pairs -> DPO rounds."""
    tasks_per_iteration: int = 32
    """Fresh task seeds searched per iteration."""
    seed: int = 0
    """Base of the task seeds (iteration ``i`` uses ``seed * 10**6 + i * tasks_per_iteration + j``)."""
    split: str = "id"
    """Task split to search on."""
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Extra ``gymnasium.make`` arguments."""
    search: SearchKind = "mcts"
    """``"mcts"`` or ``"best_of_n"`` (pairs: best vs worst episode)."""
    best_of_n: int = 8
    """Episodes per task for ``search="best_of_n"``."""
    mcts: MCTSConfig = field(default_factory=MCTSConfig)
    """Search knobs."""
    pairs: PairConfig = field(default_factory=PairConfig)
    """Pair extraction rules."""
    dpo: DPOConfig = field(default_factory=DPOConfig)
    """DPO settings."""
    train: bool = True
    """Run DPO after each search (needs an ``HFPolicy``); off: synthesise data only."""
    render_trees: int = 2
    """Trees per iteration drawn as PNG + HTML."""
    eval_episodes: int = 0
    """Held-out episodes evaluated after each iteration (seeds from ``900_000_000``; 0: none)."""
    batch_tasks: int = 16
    """Tasks searched in lockstep, so that each policy call batches the leaves of all their trees."""

    def __post_init__(self) -> None:
        check_choice(self, "search", ("mcts", "best_of_n"))
        check_int(self, "iterations", "tasks_per_iteration", "best_of_n", "batch_tasks")
        check_int(self, "render_trees", "eval_episodes", low=0)

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-ready dict."""
        return jsonable(asdict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "config") -> SynthConfig:
        """Inverse of :meth:`to_dict`; an unknown key raises :class:`ConfigError` naming it and ``source``.

        Example:
            >>> cfg = SynthConfig("turnkit/MathEpisodes-v0", mcts=MCTSConfig(iterations=3))
            >>> SynthConfig.from_dict(cfg.to_dict()) == cfg
            True
            >>> SynthConfig.from_dict({"env_id": "x", "iteration": 3})
            Traceback (most recent call last):
            ...
            turnkit.errors.ConfigError: config: unknown SynthConfig key 'iteration' (did you mean 'iterations'?)
        """
        return from_dict(cls, data, source=source)

    def task_seeds(self, iteration: int) -> list[int]:
        """The task seeds searched in ``iteration``.

        Example:
            >>> SynthConfig("x", tasks_per_iteration=3, seed=1).task_seeds(1)
            [1000003, 1000004, 1000005]
        """
        base = self.seed * 1_000_000 + iteration * self.tasks_per_iteration
        return list(range(base, base + self.tasks_per_iteration))


@dataclass
class SynthResult:
    """What :func:`synthesize` returns.

    Attributes:
        out_dir: The output directory.
        iterations: One metrics dict per completed iteration (also in ``state.json``).
        pairs: Every pair of the completed iterations (also in ``dataset.jsonl``).
    """

    out_dir: Path
    iterations: list[dict[str, Any]]
    pairs: list[PreferencePair]


def synthesize(
    config: SynthConfig,
    agent: Agent,
    out_dir: str | Path,
    *,
    critic: ValueFn | None = None,
    progress: bool = True,
) -> SynthResult:
    """Run (or resume) the synthesis loop (see the module docstring).

    Args:
        config: The settings.
        agent: The policy: an :class:`~turnkit.agents.hf.HFPolicy` when ``config.train``; any agent otherwise.
        out_dir: Output directory (created; a previous run there with the same config is resumed).
        critic: Optional value function for MCTS node evaluation.
        progress: Show progress bars.

    Returns:
        Per-iteration metrics and all pairs.

    Raises:
        RunLockedError: Another process is using ``out_dir``.
        CheckpointError: Neither ``state.json`` nor ``state.prev.json`` of a previous run can be read.
    """
    with Run(out_dir, config.to_dict()) as run:
        return _synthesize(run, config, agent, critic=critic, progress=progress)


def _synthesize(run: Run, config: SynthConfig, agent: Agent, *, critic: ValueFn | None, progress: bool) -> SynthResult:
    out = run.dir
    state = _load_state(out, config)
    run.write_config()
    if config.train and not hasattr(agent, "sequence_logprobs"):
        raise ConfigError(
            f"DPO training needs an HFPolicy (got {type(agent).__name__}); use train=False to only synthesise data"
        )
    done = len(state["iterations"])
    if done and config.train:
        done = _restore_adapter(agent, out, state)
    for i in range(done, config.iterations):
        metrics = _iteration(config, agent, out, i, critic=critic, progress=progress)
        # the state before this iteration: the fallback if STATE is damaged
        write_json(out / PREV_STATE, jsonable(state))
        state["iterations"].append(metrics)
        write_json(out / STATE, jsonable(state))
        all_pairs = [p for k in range(i + 1) for p in read_pairs(_iter_dir(out, k) / "pairs.jsonl")]
        write_pairs(all_pairs, out / "dataset.jsonl")
    pairs = read_pairs(out / "dataset.jsonl") if (out / "dataset.jsonl").exists() else []
    return SynthResult(out_dir=out, iterations=list(state["iterations"]), pairs=pairs)


def _iter_dir(out: Path, i: int) -> Path:
    return out / f"iter_{i:03d}"


def _read_state(path: Path) -> tuple[dict[str, Any] | None, str]:
    """``(state, "")`` if ``path`` holds a readable synth state, else ``(None, why not)``."""
    if not path.exists():
        return None, "missing"
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"not valid JSON ({exc})"
    if not isinstance(state, dict) or not isinstance(state.get("iterations"), list):
        return None, "not a synth state (no list of iterations)"
    return state, ""


def _load_state(out: Path, config: SynthConfig) -> dict[str, Any]:
    path, prev = out / STATE, out / PREV_STATE
    fresh = {"version": STATE_VERSION, "config": config.to_dict(), "iterations": []}
    if not path.exists() and not prev.exists():
        write_json(path, jsonable(fresh))
        return fresh
    state, why = _read_state(path)
    if state is None:
        state, why_prev = _read_state(prev)
        if state is None:
            raise CheckpointError(
                f"no intact synth state in {out}: {path.name}: {why}; {prev.name}: {why_prev}; "
                "use another --out (the trees and adapters there are kept)",
                damaged=[(path, why), (prev, why_prev)],
            )
        if path.exists():
            os.replace(path, path.with_name(path.name + ".damaged"))
        warnings.warn(
            f"synth state {path} is damaged ({why}); resuming from {prev.name} "
            f"({len(state['iterations'])} completed iterations) instead",
            CheckpointWarning,
            stacklevel=3,
        )
    if state.get("version") != STATE_VERSION:
        raise DataError(f"unsupported synth state version {state.get('version')!r}", path=path)
    new, saved = config.to_dict(), dict(state.get("config", {}))
    if isinstance(saved.get("dpo"), Mapping):  # flat lr, lora_r ... of states written before DPOConfig's tables
        saved["dpo"] = upgrade_dpo_config(saved["dpo"])
    diff = config_diff(saved, new, allowed={"iterations"})
    if diff:
        raise ConfigError(f"{out} holds a synth run with a different config (fields {diff}); use another --out")
    if len(state["iterations"]) > config.iterations:
        raise ConfigError(f"{out} already has {len(state['iterations'])} iterations, more than {config.iterations}")
    state["config"] = new
    return state


def _adapter_problem(adapter: Path) -> str | None:
    """Why a saved adapter cannot be resumed from (manifest, then a full read), or ``None``."""
    why = check_manifest(adapter, required=False)  # adapters saved before manifests existed: read check only
    if why is not None:
        return why
    from peft import PeftConfig, load_peft_weights

    try:
        with reading(adapter, base=adapter.parent):
            PeftConfig.from_pretrained(str(adapter))
            load_peft_weights(str(adapter), device="cpu")
    except CheckpointError as exc:
        return str(exc)
    return None


def _restore_adapter(agent: Any, out: Path, state: dict[str, Any]) -> int:
    """Load the newest intact adapter of the completed iterations; returns the iteration to continue from.

    Damaged adapters of later iterations are skipped with a warning, and those iterations are redone.
    """
    done = len(state["iterations"])
    good = done - 1
    while good >= 0 and (why := _adapter_problem(_iter_dir(out, good) / "adapter")) is not None:
        start = f"iteration {good - 1}'s adapter" if good > 0 else "the start policy"
        warnings.warn(
            f"adapter {_iter_dir(out, good) / 'adapter'} is damaged ({why}); resuming from {start} and redoing "
            f"iterations {good}..{done - 1} (their saved trees are reused)",
            CheckpointWarning,
            stacklevel=3,
        )
        good -= 1
    if good < done - 1:
        del state["iterations"][good + 1 :]
        write_json(out / STATE, jsonable(state))
    if good >= 0:
        agent.load_adapter(_iter_dir(out, good) / "adapter")
    return good + 1


def _tree_intact(path: Path, seed: int, *, with_pairs: bool) -> bool:
    """Whether a saved tree (and, for best-of-N, its pairs file) can be reused; warns if it is damaged."""
    if not path.exists():
        return False
    pairs = path.with_name(f"seed_{seed}.pairs.jsonl")
    try:
        SearchTree.load(path)
        if with_pairs:
            read_pairs(pairs)
    except (DataError, OSError, UnicodeDecodeError, ValueError) as exc:
        detail = str(exc) if isinstance(exc, DataError) else f"{path}: {type(exc).__name__}: {exc}"
        warnings.warn(
            f"damaged search tree ({detail}); searching task seed {seed} again", CheckpointWarning, stacklevel=3
        )
        return False
    return True


def _search_chunk(
    config: SynthConfig, envs: list[gymnasium.Env], agent: Agent, seeds: list[int], salt: int, critic: ValueFn | None
) -> tuple[list[SearchTree], SearchStats, list[list[PreferencePair]]]:
    """Search a chunk of tasks in lockstep (one policy call per round across the chunk)."""
    if config.search == "mcts":
        results = MCTS(config.mcts, critic=critic).search_many(
            envs, agent, seeds=seeds, env_id=config.env_id, salt=salt
        )
        return [r.tree for r in results], results[0].stats, [tree_pairs(r.tree, config.pairs) for r in results]
    bon = best_of_n_many(envs, agent, seeds=seeds, n=config.best_of_n, env_id=config.env_id, salt=salt)
    found = [b.pair(require_success=config.pairs.require_success) for b in bon]
    return [b.tree for b in bon], bon[0].stats, [[p] if p is not None else [] for p in found]


def _iteration(
    config: SynthConfig, agent: Agent, out: Path, i: int, *, critic: ValueFn | None, progress: bool
) -> dict[str, Any]:
    from tqdm.auto import tqdm

    start = time.perf_counter()
    folder = _iter_dir(out, i)
    (folder / "trees").mkdir(parents=True, exist_ok=True)
    seeds = config.task_seeds(i)
    files = {seed: folder / "trees" / f"seed_{seed}.json" for seed in seeds}
    # the rest was searched before an interruption
    todo = [seed for seed in seeds if not _tree_intact(files[seed], seed, with_pairs=config.search != "mcts")]
    envs = [
        gymnasium.make(config.env_id, split=config.split, **dict(config.env_kwargs))
        for _ in range(min(config.batch_tasks, max(1, len(todo))))
    ]
    stats = SearchStats()
    bar = tqdm(total=len(seeds), desc=f"iter {i} {config.search}", disable=not progress, leave=False)
    bar.update(len(seeds) - len(todo))
    for c in range(0, len(todo), len(envs)):
        chunk = todo[c : c + len(envs)]
        trees, chunk_stats, found = _search_chunk(config, envs[: len(chunk)], agent, chunk, salt=i, critic=critic)
        stats.add(chunk_stats)
        for seed, tree, tree_found in zip(chunk, trees, found, strict=True):
            if config.search != "mcts":  # before the tree: a saved tree marks its task as done
                write_pairs(tree_found, folder / "trees" / f"seed_{seed}.pairs.jsonl")
            tree.save(files[seed])
        bar.update(len(chunk))
    bar.close()
    pairs, successes = [], 0
    for j, seed in enumerate(seeds):
        tree = SearchTree.load(files[seed])
        successes += int(tree.trajectory(tree.committed_path()[-1]).success)
        pairs.extend(tree_pairs(tree, config.pairs) if config.search == "mcts" else _stored_pairs(folder, seed))
        if j < config.render_trees:
            render_png(tree, folder / "pictures" / f"seed_{seed}.png")
            render_html(tree, folder / "pictures" / f"seed_{seed}.html")
    reused = len(seeds) - len(todo)
    write_pairs(pairs, folder / "pairs.jsonl")
    metrics: dict[str, Any] = {
        "iteration": i,
        "tasks": len(seeds),
        "trees_reused": reused,
        "search_success_rate": successes / len(seeds),
        "pairs": len(pairs),
        "search": stats.to_dict(),
    }
    if config.train:
        metrics["dpo"] = _train(config, agent, pairs, folder, progress=progress)
    if config.eval_episodes:
        metrics["eval"] = _evaluate(config, agent, progress=progress)
    metrics["seconds"] = time.perf_counter() - start
    write_json(folder / "metrics.json", jsonable(metrics))
    return metrics


def _stored_pairs(folder: Path, seed: int) -> list[PreferencePair]:
    path = folder / "trees" / f"seed_{seed}.pairs.jsonl"
    return read_pairs(path) if path.exists() else []


def _train(
    config: SynthConfig, agent: Any, pairs: list[PreferencePair], folder: Path, *, progress: bool
) -> dict[str, Any]:
    from turnkit.train.dpo import train_dpo

    if not agent.has_adapter:
        agent.attach_lora(
            r=config.dpo.lora.r,
            alpha=config.dpo.lora.alpha,
            target_modules=config.dpo.lora.targets,
            seed=config.dpo.seed,
        )
    summary: dict[str, Any] = {"pairs": len(pairs), "steps": 0}
    if pairs:
        history = train_dpo(agent, pairs, config.dpo, progress=progress, desc=f"iter {folder.name} dpo")
        last = [h for h in history if h["epoch"] == history[-1]["epoch"]]
        summary.update(
            steps=len(history),
            first_loss=history[0]["loss"],
            final_loss=sum(h["loss"] for h in last) / len(last),
            final_accuracy=sum(h["accuracy"] for h in last) / len(last),
            seconds=sum(h["seconds"] for h in history),
        )
    with stage_dir(folder / "adapter") as tmp:  # atomic, with a manifest a resume verifies
        agent.save_adapter(tmp)
    return summary


EVAL_SEED = 900_000_000
"""First held-out evaluation seed (training task seeds stay far below it)."""


def _evaluate(config: SynthConfig, agent: Agent, *, progress: bool) -> dict[str, Any]:
    from turnkit.rollout.evaluate import evaluate

    summary = evaluate(
        config.env_id,
        agent,
        episodes=config.eval_episodes,
        seed=EVAL_SEED,
        split=config.split,
        batch_size=64,
        env_kwargs=dict(config.env_kwargs),
        progress=progress,
    )
    return {"success_rate": summary.success_rate, "success_ci95": list(summary.success_ci95)}
