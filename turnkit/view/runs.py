"""What the Runs view shows of one folder: config, metric series, evaluation tables, checkpoints and pictures.

Everything is read tolerantly: a missing ``metrics.jsonl``, a truncated line or a config that is not JSON
becomes a :class:`~turnkit.view.folders.Problem` in the answer, next to whatever could be read.

Evaluation rows (``evals``) come from three places, each with its 95% interval:

* ``eval_*`` records in ``metrics.jsonl`` (the training loops' periodic evaluations: ``eval_success``,
  ``eval_success_lo``/``_hi``, ``eval_reward``...), one row per step;
* an eval folder's ``summary.json`` (:class:`~turnkit.rollout.evaluate.EvalSummary`);
* a quickstart's ``summary.json`` (before and after RL, greedy and sampled).

Example:
    >>> import tempfile
    >>> from turnkit.train.metrics import MetricsLog
    >>> d = Path(tempfile.mkdtemp())
    >>> log = MetricsLog(d / "metrics.jsonl")
    >>> log.write({"step": 1, "reward_mean": 0.1}); log.write({"step": 2, "reward_mean": 0.3})
    >>> log.write({"step": 2, "eval_success": 0.5, "eval_success_lo": 0.3, "eval_success_hi": 0.7})
    >>> run = read_run(d, d)
    >>> run["series"]["reward_mean"], [(e["label"], e["success"], e["lo"]) for e in run["evals"]]
    ([[1, 0.1], [2, 0.3]], [('step 2', 0.5, 0.3)])
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from turnkit.view.folders import Problem, read_json, read_jsonl, relative

IMAGES = ("curves.png", "quickstart.png")
"""Pictures a run writes itself (shown under the curves)."""


def read_run(folder: Path, root: Path) -> dict[str, Any]:
    """The Runs view's data for ``folder`` (see the module docstring); never raises on bad files.

    Returns:
        ``{"config", "series", "keys", "evals", "checkpoints", "images", "synth", "problems"}``: ``series``
        maps each numeric metric to its ``[step, value]`` points, ``keys`` lists them in display order.
    """
    problems: list[Problem] = []
    config = None
    if (folder / "config.json").exists():
        config, problem = read_json(folder / "config.json", root)
        problems.extend([problem] if problem else [])
    records: list[dict[str, Any]] = []
    if (folder / "metrics.jsonl").exists():
        rows, bad = read_jsonl(folder / "metrics.jsonl", root)
        records = [r for _, r in rows]
        problems.extend(bad)
    elif config is not None and not (folder / "summary.json").exists():
        problems.append(Problem(relative(root, folder / "metrics.jsonl"), None, "missing (no step has been logged)"))
    series = metric_series(records)
    evals = metric_evals(records)
    summary = None
    if (folder / "summary.json").exists():
        summary, problem = read_json(folder / "summary.json", root)
        problems.extend([problem] if problem else [])
        evals.extend(summary_evals(summary))
    synth = None
    if (folder / "state.json").exists() and any(folder.glob("iter_*")):
        state, problem = read_json(folder / "state.json", root)
        problems.extend([problem] if problem else [])
        if isinstance(state, dict) and isinstance(state.get("iterations"), list):
            synth = [_flat(it) for it in state["iterations"] if isinstance(it, dict)]
    return {
        "config": config,
        "summary": summary if isinstance(summary, dict) else None,
        "series": series,
        "keys": order_keys(series),
        "evals": evals,
        "checkpoints": checkpoints(folder),
        "images": [name for name in IMAGES if (folder / name).is_file()],
        "synth": synth,
        "problems": [p.to_dict() for p in problems],
    }


def metric_series(records: list[dict[str, Any]]) -> dict[str, list[list[float]]]:
    """Each finite numeric metric as ``[[step, value], ...]`` in log order (``step`` itself left out).

    Example:
        >>> metric_series([{"step": 1, "loss": 2.0, "note": "x"}, {"step": 2, "loss": float("nan")}])
        {'loss': [[1, 2.0]]}
    """
    out: dict[str, list[list[float]]] = {}
    for r in records:
        step: Any = r.get("step")
        if not _number(step):
            continue
        for key, value in r.items():
            if key != "step" and _number(value):
                out.setdefault(key, []).append([step, value])
    return out


PREFERRED = (
    "reward_mean",
    "success_rate",
    "eval_success",
    "eval_reward",
    "loss",
    "kl",
    "approx_kl",
    "policy_lag",
    "critic_reward_mean",
)
"""Metrics shown first, in this order; then each critic's (``name/...``), then the rest alphabetically."""


def order_keys(series: Mapping[str, Any]) -> list[str]:
    """Metric names in display order: :data:`PREFERRED`, then the critics' (``name/...``), then the rest.

    Example:
        >>> order_keys({"zeta": [], "length/total": [], "kl": [], "reward_mean": []})
        ['reward_mean', 'kl', 'length/total', 'zeta']
    """
    first = [k for k in PREFERRED if k in series]
    critic = sorted(k for k in series if k not in first and ("critic" in k or "/" in k))
    rest = sorted(k for k in series if k not in first and k not in critic)
    return first + critic + rest


def metric_evals(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One evaluation row per metrics record holding ``eval_success``."""
    out = []
    for r in records:
        if not _number(r.get("eval_success")):
            continue
        out.append(
            _row(
                f"step {r.get('step')}",
                r["eval_success"],
                r.get("eval_success_lo"),
                r.get("eval_success_hi"),
                reward=r.get("eval_reward"),
                episodes=r.get("eval_episodes"),
                errors=r.get("eval_errors"),
                turns=r.get("eval_turns"),
            )
        )
    return out


def summary_evals(summary: Any) -> list[dict[str, Any]]:
    """Evaluation rows of an eval ``summary.json`` or a quickstart ``summary.json`` (``[]`` for others).

    Example:
        >>> rows = summary_evals({"success_rate": 0.25, "success_ci95": [0.1, 0.5], "mean_reward": 0.3,
        ...                       "mean_reward_ci95": [0.2, 0.4], "episodes": 8, "errors": {"timeout": 1}})
        >>> rows[0]["label"], rows[0]["hi"], rows[0]["errors"]
        ('summary', 0.5, 1)
    """
    if not isinstance(summary, dict):
        return []
    if _number(summary.get("success_rate")):
        lo, hi = _pair(summary.get("success_ci95"))
        rlo, rhi = _pair(summary.get("mean_reward_ci95"))
        errors = summary.get("errors")
        return [
            _row(
                "summary",
                summary["success_rate"],
                lo,
                hi,
                reward=summary.get("mean_reward"),
                reward_lo=rlo,
                reward_hi=rhi,
                episodes=summary.get("episodes"),
                errors=sum(errors.values()) if isinstance(errors, dict) else errors,
                turns=summary.get("mean_turns"),
            )
        ]
    rows = []
    parts = [("greedy", summary)]
    if isinstance(summary.get("sampled"), dict):
        parts.append((f"sampled T={summary['sampled'].get('temperature', '?')}", summary["sampled"]))
    for decoding, part in parts:
        for when in ("before", "after"):
            e = part.get(when)
            if isinstance(e, dict) and _number(e.get("success")):
                lo, hi = _pair(e.get("ci95"))
                label = f"{'SFT start' if when == 'before' else 'after RL'}, {decoding}"
                rows.append(_row(label, e["success"], lo, hi, episodes=e.get("episodes"), errors=e.get("errors"),
                                 turns=e.get("mean_turns")))  # fmt: skip
    return rows


def checkpoints(folder: Path) -> list[dict[str, Any]]:
    """The folder's checkpoints (``checkpoints/step-NNNNNN``), oldest first, with their files.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp()); (d / "checkpoints" / "step-000010").mkdir(parents=True)
        >>> checkpoints(d)
        [{'name': 'step-000010', 'step': 10, 'files': []}]
    """
    base = folder / "checkpoints"
    if not base.is_dir():
        return []
    out = []
    for ckpt in sorted(base.iterdir()):
        if not ckpt.is_dir() or not ckpt.name.startswith("step-"):
            continue
        try:
            step: int | None = int(ckpt.name.split("-", 1)[1])
        except ValueError:
            step = None
        out.append({"name": ckpt.name, "step": step, "files": sorted(p.name for p in ckpt.iterdir())})
    return out


def _row(label: str, success: Any, lo: Any, hi: Any, **more: Any) -> dict[str, Any]:
    return {"label": label, "success": success, "lo": lo, "hi": hi, **more}


def _pair(value: Any) -> tuple[Any, Any]:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return value[0], value[1]
    return None, None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _flat(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested record flattened to ``a.b`` keys (a synth iteration's search, DPO and eval numbers)."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{name}."))
        else:
            out[name] = value
    return out
