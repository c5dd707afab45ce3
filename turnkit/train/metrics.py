"""Metrics of a training run: a JSONL log (one record per step), optional TensorBoard, and PNG curves.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> run = Path(tempfile.mkdtemp())
    >>> log = MetricsLog(run / "metrics.jsonl")
    >>> log.write({"step": 1, "reward": 0.5}); log.write({"step": 2, "reward": 0.75})
    >>> [r["reward"] for r in read_metrics(run / "metrics.jsonl")]
    [0.5, 0.75]
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from turnkit.errors import ConfigError, DataError


class MetricsLog:
    """Appends one JSON record per line; optionally mirrors scalars to TensorBoard.

    Args:
        path: The JSONL file (parent directories are created).
        tensorboard_dir: If given, also write every finite numeric field of each record as a TensorBoard
            scalar (tag = the field name, step = the record's ``step``) to event files in this directory.

    Raises:
        ConfigError: ``tensorboard_dir`` is given but the ``tensorboard`` package is not installed. Raised
            here, at construction, so a run fails before any training work.
    """

    def __init__(self, path: str | Path, tensorboard_dir: str | Path | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tb = None
        if tensorboard_dir is not None:
            self._tb = _summary_writer(Path(tensorboard_dir))

    def write(self, record: Mapping[str, Any]) -> None:
        """Append a record (must contain ``"step"``)."""
        if "step" not in record:
            raise ValueError("a metrics record needs a 'step'")
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(dict(record), sort_keys=True) + "\n")
        if self._tb is not None:
            for key, value in record.items():
                if key != "step" and isinstance(value, (int, float)) and math.isfinite(value):
                    self._tb.add_scalar(key, value, int(record["step"]))
            self._tb.flush()

    def truncate_after(self, step: int) -> None:
        """Drop records with ``step > step`` (used when resuming from an older checkpoint)."""
        if not self.path.exists():
            return
        keep = [r for r in read_metrics(self.path) if r["step"] <= step]
        self.path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in keep), encoding="utf-8")


def _summary_writer(log_dir: Path) -> Any:
    """A ``torch.utils.tensorboard.SummaryWriter`` for ``log_dir``, or a :class:`ConfigError` naming the fix."""
    try:
        import tensorboard  # noqa: F401  (torch.utils.tensorboard needs it; check it first for a clear error)
    except ImportError as exc:
        raise ConfigError(
            f"tensorboard=True (TensorBoard events in {log_dir}) needs the `tensorboard` package, which is not "
            f"installed ({exc}); install it with `pip install tensorboard` or `pip install 'turnkit[train]'`, "
            "or set tensorboard=False"
        ) from None
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(log_dir))


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Read a metrics JSONL file; a malformed line raises :class:`DataError` with file and line."""
    out = []
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DataError(f"not valid JSON ({exc.msg})", path=path, line=lineno) from exc
    return out


def plot_curves(records: Sequence[Mapping[str, Any]], keys: Sequence[str], path: str | Path, title: str = "") -> None:
    """Plot ``keys`` against ``step`` into a PNG (one panel per key)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in keys if any(k in r for r in records)]
    fig, axes = plt.subplots(1, max(1, len(keys)), figsize=(4.2 * max(1, len(keys)), 3.2), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=False):
        pts = [(r["step"], r[key]) for r in records if key in r]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", lw=1.2)
        ax.set_xlabel("step")
        ax.set_title(key)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
