"""DockerSandbox specifics: container lock-down, labels, guaranteed cleanup, the offline image."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.sandbox.conftest import TEST_LIMITS
from turnkit.errors import SandboxError
from turnkit.sandbox import DockerSandbox, Limits
from turnkit.sandbox import docker as docker_backend
from turnkit.sandbox.image import DEFAULT_TAG, RootfsSpec, build_image, main

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def client():
    import docker

    c = docker.from_env()
    yield c
    c.close()


def _sandbox_containers(client, **labels):
    filters = {"label": ["turnkit.sandbox=1", *(f"{k}={v}" for k, v in labels.items())]}
    # sparse: no inspect per container, which fails when the watchdog removes one between listing and inspecting
    return client.containers.list(all=True, filters=filters, sparse=True)


@pytest.fixture
def shared(shared_sandboxes):
    return shared_sandboxes("docker")


def test_container_is_locked_down(client, shared):
    cfg = client.api.inspect_container(shared.container.id)["HostConfig"]
    assert (cfg["NetworkMode"], cfg["ReadonlyRootfs"], cfg["CapDrop"], cfg["PidsLimit"]) == (
        "none",
        True,
        ["ALL"],
        TEST_LIMITS.pids + 16,
    )


def test_container_memory_limit_follows_limits(client):
    with DockerSandbox(Limits(memory_mb=128)) as sb:
        cfg = client.api.inspect_container(sb.container.id)["HostConfig"]
    assert cfg["Memory"] == (128 + 64) * 1024 * 1024 and cfg["MemorySwap"] == cfg["Memory"]


def test_container_is_labelled_with_its_owner(shared):
    labels = shared.container.labels
    assert labels["turnkit.sandbox"] == "1" and labels["turnkit.owner"].split("/")[1] == str(os.getpid())


def test_close_removes_the_container_and_is_idempotent(client):
    sb = DockerSandbox(TEST_LIMITS)
    cid = sb.container.id
    sb.close()
    sb.close()
    assert _sandbox_containers(client, id=cid) == [] and all(c.id != cid for c in _sandbox_containers(client))


def test_exception_in_with_block_removes_the_container(client):
    with pytest.raises(RuntimeError), DockerSandbox(TEST_LIMITS) as sb:
        raise RuntimeError("boom")
    assert all(c.id != sb.container.id for c in _sandbox_containers(client))


def test_watchdog_removes_containers_of_a_killed_parent(client):
    script = textwrap.dedent(
        """
        import time
        from turnkit.sandbox import DockerSandbox
        sb = DockerSandbox()
        print(sb.container.id, flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    cid = proc.stdout.readline().strip()
    assert any(c.id == cid for c in _sandbox_containers(client))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while any(c.id == cid for c in _sandbox_containers(client)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(c.id != cid for c in _sandbox_containers(client))


def test_stale_containers_of_dead_owners_are_reaped(client):
    owner = f"{docker_backend._watchdog.owner_label(999_999_999, 1)}"
    stale = client.containers.run(
        DEFAULT_TAG, detach=True, labels={"turnkit.sandbox": "1", "turnkit.owner": owner}, network_mode="none"
    )
    try:
        removed = docker_backend.reap_stale_containers(client)
    finally:
        leftover = [c for c in _sandbox_containers(client) if c.id == stale.id]
        for c in leftover:
            c.remove(force=True)
    assert stale.id in removed and leftover == []


def test_missing_image_is_a_clear_error():
    with pytest.raises(SandboxError, match=r"python -m turnkit\.sandbox\.image build"):
        DockerSandbox(image="turnkit-sandbox:no-such-tag")


def test_cgroup_oom_kill_is_reported():
    # Each process stays under its own address-space limit, but together they exceed the container's
    # cgroup limit: the kernel's OOM killer acts, and the result says so.
    code = (
        "import os, time\nfor _ in range(6):\n    if os.fork() == 0:\n        b = b'x' * (80 << 20)\n"
        "        time.sleep(5)\n        os._exit(0)\ntime.sleep(3)"
    )
    with DockerSandbox(Limits(memory_mb=128)) as sb:
        r = sb.run_python(code, timeout=20)
    assert r.oom_killed


def test_image_build_is_a_no_op_when_present():
    assert build_image().startswith("sha256:")


def test_image_cli_reports_the_tag(capsys):
    assert main(["build"]) == 0 and capsys.readouterr().out.startswith(f"{DEFAULT_TAG} sha256:")


def test_image_has_no_package_manager_compiler_or_network_tools(shared):
    r = shared.run("for t in apt-get pip gcc cc curl wget nc ssh; do command -v $t; done; echo done", timeout=10)
    assert r.stdout == "done\n"


def test_rootfs_spec_contains_python_shell_and_their_libraries():
    entries = RootfsSpec(tools=("sh", "base64")).entries()
    libc = [p for p in entries if p.rsplit("/", 1)[-1].startswith("libc.so")]
    assert "/usr/bin/python3.11" in entries and any(p.endswith("/base64") for p in entries) and libc
