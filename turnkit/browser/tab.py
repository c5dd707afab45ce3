"""`Tab`: one interactive, stateful page in headless Chromium whose every request a Python resolver answers.

:class:`~turnkit.browser.Browser` renders static HTML strings. A :class:`Tab` instead keeps a live page that
an env navigates (:meth:`Tab.goto`), scripts (:meth:`Tab.evaluate`), clicks and types into (:meth:`Tab.click`,
:meth:`Tab.insert_text`, :meth:`Tab.press`) and photographs (:meth:`Tab.screenshot`).

Isolation: every request of the page (documents, scripts, styles, XHR, form posts, redirects) is paused
through DevTools ``Fetch`` interception and handed to the resolver as a :class:`TabRequest`; its
:class:`TabResponse` is served, and ``None`` fails the request (``BlockedByClient``). Nothing reaches the
network or the disk unless the resolver fetches it itself; anything that escapes interception meets the closed
proxy of :data:`~turnkit.browser.process.LAUNCH_FLAGS`. ``data:`` URLs still work. Dialogs are dismissed,
popups closed and downloads denied. Each tab lives in its own browser context (own cookies, storage and
renderer process), so tabs cannot see each other.

Sharing: Chromium is heavy (about 0.5-1 s and 100 MB to start), and a GRPO group plays 8 copies of an env
at once. Tabs with the same launch settings therefore share one Chromium process (reference-counted: it
starts with the first tab's first :meth:`~Tab.goto` and stops when the last tab closes or is collected), one
target each. Calls through a shared browser are serialised by its lock; a resolver may run while another tab
of the same browser waits (the answer is sent from whichever thread reads the DevTools pipe).

Failures (all typed, all with deadlines):

* A script that throws in :meth:`Tab.evaluate`: :class:`~turnkit.browser.errors.PageError` (``reason="script"``)
  with the JavaScript message; the tab stays usable.
* A page that hangs past ``timeout_s``: ``PageError`` (``reason="timeout"``) while the browser itself still
  answers; the page is discarded.
* A crashed renderer, a killed browser or a browser that does not answer:
  :class:`~turnkit.browser.errors.BrowserError` (the rollout layer records it as ``ErrorCause.BROWSER``).
* After a failure the next :meth:`Tab.goto` builds a fresh page, on a fresh browser if the old one died.

Example:
    >>> def resolver(req):
    ...     if req.url == "http://site.invalid/":
    ...         return TabResponse(body=b"<button onclick='this.textContent=1+1'>go</button>")
    ...     return None  # everything else is blocked
    >>> with Tab(resolver, viewport=(200, 100)) as tab:
    ...     tab.goto("http://site.invalid/")
    ...     x, y = tab.evaluate("(() => { const r = document.querySelector('button').getBoundingClientRect();"
    ...                         " return [r.x + r.width / 2, r.y + r.height / 2]; })()")
    ...     tab.click(x, y)
    ...     tab.evaluate("document.querySelector('button').textContent"), tab.screenshot().shape
    ('2', (100, 200, 3))
"""

from __future__ import annotations

import base64
import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from turnkit.browser.browser import decode_png
from turnkit.browser.cdp import CallTimeout, ConnectionClosed
from turnkit.browser.errors import BrowserError, PageError
from turnkit.browser.process import ChromiumProcess, find_chromium


@dataclass(frozen=True)
class TabRequest:
    """One request of the page, paused for the resolver.

    Attributes:
        method: ``"GET"``, ``"POST"``...
        url: The absolute URL (fragment removed).
        headers: The request headers Chromium would send.
        post_data: The request body (form posts, ``fetch`` bodies), or ``None``.
        resource_type: DevTools resource type: ``"Document"``, ``"Script"``, ``"Stylesheet"``, ``"XHR"``...
    """

    method: str
    url: str
    headers: Mapping[str, str]
    post_data: bytes | None
    resource_type: str = ""


@dataclass(frozen=True)
class TabResponse:
    """The resolver's answer to a :class:`TabRequest`.

    Attributes:
        status: HTTP status (a 3xx with a ``Location`` header redirects).
        body: The response body.
        content_type: The ``Content-Type`` header.
        headers: More response headers (``Location``, ``Set-Cookie``...).

    Example:
        >>> TabResponse(body=b"{}", content_type="application/json").status
        200
    """

    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)


Resolver = Callable[[TabRequest], "TabResponse | None"]
"""Answers a page request; ``None`` fails (blocks) it."""

_KEYS: dict[str, tuple[str, int, str]] = {  # key name -> (code, windowsVirtualKeyCode, text)
    "Enter": ("Enter", 13, "\r"),
    "Tab": ("Tab", 9, ""),
    "Escape": ("Escape", 27, ""),
    "Backspace": ("Backspace", 8, ""),
    "Delete": ("Delete", 46, ""),
    "ArrowUp": ("ArrowUp", 38, ""),
    "ArrowDown": ("ArrowDown", 40, ""),
    "ArrowLeft": ("ArrowLeft", 37, ""),
    "ArrowRight": ("ArrowRight", 39, ""),
    " ": ("Space", 32, " "),
}
"""Keys :meth:`Tab.press` knows."""


# ---------------------------------------------------------------------------------------------- the shared host
class _Host:
    """One Chromium shared by the tabs with the same launch settings; events are routed to pages by session."""

    def __init__(self, key: tuple[Any, ...], executable: str, flags: tuple[str, ...], start_timeout_s: float) -> None:
        self.key = key
        self.lock = threading.RLock()
        self.pages: dict[str, weakref.ref[_Page]] = {}
        self.holders = 0
        self.waiting: _Page | None = None  # the page whose call is being waited on (a crash of it raises)
        self.lost = False  # the DevTools pipe closed: the browser is gone even if its process is not reaped yet
        self.proc = ChromiumProcess(
            executable, extra_flags=flags, start_timeout_s=start_timeout_s, on_event=self._on_event
        )
        deadline = time.monotonic() + start_timeout_s
        try:
            self.proc.conn.call("Target.setDiscoverTargets", {"discover": True}, deadline=deadline)
        except BrowserError:
            self.proc.kill(graceful=False)
            raise

    @property
    def alive(self) -> bool:
        return not self.lost and self.proc.alive and not self.proc.conn.closed

    def _on_event(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method", ""), msg.get("params", {})
        if method == "Target.targetCreated":
            info = params.get("targetInfo", {})
            if info.get("openerId"):  # a popup (window.open, target=_blank): close it
                self.proc.conn.fire("Target.closeTarget", {"targetId": info["targetId"]})
            return
        if method == "Target.targetCrashed":
            for ref in list(self.pages.values()):
                page = ref()
                if page is not None and page.target == params.get("targetId"):
                    page.on_crash(self)
            return
        ref = self.pages.get(msg.get("sessionId") or "")
        page = ref() if ref is not None else None
        if page is not None:
            page.on_event(self, method, params)


_HOSTS: dict[tuple[Any, ...], _Host] = {}
_HOSTS_LOCK = threading.Lock()


def _acquire_host(executable: str | None, no_sandbox: bool, start_timeout_s: float) -> _Host:
    path = find_chromium(executable)
    key = (path, no_sandbox, float(start_timeout_s))
    with _HOSTS_LOCK:
        host = _HOSTS.get(key)
        if host is None or not host.alive:
            flags = ("--no-sandbox",) if no_sandbox else ()
            host = _Host(key, path, flags, start_timeout_s)
            _HOSTS[key] = host
        host.holders += 1
        return host


def _release_host(host: _Host) -> None:
    with _HOSTS_LOCK:
        host.holders -= 1
        if host.holders > 0:
            return
        if _HOSTS.get(host.key) is host:
            del _HOSTS[host.key]
    host.proc.kill(graceful=False)  # outside the lock: waits for the process tree


def running_hosts() -> int:
    """How many shared Chromium processes tabs hold in this process (for tests and monitoring).

    Example:
        >>> running_hosts() >= 0
        True
    """
    with _HOSTS_LOCK:
        return sum(1 for h in _HOSTS.values() if h.alive)


# ---------------------------------------------------------------------------------------------- one page
class _Page:
    """One target (in its own browser context) of a host: the state a tab's finalizer needs, nothing more.

    It holds the tab only weakly (the resolver belongs to the tab), so a tab that is dropped is collected.
    """

    def __init__(self, tab: Tab, host: _Host) -> None:
        self.tab_ref = weakref.ref(tab)
        self.host: _Host | None = host
        self.context = self.target = self.session = self.frame = ""
        self.crashed = False
        self.loads = 0
        self.loader = ""  # loaderId of the main frame's current document
        self.loaded = ""  # loaderId of the last document whose load event fired
        self.navigating = False
        self.url = ""
        self.resolver_error: BaseException | None = None

    def on_crash(self, host: _Host) -> None:
        self.crashed = True
        if host.waiting is self:
            raise BrowserError("the tab's renderer crashed")

    def on_event(self, host: _Host, method: str, params: dict[str, Any]) -> None:
        conn = host.proc.conn
        if method == "Fetch.requestPaused":
            self._answer(conn, params)
        elif method == "Page.loadEventFired":
            self.loads += 1
            self.loaded = self.loader
            self.navigating = False
        elif method in ("Page.frameRequestedNavigation", "Page.frameStartedLoading"):
            if params.get("frameId") == self.frame:
                self.navigating = True
        elif method == "Page.frameStoppedLoading":
            if params.get("frameId") == self.frame:
                self.navigating = False
        elif method == "Page.frameNavigated":
            frame = params.get("frame", {})
            if frame.get("id") == self.frame:
                self.url = frame.get("url", "")
                self.loader = frame.get("loaderId", "")
        elif method == "Page.javascriptDialogOpening":
            accept = params.get("type") == "beforeunload"  # leaving the page must not be blocked
            conn.fire("Page.handleJavaScriptDialog", {"accept": accept}, self.session)
        elif method == "Inspector.targetCrashed":
            self.on_crash(host)
        elif method == "Inspector.detached":
            self.crashed = True

    def _answer(self, conn: Any, params: dict[str, Any]) -> None:
        req = params.get("request", {})
        tab = self.tab_ref()
        response: TabResponse | None = None
        if tab is not None:
            entries = req.get("postDataEntries")
            if entries:
                body: bytes | None = b"".join(base64.b64decode(e.get("bytes", "")) for e in entries)
            else:
                body = req["postData"].encode() if "postData" in req else None
            request = TabRequest(
                method=req.get("method", "GET"),
                url=req.get("url", ""),
                headers=dict(req.get("headers", {})),
                post_data=body,
                resource_type=params.get("resourceType", ""),
            )
            try:
                response = tab.resolver(request)
            except Exception as exc:  # a resolver bug: fail the request, re-raise in the waiting call
                self.resolver_error = exc
                response = None
            if response is not None and not isinstance(response, TabResponse):
                self.resolver_error = TypeError(f"the resolver returned {type(response).__name__}, not TabResponse")
                response = None
        if response is None:
            if tab is not None:
                tab.requests_blocked += 1
            conn.fire(
                "Fetch.failRequest", {"requestId": params["requestId"], "errorReason": "BlockedByClient"}, self.session
            )
            return
        tab.requests_served += 1  # type: ignore[union-attr]
        headers = [{"name": "Content-Type", "value": response.content_type}]
        if not any(str(k).lower() == "cache-control" for k in response.headers):
            headers.append({"name": "Cache-Control", "value": "no-store"})
        headers += [{"name": str(k), "value": str(v)} for k, v in response.headers.items()]
        conn.fire(
            "Fetch.fulfillRequest",
            {
                "requestId": params["requestId"],
                "responseCode": int(response.status),
                "responseHeaders": headers,
                "body": base64.b64encode(bytes(response.body)).decode("ascii"),
            },
            self.session,
        )


def _drop_page(page: _Page) -> None:
    """Close a page's target and context (without waiting) and let go of its host; idempotent."""
    host, page.host = page.host, None
    if host is None:
        return
    with host.lock:
        host.pages.pop(page.session, None)
        if host.alive and page.context:
            with contextlib.suppress(BrowserError, OSError):
                host.proc.conn.fire("Target.disposeBrowserContext", {"browserContextId": page.context})
    _release_host(host)


# ---------------------------------------------------------------------------------------------- the tab
class Tab:
    """One interactive page whose requests ``resolver`` answers (see the module docstring).

    Args:
        resolver: ``TabRequest -> TabResponse | None``; ``None`` blocks the request.
        viewport: ``(width, height)`` of the page and the screenshot, in CSS pixels (scale factor 1).
        timeout_s: Deadline of one call (a navigation with its load event, a script, an input event).
        init_script: JavaScript run in every new document before the page's own scripts.
        executable: The Chromium binary (default: :func:`~turnkit.browser.process.find_chromium`).
        no_sandbox: Pass ``--no-sandbox``; ``None``: only when running as root.
        start_timeout_s: How long a starting browser may take.

    Copies (``copy.copy``/``copy.deepcopy``) and unpickled tabs are new, unloaded tabs with the same settings.

    Attributes:
        navigations: Successful :meth:`goto` calls.
        evaluations: :meth:`evaluate` calls that returned.
        requests_served: Requests answered with a resolver's response.
        requests_blocked: Requests failed because the resolver returned ``None`` (or raised).
        rebuilds: Pages built again after a failure (crash, hang, lost browser).
    """

    def __init__(
        self,
        resolver: Resolver,
        *,
        viewport: tuple[int, int] = (640, 480),
        timeout_s: float = 5.0,
        init_script: str = "",
        executable: str | None = None,
        no_sandbox: bool | None = None,
        start_timeout_s: float = 20.0,
    ) -> None:
        w, h = viewport
        if not (16 <= int(w) <= 4096 and 16 <= int(h) <= 4096):
            raise BrowserError(f"viewport must be between 16 and 4096 pixels each way, got {viewport}")
        if timeout_s <= 0:
            raise BrowserError(f"timeout_s must be > 0, got {timeout_s}")
        if not callable(resolver):
            raise BrowserError(f"resolver must be callable, got {type(resolver).__name__}")
        self.resolver = resolver
        self.viewport = (int(w), int(h))
        self.timeout_s = float(timeout_s)
        self.init_script = init_script
        self.start_timeout_s = float(start_timeout_s)
        self._executable = executable
        self._no_sandbox = (os.geteuid() == 0) if no_sandbox is None else bool(no_sandbox)
        self._page: _Page | None = None
        self._finalizer: weakref.finalize | None = None
        self._broken = False
        self.navigations = 0
        self.evaluations = 0
        self.requests_served = 0
        self.requests_blocked = 0
        self.rebuilds = 0

    # ------------------------------------------------------------------ copying
    def _settings(self) -> dict[str, Any]:
        return {
            "viewport": self.viewport,
            "timeout_s": self.timeout_s,
            "init_script": self.init_script,
            "executable": self._executable,
            "no_sandbox": self._no_sandbox,
            "start_timeout_s": self.start_timeout_s,
        }

    def __copy__(self) -> Tab:
        return Tab(self.resolver, **self._settings())

    def __deepcopy__(self, memo: dict[int, Any]) -> Tab:
        return self.__copy__()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.resolver, self._settings()))

    # ------------------------------------------------------------------ public API
    @property
    def running(self) -> bool:
        """Whether the tab has a live page in a live browser."""
        page = self._page
        return page is not None and page.host is not None and page.host.alive and not page.crashed and not self._broken

    @property
    def pid(self) -> int | None:
        """The process id of the (possibly shared) browser, if the tab has a page."""
        page = self._page
        return page.host.proc.pid if page is not None and page.host is not None else None

    @property
    def url(self) -> str:
        """The URL of the page's main frame (``""`` before the first :meth:`goto`)."""
        return self._page.url if self._page is not None else ""

    def goto(self, url: str) -> None:
        """Navigate to ``url`` and wait for its load event (a failed tab gets a fresh page first).

        Raises:
            PageError: The navigation failed (``reason="navigation"``, e.g. the resolver blocked the document)
                or did not load in time (``"timeout"``).
            BrowserError: The browser cannot start, crashed or was lost.
        """
        existing = self._page is not None
        try:
            self._goto(url)
        except ConnectionClosed:
            if not existing:
                raise
            self._goto(url)  # the browser died since the last call: once more, on a fresh one

    def _goto(self, url: str) -> None:
        page = self._ensure_page()
        with self._op(page) as deadline:
            page.navigating = True
            nav = self._call(page, "Page.navigate", {"url": url, "frameId": page.frame}, deadline)
            if nav.get("errorText"):
                page.navigating = False
                raise PageError("navigation", f"navigation to {url} failed: {nav['errorText']}")
            loader = nav.get("loaderId")  # none for a same-document navigation (a fragment): nothing to load
            if loader:
                self._wait(page, lambda: page.loaded == loader, deadline, "load event")
            page.navigating = False
        self._raise_resolver_error(page)
        self.navigations += 1

    def evaluate(self, expression: str, *, await_promise: bool = False) -> Any:
        """Run a JavaScript expression in the page and return its value (JSON-like; ``undefined`` is ``None``).

        Raises:
            PageError: The script threw (``reason="script"``, the message is the JavaScript error) or ran past
                ``timeout_s`` (``"timeout"``).
            BrowserError: No page (call :meth:`goto` first), or the browser failed.
        """
        page = self._live_page()
        with self._op(page) as deadline:
            out = self._call(
                page,
                "Runtime.evaluate",
                {"expression": expression, "returnByValue": True, "awaitPromise": await_promise},
                deadline,
            )
        self._raise_resolver_error(page)
        if "exceptionDetails" in out:
            details = out["exceptionDetails"]
            exc = details.get("exception", {})
            message = exc.get("description") or exc.get("value") or details.get("text", "a script error")
            raise PageError("script", str(message).splitlines()[0])
        self.evaluations += 1
        return out.get("result", {}).get("value")

    def click(self, x: float, y: float) -> None:
        """A left click (move, press, release) at viewport position ``(x, y)``; waits for a navigation it starts."""
        page = self._live_page()
        with self._op(page) as deadline:
            base = {"x": float(x), "y": float(y), "button": "left", "clickCount": 1}
            self._call(page, "Input.dispatchMouseEvent", {**base, "type": "mouseMoved", "button": "none"}, deadline)
            self._call(page, "Input.dispatchMouseEvent", {**base, "type": "mousePressed"}, deadline)
            self._call(page, "Input.dispatchMouseEvent", {**base, "type": "mouseReleased"}, deadline)
            self._settle(page, deadline)

    def insert_text(self, text: str) -> None:
        """Type ``text`` into the focused element (like an input method commits it: one ``input`` event)."""
        page = self._live_page()
        with self._op(page) as deadline:
            self._call(page, "Input.insertText", {"text": text}, deadline)
            self._settle(page, deadline)

    def press(self, key: str) -> None:
        """Press and release one key (``"Enter"``, ``"Tab"``, ``"Escape"``, ``"Backspace"``, arrows, ``" "``).

        Raises:
            BrowserError: An unknown key name (see the list above).
        """
        if key not in _KEYS:
            raise BrowserError(f"unknown key {key!r}; known keys: {sorted(_KEYS)}")
        code, vk, text = _KEYS[key]
        page = self._live_page()
        with self._op(page) as deadline:
            down: dict[str, Any] = {"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk}
            if text:
                down["text"] = text
            self._call(page, "Input.dispatchKeyEvent", down, deadline)
            up = {"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk}
            self._call(page, "Input.dispatchKeyEvent", up, deadline)
            self._settle(page, deadline)

    def screenshot(self) -> np.ndarray:
        """The viewport as a read-only ``(height, width, 3)`` ``uint8`` RGB array."""
        page = self._live_page()
        with self._op(page) as deadline:
            shot = self._call(page, "Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True}, deadline)
        return decode_png(base64.b64decode(shot["data"]))

    def close(self) -> None:
        """Close the page and let go of the shared browser (the last tab stops it); idempotent.

        A later :meth:`goto` opens a new page.
        """
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._page = None
        self._broken = False

    def __enter__(self) -> Tab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ page lifecycle
    def _ensure_page(self) -> _Page:
        page = self._page
        if page is None:
            return self._open_page()
        if self._broken or page.crashed or page.host is None or not page.host.alive:
            self.rebuilds += 1
            old, self._finalizer, self._page, self._broken = self._finalizer, None, None, False
            try:
                return self._open_page()  # while the old page still holds its browser: a live one is reused
            finally:
                if old is not None:
                    old()
        return page

    def _live_page(self) -> _Page:
        page = self._page
        if page is None:
            raise BrowserError("the tab has no page; call goto() first")
        if self._broken or page.crashed or page.host is None or not page.host.alive:
            raise BrowserError("the tab's page was lost (crash, hang or browser exit); call goto() to load a page")
        return page

    def _open_page(self) -> _Page:
        host = _acquire_host(self._executable, self._no_sandbox, self.start_timeout_s)
        page = _Page(self, host)
        self._page = page
        self._finalizer = weakref.finalize(self, _drop_page, page)
        deadline = time.monotonic() + self.start_timeout_s
        conn = host.proc.conn
        try:
            with host.lock:
                page.context = conn.call("Target.createBrowserContext", {}, deadline=deadline)["browserContextId"]
                page.target = conn.call(
                    "Target.createTarget", {"url": "about:blank", "browserContextId": page.context}, deadline=deadline
                )["targetId"]
                page.session = conn.call(
                    "Target.attachToTarget", {"targetId": page.target, "flatten": True}, deadline=deadline
                )["sessionId"]
                host.pages[page.session] = weakref.ref(page)
                conn.call(
                    "Browser.setDownloadBehavior",
                    {"behavior": "deny", "browserContextId": page.context},
                    deadline=deadline,
                )
                w, h = self.viewport
                setup: list[tuple[str, dict[str, Any]]] = [
                    ("Page.enable", {}),
                    ("Inspector.enable", {}),
                    (
                        "Emulation.setDeviceMetricsOverride",
                        {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False},
                    ),
                    ("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}),
                ]
                if self.init_script:
                    setup.append(("Page.addScriptToEvaluateOnNewDocument", {"source": self.init_script}))
                for method, params in setup:
                    conn.call(method, params, session_id=page.session, deadline=deadline)
                page.frame = conn.call("Page.getFrameTree", session_id=page.session, deadline=deadline)["frameTree"][
                    "frame"
                ]["id"]
        except BrowserError as exc:
            self.close()
            raise BrowserError(f"could not open a page in Chromium: {exc}") from exc
        return page

    # ------------------------------------------------------------------ calls with deadlines
    @contextlib.contextmanager
    def _op(self, page: _Page) -> Iterator[float]:
        """One operation on the page: the host's lock, a deadline, and failures turned into typed errors."""
        host = page.host
        assert host is not None
        with host.lock:
            host.proc.conn.events.clear()
            host.waiting = page
            try:
                yield time.monotonic() + self.timeout_s
            except BrowserError as exc:
                bug, page.resolver_error = page.resolver_error, None
                if bug is not None:  # the resolver raised: that is the error to report
                    raise bug from exc
                if isinstance(exc, PageError) and exc.reason in ("script", "navigation"):
                    raise  # the page is still usable
                self._broken = True
                if isinstance(exc, ConnectionClosed):
                    host.lost = True
                if isinstance(exc, CallTimeout):
                    if host.alive and self._host_answers(host):
                        raise PageError(
                            "timeout", f"the page did not answer within {self.timeout_s:g} s ({exc})"
                        ) from exc
                    raise BrowserError(f"the browser stopped answering: {exc}") from exc
                raise
            finally:
                host.waiting = None

    @staticmethod
    def _host_answers(host: _Host) -> bool:
        try:
            host.proc.conn.call("Browser.getVersion", deadline=time.monotonic() + 2.0)
        except BrowserError:
            return False
        return True

    @staticmethod
    def _call(page: _Page, method: str, params: dict[str, Any], deadline: float) -> dict[str, Any]:
        if page.crashed:
            raise BrowserError("the tab's renderer crashed")
        host = page.host
        assert host is not None
        return host.proc.conn.call(method, params, session_id=page.session, deadline=deadline)

    @staticmethod
    def _wait(page: _Page, done: Callable[[], bool], deadline: float, what: str) -> None:
        host = page.host
        assert host is not None
        conn = host.proc.conn
        while not done():
            if page.crashed:
                raise BrowserError("the tab's renderer crashed")
            conn.wait_event(lambda _ev: True, deadline=deadline, what=f"the page's {what}")
            conn.events.clear()

    def _settle(self, page: _Page, deadline: float) -> None:
        """After an input event: a round trip through the renderer, then wait for a navigation it started."""
        self._call(page, "Runtime.evaluate", {"expression": "0"}, deadline)
        if page.navigating:
            self._wait(page, lambda: not page.navigating, deadline, "navigation")

    @staticmethod
    def _raise_resolver_error(page: _Page) -> None:
        err, page.resolver_error = page.resolver_error, None
        if err is not None:
            raise err


def _rebuild(resolver: Resolver, settings: dict[str, Any]) -> Tab:
    """Unpickle a :class:`Tab`: same resolver and settings, no page yet."""
    return Tab(resolver, **settings)
