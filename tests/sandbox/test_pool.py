"""SandboxPool: fresh sandboxes per task, background replacement, factory failures."""

from __future__ import annotations

import pytest

from tests.sandbox.conftest import TEST_LIMITS, backend_params, make_sandbox
from turnkit.errors import ConfigError, SandboxError
from turnkit.sandbox import SandboxPool


@pytest.mark.parametrize("backend", backend_params(["local-persistent", "docker"]))
def test_each_task_gets_an_untouched_sandbox(backend):
    with SandboxPool(lambda: make_sandbox(backend, TEST_LIMITS), size=1) as pool:
        with pool.acquire() as first:
            first.write_file("mark.txt", "used")
        with pool.acquire() as second:
            r = second.run("ls", timeout=10)
    assert first is not second and first.closed and r.ok and "mark.txt" not in r.stdout


def test_released_sandboxes_are_closed_and_replaced():
    seen = []
    with SandboxPool(lambda: make_sandbox("local", TEST_LIMITS), size=2) as pool:
        for _ in range(3):
            with pool.acquire() as sb:
                seen.append(sb)
        pool.wait_ready(timeout=60)
        ready_after_use = pool.ready
    assert all(s.closed for s in seen) and len({id(s) for s in seen}) == 3 and ready_after_use == 2


def test_factory_failure_surfaces_as_sandbox_error():
    def broken():
        raise OSError("no engine")

    with SandboxPool(broken, size=1) as pool, pytest.raises(SandboxError, match="no engine"), pool.acquire(timeout=10):
        pass


def test_close_closes_ready_sandboxes():
    made = []

    def factory():
        made.append(make_sandbox("local", TEST_LIMITS))
        return made[-1]

    pool = SandboxPool(factory, size=2)
    pool.close()
    pool.close()
    assert len(made) == 2 and all(s.closed for s in made)


def test_acquire_after_close_is_an_error():
    pool = SandboxPool(lambda: make_sandbox("local", TEST_LIMITS), size=1)
    pool.close()
    with pytest.raises(SandboxError, match="closed"), pool.acquire():
        pass


def test_size_must_be_positive():
    with pytest.raises(ConfigError):
        SandboxPool(lambda: None, size=0)  # type: ignore[arg-type,return-value]
