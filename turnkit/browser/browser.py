"""`Browser`: render HTML to pixels and a DOM summary in one lazily started headless Chromium.

One browser process and one page serve every render; the process starts on the first :meth:`Browser.render`
and stops on :meth:`Browser.close` (or when the object is collected, or at interpreter exit).

Isolation: the page is loaded from ``http://turnkit.invalid/`` by answering the browser's own request with
the HTML (DevTools ``Fetch`` interception); every other request (``http``, ``https``, ``ws``, ``file``,
relative URLs) is failed, so pages cannot reach the network or the disk; ``data:`` URLs (inline images,
fonts) still work. Anything that escapes interception meets a proxy on a closed port. Navigations away from
the page (``location``, ``<meta http-equiv=refresh>``, links) are cancelled through the Navigation API.
Dialogs (``alert``, ``confirm``) are dismissed, popups closed, downloads denied, and ``Math.random`` is
seeded, so that the same HTML renders the same pixels (pages that animate or read the clock may still
differ).

Failures:

* Every render has a deadline (``timeout_s``). A render that times out, crashes its renderer or loses the
  browser restarts the browser and renders a tiny probe page.
* If the probe fails too, the browser itself is broken: :class:`~turnkit.browser.errors.BrowserError`.
* If the probe works, a timeout is the page's fault (e.g. ``while (true) {}``):
  :class:`~turnkit.browser.errors.PageError` with ``reason="timeout"``. A crash or a lost browser is
  retried once (the browser may have been killed from outside); a second failure is a ``PageError`` too.

Example:
    >>> with Browser(viewport=(64, 48)) as browser:
    ...     r = browser.render("<body style='margin:0;background:#ff0000'><p>hi</p></body>")
    >>> r.pixels.shape, tuple(int(v) for v in r.pixels[40, 60]), r.dom.texts[0].text, browser.running
    ((48, 64, 3), (255, 0, 0), 'hi', False)
"""

from __future__ import annotations

import base64
import io
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from turnkit.browser.cache import RenderCache, shared_cache
from turnkit.browser.cdp import CallTimeout
from turnkit.browser.dom import DOM_SUMMARY_JS, DomSummary
from turnkit.browser.errors import BrowserError, PageError
from turnkit.browser.process import ChromiumProcess, find_chromium

PAGE_URL = "http://turnkit.invalid/"
"""The URL every rendered page is served from (``.invalid`` is a reserved top-level domain)."""

PROBE_HTML = "<!doctype html><body style='margin:0;background:#fff'><p>probe</p></body>"
"""The page rendered after a failure to tell a broken browser from a broken page."""

_INIT_JS = """(() => {
  let s = 0x2545F491;
  Math.random = () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s / 4294967296; };
  if (self.navigation) navigation.addEventListener('navigate', (e) => { if (e.cancelable) e.preventDefault(); });
})();"""
"""Runs before any page script: seeds ``Math.random`` and cancels navigations away from the page."""


class _RendererCrashed(BrowserError):
    """The page's renderer process crashed."""


@dataclass(frozen=True)
class Render:
    """One rendered page.

    Attributes:
        key: The cache key (SHA-256 of the HTML plus viewport and JavaScript setting).
        pixels: ``(height, width, 3)`` ``uint8`` RGB screenshot of the viewport (read-only).
        dom: The visible texts and boxes (see :mod:`turnkit.browser.dom`).
        seconds: Wall time the render took in the browser (0 for a synthetic render).

    Example:
        >>> import numpy as np
        >>> from turnkit.browser.dom import DomSummary
        >>> r = Render("k", np.zeros((2, 3, 3), np.uint8), DomSummary((), (), (0, 0, 0)))
        >>> r.size
        (3, 2)
    """

    key: str
    pixels: np.ndarray
    dom: DomSummary
    seconds: float = 0.0

    @property
    def size(self) -> tuple[int, int]:
        """``(width, height)`` in pixels."""
        return (int(self.pixels.shape[1]), int(self.pixels.shape[0]))


def decode_png(data: bytes) -> np.ndarray:
    """Decode PNG bytes to a read-only ``(height, width, 3)`` ``uint8`` array (needs Pillow).

    Example:
        >>> import io
        >>> from PIL import Image
        >>> buf = io.BytesIO(); Image.new("RGB", (3, 2), (1, 2, 3)).save(buf, "PNG")
        >>> a = decode_png(buf.getvalue()); a.shape, a[1, 2].tolist(), a.flags.writeable
        ((2, 3, 3), [1, 2, 3], False)
    """
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - Pillow ships with matplotlib in every turnkit extra
        raise BrowserError("decoding screenshots needs Pillow: pip install pillow") from exc
    with Image.open(io.BytesIO(data)) as im:
        arr = np.asarray(im.convert("RGB"), dtype=np.uint8).copy()
    arr.flags.writeable = False
    return arr


class Browser:
    """A headless Chromium that renders HTML strings (see the module docstring).

    Args:
        viewport: ``(width, height)`` of the page and of the screenshot, in CSS pixels (scale factor 1).
        timeout_s: Deadline of one render (navigation, load, DOM summary and screenshot together).
        javascript: Run the page's scripts.
        executable: The Chromium binary (default: :func:`~turnkit.browser.process.find_chromium`).
        no_sandbox: Pass ``--no-sandbox`` (Chromium refuses to start as root without it). ``None``: only
            when running as root.
        cache: Render cache (default: the process-wide :func:`~turnkit.browser.cache.shared_cache`);
            ``RenderCache(0)`` turns caching off.
        start_timeout_s: How long a starting browser may take.
        extra_flags: More Chromium command-line flags.

    A ``Browser`` is a handle to a process: copies (``copy.copy``, ``copy.deepcopy``, hence
    ``gymnasium.make(env.spec)``) share it; pickling gives a new, unstarted browser with the same settings
    (so an env spec that carries a browser can still be sent to another process).

    Attributes:
        renders: Renders done in the browser (cache hits excluded).
        restarts: Browser restarts after a failure.
        page_errors: Renders that ended in a :class:`PageError`.
        render_seconds: Total wall time of renders done in the browser (including failed ones).
    """

    def __init__(
        self,
        *,
        viewport: tuple[int, int] = (640, 480),
        timeout_s: float = 5.0,
        javascript: bool = True,
        executable: str | None = None,
        no_sandbox: bool | None = None,
        cache: RenderCache | None = None,
        start_timeout_s: float = 20.0,
        extra_flags: tuple[str, ...] = (),
    ) -> None:
        w, h = viewport
        if not (16 <= int(w) <= 4096 and 16 <= int(h) <= 4096):
            raise BrowserError(f"viewport must be between 16 and 4096 pixels each way, got {viewport}")
        if timeout_s <= 0:
            raise BrowserError(f"timeout_s must be > 0, got {timeout_s}")
        self.viewport = (int(w), int(h))
        self.timeout_s = float(timeout_s)
        self.javascript = javascript
        self._executable = executable
        self._no_sandbox = (os.geteuid() == 0) if no_sandbox is None else no_sandbox
        self.cache = cache if cache is not None else shared_cache()
        self.start_timeout_s = start_timeout_s
        self.extra_flags = tuple(extra_flags)
        self._proc: ChromiumProcess | None = None
        self._session = ""
        self._target = ""
        self._frame = ""
        self._pending_html: str | None = None
        self._lock = threading.RLock()
        self.renders = 0
        self.restarts = 0
        self.page_errors = 0
        self.render_seconds = 0.0

    def _settings(self) -> dict[str, Any]:
        return {
            "viewport": self.viewport,
            "timeout_s": self.timeout_s,
            "javascript": self.javascript,
            "executable": self._executable,
            "no_sandbox": self._no_sandbox,
            "start_timeout_s": self.start_timeout_s,
            "extra_flags": self.extra_flags,
        }

    def __copy__(self) -> Browser:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Browser:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._settings(),))

    # ------------------------------------------------------------------ public API
    @property
    def running(self) -> bool:
        """Whether a browser process is up (it starts lazily on the first render)."""
        return self._proc is not None and self._proc.alive

    @property
    def pid(self) -> int | None:
        """The browser's process id, if one was started and not closed."""
        return self._proc.pid if self._proc is not None else None

    def render(self, html: str) -> Render:
        """Render ``html`` (from the cache when the same HTML was rendered before).

        Raises:
            PageError: The page hung or crashed the renderer; the browser has been recovered.
            BrowserError: The browser cannot start or is broken.
        """
        key = RenderCache.key(html, self.viewport, self.javascript)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        with self._lock:
            result = self._render_recovering(html, key)
        self.cache.put(key, result)
        return result

    def start(self) -> None:
        """Start the browser now (normally it starts on the first render); no-op when running."""
        with self._lock:
            self._ensure_running()

    def restart(self) -> None:
        """Kill the browser (if any) and start a fresh one."""
        with self._lock:
            self._kill(graceful=False)
            self._launch()

    def close(self) -> None:
        """Stop the browser and all its processes (idempotent; a later render starts a new one)."""
        with self._lock:
            self._kill(graceful=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ lifecycle
    def _launch(self) -> None:
        flags = (*(("--no-sandbox",) if self._no_sandbox else ()), *self.extra_flags)
        self._proc = ChromiumProcess(
            find_chromium(self._executable),
            extra_flags=flags,
            start_timeout_s=self.start_timeout_s,
            on_event=self._on_event,
        )
        try:
            self._open_page(time.monotonic() + self.start_timeout_s)
        except BrowserError as exc:
            self._kill(graceful=False)
            raise BrowserError(f"Chromium started but its page could not be set up: {exc}") from exc

    def _kill(self, *, graceful: bool) -> None:
        if self._proc is not None:
            self._proc.kill(graceful=graceful)
            self._proc = None

    def _call(self, method: str, params: dict[str, Any] | None = None, *, deadline: float, page: bool = True) -> Any:
        assert self._proc is not None
        return self._proc.conn.call(method, params, session_id=self._session if page else None, deadline=deadline)

    def _open_page(self, deadline: float) -> None:
        self._session = ""
        self._call("Target.setDiscoverTargets", {"discover": True}, deadline=deadline, page=False)
        self._call("Browser.setDownloadBehavior", {"behavior": "deny"}, deadline=deadline, page=False)
        self._target = self._call("Target.createTarget", {"url": "about:blank"}, deadline=deadline, page=False)[
            "targetId"
        ]
        self._session = self._call(
            "Target.attachToTarget", {"targetId": self._target, "flatten": True}, deadline=deadline, page=False
        )["sessionId"]
        w, h = self.viewport
        self._call("Page.enable", deadline=deadline)
        self._call("Inspector.enable", deadline=deadline)
        self._call(
            "Emulation.setDeviceMetricsOverride",
            {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False},
            deadline=deadline,
        )
        self._call("Emulation.setScriptExecutionDisabled", {"value": not self.javascript}, deadline=deadline)
        self._call("Page.addScriptToEvaluateOnNewDocument", {"source": _INIT_JS}, deadline=deadline)
        self._call("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, deadline=deadline)
        self._frame = self._call("Page.getFrameTree", deadline=deadline)["frameTree"]["frame"]["id"]

    # ------------------------------------------------------------------ events (answered while waiting)
    def _on_event(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method", ""), msg.get("params", {})
        proc = self._proc
        if proc is None:
            return
        if method == "Fetch.requestPaused":
            req = params.get("request", {})
            serve = (
                self._pending_html is not None
                and req.get("url") == PAGE_URL
                and params.get("resourceType") == "Document"
                and params.get("frameId") == self._frame
            )
            if serve:
                body = base64.b64encode((self._pending_html or "").encode("utf-8", "replace")).decode()
                self._pending_html = None
                headers = [
                    {"name": "Content-Type", "value": "text/html; charset=utf-8"},
                    {"name": "Cache-Control", "value": "no-store"},
                ]
                proc.conn.fire(
                    "Fetch.fulfillRequest",
                    {"requestId": params["requestId"], "responseCode": 200, "responseHeaders": headers, "body": body},
                    msg.get("sessionId"),
                )
            else:
                proc.conn.fire(
                    "Fetch.failRequest",
                    {"requestId": params["requestId"], "errorReason": "BlockedByClient"},
                    msg.get("sessionId"),
                )
        elif method == "Page.javascriptDialogOpening":
            accept = params.get("type") == "beforeunload"  # leaving the page must not be blocked
            proc.conn.fire("Page.handleJavaScriptDialog", {"accept": accept}, msg.get("sessionId"))
        elif method == "Target.targetCreated":
            info = params.get("targetInfo", {})
            if info.get("openerId") and info.get("targetId") != self._target:  # a popup: close it
                proc.conn.fire("Target.closeTarget", {"targetId": info["targetId"]})
        elif (method == "Inspector.targetCrashed" and msg.get("sessionId") == self._session) or (
            method == "Target.targetCrashed" and params.get("targetId") == self._target
        ):
            raise _RendererCrashed("the page's renderer crashed")

    # ------------------------------------------------------------------ rendering
    def _render_recovering(self, html: str, key: str) -> Render:
        start = time.perf_counter()
        try:
            try:
                return self._render_once(html, key, start)
            except BrowserError as exc:
                failure = exc
            self.restarts += 1
            self.restart()
            try:
                self._render_once(PROBE_HTML, "probe", time.perf_counter())
            except BrowserError as exc:
                self._kill(graceful=False)
                raise BrowserError(f"the browser is broken: {failure}; then a probe page failed too: {exc}") from exc
            if isinstance(failure, CallTimeout):
                self.page_errors += 1
                raise PageError(
                    "timeout", f"the page did not finish rendering within {self.timeout_s:g} s ({failure})"
                ) from failure
            try:
                return self._render_once(html, key, time.perf_counter())
            except BrowserError as exc:
                self.restarts += 1
                self.restart()
                self.page_errors += 1
                reason = "timeout" if isinstance(exc, CallTimeout) else "crash"
                raise PageError(reason, f"the page failed to render twice: {failure}; then {exc}") from exc
        finally:
            self.render_seconds += time.perf_counter() - start

    def _ensure_running(self) -> None:
        if self._proc is not None and not self._proc.alive:  # died since the last render (killed, crashed)
            self.restarts += 1
            self._kill(graceful=False)
        if self._proc is None:
            self._launch()

    def _loaded(self, msg: dict[str, Any]) -> bool:
        """The page finished loading, or stopped (a script navigated away mid-parse and got a 204)."""
        if msg.get("sessionId") != self._session:
            return False
        method = msg.get("method")
        return method == "Page.loadEventFired" or (
            method == "Page.frameStoppedLoading" and msg.get("params", {}).get("frameId") == self._frame
        )

    def _render_once(self, html: str, key: str, start: float) -> Render:
        self._ensure_running()
        assert self._proc is not None
        deadline = time.monotonic() + self.timeout_s
        conn = self._proc.conn
        conn.events.clear()
        self._pending_html = html
        try:
            nav = self._call("Page.navigate", {"url": PAGE_URL, "frameId": self._frame}, deadline=deadline)
            if nav.get("errorText"):
                raise BrowserError(f"navigation failed: {nav['errorText']}")
            conn.wait_event(self._loaded, deadline=deadline, what="the page's load event")
        finally:
            self._pending_html = None
        world = self._call(
            "Page.createIsolatedWorld", {"frameId": self._frame, "worldName": "turnkit-dom"}, deadline=deadline
        )["executionContextId"]
        summary = self._call(
            "Runtime.evaluate",
            {"expression": DOM_SUMMARY_JS, "contextId": world, "returnByValue": True},
            deadline=deadline,
        )
        if "exceptionDetails" in summary:
            detail = summary["exceptionDetails"].get("exception", {}).get("description", summary["exceptionDetails"])
            raise BrowserError(f"the DOM summary script failed: {detail}")
        shot = self._call("Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True}, deadline=deadline)
        pixels = decode_png(base64.b64decode(shot["data"]))
        w, h = self.viewport
        if pixels.shape[:2] != (h, w):  # never seen; guards the fixed-size contract of Render.pixels
            raise BrowserError(f"screenshot is {pixels.shape[1]}x{pixels.shape[0]}, expected {w}x{h}")
        self.renders += 1
        return Render(key, pixels, DomSummary.from_json(summary["result"]["value"]), time.perf_counter() - start)


def _rebuild(settings: dict[str, Any]) -> Browser:
    """Unpickle a :class:`Browser`: same settings, new process (started lazily)."""
    return Browser(**settings)
