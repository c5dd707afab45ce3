"""Serve the MiniWoB++ task pages of the ``miniwob`` wheel from a fake origin, with no HTTP server and no network.

The wheel ships the pages under ``miniwob/html/`` (``miniwob/<task>.html``, ``core/``, ``common/``). The env's
:class:`~turnkit.browser.Tab` loads ``http://miniwob.invalid/miniwob/<task>.html`` and :func:`resolve`
answers each of the page's requests with the file's bytes. Anything outside that directory, any other origin
and any method but ``GET`` is blocked; a missing file is a 404. Scripts and styles are cacheable
(:data:`CACHE_CONTROL`), which halves the time of a reset.

Example:
    >>> from turnkit.browser import TabRequest
    >>> page = resolve(TabRequest("GET", task_url("click-button", seed=3), {}, None))
    >>> page.status, page.content_type, b"genProblem" in page.body
    (200, 'text/html; charset=utf-8', True)
    >>> resolve(TabRequest("GET", ORIGIN + "../../etc/passwd", {}, None)) is None
    True
    >>> resolve(TabRequest("GET", "http://example.com/x.js", {}, None)) is None
    True
    >>> resolve(TabRequest("GET", ORIGIN + "favicon.ico", {}, None)).status
    404
"""

from __future__ import annotations

import functools
import mimetypes
import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from turnkit.browser import TabRequest, TabResponse
from turnkit.errors import ConfigError

ORIGIN = "http://miniwob.invalid/"
"""Where the pages are served from (``.invalid`` is a reserved top-level domain)."""

CACHE_CONTROL = "public, max-age=86400, immutable"
"""How the shared files (``core/``, ``common/``: jQuery, d3, MiniWoB's core) are served: Chromium keeps them in
the tab's HTTP cache, so a reset re-parses only the task page (task pages themselves are never cached)."""

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}


@functools.lru_cache(maxsize=1)
def html_root() -> Path:
    """The ``html`` directory of the installed ``miniwob`` package.

    Raises:
        ConfigError: ``miniwob`` is not installed (``pip install 'turnkit[web]'`` or ``pip install miniwob``).

    Example:
        >>> (html_root() / "core" / "core.js").is_file()
        True
    """
    try:
        import miniwob
    except ImportError as exc:
        raise ConfigError("MiniWoB-v0 needs the miniwob package: pip install 'turnkit[web]'") from exc
    root = Path(os.path.dirname(miniwob.__file__)) / "html"
    if not (root / "core" / "core.js").is_file():
        raise ConfigError(f"the miniwob package at {root.parent} has no html/core/core.js")
    return root.resolve()


def task_names() -> tuple[str, ...]:
    """Every task page the installed wheel ships (curated or not), sorted.

    Example:
        >>> "click-button" in task_names()
        True
    """
    return tuple(sorted(p.stem for p in (html_root() / "miniwob").glob("*.html")))


def task_url(task: str, *, seed: int) -> str:
    """The URL of a task page; ``tkseed`` seeds ``Math.random`` before the page's scripts run.

    Example:
        >>> task_url("click-button", seed=5)
        'http://miniwob.invalid/miniwob/click-button.html?tkseed=5'
    """
    return f"{ORIGIN}miniwob/{task}.html?tkseed={int(seed)}"


@functools.lru_cache(maxsize=512)
def _read(path: Path) -> bytes:
    return path.read_bytes()


def resolve(request: TabRequest) -> TabResponse | None:
    """Answer one page request from the wheel's files (the env's :data:`~turnkit.browser.tab.Resolver`)."""
    if request.method != "GET" or not request.url.startswith(ORIGIN):
        return None
    root = html_root()
    rel = unquote(urlsplit(request.url).path).lstrip("/")
    path = (root / rel).resolve()
    if not path.is_relative_to(root):
        return None
    if not path.is_file():
        return TabResponse(status=404, body=b"not found", content_type="text/plain")
    kind = _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    headers = {} if path.suffix == ".html" else {"Cache-Control": CACHE_CONTROL}
    return TabResponse(body=_read(path), content_type=kind, headers=headers)
