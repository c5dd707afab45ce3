"""One run harness for every training loop: the lock, ``config.json``, resume, metrics, cadence and curves.

A run folder (docs/viewer.md, "What it reads"; docs/architecture.md, "One run harness")::

    run/
      turnkit.lock      held while a process writes the folder (turnkit.train.runlock)
      config.json       the run's settings
      metrics.jsonl     one record per step (and per evaluation)
      checkpoints/      step-NNNNNN/: state.json (step, config, the loop's small state) + the loop's files
      curves.png        the run's main metrics against the step

:class:`Run` owns that scaffolding for one call of a training loop (GRPO, IQLearn, DPO); the loop keeps only
what is its own: the step, what a checkpoint holds (a ``write`` callable and a ``load`` callable) and which
curves to draw. A resumed run starts from the newest intact checkpoint (:func:`~turnkit.checkpoint.load_newest_intact`
skips damaged ones with a warning), refuses a checkpoint whose config differs outside the loop's resumable keys
(a :class:`~turnkit.errors.ConfigError` naming them), and drops the metrics records after the checkpoint's
step, so the log reads as one uninterrupted run. :class:`Cadence` says when periodic work (evaluation,
checkpoints) is due.

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> def one_run(steps):
    ...     saving = Cadence(every=2, last=steps)
    ...     with Run(folder, {"lr": 0.1, "steps": steps}, resumable={"steps"}) as run:
    ...         start, _ = run.start(lambda ckpt, state: None, resume=True)
    ...         for step in range(start + 1, steps + 1):
    ...             run.log({"step": step, "loss": 1.0 / step})
    ...             if saving.due(step):
    ...                 run.save(step, lambda tmp: None)
    ...         return start, [r["step"] for r in run.history()]
    >>> one_run(3)  # a fresh run: checkpoints after steps 2 and 3
    (0, [1, 2, 3])
    >>> one_run(5)  # resumed from step 3 with a larger step budget
    (3, [1, 2, 3, 4, 5])
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from turnkit.checkpoint import (
    checkpoint_path,
    load_newest_intact,
    read_checkpoint_json,
    reading,
    stage_checkpoint,
    write_json,
)
from turnkit.errors import ConfigError
from turnkit.train.metrics import MetricsLog, plot_curves, read_metrics
from turnkit.train.runlock import RunLock

T = TypeVar("T")

STATE = "state.json"
"""A checkpoint's small state: ``step``, ``config`` and whatever the loop adds."""


# ---------------------------------------------------------------------------------------------- cadence


@dataclass(frozen=True)
class Cadence:
    """When periodic work is due: every ``every`` steps and after the ``last``.

    Attributes:
        every: The period in steps (``0``: only after the last step).
        last: The run's last step.
        enabled: ``False``: never due (e.g. no evaluation episodes).

    Example:
        >>> [s for s in range(1, 8) if Cadence(every=3, last=7).due(s)]
        [3, 6, 7]
        >>> [s for s in range(1, 8) if Cadence(every=0, last=7).due(s)]
        [7]
        >>> Cadence(every=3, last=7, enabled=False).due(3)
        False
    """

    every: int
    last: int
    enabled: bool = True

    def due(self, step: int) -> bool:
        """Whether the work is due after ``step``."""
        return self.enabled and ((self.every > 0 and step % self.every == 0) or step == self.last)


# ---------------------------------------------------------------------------------------------- configs


def plain(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config as it reads back from JSON (tuples as lists), so a saved and a live config compare equal.

    Example:
        >>> plain({"targets": ("q", "v"), "lr": 0.1})
        {'targets': ['q', 'v'], 'lr': 0.1}
    """
    return json.loads(json.dumps(dict(config)))


def config_diff(saved: Mapping[str, Any], current: Mapping[str, Any], allowed: Iterable[str] = ()) -> list[str]:
    """The keys whose values differ between two configs, sorted, leaving out ``allowed`` ones.

    An allowed key may be dotted (``eval.every``): that table's other keys are then compared one by one, and a
    difference names the dotted key.

    Example:
        >>> config_diff({"lr": 0.1, "steps": 5}, {"lr": 0.2, "steps": 9, "seed": 0}, allowed={"steps"})
        ['lr', 'seed']
        >>> config_diff({"eval": {"every": 5, "episodes": 10}}, {"eval": {"every": 2, "episodes": 20}}, {"eval.every"})
        ['eval.episodes']
    """
    allowed = set(allowed)
    diff = []
    for key in set(saved) | set(current):
        if key in allowed:
            continue
        inner = {a.partition(".")[2] for a in allowed if a.startswith(f"{key}.")}
        old, new = saved.get(key), current.get(key)
        if inner and isinstance(old, Mapping) and isinstance(new, Mapping):
            diff += [f"{key}.{k}" for k in config_diff(old, new, inner)]
        elif old != new:
            diff.append(key)
    return sorted(diff)


def _lookup(config: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    """``(found, value)`` of a dotted key in a config."""
    value: Any = config
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def check_resumable(ckpt: Path, saved: Mapping[str, Any], current: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """Refuse to resume ``ckpt`` when its run's config differs from ``current`` outside ``allowed`` keys.

    Keys only the saved config has are ignored (a field that no longer exists).

    Raises:
        ConfigError: Naming every differing key with its old and new value.

    Example:
        >>> check_resumable(Path("run"), {"lr": 0.1, "steps": 5}, {"lr": 0.1, "steps": 9}, {"steps"})
        >>> check_resumable(Path("run"), {"lr": 0.1}, {"lr": 0.2}, ())
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: cannot resume run: the config differs (lr: 0.1 -> 0.2); use a new out_dir
        >>> check_resumable(Path("run"), {"eval": {"every": 5, "seed": 1}}, {"eval": {"every": 2, "seed": 3}},
        ...                 {"eval.every"})
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: cannot resume run: the config differs (eval.seed: 1 -> 3); use a new out_dir
    """
    diff = [k for k in config_diff(saved, current, allowed) if _lookup(current, k)[0]]
    if diff:
        changes = ", ".join(f"{k}: {_lookup(saved, k)[1]!r} -> {_lookup(current, k)[1]!r}" for k in diff)
        raise ConfigError(f"cannot resume {ckpt}: the config differs ({changes}); use a new out_dir")


# ---------------------------------------------------------------------------------------------- checkpoints


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    config: Mapping[str, Any],
    write: Callable[[Path], None],
    state: Mapping[str, Any] | None = None,
    *,
    keep: int = 2,
) -> Path:
    """Write an atomic checkpoint of ``step``: the loop's files (``write`` fills the folder) and ``state.json``.

    Args:
        run_dir: The run folder.
        step: The step the checkpoint captures.
        config: The run's config (stored in ``state.json``, checked on resume).
        write: Writes the loop's files into the (temporary) checkpoint folder it is given.
        state: More JSON-ready state for ``state.json`` (RNG states, sample pools, ...).
        keep: How many checkpoints to keep (:func:`~turnkit.checkpoint.stage_checkpoint`).

    Returns:
        The checkpoint folder.

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> ckpt = save_checkpoint(run, 4, {"lr": 0.1}, lambda tmp: None, {"pool": [1, 2]})
        >>> ckpt.name, read_checkpoint_json(ckpt / STATE)
        ('step-000004', {'config': {'lr': 0.1}, 'pool': [1, 2], 'step': 4})
    """
    with stage_checkpoint(Path(run_dir), step, keep=keep) as tmp:
        write(tmp)
        write_json(tmp / STATE, {**(state or {}), "step": step, "config": plain(config)})
    return checkpoint_path(Path(run_dir), step)


def read_state(
    ckpt: Path,
    config: Mapping[str, Any],
    resumable: Iterable[str] = (),
    defaults: Mapping[str, Any] | None = None,
    upgrade: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Read a checkpoint's ``state.json`` and check that it belongs to a run with this config.

    Args:
        ckpt: The checkpoint folder.
        config: The current run's config.
        resumable: Keys whose values a resumed run may change (dotted inside a table: ``eval.every``).
        defaults: Values of keys the checkpoint's config lacks (fields newer than the checkpoint).
        upgrade: Rewrites a checkpoint's config into the current shape first (keys that moved into tables).

    Returns:
        The state, with ``step`` an int.

    Raises:
        CheckpointError: ``state.json`` is missing, unreadable or lacks ``step``/``config``.
        ConfigError: The configs differ outside ``resumable`` (:func:`check_resumable`).

    Example:
        >>> import tempfile
        >>> ckpt = save_checkpoint(Path(tempfile.mkdtemp()), 2, {"lr": 0.1}, lambda tmp: None)
        >>> read_state(ckpt, {"lr": 0.1})["step"]
        2
        >>> read_state(ckpt, {"lr": 0.5})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: cannot resume .../step-000002: the config differs (lr: 0.1 -> 0.5); use a ...
    """
    state = read_checkpoint_json(ckpt / STATE)
    with reading(ckpt / STATE, base=ckpt):
        state["step"], saved = int(state["step"]), dict(state["config"])
        if upgrade is not None:
            saved = upgrade(saved)
    check_resumable(ckpt, {**(defaults or {}), **saved}, plain(config), resumable)
    return state


# ---------------------------------------------------------------------------------------------- the run


class Run:
    """A run folder held by one training call (see the module docstring); use it as a context manager.

    Entering takes the run lock and opens ``metrics.jsonl``; leaving releases the lock (also on errors).

    Args:
        run_dir: The run folder (created if missing).
        config: The run's config as JSON-ready data (``config.json``, and every checkpoint's ``state.json``).
        resumable: Config keys a resumed run may change; any other difference refuses the checkpoint.
        defaults: Values of keys an older checkpoint's config lacks.
        upgrade: Rewrites an older checkpoint's config into the current shape (see :func:`read_state`).
        tensorboard: Also write the metrics as TensorBoard events to ``run_dir/tb``.

    Raises:
        RunLockedError: On entering, when another process holds the folder.
        ConfigError: On entering, with ``tensorboard`` but no ``tensorboard`` package.
    """

    def __init__(
        self,
        run_dir: str | Path,
        config: Mapping[str, Any],
        *,
        resumable: Iterable[str] = (),
        defaults: Mapping[str, Any] | None = None,
        upgrade: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        tensorboard: bool = False,
    ) -> None:
        self.dir = Path(run_dir)
        self.config = plain(config)
        self.resumable = frozenset(resumable)
        self.defaults = dict(defaults or {})
        self.upgrade = upgrade
        self.tensorboard = tensorboard
        self.metrics_path = self.dir / "metrics.jsonl"
        self._lock = RunLock(self.dir)
        self._metrics: MetricsLog | None = None

    def __enter__(self) -> Run:
        self._lock.acquire()
        try:
            self._metrics = MetricsLog(self.metrics_path, tensorboard_dir=self.dir / "tb" if self.tensorboard else None)
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._metrics = None
        self._lock.release()

    @property
    def metrics(self) -> MetricsLog:
        """The run's metrics log (only inside ``with``)."""
        if self._metrics is None:
            raise RuntimeError(f"Run({str(self.dir)!r}) is used outside its `with` block")
        return self._metrics

    def read_state(self, ckpt: Path) -> dict[str, Any]:
        """:func:`read_state` with this run's config, resumable keys and defaults."""
        return read_state(ckpt, self.config, self.resumable, self.defaults, self.upgrade)

    def start(self, load: Callable[[Path, dict[str, Any]], T], *, resume: bool) -> tuple[int, T | None]:
        """Begin the run: resume from the newest intact checkpoint (or start fresh), then write ``config.json``.

        Args:
            load: Given a checkpoint folder and its checked state (:meth:`read_state`), reads the loop's files
                and then restores them in place (read everything before changing anything, and raise
                :class:`~turnkit.errors.CheckpointError` for a file that cannot be read; see
                :func:`~turnkit.checkpoint.reading`). Its result is handed back.
            resume: Continue from a checkpoint if there is one. Without it (or without any checkpoint) the run
                starts fresh and owns its log: an old ``metrics.jsonl`` is removed.

        Returns:
            ``(the checkpoint's step, load's result)``, or ``(0, None)`` for a fresh start. A resumed run's
            ``metrics.jsonl`` keeps only the records up to that step.

        Raises:
            CheckpointError: There are checkpoints, but none is intact.
            ConfigError: The newest intact checkpoint belongs to a run with another config.
        """

        def restore(ckpt: Path) -> tuple[int, T]:
            state = self.read_state(ckpt)
            return state["step"], load(ckpt, state)

        found = load_newest_intact(self.dir, restore) if resume else None
        start, value = found[1] if found is not None else (0, None)
        if found is not None:
            self.metrics.truncate_after(start)
        elif self.metrics_path.exists():
            self.metrics_path.unlink()
        self.write_config()
        return start, value

    def write_config(self) -> None:
        """Write ``config.json`` (atomically); :meth:`start` does it once the run is known to be this one."""
        write_json(self.dir / "config.json", self.config)

    def log(self, record: Mapping[str, Any]) -> None:
        """Append a metrics record (it needs a ``step``)."""
        self.metrics.write(record)

    def save(self, step: int, write: Callable[[Path], None], state: Mapping[str, Any] | None = None) -> Path:
        """:func:`save_checkpoint` of ``step`` with this run's config."""
        return save_checkpoint(self.dir, step, self.config, write, state)

    def history(self) -> list[dict[str, Any]]:
        """Every metrics record of the run so far, in order."""
        return read_metrics(self.metrics_path) if self.metrics_path.exists() else []

    def finish(self, keys: Sequence[str], title: str = "") -> list[dict[str, Any]]:
        """The run's history, with ``keys`` drawn against the step into ``curves.png`` (if there is any)."""
        history = self.history()
        if history:
            plot_curves(history, keys, self.dir / "curves.png", title=title)
        return history

    def __repr__(self) -> str:
        return f"Run({str(self.dir)!r}, locked={self._lock.locked})"


__all__ = ["Cadence", "Run", "check_resumable", "config_diff", "plain", "read_state", "save_checkpoint"]
