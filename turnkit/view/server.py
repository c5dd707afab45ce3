"""The viewer's HTTP server: loopback only, standard library only, the page from the package's own files.

Routes: ``/`` (the page), ``/static/<file>`` (its script and style), ``/api/<route>`` (:mod:`turnkit.view.api`)
and ``/files/<path>`` (the PNG pictures runs draw, from under the root only); ``/favicon.ico`` is an empty 204.
The page loads nothing from elsewhere: no CDN, no web font (a ``Content-Security-Policy`` of ``'self'`` says so
to the browser too, with no inline styles or scripts), so it works offline.

Only loopback names reach it: a request whose ``Host`` header is not ``localhost``, ``127.x.x.x`` or ``[::1]``
with the server's port is refused with a 403 (:func:`check_host_header`). A page on another site that rebinds
its own name to 127.0.0.1 (DNS rebinding) would send its own name, so it cannot read the API.

A request never brings the server down: the API answers bad files with messages, and anything unexpected is
a 500 whose body names the exception in one line (the traceback goes to the server's log, not the page).

Example:
    >>> import json, tempfile, threading, urllib.request
    >>> server = make_server(tempfile.mkdtemp(), port=0)
    >>> thread = threading.Thread(target=server.serve_forever, daemon=True); thread.start()
    >>> with urllib.request.urlopen(server.url + "api/sources") as reply:
    ...     json.load(reply)["sources"]
    []
    >>> server.shutdown(); server.server_close()
    >>> make_server(".", host="0.0.0.0")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: turnkit view serves on a loopback address only (...), not '0.0.0.0'
"""

from __future__ import annotations

import ipaddress
import json
import math
import socket
import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from turnkit.errors import ConfigError
from turnkit.view.api import ViewerApi
from turnkit.view.folders import inside

STATIC = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
"""The page's files (in ``turnkit/view/static/``) and their content types."""

CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'"


def check_host_header(host: str | None, port: int) -> str:
    """Why a request's ``Host`` header is refused (``""`` when it names this loopback server).

    Accepted: ``localhost``, any ``127.x.x.x`` or ``[::1]``, with ``:port`` (a header without a port only when
    the server is on port 80). Anything else, a missing header included, is refused: a browser always sends the
    name it looked up, so a DNS-rebinding page on another site sends that site's name.

    Example:
        >>> check_host_header("127.0.0.1:8765", 8765), check_host_header("[::1]:8765", 8765)
        ('', '')
        >>> check_host_header("localhost:8765", 8765), check_host_header("127.3.2.1:8765", 8765)
        ('', '')
        >>> check_host_header("evil.example:8765", 8765)
        "Host header 'evil.example:8765' is not a loopback name"
        >>> check_host_header("localhost:9999", 8765)
        "Host header 'localhost:9999' names port 9999, not this server's 8765"
    """
    if not host:
        return "no Host header"
    name, sep, tail = host.rpartition(":")
    if not sep or name.endswith(":") or (host.startswith("[") and host.endswith("]")):
        name, tail = host, ""  # no port (a bare IPv6 address in brackets included)
    if tail and not tail.isdigit():
        return f"Host header {host!r} has a bad port"
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    elif ":" in name:
        return f"Host header {host!r} is not a loopback name"
    if name.lower() != "localhost":
        try:
            loopback = ipaddress.ip_address(name).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            return f"Host header {host!r} is not a loopback name"
    given = int(tail) if tail else 80
    if given != port:
        named = f"port {given}" if tail else "no port (so 80)"
        return f"Host header {host!r} names {named}, not this server's {port}"
    return ""


def check_loopback(host: str) -> None:
    """Refuse a host that is not a loopback address.

    Raises:
        ConfigError: Naming the host.

    Example:
        >>> check_loopback("127.0.0.1"); check_loopback("::1"); check_loopback("localhost")
    """
    if host == "localhost":
        return
    try:
        ok = ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(f"turnkit view serves on a loopback address only (127.0.0.1, ::1, localhost), not {host!r}")


class ViewerServer(ThreadingHTTPServer):
    """A threading HTTP server bound to a loopback address, answering for one root folder.

    Attributes:
        api: The :class:`~turnkit.view.api.ViewerApi`.
        url: ``http://HOST:PORT/``.
        quiet: Do not log requests.
    """

    daemon_threads = True

    def __init__(self, root: str | Path, host: str, port: int, *, quiet: bool = True) -> None:
        check_loopback(host)
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.api = ViewerApi(root)
        self.quiet = quiet
        super().__init__((host, port), _Handler)
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.server_address[1]}/"


def make_server(root: str | Path, *, host: str = "127.0.0.1", port: int = 0, quiet: bool = True) -> ViewerServer:
    """A :class:`ViewerServer` for ``root`` (``port=0``: a free port); call ``serve_forever()`` on it.

    Raises:
        ConfigError: ``host`` is not a loopback address.
        OSError: The port is taken.
    """
    return ViewerServer(root, host, port, quiet=quiet)


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer
    server_version = "turnkit-view"

    def do_GET(self) -> None:
        try:
            self._get()
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # the page gets one line; the log gets the traceback
            traceback.print_exc(file=sys.stderr)
            self._json(500, {"error": f"internal error answering {self.path}: {type(exc).__name__}: {exc}"})

    def _get(self) -> None:
        refused = check_host_header(self.headers.get("Host"), self.server.server_address[1])
        if refused:
            message = (
                f"refused: {refused}; turnkit view answers only requests to a loopback name (localhost, "
                f"127.0.0.1 or [::1]) with its port {self.server.server_address[1]}, so that pages of other sites "
                "cannot read it (DNS rebinding)"
            )
            return self._json(403, {"error": message})
        url = urlsplit(self.path)
        path = unquote(url.path)
        if path == "/favicon.ico":
            return self._send(204, "image/x-icon", b"")
        if path in ("/", "/index.html"):
            return self._static("index.html")
        if path.startswith("/static/"):
            return self._static(path[len("/static/") :])
        if path.startswith("/api/"):
            status, body = self.server.api.answer(path[len("/api/") :], dict(parse_qsl(url.query)))
            return self._json(status, body)
        if path.startswith("/files/"):
            return self._file(path[len("/files/") :])
        return self._json(404, {"error": f"no page {path!r}"})

    def _static(self, name: str) -> None:
        if name not in STATIC:
            return self._json(404, {"error": f"no static file {name!r}"})
        body = resources.files("turnkit.view").joinpath("static", name).read_bytes()
        self._send(200, STATIC[name], body)

    def _file(self, rel: str) -> None:
        path = inside(self.server.api.root, rel)
        if path is None or path.suffix.lower() != ".png" or not path.is_file():
            return self._json(404, {"error": f"no picture {rel!r} under the root"})
        self._send(200, "image/png", path.read_bytes())

    def _json(self, status: int, body: dict[str, Any]) -> None:
        try:
            text = json.dumps(body, allow_nan=False, default=str)
        except ValueError:  # NaN or infinity in a record: JSON has no such numbers, the page shows null
            text = json.dumps(_finite(body), allow_nan=False, default=str)
        self._send(status, "application/json; charset=utf-8", text.encode())

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        if not self.server.quiet:
            super().log_message(format, *args)


def _finite(value: Any) -> Any:
    """``value`` with non-finite floats replaced by ``None`` (recursively).

    Example:
        >>> _finite({"a": [1.0, float("nan")], "b": float("inf")})
        {'a': [1.0, None], 'b': None}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
