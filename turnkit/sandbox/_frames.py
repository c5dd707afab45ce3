"""Length-prefixed frames: the wire format between the host and the in-sandbox supervisor (standard library only).

Frame: ``b"TKF1"``, a 4-byte big-endian header length, a JSON header, then the blobs whose lengths the header lists
under ``"blobs"``. The supervisor's script is this module, :mod:`turnkit.sandbox._harness` and
:mod:`turnkit.sandbox._supervisor` joined into one source (see :func:`turnkit.sandbox._wire.supervisor_source`).

Example:
    >>> frame = encode_frame({"op": "ping"}, [b"abc"])
    >>> dec = FrameDecoder(max_bytes=1 << 20)
    >>> dec.feed(frame)
    [({'op': 'ping', 'blobs': [3]}, [b'abc'])]
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Sequence
from typing import Any

MAGIC = b"TKF1"
_HEAD = struct.Struct(">I")
CHUNK = 65536

Frame = tuple[dict[str, Any], list[bytes]]


def encode_frame(header: dict[str, Any], blobs: Sequence[bytes] = ()) -> bytes:
    """Encode one frame.

    Example:
        >>> encode_frame({}, [])[:4]
        b'TKF1'
    """
    data = [bytes(b) for b in blobs]
    head = dict(header)
    head["blobs"] = [len(b) for b in data]
    raw = json.dumps(head, separators=(",", ":")).encode("utf-8")
    return MAGIC + _HEAD.pack(len(raw)) + raw + b"".join(data)


class FrameError(ValueError):
    """A malformed or oversized frame."""


class FrameDecoder:
    r"""Incremental frame decoder with a size bound (the peer is not trusted).

    Args:
        max_bytes: Largest frame accepted (header plus blobs).

    Example:
        >>> dec = FrameDecoder(max_bytes=64)
        >>> dec.feed(b"TKF1")
        []
        >>> dec.feed(b"\xff\xff\xff\xff")
        Traceback (most recent call last):
        ...
        turnkit.sandbox._frames.FrameError: frame header of 4294967295 bytes exceeds 64
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        """Add bytes; return the frames completed so far as ``(header, blobs)`` pairs."""
        self._buf += data
        frames: list[Frame] = []
        while True:
            frame = self._take()
            if frame is None:
                return frames
            frames.append(frame)

    def _take(self) -> Frame | None:
        buf = self._buf
        if len(buf) < 8:
            return None
        if bytes(buf[:4]) != MAGIC:
            raise FrameError(f"bad frame magic {bytes(buf[:4])!r}")
        (hlen,) = _HEAD.unpack(bytes(buf[4:8]))
        if hlen > self.max_bytes:
            raise FrameError(f"frame header of {hlen} bytes exceeds {self.max_bytes}")
        if len(buf) < 8 + hlen:
            return None
        try:
            header = json.loads(bytes(buf[8 : 8 + hlen]).decode("utf-8"))
        except ValueError as exc:
            raise FrameError(f"frame header is not JSON: {exc}") from exc
        sizes = header.get("blobs") if isinstance(header, dict) else None
        if not isinstance(sizes, list) or not all(isinstance(n, int) and n >= 0 for n in sizes):
            raise FrameError("frame header has no valid blob sizes")
        total = 8 + hlen + sum(sizes)
        if total > self.max_bytes:
            raise FrameError(f"frame of {total} bytes exceeds {self.max_bytes}")
        if len(buf) < total:
            return None
        blobs, pos = [], 8 + hlen
        for n in sizes:
            blobs.append(bytes(buf[pos : pos + n]))
            pos += n
        del buf[:total]
        return header, blobs


def read_frame(fd: int, max_bytes: int) -> Frame:
    """Read one frame from ``fd`` (blocking); ``EOFError`` if it closes first."""
    dec = FrameDecoder(max_bytes)
    while True:
        data = os.read(fd, CHUNK)
        if not data:
            raise EOFError("stdin closed")
        frames = dec.feed(data)
        if frames:
            return frames[0]


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to a blocking ``fd``."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
