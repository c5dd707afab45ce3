"""The sandbox contract: the :class:`Sandbox` protocol, resource :class:`Limits` and shared helpers.

Every backend (:class:`~turnkit.sandbox.local.LocalSandbox`, :class:`~turnkit.sandbox.docker.DockerSandbox`)
implements :class:`Sandbox`. A sandbox is a session: files written to its work directory persist between
calls until :meth:`Sandbox.close`, while every call runs in fresh processes (or a fresh fork).

Example:
    >>> from turnkit.sandbox.base import Limits
    >>> Limits(memory_mb=256).memory_mb, Limits().network
    (256, False)
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any, Protocol, TypeVar, runtime_checkable

from turnkit.configs import check_float
from turnkit.errors import ConfigError, SandboxError
from turnkit.types import ExecResult

WORKDIR = "/work"
"""Where the private writable work directory is mounted inside every backend."""

DEFAULT_IMAGE = "turnkit-sandbox:py311"
"""The Docker image built offline by ``python -m turnkit.sandbox.image build``."""

_S = TypeVar("_S", bound="Sandbox")
_B = TypeVar("_B", bound="SandboxBase")

Command = str | Sequence[str]
"""A command: a string runs through ``/bin/sh -c``, a sequence is an argv run directly."""


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to every execution in a sandbox.

    Attributes:
        wall_time_s: Default wall-clock timeout per call, when the call gives none.
        cpu_time_s: CPU seconds per call (``RLIMIT_CPU``); ``None`` uses ``ceil(timeout) + 1``.
        memory_mb: Memory per process (address space in the local backend, plus a cgroup limit for the
            whole container in the Docker backend).
        pids: Processes and threads per call (``RLIMIT_NPROC`` inside a private user namespace; the
            Docker backend also sets the cgroup ``pids`` limit).
        file_size_mb: Largest file a call may write (``RLIMIT_FSIZE``).
        disk_mb: Size of the Docker backend's tmpfs work directory and ``/tmp``.
        output_bytes: Captured bytes per stream (stdout, stderr); a call that writes more is killed and
            marked ``truncated``.
        open_files: Open file descriptors per process (``RLIMIT_NOFILE``).
        cpus: CPU share of a Docker container (``nano_cpus``).
        network: Allow network access. Off by default: the sandbox gets an empty network namespace.

    Example:
        >>> Limits(wall_time_s=2).cpu_seconds(2.0)
        3
        >>> Limits(pids=0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: Limits.pids must be null or a finite number > 0, got 0
    """

    wall_time_s: float = 10.0
    cpu_time_s: float | None = None
    memory_mb: int = 512
    pids: int = 64
    file_size_mb: int = 64
    disk_mb: int = 256
    output_bytes: int = 1_000_000
    open_files: int = 256
    cpus: float = 1.0
    network: bool = False

    def __post_init__(self) -> None:
        names = [name for name in asdict(self) if name != "network"]
        check_float(self, *names, low=0.0, open_low=True, optional=True)

    def cpu_seconds(self, timeout: float) -> int:
        """The ``RLIMIT_CPU`` value for a call with the given wall timeout.

        Args:
            timeout: The call's wall-clock timeout in seconds.

        Returns:
            Whole CPU seconds: ``cpu_time_s`` rounded up if set, else ``ceil(timeout) + 1``.

        Example:
            >>> Limits(cpu_time_s=0.5).cpu_seconds(10.0)
            1
        """
        if self.cpu_time_s is not None:
            return max(1, math.ceil(self.cpu_time_s))
        return math.ceil(timeout) + 1

    def child_rlimits(self) -> dict[str, int]:
        """The rlimits the in-sandbox supervisor applies to each execution (byte/count units).

        Example:
            >>> Limits(memory_mb=1).child_rlimits()["as"]
            1048576
        """
        return {
            "as": self.memory_mb * 1024 * 1024,
            "nproc": self.pids,
            "fsize": self.file_size_mb * 1024 * 1024,
            "nofile": self.open_files,
        }


@runtime_checkable
class Sandbox(Protocol):
    """What every sandbox backend provides. Use it as a context manager so that it is always closed.

    A crash, timeout, memory blow-up or garbage output of the code being run is an :class:`ExecResult`;
    :class:`~turnkit.errors.SandboxError` is raised only when the sandbox infrastructure itself fails.

    Example:
        >>> from turnkit.sandbox import LocalSandbox, Sandbox
        >>> with LocalSandbox() as sb:
        ...     isinstance(sb, Sandbox)
        True
    """

    limits: Limits

    def __enter__(self: _S) -> _S: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    def run(self, cmd: Command, *, timeout: float | None = None, stdin: bytes | str | None = None) -> ExecResult:
        """Run a command (a string runs through ``/bin/sh -c``) in the work directory."""
        ...

    def run_python(self, code: str | bytes, *, timeout: float | None = None) -> ExecResult:
        """Run Python source as ``__main__`` with fresh globals."""
        ...

    def write_file(self, path: str, data: bytes | str) -> None:
        """Write a file, relative to the work directory (or an absolute path inside it)."""
        ...

    def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """Read a file from the work directory."""
        ...

    def close(self) -> None:
        """Release every resource; calling it again does nothing."""
        ...


class SandboxBase:
    """Shared behaviour of the backends: context management, closed-state checks, argument normalisation.

    Args:
        limits: Resource limits; defaults to ``Limits()``.

    Example:
        >>> class Echo(SandboxBase):
        ...     def _close(self) -> None:
        ...         print("closed")
        >>> with Echo() as sb:
        ...     sb.argv("echo hi")
        ['/bin/sh', '-c', 'echo hi']
        closed
    """

    def __init__(self, limits: Limits | None = None) -> None:
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigError(f"limits must be a turnkit.sandbox.Limits, got {type(limits).__name__}")
        self.limits = limits or Limits()
        self._closed = False

    def __enter__(self: _B) -> _B:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    def close(self) -> None:
        """Release the backend's resources. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._close()

    def _close(self) -> None:
        """Backend-specific cleanup, called once."""

    def run_batch_natively(
        self, setup: bytes, calls: bytes, per_call_timeout_s: float, wall_s: float, *, fresh_workdir: bool = False
    ) -> ExecResult | None:
        """Run the batch harness (:mod:`turnkit.sandbox.batch`) without shipping its source, if the backend can.

        Args:
            setup: The set-up code.
            calls: The call expressions as a JSON list.
            per_call_timeout_s: Alarm for loading and for each call.
            wall_s: Wall timeout of the whole batch.
            fresh_workdir: Empty the work directory before the set-up loads (see :func:`~turnkit.sandbox.run_batch`).

        Returns:
            The execution whose stdout carries the harness's result lines, or ``None``: this backend has no
            native batch, and :func:`~turnkit.sandbox.batch.run_batch` sends the harness through ``run_python``.

        Example:
            >>> SandboxBase().run_batch_natively(b"", b"[]", 1.0, 3.0) is None
            True
        """
        return None

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"{type(self).__name__} is closed")

    def timeout_for(self, timeout: float | None) -> float:
        """The effective wall timeout of a call.

        Example:
            >>> SandboxBase(Limits(wall_time_s=3)).timeout_for(None)
            3.0
        """
        value = self.limits.wall_time_s if timeout is None else timeout
        if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        return float(value)

    @staticmethod
    def argv(cmd: Command) -> list[str]:
        """Turn a command into an argv list.

        Example:
            >>> SandboxBase.argv(["ls", "-l"])
            ['ls', '-l']
        """
        if isinstance(cmd, str):
            return ["/bin/sh", "-c", cmd]
        argv = list(cmd)
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ConfigError(f"cmd must be a string or a non-empty sequence of strings, got {cmd!r}")
        return argv


def to_bytes(data: bytes | str | None) -> bytes:
    """Encode text for a sandbox. Lone surrogates survive as the bytes they stand for.

    Example:
        >>> to_bytes("é"), to_bytes(None), to_bytes(b"\\xff")
        (b'\\xc3\\xa9', b'', b'\\xff')
    """
    if data is None:
        return b""
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8", "surrogatepass")
    raise ConfigError(f"expected bytes or str, got {type(data).__name__}")


def sandbox_path(path: str) -> str:
    """Normalise a path inside the sandbox to a path relative to the work directory.

    Args:
        path: Relative to the work directory, or absolute under ``/work``.

    Returns:
        The normalised relative path.

    Raises:
        SandboxError: If the path is empty or leaves the work directory.

    Example:
        >>> sandbox_path("src/../main.py"), sandbox_path("/work/a/b.txt")
        ('main.py', 'a/b.txt')
        >>> sandbox_path("../etc/passwd")
        Traceback (most recent call last):
        ...
        turnkit.errors.SandboxError: path '../etc/passwd' is outside the sandbox work directory /work
    """
    if not isinstance(path, str) or not path or "\x00" in path:
        raise SandboxError(f"invalid sandbox path {path!r}")
    full = posixpath.normpath(posixpath.join(WORKDIR, path))
    if full == WORKDIR or not full.startswith(WORKDIR + "/"):
        raise SandboxError(f"path {path!r} is outside the sandbox work directory {WORKDIR}")
    return full[len(WORKDIR) + 1 :]


def result_from_wire(header: dict[str, Any], stdout: bytes, stderr: bytes) -> ExecResult:
    """Build an :class:`ExecResult` from a supervisor reply, validating every field (the reply is untrusted).

    Example:
        >>> r = result_from_wire({"exit_code": 0, "duration_s": 0.1}, b"hi\\n", b"")
        >>> r.ok, r.stdout
        (True, 'hi\\n')
    """

    def num(key: str, default: float = 0.0) -> float:
        value = header.get(key, default)
        if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
            raise SandboxError(f"malformed sandbox reply: {key}={value!r}")
        return float(value)

    code = header.get("exit_code")
    if not isinstance(code, int) or isinstance(code, bool):
        raise SandboxError(f"malformed sandbox reply: exit_code={code!r}")
    resources: dict[str, float] = {k: num(k) for k in ("cpu_s", "max_rss_kb") if k in header}
    return ExecResult(
        exit_code=code,
        stdout=stdout.decode("utf-8", "replace"),
        stderr=stderr.decode("utf-8", "replace"),
        timed_out=bool(header.get("timed_out", False)),
        truncated=bool(header.get("truncated", False)),
        duration_s=num("duration_s"),
        oom_killed=bool(header.get("oom_killed", False)),
        resources=resources,
    )


FAULTS = ("supervisor_died", "no_reply", "desync", "worker_broken")
"""Values of :attr:`~turnkit.types.ExecResult.fault`: the supervisor died, did not answer in time, answered out
of turn or with a malformed frame, or could no longer start calls; the worker is replaced after each."""


def infra_result(
    message: str, *, fault: str, exit_code: int = -1, timed_out: bool = False, duration_s: float = 0.0
) -> ExecResult:
    """An :class:`ExecResult` for a run whose supervisor died, hung or desynchronised (perhaps the code's doing).

    Example:
        >>> r = infra_result("supervisor died", fault="supervisor_died")
        >>> r.stderr, r.fault, r.ok
        ('[turnkit sandbox] supervisor died\\n', 'supervisor_died', False)
    """
    if fault not in FAULTS:
        raise ValueError(f"unknown sandbox fault {fault!r}")
    return ExecResult(
        exit_code=exit_code,
        stderr=f"[turnkit sandbox] {message}\n",
        timed_out=timed_out,
        duration_s=duration_s,
        fault=fault,
    )
