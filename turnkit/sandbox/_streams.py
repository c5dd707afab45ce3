"""The pipes of one call, as its supervisor reads and writes them (standard library only).

:class:`EndReport` is the status line a spare child writes as its call ends, :class:`Capture` one output pipe
read into a capped buffer, :class:`Feeder` the child's stdin written without blocking. Part of the supervisor's
script (see :func:`turnkit.sandbox._wire.supervisor_source`).

Example:
    >>> r, w = os.pipe()
    >>> _ = os.write(w, b"hello"); os.close(w)
    >>> cap = Capture(r, cap=3)
    >>> cap.read(), bytes(cap.buf), cap.truncated
    (True, b'hel', True)
"""

from __future__ import annotations

import json
import os

from turnkit.sandbox._frames import CHUNK


class EndReport:
    """The status line a spare child writes as its call ends (``None`` until a valid one arrived)."""

    def __init__(self, fd: int | None) -> None:
        self.fd, self.buf, self.closed = fd, b"", fd is None
        self.started = False
        """The child got the request (it wrote ``S`` before running anything of the call)."""

    def read(self) -> dict[str, float] | None:
        assert self.fd is not None
        try:
            data = os.read(self.fd, 4096)
        except BlockingIOError:
            return None
        if not data:
            self.closed = True
            return None
        self.buf += data[:4096]
        if not self.started and self.buf.startswith(b"S"):
            self.started, self.buf = True, self.buf[1:]
        line, sep, _ = self.buf.partition(b"\n")
        if not sep:
            return None
        try:
            end = json.loads(line)
            report = {k: float(end[k]) for k in ("exit_code", "cpu_s", "max_rss_kb")}
        except (ValueError, KeyError, TypeError, RecursionError):
            report = None
        if report is None or not _plausible(report):
            self.closed = True  # garbage (the code wrote it): wait for the child's exit instead
            return None
        return report

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _plausible(report: dict[str, float]) -> bool:
    """An end report the supervisor can use: an exit code of 0-255 and finite, non-negative resource figures.

    Example:
        >>> _plausible({"exit_code": 3, "cpu_s": 0.1, "max_rss_kb": 9e3}), _plausible({"exit_code": float("nan"),
        ...     "cpu_s": 0, "max_rss_kb": 0}), _plausible({"exit_code": 0, "cpu_s": float("inf"), "max_rss_kb": 0})
        (True, False, False)
    """
    code, cpu, rss = report["exit_code"], report["cpu_s"], report["max_rss_kb"]
    return 0 <= code <= 255 and code == int(code) and 0 <= cpu < 1e9 and 0 <= rss < 1e12


class Capture:
    """One output pipe, read into a buffer of at most ``cap`` bytes."""

    def __init__(self, fd: int, cap: int) -> None:
        self.fd, self.cap = fd, cap
        self.buf = bytearray()
        self.truncated = False
        self.eof = False

    def read(self) -> bool:
        """Read once; return False at end of file."""
        data = os.read(self.fd, CHUNK)
        if not data:
            self.eof = True
            return False
        room = self.cap - len(self.buf)
        if len(data) > room:
            self.buf += data[: max(room, 0)]
            self.truncated = True
        else:
            self.buf += data
        return True

    def drain(self) -> None:
        """Take what the dead writers left in the pipe, then close it."""
        os.set_blocking(self.fd, False)
        try:
            while not self.eof and not self.truncated and self.read():
                pass
        except BlockingIOError:
            pass
        os.close(self.fd)


class Feeder:
    """Writes the child's stdin without blocking the supervisor."""

    def __init__(self, fd: int, data: bytes) -> None:
        self.fd: int | None = fd
        self.pending = memoryview(data)
        if not data:
            self.close()

    def write(self) -> bool:
        """Write a chunk; return False once done (all written or the reader is gone)."""
        if self.fd is None:
            return False
        try:
            n = os.write(self.fd, self.pending[:CHUNK])
            self.pending = self.pending[n:]
        except BlockingIOError:
            return True
        except BrokenPipeError:
            self.pending = self.pending[:0]
        if self.pending:
            return True
        self.close()
        return False

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
