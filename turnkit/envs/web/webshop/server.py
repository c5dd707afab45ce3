"""The shop's HTTP server on 127.0.0.1: one per process, many sessions, the single source of episode state.

:func:`shop_server` starts a :class:`ShopServer` lazily on an ephemeral port (a daemon thread; closed at
interpreter exit) and starts a fresh one if the last one died. Each env episode is a *session*: the env
creates it (``POST /sessions`` with the shop seed, split and goal), then every page a shopper sees is a GET
under ``/s/<sid>/``; the server updates the session as pages are visited (the query, the result page, the
product, the selected options, the purchase and its reward). ``GET``/``PUT /s/<sid>/state`` read and
install the whole session (snapshots for search); ``DELETE /s/<sid>`` ends it.

Routes under ``/s/<sid>``: ``/`` (home), ``/search?q=..&p=..``, ``/item/<pid>``,
``/item/<pid>/select?group=..&value=..``, ``/item/<pid>/buy``.

Example:
    >>> import json, urllib.request
    >>> server = shop_server()
    >>> req = urllib.request.Request(server.url + "/sessions", method="POST",
    ...     data=json.dumps({"seed": 5, "split": "id"}).encode())
    >>> sid = json.load(urllib.request.urlopen(req, timeout=5))["sid"]
    >>> page = urllib.request.urlopen(f"{server.url}/s/{sid}/search?q=lamp&p=1", timeout=5).read().decode()
    >>> "results) for: lamp" in page
    True
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import threading
from dataclasses import asdict, dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from turnkit.envs.web.webshop import pages
from turnkit.envs.web.webshop.catalogue import Goal, Shop, goal_for, shop_for
from turnkit.envs.web.webshop.reward import purchase_reward
from turnkit.envs.web.webshop.search import RESULTS_PER_PAGE, search

MAX_QUERY_CHARS = 500
"""Longer queries are cut to this length before searching (a 1 MB query is not an error)."""

MAX_SESSIONS = 10_000
"""Sessions kept per server; the oldest is dropped beyond this (envs that were never closed leak none)."""


@dataclass
class Session:
    """One episode's state on the server (JSON-serialisable with :func:`dataclasses.asdict`).

    Attributes:
        seed: The shop seed.
        split: The shop split.
        goal: The goal as JSON (scores the purchase); ``None`` means the generated goal of ``(seed, split)``.
        page: ``"home"``, ``"results"``, ``"item"`` or ``"done"``.
        query: The last search query.
        results_page: The last result page number (1-based).
        item: The product id of the last product page.
        selected: Option group -> selected value on that product.
        bought: The purchase: product id, options and reward parts.
    """

    seed: int
    split: str
    goal: dict[str, Any] | None = None
    page: str = "home"
    query: str = ""
    results_page: int = 1
    item: str | None = None
    selected: dict[str, str] = field(default_factory=dict)
    bought: dict[str, Any] | None = None

    @property
    def shop(self) -> Shop:
        """The session's catalogue."""
        return shop_for(self.seed, self.split)

    @property
    def goal_obj(self) -> Goal:
        """The goal that scores a purchase."""
        return Goal.from_json(self.goal) if self.goal is not None else goal_for(self.seed, self.split)


class ShopServer(ThreadingHTTPServer):
    """A threaded HTTP server holding the sessions (see the module docstring)."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.sessions: dict[str, Session] = {}
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        self._thread = threading.Thread(target=self.serve_forever, name="turnkit-webshop", daemon=True)
        self._thread.start()
        self._pid = os.getpid()
        self.closed = False

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def alive(self) -> bool:
        """Whether the serving thread runs."""
        return not self.closed and self._thread.is_alive()

    def new_session(self, seed: int, split: str, goal: dict[str, Any] | None) -> str:
        """Create a session and return its id."""
        with self.lock:
            sid = str(next(self._ids))
            self.sessions[sid] = Session(seed=seed, split=split, goal=goal)
            while len(self.sessions) > MAX_SESSIONS:
                self.sessions.pop(next(iter(self.sessions)))
        return sid

    def close(self) -> None:
        """Stop serving and close the socket (idempotent).

        In a forked child this does nothing: the serving thread stayed in the parent, and ``shutdown()`` would
        wait for it forever.
        """
        if not self.closed and os.getpid() == self._pid:
            self.closed = True
            self.shutdown()
            self.server_close()


_SERVER: ShopServer | None = None
_SERVER_LOCK = threading.Lock()


def shop_server() -> ShopServer:
    """The process's shop server, started on first use (and again if the last one died)."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is None or not _SERVER.alive:
            _SERVER = ShopServer()
        return _SERVER


@atexit.register
def _close_at_exit() -> None:
    if _SERVER is not None:
        _SERVER.close()


def _forget_in_child() -> None:
    """A forked child has no serving thread: it starts its own server when it needs one."""
    global _SERVER
    _SERVER = None


os.register_at_fork(after_in_child=_forget_in_child)


class _BadRequest(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per env
    disable_nagle_algorithm = True  # headers and body are two writes: without this, 40 ms delayed-ACK stalls
    server: ShopServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines."""

    def do_GET(self) -> None:
        """Serve a page, or a session's state."""
        self._dispatch("GET")

    def do_POST(self) -> None:
        """Create a session."""
        self._dispatch("POST")

    def do_PUT(self) -> None:
        """Install a session's state."""
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        """End a session."""
        self._dispatch("DELETE")

    # ------------------------------------------------------------------ plumbing
    def _dispatch(self, method: str) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, ctype, payload = self._route(method, urlsplit(self.path), body)
        except _BadRequest as exc:
            status, ctype, payload = exc.status, "text/html", pages.error_page(str(exc)).encode()
        except (ValueError, KeyError, TypeError) as exc:
            status, ctype, payload = HTTPStatus.BAD_REQUEST, "text/plain", f"bad request: {exc}".encode()
        self.send_response(status)
        self.send_header("Content-Type", f"{ctype}; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(payload)

    def _route(self, method: str, url: Any, body: bytes) -> tuple[HTTPStatus, str, bytes]:
        parts = [unquote(p) for p in url.path.split("/") if p]
        if method == "POST" and parts == ["sessions"]:
            data = json.loads(body or b"{}")
            sid = self.server.new_session(int(data["seed"]), str(data["split"]), data.get("goal"))
            return HTTPStatus.OK, "application/json", json.dumps({"sid": sid}).encode()
        if len(parts) < 2 or parts[0] != "s":
            raise _BadRequest(HTTPStatus.NOT_FOUND, f"no page at {url.path}")
        sid, rest = parts[1], parts[2:]
        if method == "PUT" and rest == ["state"]:
            with self.server.lock:
                self.server.sessions[sid] = Session(**json.loads(body))
            return HTTPStatus.OK, "application/json", b"{}"
        with self.server.lock:
            session = self.server.sessions.get(sid)
        if session is None:
            raise _BadRequest(HTTPStatus.NOT_FOUND, f"no session {sid!r} (it ended, or the server restarted)")
        if method == "DELETE" and not rest:
            with self.server.lock:
                self.server.sessions.pop(sid, None)
            return HTTPStatus.OK, "application/json", b"{}"
        if method == "GET" and rest == ["state"]:
            return HTTPStatus.OK, "application/json", json.dumps(asdict(session)).encode()
        if method != "GET":
            raise _BadRequest(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} {url.path} is not supported")
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        return HTTPStatus.OK, "text/html", _page(session, f"/s/{sid}", rest, query).encode()


def _page(session: Session, base: str, rest: list[str], query: dict[str, str]) -> str:
    """Update ``session`` for a visit to ``rest`` and return the page."""
    shop = session.shop
    if session.page == "done":
        raise _BadRequest(HTTPStatus.CONFLICT, "this session already bought a product")
    if not rest:
        session.page = "home"
        return pages.home_page(base)
    if rest == ["search"]:
        text = query.get("q", "")[:MAX_QUERY_CHARS]
        hits = search(shop, text)
        n_pages = max(1, -(-len(hits) // RESULTS_PER_PAGE))
        page_no = min(max(1, int(query.get("p", "1") or 1)), n_pages)
        session.page, session.query, session.results_page = "results", text, page_no
        return pages.results_page(base, text, hits, page_no, RESULTS_PER_PAGE)
    if rest[0] != "item" or len(rest) not in (2, 3):
        raise _BadRequest(HTTPStatus.NOT_FOUND, f"no page at {base}/{'/'.join(rest)}")
    product = shop.get(rest[1])
    if product is None:
        raise _BadRequest(HTTPStatus.NOT_FOUND, f"no product {rest[1]!r}")
    if session.item != product.pid:
        session.selected = {}
    session.page, session.item = "item", product.pid
    back = pages.search_url(base, session.query, session.results_page) if session.query else None
    if len(rest) == 3 and rest[2] == "select":
        group, value = query.get("group", ""), query.get("value", "")
        if not product.offers(group, value):
            raise _BadRequest(HTTPStatus.NOT_FOUND, f"{product.pid} has no option {group}={value}")
        session.selected[group] = value
    elif len(rest) == 3 and rest[2] == "buy":
        parts = purchase_reward(product, session.selected, session.goal_obj)
        session.page = "done"
        session.bought = {"pid": product.pid, "options": dict(session.selected), "reward": asdict(parts)}
        return pages.done_page(product, session.selected, parts)
    elif len(rest) == 3:
        raise _BadRequest(HTTPStatus.NOT_FOUND, f"no page at {base}/{'/'.join(rest)}")
    return pages.item_page(base, product, session.selected, back)
