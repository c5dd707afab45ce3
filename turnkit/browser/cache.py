"""An in-memory LRU cache of renders keyed by the SHA-256 of the HTML and the render settings.

Rendering the same HTML twice (the hidden reference at every turn, an oracle's answer, the same-seed
episodes of a GRPO group) then costs one dictionary lookup. Renders are immutable, so one entry can be
shared by every env in the process: :func:`shared_cache` is the process-wide default.

Example:
    >>> cache = RenderCache(max_entries=2)
    >>> k1, k2, k3 = (RenderCache.key(h, (64, 48), True) for h in ("<p>a</p>", "<p>b</p>", "<p>c</p>"))
    >>> cache.put(k1, "render-a"); cache.put(k2, "render-b")
    >>> cache.get(k1)  # k1 becomes the most recently used
    'render-a'
    >>> cache.put(k3, "render-c")  # evicts k2, the least recently used
    >>> cache.get(k2) is None, len(cache), cache.hits, cache.misses
    (True, 2, 1, 1)
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any


class RenderCache:
    """A thread-safe least-recently-used cache.

    Args:
        max_entries: Most renders kept (a 640 x 480 render holds about 0.9 MB of pixels).
    """

    def __init__(self, max_entries: int = 64) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        self.max_entries = max_entries
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(html: str, viewport: tuple[int, int], javascript: bool) -> str:
        """The cache key of ``html`` rendered at ``viewport`` with or without JavaScript.

        Example:
            >>> RenderCache.key("<p>x</p>", (640, 480), True) == RenderCache.key("<p>x</p>", (640, 480), False)
            False
        """
        digest = hashlib.sha256(html.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{digest}:{viewport[0]}x{viewport[1]}:{'js' if javascript else 'nojs'}"

    def get(self, key: str) -> Any | None:
        """The cached value of ``key`` (marked most recently used), or ``None``."""
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``, evicting the least recently used entries beyond ``max_entries``."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)


_SHARED = RenderCache()


def shared_cache() -> RenderCache:
    """The process-wide render cache used by default.

    Example:
        >>> shared_cache() is shared_cache()
        True
    """
    return _SHARED
