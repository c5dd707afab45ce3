"""The two ways an env looks at a shop page: the server's HTML parsed in Python, or the live page in Chromium.

Both fetch every page from the shop server (the single source of state) and return a
:class:`~turnkit.envs.web.webshop.view.PageView`; a test checks that they agree label for label.

* :class:`TextRenderer` (``render="text"``, the training default): ``GET`` over the env's keep-alive
  connection, then :func:`~turnkit.envs.web.webshop.view.parse_page`.
* :class:`ChromiumRenderer` (``render="chromium"``): a :class:`turnkit.browser.Tab` navigates to the page;
  its requests for the shop's origin are forwarded to the server, every other request is blocked. The view
  is read from the DOM (:data:`~turnkit.envs.web.webshop.view.PAGE_VIEW_JS`); :meth:`ChromiumRenderer.screenshot`
  gives the pixels.

Example:
    >>> from turnkit.envs.web.webshop.client import ShopClient
    >>> client = ShopClient()
    >>> sid = client.new_session(seed=2, split="id")
    >>> TextRenderer(client).show(f"/s/{sid}/").has_search
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from turnkit.envs.web.webshop.client import ShopClient, ShopServerError
from turnkit.envs.web.webshop.view import PAGE_VIEW_JS, PageView, parse_page
from turnkit.errors import EnvError


class PageGone(Exception):
    """The server answered a page request with an error status (an unknown product, a finished session)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class TextRenderer:
    """Fetch pages over HTTP and read them with ``html.parser``."""

    def __init__(self, client: ShopClient) -> None:
        self.client = client

    def show(self, path: str) -> PageView:
        """The page at ``path`` (a server path such as ``/s/3/search?q=lamp&p=1``).

        Raises:
            PageGone: The server answered with an error status.
            ShopServerError: The server is unreachable.
        """
        status, body = self.client.get(path)
        html = body.decode("utf-8", "replace")
        if status != 200:
            raise PageGone(status, parse_page(html).lines[0] if "line" in html else html[:200])
        return parse_page(html)

    def close(self) -> None:
        """Nothing to release (the connection belongs to the client)."""


class ChromiumRenderer:
    """Show pages in a Chromium tab whose requests for the shop are answered by the shop server.

    Args:
        client: The env's connection to the server (the tab's requests go through it).
        viewport: The tab's size in CSS pixels.
        timeout_s: Deadline of one navigation.
    """

    def __init__(self, client: ShopClient, *, viewport: tuple[int, int] = (800, 600), timeout_s: float = 10.0) -> None:
        self.client = client
        self.viewport = viewport
        self.timeout_s = timeout_s
        self._tab: Any = None
        self._status = 200
        self._server_error: ShopServerError | None = None

    def __getstate__(self) -> dict[str, Any]:
        """A copy opens its own tab, whose resolver is the copy's (a copied tab would answer through this one)."""
        return {**self.__dict__, "_tab": None, "_server_error": None}

    def _resolve(self, request: Any) -> Any:
        from turnkit.browser import TabResponse

        server = self.client.server
        if server is None or not request.url.startswith(server.url + "/") or request.url.endswith("/favicon.ico"):
            return None  # the shop is the only site, and has no icon
        try:
            status, body = self.client.request(request.method, request.url[len(server.url) :], request.post_data)
        except ShopServerError as exc:
            self._server_error = exc  # re-raised by show(): the failed navigation is the server's fault
            return None
        if request.resource_type == "Document":
            self._status = status
        return TabResponse(status=status, body=body)

    @property
    def tab(self) -> Any:
        """The Chromium tab (started on the first page)."""
        if self._tab is None:
            from turnkit.browser import Tab

            self._tab = Tab(self._resolve, viewport=self.viewport, timeout_s=self.timeout_s)
        return self._tab

    def show(self, path: str) -> PageView:
        """Navigate the tab to ``path`` on the shop server and read the page from the DOM.

        Raises:
            PageGone: The server answered with an error status.
            ShopServerError: The server is unreachable.
            turnkit.browser.BrowserError: The browser crashed or hung.
        """
        server = self.client.server
        if server is None:
            raise EnvError("no shop session yet: call reset()")
        from turnkit.browser import PageError

        self._status, self._server_error = 0, None
        try:
            self.tab.goto(server.url + path)
        except PageError:
            if self._server_error is not None:
                raise self._server_error from None
            raise
        view = PageView.from_json(self.tab.evaluate(PAGE_VIEW_JS))
        if self._status != 200:
            raise PageGone(self._status, view.lines[0] if view.lines else f"HTTP {self._status}")
        return view

    def screenshot(self) -> np.ndarray:
        """The tab's pixels, ``(height, width, 3)`` ``uint8``."""
        return self.tab.screenshot()

    def close(self) -> None:
        """Close the tab (idempotent)."""
        if self._tab is not None:
            self._tab.close()
            self._tab = None


def make_renderer(kind: str, client: ShopClient, **kwargs: Any) -> TextRenderer | ChromiumRenderer:
    """``"text"`` or ``"chromium"``.

    Raises:
        EnvError: Unknown kind.
    """
    if kind == "text":
        return TextRenderer(client)
    if kind == "chromium":
        return ChromiumRenderer(client, **kwargs)
    raise EnvError(f"unknown WebShop render {kind!r}; choose 'text' or 'chromium'")
