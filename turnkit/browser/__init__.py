"""Headless Chromium for envs that render HTML: lifecycle, rendering to pixels, DOM summaries, caching.

:class:`Browser` starts one Chromium lazily, renders HTML strings to a :class:`Render` (pixels plus a
:class:`~turnkit.browser.dom.DomSummary`), caches renders by HTML hash, recovers from crashes and hangs,
and never leaves a process behind. :class:`BrowserPool` (:func:`shared_pool`) lets many envs share one
Chromium, reference-counted. Failures are typed: :class:`BrowserError` (the browser; the rollout
layer records it as ``ErrorCause.BROWSER``) and :class:`PageError` (the page's fault; envs turn it into
feedback).

Example:
    >>> from turnkit.browser import Browser, BrowserError, PageError, RenderCache
    >>> issubclass(PageError, BrowserError)
    True
"""

from turnkit.browser.browser import PAGE_URL, Browser, Render, decode_png
from turnkit.browser.cache import RenderCache, shared_cache
from turnkit.browser.dom import DomItem, DomSummary
from turnkit.browser.errors import BrowserError, PageError
from turnkit.browser.pool import BrowserPool, Lease, shared_pool
from turnkit.browser.process import ChromiumProcess, find_chromium, launched_profiles, owned_chromium_pids, pids_with
from turnkit.browser.tab import Tab, TabRequest, TabResponse

__all__ = [
    "PAGE_URL",
    "Browser",
    "BrowserError",
    "BrowserPool",
    "ChromiumProcess",
    "DomItem",
    "DomSummary",
    "Lease",
    "PageError",
    "Render",
    "RenderCache",
    "Tab",
    "TabRequest",
    "TabResponse",
    "decode_png",
    "find_chromium",
    "launched_profiles",
    "owned_chromium_pids",
    "pids_with",
    "shared_cache",
    "shared_pool",
]
