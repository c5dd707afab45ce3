"""CDPConnection against a fake browser made of two pipes (no Chromium needed)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator

import pytest

from turnkit.browser.cdp import CallTimeout, CDPConnection, ConnectionClosed, ProtocolError


class FakeBrowser:
    def __init__(self) -> None:
        self.cmd_r, cmd_w = os.pipe()  # we read the commands the connection writes
        out_r, self.out_w = os.pipe()  # we write replies and events
        self.conn = CDPConnection(read_fd=out_r, write_fd=cmd_w)

    def command(self) -> dict:
        raw = b""
        while not raw.endswith(b"\0"):
            raw += os.read(self.cmd_r, 1)
        return json.loads(raw[:-1])

    def emit(self, msg: dict) -> None:
        os.write(self.out_w, json.dumps(msg).encode() + b"\0")

    def close(self) -> None:
        self.conn.close()
        for fd in (self.cmd_r, self.out_w):
            with contextlib.suppress(OSError):
                os.close(fd)


@pytest.fixture
def fake() -> Iterator[FakeBrowser]:
    f = FakeBrowser()
    yield f
    f.close()


def soon() -> float:
    return time.monotonic() + 1.0


def test_sends_nul_terminated_json_with_session(fake: FakeBrowser) -> None:
    msg_id = fake.conn.send("Page.navigate", {"url": "x"}, session_id="S1")
    assert fake.command() == {"id": msg_id, "method": "Page.navigate", "params": {"url": "x"}, "sessionId": "S1"}


def test_returns_the_matching_reply_even_after_others(fake: FakeBrowser) -> None:
    first = fake.conn.send("A")
    second = fake.conn.send("B")
    fake.emit({"id": second, "result": {"who": "B"}})
    fake.emit({"id": first, "result": {"who": "A"}})
    assert fake.conn.wait_reply(first, deadline=soon()) == {"who": "A"}
    assert fake.conn.wait_reply(second, deadline=soon()) == {"who": "B"}


def test_protocol_error_is_raised_with_its_message(fake: FakeBrowser) -> None:
    msg_id = fake.conn.send("Bad.method")
    fake.emit({"id": msg_id, "error": {"code": -32601, "message": "'Bad.method' wasn't found"}})
    with pytest.raises(ProtocolError, match="wasn't found"):
        fake.conn.wait_reply(msg_id, deadline=soon(), method="Bad.method")


def test_events_reach_the_handler_while_waiting(fake: FakeBrowser) -> None:
    seen = []
    fake.conn.on_event = seen.append
    msg_id = fake.conn.send("X")
    fake.emit({"method": "Page.loadEventFired", "params": {}})
    fake.emit({"id": msg_id, "result": {}})
    fake.conn.wait_reply(msg_id, deadline=soon())
    assert [e["method"] for e in seen] == ["Page.loadEventFired"]


def test_wait_event_consumes_the_first_match(fake: FakeBrowser) -> None:
    fake.emit({"method": "A", "params": {"n": 1}})
    fake.emit({"method": "B", "params": {"n": 2}})
    ev = fake.conn.wait_event(lambda m: m["method"] == "B", deadline=soon(), what="B")
    assert ev["params"] == {"n": 2}
    assert [e["method"] for e in fake.conn.events] == ["A"]


def test_fired_commands_drop_their_replies(fake: FakeBrowser) -> None:
    fake.conn.fire("Fetch.failRequest", {"requestId": "1"})
    fired = fake.command()["id"]
    msg_id = fake.conn.send("Y")
    fake.emit({"id": fired, "result": {}})
    fake.emit({"id": msg_id, "result": {"ok": True}})
    assert fake.conn.wait_reply(msg_id, deadline=soon()) == {"ok": True}
    assert fired not in fake.conn._replies


def test_silence_times_out(fake: FakeBrowser) -> None:
    msg_id = fake.conn.send("Slow")
    start = time.monotonic()
    with pytest.raises(CallTimeout, match="Slow"):
        fake.conn.wait_reply(msg_id, deadline=start + 0.2, method="Slow")
    assert time.monotonic() - start < 1.0


def test_a_closed_browser_end_is_reported(fake: FakeBrowser) -> None:
    msg_id = fake.conn.send("X")
    os.close(fake.out_w)
    with pytest.raises(ConnectionClosed, match="exited"):
        fake.conn.wait_reply(msg_id, deadline=soon())


def test_writing_to_a_closed_pipe_is_connection_closed(fake: FakeBrowser) -> None:
    os.close(fake.cmd_r)
    with pytest.raises(ConnectionClosed):
        fake.conn.send("X")


def test_bound_method_handlers_are_held_weakly(fake: FakeBrowser) -> None:
    class Owner:
        def handle(self, msg: dict) -> None:
            pass

    owner = Owner()
    fake.conn.on_event = owner.handle
    assert fake.conn.on_event is not None
    del owner
    assert fake.conn.on_event is None
