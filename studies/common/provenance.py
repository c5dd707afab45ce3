"""What produced a result: the machine record every study result file carries, and its writer.

A number measured on CPU moves with the float path (the CPU's instruction set, ``ATEN_CPU_CAPABILITY``), the
thread count and the library versions; a result file that does not say where it came from cannot be checked.
:func:`machine_record` collects that; :func:`write_result` writes a result with it, the exact command and the
wall time.

Example:
    >>> record = machine_record(command=["python", "studies/x.py", "--seeds", "0"])
    >>> sorted(k for k in ("cpu_model", "torch", "threads", "float_path", "command") if k in record)
    ['command', 'cpu_model', 'float_path', 'threads', 'torch']
    >>> record["command"]
    'python studies/x.py --seeds 0'
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

LOCK_FILE = Path(__file__).resolve().parents[2] / ".ci" / "constraints.txt"
"""The tested pins ``.ci/setup.sh`` installs (hashed into the record when present)."""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine_record(command: Sequence[str] | None = None) -> dict[str, Any]:
    """CPU model, torch threads and float path, library versions, lock-file hash and the command line.

    ``float_path`` is torch's CPU capability in use (e.g. ``AVX512``, ``DEFAULT`` under
    ``ATEN_CPU_CAPABILITY=default``); ``aten_cpu_capability`` is the environment variable as set (or ``None``).
    ``turnkit_cache`` is ``TURNKIT_CACHE`` as set (or ``None``: ``~/.cache/turnkit``): the cached models a run loads
    (e.g. another float path's SFT start) depend on it, not on the float path it computes with.

    Args:
        command: The command that produced the result; default ``sys.argv`` with the interpreter's name.
    """
    import torch

    argv = list(command) if command is not None else [Path(sys.executable).name, *sys.argv]
    lock = LOCK_FILE.read_bytes() if LOCK_FILE.is_file() else None
    return {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "float_path": torch.backends.cpu.get_cpu_capability(),
        "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY"),
        "turnkit_cache": os.environ.get("TURNKIT_CACHE"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": _version("transformers"),
        "peft": _version("peft"),
        "numpy": _version("numpy"),
        "turnkit": _version("turnkit"),
        "lock_sha256": hashlib.sha256(lock).hexdigest()[:16] if lock is not None else None,
        "command": shlex.join(argv),
    }


def write_result(
    path: str | Path,
    result: Mapping[str, Any],
    *,
    started: float,
    command: Sequence[str] | None = None,
    record: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``result`` as JSON with a ``machine`` record and ``wall_s`` (seconds since ``started``).

    Args:
        path: The JSON file (parents are created).
        result: The study's numbers (JSON-able); its own ``machine``/``wall_s`` keys are replaced.
        started: ``time.time()`` when the work began.
        command: The producing command (default ``sys.argv``).
        record: A machine record to write instead of a fresh :func:`machine_record` (e.g. one extended with a
            study's own fields, shared by all its files).

    Example:
        >>> import tempfile, time
        >>> path = write_result(tempfile.mkdtemp() + "/r.json", {"success": 0.5}, started=time.time(), command=["x"])
        >>> data = json.loads(path.read_text())
        >>> data["success"], data["machine"]["command"], data["wall_s"] >= 0
        (0.5, 'x', True)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    machine = dict(record) if record is not None else machine_record(command)
    data = {**result, "machine": machine, "wall_s": round(time.time() - started, 1)}
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path
