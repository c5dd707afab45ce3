"""A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe``.

Chromium reads NUL-terminated JSON commands from file descriptor 3 and writes replies and events to file
descriptor 4. Talking to those pipes directly needs no websocket library, no driver process and no event
loop, and every wait has a deadline: a hung browser becomes a :class:`CallTimeout`, a dead one a
:class:`ConnectionClosed`. Events are passed to a handler as they arrive (so that network interception
and dialogs are answered while a command is pending) and are also queued for :meth:`CDPConnection.wait_event`.

Example:
    >>> import os, json, time
    >>> a_r, a_w = os.pipe(); b_r, b_w = os.pipe()  # a fake browser that we answer by hand
    >>> conn = CDPConnection(read_fd=b_r, write_fd=a_w)
    >>> msg_id = conn.send("Browser.getVersion")
    >>> json.loads(os.read(a_r, 1000).rstrip(b"\\0"))["method"]
    'Browser.getVersion'
    >>> _ = os.write(b_w, json.dumps({"id": msg_id, "result": {"product": "Fake/1"}}).encode() + b"\\0")
    >>> conn.wait_reply(msg_id, deadline=time.monotonic() + 1)["product"]
    'Fake/1'
    >>> conn.close(); os.close(a_r); os.close(b_w)
"""

from __future__ import annotations

import inspect
import json
import os
import select
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from turnkit.browser.errors import BrowserError

EventHandler = Callable[[dict[str, Any]], None]


class ConnectionClosed(BrowserError):
    """The browser closed its end of the pipe (it exited or was killed)."""


class CallTimeout(BrowserError):
    """No reply arrived before the deadline."""


class ProtocolError(BrowserError):
    """The browser answered a command with a protocol error."""


class CDPConnection:
    """JSON messages to and from Chromium over a pair of pipes.

    Args:
        read_fd: The descriptor Chromium writes to (its fd 4), opened for reading.
        write_fd: The descriptor Chromium reads from (its fd 3), opened for writing.
        on_event: Called with every event message (``{"method": ..., "params": ..., "sessionId": ...}``);
            it may :meth:`send` but must not wait.
    """

    def __init__(self, read_fd: int, write_fd: int, on_event: EventHandler | None = None) -> None:
        self._rfd, self._wfd = read_fd, write_fd
        os.set_blocking(self._wfd, False)
        self._buf = b""
        self._next_id = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._ignored: set[int] = set()
        self.events: deque[dict[str, Any]] = deque(maxlen=1000)
        self._handler: Callable[[], EventHandler | None] = lambda: None
        self.on_event = on_event
        self.closed = False

    @property
    def on_event(self) -> EventHandler | None:
        """The event handler. A bound method is held weakly, so that the connection keeps its owner alive."""
        return self._handler()

    @on_event.setter
    def on_event(self, handler: EventHandler | None) -> None:
        if inspect.ismethod(handler):
            self._handler = weakref.WeakMethod(handler)
        else:
            self._handler = lambda: handler

    def send(self, method: str, params: dict[str, Any] | None = None, session_id: str | None = None) -> int:
        """Send one command without waiting; returns its message id."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session_id is not None:
            msg["sessionId"] = session_id
        self._write(json.dumps(msg).encode() + b"\0", time.monotonic() + 10.0)
        return self._next_id

    def fire(self, method: str, params: dict[str, Any] | None = None, session_id: str | None = None) -> None:
        """Send a command whose reply is dropped (e.g. answering an intercepted request from an event handler)."""
        self._ignored.add(self.send(method, params, session_id))

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, session_id: str | None = None, deadline: float
    ) -> dict[str, Any]:
        """Send a command and wait for its result until ``deadline`` (a ``time.monotonic()`` value)."""
        return self.wait_reply(self.send(method, params, session_id), deadline=deadline, method=method)

    def wait_reply(self, msg_id: int, *, deadline: float, method: str = "command") -> dict[str, Any]:
        """Wait for the reply to message ``msg_id``; raise :class:`ProtocolError` if it is an error."""
        while msg_id not in self._replies:
            self._read_one(deadline, f"{method} (id {msg_id})")
        reply = self._replies.pop(msg_id)
        if "error" in reply:
            err = reply["error"]
            raise ProtocolError(f"{method} failed: {err.get('message', err)} ({err.get('data', '')})".rstrip(" ()"))
        result: dict[str, Any] = reply.get("result", {})
        return result

    def wait_event(self, predicate: Callable[[dict[str, Any]], bool], *, deadline: float, what: str) -> dict[str, Any]:
        """Wait for (and consume) the first queued or arriving event for which ``predicate`` is true."""
        while True:
            for ev in list(self.events):
                if predicate(ev):
                    self.events.remove(ev)
                    return ev
            self._read_one(deadline, what)

    def close(self) -> None:
        """Close both descriptors (idempotent)."""
        if not self.closed:
            self.closed = True
            for fd in (self._rfd, self._wfd):
                try:
                    os.close(fd)
                except OSError:  # already closed by the owner: nothing left to release
                    continue

    # ------------------------------------------------------------------ internals
    def _write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            if self.closed:
                raise ConnectionClosed("the DevTools pipe is closed")
            _, ready, _ = select.select([], [self._wfd], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise CallTimeout("the browser stopped reading DevTools commands")
            try:
                n = os.write(self._wfd, view)
            except BrokenPipeError as exc:
                raise ConnectionClosed("the browser closed the DevTools pipe") from exc
            except BlockingIOError:
                continue
            view = view[n:]

    def _read_one(self, deadline: float, what: str) -> None:
        """Read until at least one complete message has been dispatched."""
        while b"\0" not in self._buf:
            if self.closed:
                raise ConnectionClosed("the DevTools pipe is closed")
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._rfd], [], [], max(0.0, left))
            if not ready:
                raise CallTimeout(f"no answer to {what} in time")
            chunk = os.read(self._rfd, 1 << 20)
            if not chunk:
                raise ConnectionClosed(f"the browser exited while waiting for {what}")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        msg = json.loads(raw)
        if "id" in msg:
            if msg["id"] in self._ignored:
                self._ignored.discard(msg["id"])
            else:
                self._replies[msg["id"]] = msg
            return
        self.events.append(msg)
        handler = self.on_event
        if handler is not None:
            handler(msg)
