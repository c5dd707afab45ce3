"""Fixtures for the sandbox suite: backends, the host-unchanged check, and host-side process inspection."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from turnkit.sandbox import DockerSandbox, Limits, LocalSandbox, docker_available
from turnkit.sandbox import docker as docker_backend
from turnkit.sandbox._bwrap import bwrap_path
from turnkit.sandbox.image import build_image

SECRET = "turnkit-secret-7d1f0c"
BACKENDS = ["local", "local-persistent", "docker", "docker-persistent"]
TEST_LIMITS = Limits(wall_time_s=10, memory_mb=256, pids=48, output_bytes=200_000)

_DOCKER = docker_available()
_DOCKER_REASON = "no Docker engine reachable (start one with .ci/docker.sh)"
if _DOCKER:
    build_image()  # a no-op when the image exists (CI builds it in .ci/docker.sh)
_OWN_TMP_PREFIXES = ("turnkit-bwrap-probe-", "turnkit-image-", "tk-ro-bind-", "tk-victim-")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _DOCKER:
        return
    skip = pytest.mark.skip(reason=_DOCKER_REASON)
    for item in items:
        if "docker" in item.keywords:
            item.add_marker(skip)


def backend_params(names: list[str]) -> list[object]:
    """Parameters for the given backends, Docker ones marked ``docker``."""
    return [pytest.param(n, marks=pytest.mark.docker) if n.startswith("docker") else n for n in names]


def make_sandbox(name: str, limits: Limits = TEST_LIMITS) -> LocalSandbox | DockerSandbox:
    if name.startswith("local"):
        if bwrap_path() is None:
            pytest.skip("bubblewrap is not installed")
        return LocalSandbox(limits, persistent=name.endswith("persistent"))
    return DockerSandbox(limits, persistent=name.endswith("persistent"))


# --- host snapshot ---------------------------------------------------------------------------------


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.add(pid)
            todo.append(pid)
    return found


def _ours(owner_pid: int) -> bool:
    """Whether something owned by ``owner_pid`` is this suite's business (other helpers share the box)."""
    return owner_pid == os.getpid() or not Path(f"/proc/{owner_pid}").exists()


def _sandbox_uid_processes() -> set[int]:
    """Processes running as a LocalSandbox uid (2**30 + owner_pid * 256 + n) of ours or of a dead owner."""
    pids = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                uid = os.stat(f"/proc/{name}").st_uid
            except OSError:
                continue
            if uid >= 1 << 30 and _ours((uid - (1 << 30)) >> 8):
                pids.add(int(name))
    return pids


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return "?"


def _snapshot() -> dict[str, set[str]]:
    tmp = tempfile.gettempdir()
    procs = (_descendants(os.getpid()) | _sandbox_uid_processes()) - {os.getpid()}
    workdirs = set()
    for name in os.listdir(tmp):
        owner = name.removeprefix("turnkit-sandbox-").split("-")[0]
        if name.startswith("turnkit-sandbox-") and owner.isdigit() and _ours(int(owner)):
            workdirs.add(name)
    workdirs |= {n for n in os.listdir(tmp) if n.startswith(_OWN_TMP_PREFIXES)}
    workdirs |= {f"/root/{n}" for n in os.listdir("/root") if n.startswith(".tk-hostfile-")}
    snap = {
        "workdirs": workdirs,
        "processes": {f"{p} {_cmdline(p)}" for p in procs if _cmdline(p) != "?"},
        "containers": set(),
    }
    if _DOCKER:
        import docker

        client = docker.from_env()
        for c in client.containers.list(all=True, filters={"label": "turnkit.sandbox=1"}):
            owner = c.labels.get("turnkit.owner", "").split("/")
            if len(owner) == 3 and owner[1].isdigit() and _ours(int(owner[1])):
                snap["containers"].add(c.id)
        client.close()
    return snap


@pytest.fixture(scope="session", autouse=True)
def host_unchanged() -> Iterator[None]:
    """The whole suite leaves no stray files, processes or containers behind (and sets the host secret)."""
    os.environ["TURNKIT_TEST_SECRET"] = SECRET
    before = _snapshot()
    yield
    docker_backend.shutdown()
    deadline = time.monotonic() + 15
    while True:
        after = _snapshot()
        new = {key: after[key] - before[key] for key in after}
        if not any(new.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    os.environ.pop("TURNKIT_TEST_SECRET", None)
    assert not any(new.values()), f"the sandbox suite left things behind: {new}"


# --- shared sandboxes ------------------------------------------------------------------------------


_SHARED: dict[str, LocalSandbox | DockerSandbox] = {}


@pytest.fixture(scope="session")
def shared_sandboxes() -> Iterator[Callable[[str], LocalSandbox | DockerSandbox]]:
    """One sandbox per backend, reused across tests (each test checks that the sandbox stays usable)."""

    def get(name: str) -> LocalSandbox | DockerSandbox:
        if name not in _SHARED or _SHARED[name].closed:
            _SHARED[name] = make_sandbox(name)
        return _SHARED[name]

    yield get
    for sb in _SHARED.values():
        sb.close()
    _SHARED.clear()


@pytest.fixture(params=backend_params(BACKENDS))
def sb(
    request: pytest.FixtureRequest, shared_sandboxes: Callable[[str], LocalSandbox | DockerSandbox]
) -> LocalSandbox | DockerSandbox:
    return shared_sandboxes(request.param)


# --- host-side views of sandboxed processes ---------------------------------------------------------


def processes_named(comm: str) -> list[tuple[int, str]]:
    """Host processes whose command name is ``comm``, with their state letter (Z = zombie)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            if stat[stat.index(b"(") + 1 : stat.rindex(b")")].decode(errors="replace") == comm:
                found.append((int(name), stat[stat.rindex(b")") + 2 :].split()[0].decode()))
    return found
