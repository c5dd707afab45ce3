"""``DockerSandbox``: one locked-down container per sandbox, driven through the docker SDK.

The container runs the offline-built image (:mod:`turnkit.sandbox.image`) with no network, a read-only
root, tmpfs ``/work`` and ``/tmp``, ``no-new-privileges``, cgroup memory/CPU/pids limits and a non-dumpable
init as PID 1 that reaps zombies. Every call is a ``docker exec`` of the same supervisor the local backend uses,
so limits, output caps, leftover-process cleanup and the grading trust boundary (see
:mod:`turnkit.sandbox._zygote`) behave identically. PID 1 is a small non-dumpable init of turnkit's
(:data:`_INIT`), not ``docker-init``.

The code runs as ``nobody`` (:data:`SANDBOX_USER`) with no capability. The init, the supervisor, its zygote and
the spares run as root with only ``CAP_SETUID``, ``CAP_SETGID`` and ``CAP_KILL``, so the code cannot change
their rlimits, priority or scheduling (the kernel checks the uid), and every process of the code dies after its
call at once (:mod:`turnkit.sandbox._calljail`: Docker's seccomp profile refuses the per-call namespaces that
the local backend uses).

Cleanup is guaranteed three ways: ``close()`` (and the context manager); an ``atexit`` hook; and a
watchdog process per owner that removes the owner's containers when the owner dies, even by SIGKILL.
Containers carry the labels ``turnkit.sandbox=1`` and ``turnkit.owner=<host>/<pid>/<start time>``; stale ones
whose owner is gone are reaped whenever a new sandbox starts.

Example:
    >>> kwargs = DockerSandbox.container_kwargs(Limits(memory_mb=256, pids=32), owner="h/1/2")
    >>> kwargs["network_mode"], kwargs["mem_limit"], kwargs["pids_limit"], kwargs["read_only"]
    ('none', '320m', 48, True)
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from turnkit.errors import SandboxError
from turnkit.sandbox import _frames, _watchdog, _wire
from turnkit.sandbox.base import (
    DEFAULT_IMAGE,
    WORKDIR,
    Command,
    Limits,
    SandboxBase,
    infra_result,
    sandbox_path,
    to_bytes,
)
from turnkit.sandbox.local import READ_MAX_BYTES, InteractiveCommand
from turnkit.types import ExecResult

SANDBOX_USER = "65534:65534"
"""The code's user (interactive programs run as it too)."""
SUPERVISOR_USER = "0:0"
"""The supervisor's, with only the capabilities of :data:`SUPERVISOR_CAPS` (and the container's init's)."""
SUPERVISOR_CAPS = ["SETUID", "SETGID", "KILL"]
_MEMORY_HEADROOM_MB = 64
"""cgroup memory above the per-process limit, for the supervisor and the shell around the code."""

_INIT = r"""
import ctypes, signal
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps every child it adopts: no zombie piles up
while True:
    signal.pause()
"""
"""PID 1 of a sandbox container: non-dumpable (the code cannot patch it through ``/proc/1/mem`` and wait there
for the next supervisor), immune to signals from inside (an init without handlers ignores them), and the orphans
it adopts are reaped by the kernel (``SIGCHLD`` ignored). It replaces ``docker-init`` and a keeper process, both
dumpable processes of the code's uid."""

_KILL_LEFTOVERS = ["/bin/sh", "-c", "i=0; while [ $i -lt 2000 ] && kill -9 -1 2>/dev/null; do i=$((i + 1)); done"]
"""Kills every process in the container but init, round after round until none is left (``kill(-1)``: every
process root may signal with ``CAP_KILL`` but itself and init). One syscall right after ``exec`` and no
interpreter."""

_KILL_SESSION = r"""
import os, signal, time
def table():
    procs = {}
    for n in os.listdir('/proc'):
        if n.isdigit():
            try:
                with open('/proc/%s/stat' % n, 'rb') as f:
                    s = f.read()
                rest = s[s.rindex(b')') + 2:].split()
                procs[int(n)] = (rest[0], int(rest[1]), int(rest[3]))
            except (OSError, ValueError):
                pass
    return procs
me = os.getpid()
for _ in range(200):
    procs = table()
    doomed = {p for p, (state, ppid, sid) in procs.items() if sid == SID or ppid == 1}
    grew = True
    while grew:
        more = {p for p, (state, ppid, sid) in procs.items() if ppid in doomed} - doomed
        doomed |= more
        grew = bool(more)
    doomed = {p for p in doomed - {1, me} if procs[p][0] != b'Z'}
    if not doomed:
        break
    for p in doomed:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.005)
"""
"""Kills an interactive program's session and every orphan init adopted, with their descendants. Live programs
are subreapers (their daemons stay below them, see ``fg`` mode) and ``docker exec``'d supervisors have no parent
in the container, so a process whose parent is init belongs to a program that is gone."""


def _docker_module() -> Any:
    try:
        import docker
    except ImportError as exc:
        raise SandboxError("the docker SDK is missing: pip install 'turnkit[sandbox]'") from exc
    return docker


def docker_available(timeout: float = 5.0) -> bool:
    """Whether a Docker engine answers (and the SDK is installed).

    Example:
        >>> isinstance(docker_available(), bool)
        True
    """
    try:
        docker = _docker_module()
    except SandboxError:
        return False
    import requests

    try:
        client = docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (docker.errors.DockerException, requests.RequestException, OSError):
        return False


def _start_ticks(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return -1
    return int(stat[stat.rindex(b")") + 2 :].split()[19])


class _Owner:
    """Per-process bookkeeping: live containers, the watchdog and the atexit hook."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid = -1
        self.label = ""
        self.containers: dict[str, Any] = {}
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.reaped_stale = False
        self.atexit_registered = False

    def ensure(self, client: Any) -> str:
        """Start the watchdog and reap stale containers once per process (again after a fork)."""
        with self.lock:
            pid = os.getpid()
            if self.pid != pid:
                self.pid = pid
                self.label = _watchdog.owner_label(pid, _start_ticks(pid))
                self.containers = {}
                self.watchdog = None
                self.reaped_stale = False
            if not self.reaped_stale:
                reap_stale_containers(client)
                self.reaped_stale = True
            if self.watchdog is None or self.watchdog.poll() is not None:
                source = Path(_watchdog.__file__).read_text(encoding="utf-8")
                self.watchdog = subprocess.Popen(
                    [sys.executable, "-c", source, self.label],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    cwd="/",
                )
            if not self.atexit_registered:
                atexit.register(shutdown)
                self.atexit_registered = True
            return self.label


_OWNER = _Owner()


def shutdown(timeout: float = 30.0) -> None:
    """Remove every container this process owns and stop its watchdog. Runs at interpreter exit.

    Example:
        >>> import atexit  # registered with atexit on first use; call it to clean up early
        >>> shutdown.__module__
        'turnkit.sandbox.docker'
    """
    with _OWNER.lock:
        if _OWNER.pid != os.getpid():
            return
        containers = list(_OWNER.containers.values())
        _OWNER.containers.clear()
        watchdog, _OWNER.watchdog = _OWNER.watchdog, None
    docker = _docker_module() if containers else None
    for container in containers:
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):  # type: ignore[union-attr]
            container.remove(force=True)
    if watchdog is not None:
        if watchdog.stdin is not None:
            watchdog.stdin.close()
        try:
            watchdog.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            watchdog.kill()
            watchdog.wait()


def reap_stale_containers(client: Any = None) -> list[str]:
    """Remove sandbox containers whose owner process (on this host) no longer exists.

    Returns:
        The ids of removed containers.

    Example:
        >>> removed = reap_stale_containers() if docker_available() else []
        >>> isinstance(removed, list)  # what there is to reap depends on the machine
        True
    """
    docker = _docker_module()
    client = client or docker.from_env()
    removed = []
    host = _watchdog.owner_label(0, 0).split("/")[0]
    for container in client.containers.list(all=True, filters={"label": f"{_watchdog.SANDBOX_LABEL}=1"}):
        owner = container.labels.get(_watchdog.OWNER_LABEL, "")
        parts = owner.split("/")
        if len(parts) != 3 or parts[0] != host or not parts[1].isdigit():
            continue
        pid, ticks = int(parts[1]), parts[2]
        if str(_start_ticks(pid)) == ticks:
            continue
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            container.remove(force=True)
            removed.append(container.id)
    return removed


class _DockerStream:
    """Demultiplexes Docker's attach stream (8-byte headers) into stdout bytes and a bounded stderr."""

    def __init__(self, stderr_cap: int = 65536) -> None:
        self._buf = bytearray()
        self.stderr = bytearray()
        self._cap = stderr_cap

    def __call__(self, data: bytes) -> bytes:
        self._buf += data
        out = bytearray()
        while len(self._buf) >= 8:
            kind, size = self._buf[0], struct.unpack(">I", bytes(self._buf[4:8]))[0]
            if len(self._buf) < 8 + size:
                break
            payload = bytes(self._buf[8 : 8 + size])
            del self._buf[: 8 + size]
            if kind == 2:
                self.stderr += payload[: max(0, self._cap - len(self.stderr))]
            else:
                out += payload
        return bytes(out)


class _ExecConnection:
    """A ``docker exec`` of the supervisor with its hijacked socket (stdin in, multiplexed output back)."""

    def __init__(self, sandbox: DockerSandbox, mode: str, max_reply: int) -> None:
        docker = sandbox._docker
        api = sandbox._client.api
        argv = _wire.supervisor_argv(sandbox.python, mode, str(256 << 20), "uid")
        try:
            exec_id = api.exec_create(sandbox.container.id, argv, stdin=True, user=SUPERVISOR_USER, workdir=WORKDIR)[
                "Id"
            ]
            self._sock = api.exec_start(exec_id, socket=True)
        except docker.errors.NotFound as exc:
            raise SandboxError(f"the sandbox container is gone: {exc}") from exc
        except docker.errors.DockerException as exc:
            raise SandboxError(f"docker exec failed: {exc}") from exc
        self._raw = getattr(self._sock, "_sock", self._sock)
        self._demux = _DockerStream()
        self.reader = _wire.ReplyReader(self._raw.fileno(), max_bytes=max_reply, unwrap=self._demux)

    def send(self, frame: bytes) -> None:
        try:
            self._raw.sendall(frame)
        except OSError as exc:
            raise _wire.ProtocolError(f"lost the connection to the sandbox supervisor: {exc}") from exc

    def wait_ready(self) -> None:
        ready = self.reader.next(deadline=time.monotonic() + _wire.START_S)
        if ready is None or ready[0].get("ready") is not True:
            detail = self._demux.stderr.decode("utf-8", "replace").strip()
            self.close()
            raise SandboxError(f"the sandbox supervisor did not start in the container: {detail or 'no output'}")

    def reply(self, wait_s: float) -> _wire.Frame | None:
        return self.reader.next(deadline=time.monotonic() + wait_s)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()


class DockerSandbox(SandboxBase):
    """A sandbox in a locked-down Docker container (see the module docstring).

    Args:
        limits: Resource limits.
        image: The image tag (build it with ``python -m turnkit.sandbox.image build``).
        client: A ``docker.DockerClient``; ``docker.from_env()`` by default.
        python: The interpreter inside the image.
        persistent: Keep one warm supervisor in the container (one long-lived ``docker exec``) that forks
            per call, instead of a ``docker exec`` per call (~5 ms instead of ~100 ms).

    Raises:
        SandboxError: If the engine is unreachable or the image is missing.

    Example:
        >>> DockerSandbox.container_kwargs(Limits(), owner="h/1/2")["labels"]["turnkit.sandbox"]
        '1'
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        image: str = DEFAULT_IMAGE,
        client: Any = None,
        python: str = "/usr/bin/python3",
        persistent: bool = False,
    ) -> None:
        super().__init__(limits)
        self._closed = True
        self.persistent = persistent
        self._lock = threading.Lock()
        self._worker: _ExecConnection | None = None
        docker = _docker_module()
        self._docker = docker
        try:
            self._client = client or docker.from_env(timeout=120)
            self._client.ping()
        except docker.errors.DockerException as exc:
            raise SandboxError(
                f"the Docker engine is not reachable ({exc}); start dockerd (see .ci/docker.sh)"
            ) from exc
        try:
            self._client.images.get(image)
        except docker.errors.ImageNotFound:
            raise SandboxError(
                f"the sandbox image {image} is missing: build it with `python -m turnkit.sandbox.image build`"
            ) from None
        self.image = image
        self.python = python
        owner = _OWNER.ensure(self._client)
        try:
            self.container = self._client.containers.run(
                image, detach=True, **self.container_kwargs(self.limits, owner, python)
            )
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot start a sandbox container: {exc}") from exc
        with _OWNER.lock:
            _OWNER.containers[self.container.id] = self.container
        # Runs at close(), when the sandbox is garbage-collected unclosed, or at interpreter exit.
        self._finalizer = weakref.finalize(self, _remove_container, self.container, self.__dict__, os.getpid())
        self._closed = False

    @staticmethod
    def container_kwargs(limits: Limits, owner: str, python: str = "/usr/bin/python3") -> dict[str, Any]:
        """The ``containers.run`` arguments that lock a container down to ``limits``.

        Example:
            >>> DockerSandbox.container_kwargs(Limits(network=True), owner="h/1/2")["network_mode"]
            'bridge'
        """
        from docker.types import Ulimit

        mem = f"{limits.memory_mb + _MEMORY_HEADROOM_MB}m"
        fsize = limits.file_size_mb * 1024 * 1024
        tmpfs_opts = f"rw,nosuid,nodev,size={limits.disk_mb}m,uid=65534,gid=65534,mode=1777"
        return {
            "init": False,
            "command": [python, "-I", "-c", _INIT],
            "network_mode": "bridge" if limits.network else "none",
            "mem_limit": mem,
            "memswap_limit": mem,
            "nano_cpus": int(limits.cpus * 1e9),
            "pids_limit": limits.pids + 16,
            "read_only": True,
            "tmpfs": {WORKDIR: tmpfs_opts, "/tmp": tmpfs_opts},
            "user": SUPERVISOR_USER,
            "cap_drop": ["ALL"],
            "cap_add": SUPERVISOR_CAPS,
            "security_opt": ["no-new-privileges"],
            "ulimits": [
                Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
                Ulimit(name="fsize", soft=fsize, hard=fsize),
                Ulimit(name="core", soft=0, hard=0),
            ],
            "labels": {_watchdog.SANDBOX_LABEL: "1", _watchdog.OWNER_LABEL: owner},
            "working_dir": WORKDIR,
            "hostname": "sandbox",
            "environment": dict(_wire.SANDBOX_ENV),
        }

    # --- public API -----------------------------------------------------------------------------

    def run(self, cmd: Command, *, timeout: float | None = None, stdin: bytes | str | None = None) -> ExecResult:
        """Run a command in ``/work`` inside the container (a string runs through ``/bin/sh -c``).

        Example:
            >>> def hello() -> str:  # needs a Docker engine and the image; starting a container takes ~1 s
            ...     with DockerSandbox() as sb:
            ...         return sb.run("echo hi", timeout=10).stdout
            >>> DockerSandbox.argv("echo hi")  # what a string command becomes
            ['/bin/sh', '-c', 'echo hi']
        """
        self._check_open()
        wall = self.timeout_for(timeout)
        req = _wire.exec_request(self.limits, op="exec", argv=self.argv(cmd), timeout=wall, cwd=WORKDIR, nproc=False)
        return self._execute(req, [to_bytes(stdin)], wall)

    def run_python(self, code: str | bytes, *, timeout: float | None = None) -> ExecResult:
        """Run Python source as ``__main__`` with fresh globals, in ``/work`` inside the container.

        Example:
            >>> DockerSandbox.run_python.__name__
            'run_python'
        """
        self._check_open()
        wall = self.timeout_for(timeout)
        req = _wire.exec_request(self.limits, op="python", timeout=wall, cwd=WORKDIR, nproc=False)
        return self._execute(req, [to_bytes(code)], wall)

    def run_batch_natively(
        self, setup: bytes, calls: bytes, per_call_timeout_s: float, wall_s: float, *, fresh_workdir: bool = False
    ) -> ExecResult:
        """Run the batch harness compiled into the supervisor (see :func:`turnkit.sandbox.batch.run_batch`).

        Example:
            >>> DockerSandbox.run_batch_natively.__name__
            'run_batch_natively'
        """
        self._check_open()
        req = _wire.exec_request(self.limits, op="batch", timeout=wall_s, cwd=WORKDIR, nproc=False)
        req["item_timeout"] = per_call_timeout_s
        req["fresh_workdir"] = bool(fresh_workdir)
        return self._execute(req, [setup, calls], wall_s)

    def write_file(self, path: str, data: bytes | str) -> None:
        """Write a file into the container's ``/work`` (parents are created).

        Example:
            >>> DockerSandbox.write_file.__name__
            'write_file'
        """
        self._check_open()
        rel = sandbox_path(path)
        frame = self._file_request({"op": "write", "path": f"{WORKDIR}/{rel}"}, [to_bytes(data)], None)
        _wire.check_file_reply(frame, f"write {path!r}")

    def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """Read a file from the container's ``/work``.

        Example:
            >>> DockerSandbox.read_file.__name__
            'read_file'
        """
        self._check_open()
        rel = sandbox_path(path)
        limit = max_bytes or READ_MAX_BYTES
        req = {"op": "read", "path": f"{WORKDIR}/{rel}", "max_bytes": limit}
        frame = self._file_request(req, [], limit + 65536)
        blobs = _wire.check_file_reply(frame, f"read {path!r}")
        return blobs[0] if blobs else b""

    def interactive_command(self, argv: list[str], *, env: dict[str, str] | None = None) -> InteractiveCommand:
        """The ``docker exec -it`` command line that runs ``argv`` on a terminal in this container.

        Example:
            >>> DockerSandbox.interactive_command.__name__
            'interactive_command'
        """
        self._check_open()
        cli = shutil.which("docker")
        if cli is None:
            raise SandboxError("interactive Docker sessions need the docker CLI on PATH")
        args = [cli, "exec", "-it", "-u", SANDBOX_USER, "-w", WORKDIR, "-e", "TERM=dumb"]
        for key, value in (env or {}).items():
            args += ["-e", f"{key}={value}"]
        limits = self.limits.child_rlimits()
        del limits["nproc"]
        inner = _wire.supervisor_argv(self.python, "fg", json.dumps(limits), *argv)
        return InteractiveCommand(argv=[*args, self.container.id, *inner], env=dict(os.environ))

    def end_interactive(self, pid: int) -> None:
        """Kill an interactive program's session in the container (``docker exec`` leaves it running).

        Args:
            pid: The program's pid inside the container (its session id: ``docker exec -t`` makes it a
                session leader), so background jobs of a shell go too.

        Example:
            >>> DockerSandbox.end_interactive.__name__
            'end_interactive'
        """
        if self.closed:
            return
        script = _KILL_SESSION.replace("SID", str(int(pid)))
        with contextlib.suppress(self._docker.errors.DockerException):
            self.container.exec_run([self.python, "-I", "-c", script], user=SANDBOX_USER)

    def oom_kills(self) -> int | None:
        """The container cgroup's OOM-kill counter, where the host exposes it (cgroup v1 or v2).

        Example:
            >>> DockerSandbox.oom_kills.__name__
            'oom_kills'
        """
        cid = self.container.id
        for path in (
            f"/sys/fs/cgroup/memory/docker/{cid}/memory.oom_control",
            f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/memory.events",
            f"/sys/fs/cgroup/docker/{cid}/memory.events",
        ):
            try:
                text = Path(path).read_text()
            except OSError:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return None

    # --- internals -------------------------------------------------------------------------------

    def _execute(self, req: dict[str, Any], blobs: list[bytes], wall: float) -> ExecResult:
        ooms = self.oom_kills()
        start = time.monotonic()
        try:
            frame = self._request(req, blobs, wall + _wire.SLACK_S)
        except TimeoutError:
            self._kill_leftovers()
            return infra_result(
                f"no reply within {wall + _wire.SLACK_S:.1f} s; the container's processes were killed",
                fault="no_reply",
                exit_code=-9,
                timed_out=True,
                duration_s=time.monotonic() - start,
            )
        except _wire.ProtocolError as exc:
            self._kill_leftovers()
            return infra_result(
                f"{exc}; the code may have tampered with it", fault="desync", duration_s=time.monotonic() - start
            )
        if frame is None:
            self._kill_leftovers()
            return infra_result(
                "the sandbox supervisor exited without a reply; the code may have killed it",
                fault="supervisor_died",
                duration_s=time.monotonic() - start,
            )
        broken = _wire.broken_worker_result(frame)
        if broken is not None:
            return broken
        try:
            result = _wire.result_from_frame(frame)
        except _wire.ProtocolError as exc:
            self._kill_leftovers()
            return infra_result(
                f"{exc}; the code may have tampered with it", fault="desync", duration_s=time.monotonic() - start
            )
        after = self.oom_kills()
        if ooms is not None and after is not None and after > ooms and not result.oom_killed:
            result = dataclasses.replace(result, oom_killed=True)
        return result

    def _request(
        self, req: dict[str, Any], blobs: list[bytes], wait_s: float, max_reply: int | None = None
    ) -> _wire.Frame | None:
        """Send one request to a supervisor and return its reply (``None`` if the supervisor died).

        In persistent mode the request goes to the warm worker (started on first use); otherwise to a fresh
        ``docker exec`` of the supervisor in ``once`` mode.

        Raises:
            TimeoutError: If no reply came within ``wait_s``.
        """
        limit = max_reply or _wire.max_reply_bytes(self.limits)
        if not self.persistent:
            req = dict(req, id=_wire.new_request_id())
            conn = _ExecConnection(self, "once", limit)
            try:
                conn.send(_frames.encode_frame(req, blobs))
                conn.wait_ready()
                reply = conn.reply(wait_s)
                if reply is not None:
                    _wire.check_reply_id(reply, req["id"])
                return reply
            finally:
                conn.close()
        with self._lock:
            self._check_open()
            reply = self._ask_worker(req, blobs, wait_s, limit)
            if reply is not None and reply[0].get("fault") == "worker_broken":  # nothing ran: once more
                reply = self._ask_worker(req, blobs, wait_s, limit)
            return reply

    def _ask_worker(self, req: dict[str, Any], blobs: list[bytes], wait_s: float, limit: int) -> _wire.Frame | None:
        """One request to the warm worker, under a fresh id; a worker left unusable is dropped."""
        worker = self._ready_worker()
        req = dict(req, id=_wire.new_request_id())
        try:
            worker.reader.max_bytes = limit
            worker.send(_frames.encode_frame(req, blobs))
            reply = worker.reply(wait_s)
            if reply is not None:
                _wire.check_reply_id(reply, req["id"])
        except (TimeoutError, _wire.ProtocolError):
            self._drop_worker()
            raise
        if reply is None:
            self._drop_worker()  # the caller kills what is left
        elif reply[0].get("fault") == "worker_broken":
            self._drop_worker()
            self._kill_leftovers()
        return reply

    def _ready_worker(self) -> _ExecConnection:
        """The warm worker, replaced first if its stream ended or it sent anything unasked since its last reply."""
        if self._worker is not None and self._worker.reader.pending():
            self._drop_worker()
            self._kill_leftovers()
        if self._worker is None:
            self._worker = _ExecConnection(self, "worker", _wire.max_reply_bytes(self.limits))
            self._worker.wait_ready()
        return self._worker

    def _file_request(self, req: dict[str, Any], blobs: list[bytes], max_reply: int | None) -> _wire.Frame | None:
        try:
            return self._request(req, blobs, 60.0, max_reply=max_reply)
        except (TimeoutError, _wire.ProtocolError) as exc:
            raise SandboxError(f"file transfer with the sandbox failed: {exc}") from exc

    def _drop_worker(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def _kill_leftovers(self) -> None:
        """Kill every process in the container but init (after a hung, killed or desynchronised supervisor)."""
        with contextlib.suppress(self._docker.errors.DockerException):
            self.container.exec_run(_KILL_LEFTOVERS, user=SUPERVISOR_USER)

    def _close(self) -> None:
        with self._lock:
            self._finalizer()


def _remove_container(container: Any, state: dict[str, Any], owner_pid: int) -> None:
    if os.getpid() != owner_pid:  # a forked child exiting must not remove its parent's container
        return
    worker, state["_worker"] = state.get("_worker"), None
    if worker is not None:
        worker.close()
    with _OWNER.lock:
        _OWNER.containers.pop(container.id, None)
    docker = _docker_module()
    with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
        container.remove(force=True)
