"""One real local Ray cluster (127.0.0.1) for the distributed tests; collectors join it and leave it running.

It lives for one test module only: a later test that forks (the sandbox tests) would otherwise run Ray's exit hooks
in the child, which hang.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")  # shut down before other tests run: a forked Ray driver hangs in its atexit
def ray_cluster() -> Iterator[object]:
    ray = pytest.importorskip("ray", reason="needs the turnkit[ray] extra (.ci/setup.sh installs it)")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        address="local",
        num_cpus=4,
        object_store_memory=256 * 1024**2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        _system_config={"worker_niceness": 0},  # as turnkit's own local clusters
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},  # workers import tests.distributed.helpers
    )
    yield ray
    ray.shutdown()
