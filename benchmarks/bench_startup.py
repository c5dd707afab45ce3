"""The start-up and checksum costs behind three design choices of #19, each beside its baseline.

* **Plugin scan** (``turnkit.envs.plugins``): scanning installed distributions for ``turnkit.envs`` entry
  points, in a fresh process, beside a fresh ``import turnkit``. Why plugins load when the CLI starts and not
  on ``import turnkit``.
* **OpenEnv import** (``turnkit.integrations.openenv``): importing openenv-core's server module in a fresh
  process, beside a fresh ``import turnkit``. Why the OpenEnv client speaks WebSocket itself.
* **Checkpoint checksums** (``turnkit.checkpoint``): CRC-32 beside SHA-256 over the same 64 MiB buffer.
  Why manifests use CRC-32 (the threat is accidental damage, not an adversary).

Trials alternate the measured thing and its baseline (ABAB...); we report medians over trials.

Run:  python benchmarks/bench_startup.py --trials 7
      (or ``turnkit bench startup -- --trials 7``)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import zlib

IMPORT_TURNKIT = "import turnkit"
SCAN_PLUGINS = "import importlib.metadata as m; m.entry_points(group='turnkit.envs')"
IMPORT_OPENENV = "import openenv.core.env_server.http_server"


def fresh_process_seconds(code: str) -> float:
    """Seconds ``code`` takes inside a fresh interpreter (measured in the child, start-up excluded)."""
    timed = f"import time; t = time.perf_counter(); {code}; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", timed], capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def checksum_seconds(data: bytes) -> tuple[float, float]:
    """Seconds for CRC-32 and for SHA-256 over ``data``."""
    start = time.perf_counter()
    zlib.crc32(data)
    crc = time.perf_counter() - start
    start = time.perf_counter()
    hashlib.sha256(data).digest()
    return crc, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=7)
    p.add_argument("--mib", type=int, default=64, help="checksum buffer size")
    args = p.parse_args(argv)
    times: dict[str, list[float]] = {k: [] for k in ("import_turnkit", "plugin_scan", "openenv_import", "crc", "sha")}
    data = os.urandom(args.mib << 20)
    for _ in range(args.trials):
        times["import_turnkit"].append(fresh_process_seconds(IMPORT_TURNKIT))
        times["plugin_scan"].append(fresh_process_seconds(SCAN_PLUGINS))
        times["openenv_import"].append(fresh_process_seconds(IMPORT_OPENENV))
        crc, sha = checksum_seconds(data)
        times["crc"].append(crc)
        times["sha"].append(sha)
    med = {k: statistics.median(v) for k, v in times.items()}
    gib = args.mib / 1024
    result = {
        "trials": args.trials,
        "import_turnkit_s": round(med["import_turnkit"], 3),
        "plugin_scan_s": round(med["plugin_scan"], 3),
        "plugin_scan_vs_import_turnkit": round(med["plugin_scan"] / med["import_turnkit"], 3),
        "openenv_import_s": round(med["openenv_import"], 3),
        "openenv_import_vs_import_turnkit": round(med["openenv_import"] / med["import_turnkit"], 1),
        "crc32_gib_per_s": round(gib / med["crc"], 2),
        "sha256_gib_per_s": round(gib / med["sha"], 2),
        "crc32_speedup_over_sha256": round(med["sha"] / med["crc"], 1),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
