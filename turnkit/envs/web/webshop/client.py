"""An env's HTTP connection to the shop server: keep-alive, a timeout on every request, typed failures.

Example:
    >>> client = ShopClient(timeout_s=5.0)
    >>> sid = client.new_session(seed=1, split="id")
    >>> status, page = client.get(f"/s/{sid}/")
    >>> status, b"Search" in page
    (200, True)
    >>> client.close()
"""

from __future__ import annotations

import http.client
import json
from typing import Any

from turnkit.envs.web.webshop.server import ShopServer, shop_server
from turnkit.errors import EnvError


class ShopServerError(EnvError):
    """The shop server died, hung or lost the session (an infrastructure fault, not the agent's)."""


class ShopClient:
    """One keep-alive connection to the process's :class:`~turnkit.envs.web.webshop.server.ShopServer`.

    Args:
        timeout_s: Deadline of one request (connect, send and read).

    The client binds to the server alive at :meth:`new_session`; if that server stops, every later request
    raises :class:`ShopServerError` (its sessions are gone) until the next :meth:`new_session`, which starts a
    fresh server. A copy (``copy.deepcopy``, pickling: how ``turnkit`` clones an env without a spec) is
    unconnected until its own :meth:`new_session`, so a copied env must be reset before it steps.
    """

    def __init__(self, timeout_s: float = 5.0) -> None:
        if timeout_s <= 0:
            raise EnvError(f"timeout_s must be > 0, got {timeout_s}")
        self.timeout_s = timeout_s
        self.server: ShopServer | None = None
        self._conn: http.client.HTTPConnection | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Copies and pickles keep the settings only: a copy connects on its own next :meth:`new_session`."""
        return {"timeout_s": self.timeout_s, "server": None, "_conn": None}

    def new_session(self, seed: int, split: str) -> str:
        """Start a session on the (possibly new) server and return its id."""
        if self.server is None or not self.server.alive:
            self.close()
            self.server = shop_server()
        status, body = self.request("POST", "/sessions", json.dumps({"seed": seed, "split": split}).encode())
        if status != 200:
            raise ShopServerError(f"the shop server refused a new session: HTTP {status}: {body[:200]!r}")
        return str(json.loads(body)["sid"])

    def get(self, path: str) -> tuple[int, bytes]:
        """``GET path``: ``(status, body)``."""
        return self.request("GET", path)

    def state(self, sid: str) -> dict[str, Any]:
        """Session ``sid``'s state (the server's JSON)."""
        status, body = self.get(f"/s/{sid}/state")
        if status != 200:
            raise ShopServerError(f"session {sid} is gone from the shop server: HTTP {status}")
        return json.loads(body)

    def put_state(self, sid: str, state: dict[str, Any]) -> None:
        """Install ``state`` as session ``sid`` (creating it if needed)."""
        status, body = self.request("PUT", f"/s/{sid}/state", json.dumps(state).encode())
        if status != 200:
            raise ShopServerError(f"the shop server refused a session state: HTTP {status}: {body[:200]!r}")

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """Send one request; a broken keep-alive connection is retried once on a new one.

        Raises:
            ShopServerError: The server is down, did not answer within ``timeout_s``, or was never started.
        """
        server = self.server
        if server is None:
            raise ShopServerError("no shop session yet: call reset()")
        if not server.alive:
            raise ShopServerError(f"the shop server at {server.url} stopped; its sessions are lost")
        last: Exception | None = None
        for _ in range(2):
            if self._conn is None:
                host, port = server.server_address[:2]
                self._conn = http.client.HTTPConnection(str(host), int(port), timeout=self.timeout_s)
            try:
                self._conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
                response = self._conn.getresponse()
                return response.status, response.read()
            except (OSError, http.client.HTTPException) as exc:
                last = exc
                self._conn.close()
                self._conn = None
                if isinstance(exc, TimeoutError):
                    break  # a hung server: do not wait twice
        raise ShopServerError(f"{method} {path} to the shop server at {server.url} failed: {last!r}")

    def close(self) -> None:
        """Close the connection (idempotent; the server keeps running for other envs)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
