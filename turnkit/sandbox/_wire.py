"""Host side of the supervisor protocol: requests, replies and deadline-bounded frame reads.

The supervisor's source travels as ``python3 -I -c SOURCE``, so the code inside always matches the host's
version of turnkit (no image or install step to keep in sync).

Example:
    >>> from turnkit.sandbox.base import Limits
    >>> req = exec_request(Limits(), op="python", timeout=1.0, cwd="/work")
    >>> req["op"], req["cpu"], req["cap"]
    ('python', 2, 1000000)
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import select
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from turnkit.errors import SandboxError
from turnkit.sandbox import _frames, _supervisor
from turnkit.sandbox.base import Limits, infra_result, result_from_wire
from turnkit.types import ExecResult

Frame = tuple[dict[str, Any], list[bytes]]
SLACK_S = 3.0
"""Extra seconds the host waits beyond a call's timeout before it kills an unresponsive sandbox."""
START_S = 20.0
"""Seconds a sandbox may take to start its supervisor (a loaded 2-core box can be slow)."""

SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/work",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}


SUPERVISOR_MODULES = (
    "_frames.py",
    "_harness.py",
    "_zygote.py",
    "_calljail.py",
    "_child.py",
    "_streams.py",
    "_supervisor.py",
)
"""The modules of the in-sandbox supervisor, in the order their sources are joined into one script."""

_OWN_IMPORT = re.compile(r"^from turnkit\.sandbox\._\w+ import [\w, ]+$|^from __future__ import annotations$")
_OWN_MULTILINE_IMPORT = re.compile(r"^from turnkit\.sandbox\._\w+ import \($")


def join_supervisor_source(read: Callable[[str], str]) -> str:
    """Join the supervisor's modules (read by file name) into one script: one future import, no imports of each other.

    Example:
        >>> parts = dict.fromkeys(SUPERVISOR_MODULES, "")
        >>> parts.update({"_frames.py": "from __future__ import annotations\\nA = 1\\n", "_harness.py": "B = 2\\n",
        ...               "_supervisor.py": "from turnkit.sandbox._frames import (\\n    A,\\n)\\nC = A + B\\n"})
        >>> ns = {}
        >>> exec(join_supervisor_source(parts.__getitem__), ns)
        >>> ns["C"]
        3
    """
    body = []
    for name in SUPERVISOR_MODULES:
        kept, in_import = [], False
        for line in read(name).splitlines():
            if in_import:
                in_import = line != ")"
            elif _OWN_MULTILINE_IMPORT.match(line):
                in_import = True
            elif not _OWN_IMPORT.match(line):
                kept.append(line)
        body.append("\n".join(kept))
    return "from __future__ import annotations\n" + "\n\n".join(body) + "\n"


@functools.lru_cache(maxsize=1)
def supervisor_source() -> str:
    """The supervisor's source code, as passed to ``python3 -c``.

    Example:
        >>> "def main(argv" in supervisor_source()
        True
    """
    here = Path(_supervisor.__file__).parent
    return join_supervisor_source(lambda name: (here / name).read_text(encoding="utf-8"))


def supervisor_argv(python: str, mode: str, *extra: str) -> list[str]:
    """The command that starts the supervisor inside a sandbox.

    Example:
        >>> argv = supervisor_argv("/usr/bin/python3", "worker")
        >>> argv[:3], argv[-1]
        (['/usr/bin/python3', '-I', '-c'], 'worker')
    """
    return [python, "-I", "-c", supervisor_source(), mode, *extra]


def exec_request(
    limits: Limits,
    *,
    op: str,
    timeout: float,
    cwd: str,
    argv: list[str] | None = None,
    env: dict[str, str] | None = None,
    nproc: bool = True,
) -> dict[str, Any]:
    """A request header for one execution.

    Args:
        limits: The sandbox's limits.
        op: ``"exec"`` or ``"python"``.
        timeout: Wall timeout in seconds.
        cwd: Working directory inside the sandbox.
        argv: The command (for ``"exec"``).
        env: The execution's environment (defaults to :data:`SANDBOX_ENV`).
        nproc: Apply ``RLIMIT_NPROC`` (off where a cgroup limits processes and the uid is shared).

    Example:
        >>> exec_request(Limits(pids=5), op="exec", argv=["ls"], timeout=1, cwd="/", nproc=False)["limits"]
        {'as': 536870912, 'fsize': 67108864, 'nofile': 256}
    """
    rl = limits.child_rlimits()
    if not nproc:
        del rl["nproc"]
    req: dict[str, Any] = {
        "op": op,
        "timeout": timeout,
        "cpu": limits.cpu_seconds(timeout),
        "cap": limits.output_bytes,
        "cwd": cwd,
        "env": dict(SANDBOX_ENV if env is None else env),
        "limits": rl,
    }
    if argv is not None:
        req["argv"] = argv
    return req


def max_reply_bytes(limits: Limits) -> int:
    """The largest reply the host accepts: both capped streams plus room for the header.

    Example:
        >>> max_reply_bytes(Limits(output_bytes=10))
        65556
    """
    return 2 * limits.output_bytes + 65536


class ProtocolError(SandboxError):
    """A supervisor reply was malformed or the connection broke mid-call.

    The sandboxed code runs as the same user as its supervisor and can cause this on purpose, so backends
    turn it into an :class:`~turnkit.types.ExecResult` rather than letting it escape.
    """


class ReplyReader:
    """Reads frames from a file descriptor under a deadline.

    Args:
        fd: Readable descriptor (a pipe or a socket).
        max_bytes: Largest frame accepted.
        unwrap: Optional transform of raw chunks (e.g. Docker stream demultiplexing) returning the bytes
            that belong to the frame stream.

    Example:
        >>> r, w = os.pipe()
        >>> _ = os.write(w, _frames.encode_frame({"ready": True}))
        >>> ReplyReader(r, max_bytes=1024).next(deadline=time.monotonic() + 1)[0]["ready"]
        True
    """

    def __init__(self, fd: int, *, max_bytes: int, unwrap: Callable[[bytes], bytes] | None = None) -> None:
        self.fd = fd
        self._decoder = _frames.FrameDecoder(max_bytes)
        self._unwrap = unwrap
        self._ready: list[Frame] = []
        self.eof = False
        self._poller = select.poll()  # not select(): descriptors above 1024 are common in big processes
        self._poller.register(fd, select.POLLIN)

    @property
    def max_bytes(self) -> int:
        """Largest frame accepted (adjustable between frames)."""
        return int(self._decoder.max_bytes)

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        self._decoder.max_bytes = value

    def pending(self) -> bool:
        """Whether anything arrived that no request asked for (a worker must be silent between calls).

        Example:
            >>> r, w = os.pipe()
            >>> reader = ReplyReader(r, max_bytes=1024)
            >>> before = reader.pending()
            >>> _ = os.write(w, b"x")
            >>> before, reader.pending()
            (False, True)
        """
        return bool(self._ready) or self.eof or bool(self._poller.poll(0))

    def next(self, *, deadline: float) -> Frame | None:
        """The next frame, or ``None`` on EOF. Raises :class:`TimeoutError` at the deadline.

        Raises:
            ProtocolError: If the peer sends a malformed frame.
        """
        while not self._ready:
            if self.eof:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no reply from the sandbox supervisor")
            if not self._poller.poll(remaining * 1000):
                continue
            try:
                data = os.read(self.fd, 1 << 16)
            except (ConnectionResetError, BrokenPipeError):
                data = b""
            if not data:
                self.eof = True
                continue
            if self._unwrap is not None:
                data = self._unwrap(data)
            try:
                self._ready.extend(self._decoder.feed(data))
            except _frames.FrameError as exc:
                raise ProtocolError(f"malformed reply from the sandbox supervisor: {exc}") from exc
        return self._ready.pop(0)


def new_request_id() -> str:
    """A fresh random id for one request (the supervisor echoes it; the call's own process never sees it).

    Example:
        >>> len(new_request_id()), new_request_id() != new_request_id()
        (32, True)
    """
    return secrets.token_hex(16)


def check_reply_id(frame: Frame, request_id: str) -> None:
    """Refuse a reply that does not answer ``request_id`` (forged, or meant for another request).

    Raises:
        ProtocolError: The ids differ: the connection is desynchronised and the worker must be replaced.

    Example:
        >>> check_reply_id(({"id": "a1"}, []), "a1")
        >>> check_reply_id(({"id": "b2"}, []), "a1")
        Traceback (most recent call last):
        ...
        turnkit.sandbox._wire.ProtocolError: a reply out of turn from the sandbox supervisor (desynchronised)
    """
    if frame[0].get("id") != request_id:
        raise ProtocolError("a reply out of turn from the sandbox supervisor (desynchronised)")


def broken_worker_result(frame: Frame) -> ExecResult | None:
    """The fault result of a ``worker_broken`` reply (the worker could no longer start calls; nothing ran), or ``None``.

    Example:
        >>> broken_worker_result(({"fault": "worker_broken", "detail": "it exited"}, [])).stderr
        '[turnkit sandbox] the sandbox worker can no longer start calls (it exited)\\n'
        >>> broken_worker_result(({"exit_code": 0}, [b"", b""])) is None
        True
    """
    header = frame[0]
    if header.get("fault") != "worker_broken":
        return None
    detail = str(header.get("detail", ""))[:300]
    return infra_result(f"the sandbox worker can no longer start calls ({detail})", fault="worker_broken")


def result_from_frame(frame: Frame) -> ExecResult:
    """Validate an execution reply (two blobs: stdout, stderr) and build the result.

    Raises:
        ProtocolError: If the reply is malformed.

    Example:
        >>> result_from_frame(({"exit_code": 3}, [b"", b"boom"])).stderr
        'boom'
    """
    header, blobs = frame
    if len(blobs) != 2:
        raise ProtocolError(f"malformed reply from the sandbox supervisor: {len(blobs)} blobs")
    try:
        return result_from_wire(header, blobs[0], blobs[1])
    except SandboxError as exc:
        raise ProtocolError(str(exc)) from exc


def check_file_reply(frame: Frame | None, what: str) -> list[bytes]:
    """Validate a reply to a ``read``/``write`` request; return its blobs.

    Example:
        >>> check_file_reply(({"ok": True}, [b"x"]), "read 'a'")
        [b'x']
    """
    if frame is None:
        raise SandboxError(f"cannot {what}: the sandbox supervisor exited")
    header, blobs = frame
    if header.get("ok") is not True:
        raise SandboxError(f"cannot {what}: {header.get('error', 'unknown error')}")
    return blobs
