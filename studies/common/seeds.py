"""Per-seed result files of a resumable study: what is left to run, the files read back, paired differences.

A study that runs arm by arm and seed by seed writes one JSON file per (arm, seed) and skips the ones that
exist; its report pairs each arm's seeds with the control's same seeds.

Example:
    >>> pending(["grpo", "oracle"], [0, 1], done=lambda arm, seed: (arm, seed) == ("grpo", 0))
    [('oracle', 0), ('grpo', 1), ('oracle', 1)]
    >>> d = paired([0.1, 0.2, 0.3])  # mean 0.2, s = 0.1, t(0.975, 2) = 4.303: 0.2 -/+ 4.303 * 0.1 / sqrt(3)
    >>> round(d["mean"], 3), [round(x, 3) for x in d["ci95"]]
    (0.2, [-0.048, 0.448])
    >>> paired([0.05])
    {'mean': 0.05, 'ci95': [None, None]}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from turnkit.stats import mean_ci


def pending(arms: Sequence[str], seeds: Sequence[int], *, done: Callable[[str, int], bool]) -> list[tuple[str, int]]:
    """The (arm, seed) units not ``done`` yet, seed by seed (every arm's seed 0 before any seed 1)."""
    return [(arm, seed) for seed in seeds for arm in arms if not done(arm, seed)]


def paired(diffs: Sequence[float]) -> dict[str, Any]:
    """Mean of paired differences with its Student-t 95% interval (``None`` bounds below two pairs)."""
    if len(diffs) < 2:
        return {"mean": diffs[0], "ci95": [None, None]}
    mean, lo, hi = mean_ci(diffs)
    return {"mean": mean, "ci95": [lo, hi]}


def load_seeds(folder: Path) -> dict[int, dict[str, Any]]:
    """The ``seed-*.json`` files of one arm and float path, by their ``seed``."""
    files = sorted(folder.glob("seed-*.json"))
    return {d["seed"]: d for d in (json.loads(p.read_text()) for p in files)}
