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
from turnkit.sandbox import local as local_backend
from turnkit.sandbox._bwrap import bwrap_path
from turnkit.sandbox._watchdog import owner_label
from turnkit.sandbox.image import build_image

SECRET = "turnkit-secret-7d1f0c"
BACKENDS = ["local", "local-persistent", "local-jail-persistent", "docker", "docker-persistent"]
"""Every backend the shared suites run on; ``local-jail-persistent`` is bubblewrap as a host that is not root
runs it (a jail per call), kept tested on root hosts too."""
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
    """A sandbox of the named backend; ``local-jail*`` is bubblewrap with a jail per call, as on hosts not root."""
    if name.startswith("local"):
        if bwrap_path() is None:
            pytest.skip("bubblewrap is not installed")
        return local_sandbox(limits, persistent=name.endswith("persistent"), jail=name.startswith("local-jail"))
    return DockerSandbox(limits, persistent=name.endswith("persistent"))


def local_sandbox(limits: Limits = TEST_LIMITS, *, persistent: bool, jail: bool = False) -> LocalSandbox:
    """A LocalSandbox; with ``jail``, its calls are jailed even on a root host (``local.SECOND_UID`` off)."""
    before = local_backend.SECOND_UID
    local_backend.SECOND_UID = not jail and before
    try:
        return LocalSandbox(limits, persistent=persistent)
    finally:
        local_backend.SECOND_UID = before


# --- host snapshot ---------------------------------------------------------------------------------
#
# Only what sandbox code starts is counted: bubblewrap and `docker exec` processes and everything below them, the
# supervisor when it runs unsandboxed, processes under a sandbox uid, work dirs in this run's private temp dir
# (the root conftest gives every run its own), and containers labelled with this process as their owner. Chromium,
# other programs and other test runs on the machine are none of this check's business.

_SANDBOX_COMMANDS = {"bwrap", "docker"}
_SUPERVISOR_MARK = b"The in-sandbox supervisor"


def _process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every live process."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            comm = stat[stat.index(b"(") + 1 : stat.rindex(b")")].decode(errors="replace")
            table[int(name)] = (int(stat[stat.rindex(b")") + 2 :].split()[1]), comm)
    return table


def _is_sandbox_root(pid: int, comm: str) -> bool:
    if comm in _SANDBOX_COMMANDS:
        return True
    try:
        return _SUPERVISOR_MARK in Path(f"/proc/{pid}/cmdline").read_bytes()[:400]
    except OSError:
        return False


def _sandbox_processes() -> set[int]:
    """Our descendants that sandbox code started (and theirs), plus processes under one of our sandbox uids."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [(os.getpid(), False)]
    while todo:
        pid, inside = todo.pop()
        for child in children.get(pid, ()):
            child_inside = inside or _is_sandbox_root(child, table[child][1])
            if child_inside:
                found.add(child)
            todo.append((child, child_inside))
    for pid in table:
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        if uid >= 1 << 30 and (uid - (1 << 30)) >> 8 == os.getpid():  # LocalSandbox uid: 2**30 + owner * 256 + n
            found.add(pid)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return "?"


def _snapshot() -> dict[str, set[str]]:
    tmp = tempfile.gettempdir()
    workdirs = {n for n in os.listdir(tmp) if n.startswith(("turnkit-sandbox-", *_OWN_TMP_PREFIXES))}
    workdirs |= {str(f) for f in Path.home().glob(".tk-hostfile-*")}
    snap = {
        "workdirs": workdirs,
        "processes": {f"{p} {_cmdline(p)}" for p in _sandbox_processes() if _cmdline(p) != "?"},
        "containers": set(),
    }
    if _DOCKER:
        import docker

        client = docker.from_env()
        mine = owner_label(os.getpid(), docker_backend._start_ticks(os.getpid()))
        for c in client.containers.list(all=True, filters={"label": f"turnkit.owner={mine}"}):
            snap["containers"].add(c.id)
        client.close()
    return snap


def leftovers_since(before: dict, timeout: float = 15.0) -> dict:
    """What the host holds now that it did not in ``before`` (a :func:`_snapshot`), once that is nothing or after
    ``timeout`` seconds (closed sandboxes' processes can take a moment to be reaped)."""
    deadline = time.monotonic() + timeout
    while True:
        after = _snapshot()
        new = {key: after[key] - before[key] for key in after}
        if not any(new.values()) or time.monotonic() > deadline:
            return new
        time.sleep(0.2)


@pytest.fixture(scope="package", autouse=True)
def host_unchanged() -> Iterator[None]:
    """The sandbox suite leaves no stray files, processes or containers behind (and sets the host secret)."""
    os.environ["TURNKIT_TEST_SECRET"] = SECRET
    before = _snapshot()
    yield
    docker_backend.shutdown()
    new = leftovers_since(before)
    os.environ.pop("TURNKIT_TEST_SECRET", None)
    assert not any(new.values()), f"the sandbox suite left things behind: {new}"


# --- shared sandboxes ------------------------------------------------------------------------------


_SHARED: dict[str, LocalSandbox | DockerSandbox] = {}


@pytest.fixture(scope="package")
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


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until it holds (``True``) or ``timeout`` seconds pass (``False``): no fixed sleeps."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


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


def runnable_processes_named(comm: str) -> list[tuple[int, str]]:
    """Those of :func:`processes_named` that could still run code: neither zombies nor exiting nor SIGKILLed.

    A call's leftovers are killed before its reply and the kernel tears them down after it: until then a process
    has SIGKILL pending (``SigPnd``/``ShdPnd``) or is exiting (``PF_EXITING`` in ``/proc/PID/stat``'s flags), and
    cannot run another instruction of its own.
    """
    runnable = []
    for pid, state in processes_named(comm):
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue  # gone meanwhile
        flags = int(stat[stat.rindex(b")") + 2 :].split()[6])
        pending = [int(line.split()[1], 16) for line in status.splitlines() if line.startswith(("SigPnd", "ShdPnd"))]
        if state != "Z" and not flags & 0x4 and not any(p & (1 << (9 - 1)) for p in pending):
            runnable.append((pid, state))
    return runnable
