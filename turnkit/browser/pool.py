"""A process-wide, reference-counted pool of browsers: envs with the same settings share one Chromium.

A GRPO group or a rollout batch holds G copies of one env. Without sharing, each copy starts its own
Chromium (about 2 s and 150 MB each). :meth:`BrowserPool.acquire` instead hands out one
:class:`~turnkit.browser.browser.Browser` per distinct setting (viewport, timeout, JavaScript, executable,
flags) and counts its holders; :meth:`BrowserPool.release` stops the browser when the last holder lets go.
Renders through a shared browser are serialised by its lock (one page, one render at a time), which is what
a single-threaded rollout does anyway; a crash or hang of one env's page restarts the shared browser for
everyone, transparently (the next render starts it again), and a browser that cannot start raises
:class:`~turnkit.browser.errors.BrowserError` in whichever env renders next.

Example:
    >>> pool = BrowserPool()
    >>> a = pool.acquire(viewport=(64, 48)); b = pool.acquire(viewport=(64, 48)); c = pool.acquire(viewport=(80, 48))
    >>> a is b, a is c, pool.holders(a), len(pool)
    (True, False, 2, 2)
    >>> pool.release(a); pool.release(c); pool.holders(a), len(pool)
    (1, 1)
    >>> pool.release(b); len(pool)  # the last holder: the browser is closed and forgotten
    0
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from turnkit.browser.browser import Browser
from turnkit.browser.cache import RenderCache
from turnkit.browser.errors import BrowserError


def _key(settings: dict[str, Any]) -> tuple[Any, ...]:
    no_sandbox = settings.get("no_sandbox")
    return (
        tuple(int(v) for v in settings.get("viewport", (640, 480))),
        float(settings.get("timeout_s", 5.0)),
        bool(settings.get("javascript", True)),
        settings.get("executable"),
        (os.geteuid() == 0) if no_sandbox is None else bool(no_sandbox),
        float(settings.get("start_timeout_s", 20.0)),
        tuple(settings.get("extra_flags", ())),
        id(settings["cache"]) if settings.get("cache") is not None else None,
    )


class BrowserPool:
    """Reference-counted shared browsers, one per distinct setting (see the module docstring).

    Thread-safe. The keyword arguments of :meth:`acquire` are those of
    :class:`~turnkit.browser.browser.Browser`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[Any, ...], list[Any]] = {}  # key -> [browser, holders, cache]

    def acquire(
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
    ) -> Browser:
        """The shared browser for these settings (created unstarted when new); one more holder.

        Every :meth:`acquire` must be matched by one :meth:`release` of the returned browser.

        Raises:
            BrowserError: Invalid settings (see :class:`~turnkit.browser.browser.Browser`).
        """
        settings: dict[str, Any] = {
            "viewport": viewport,
            "timeout_s": timeout_s,
            "javascript": javascript,
            "executable": executable,
            "no_sandbox": no_sandbox,
            "cache": cache,
            "start_timeout_s": start_timeout_s,
            "extra_flags": tuple(extra_flags),
        }
        key = _key(settings)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = [Browser(**settings), 0, cache]  # the cache object is kept alive with its key
                self._entries[key] = entry
            entry[1] += 1
            return entry[0]

    def release(self, browser: Browser) -> None:
        """One holder fewer; the last release closes the browser (all its processes) and forgets it.

        Raises:
            BrowserError: ``browser`` is not held from this pool (released too often, or never acquired).
        """
        with self._lock:
            for key, entry in self._entries.items():
                if entry[0] is browser:
                    entry[1] -= 1
                    if entry[1] > 0:
                        return
                    del self._entries[key]
                    break
            else:
                raise BrowserError("release() of a browser that this pool does not hold (released twice?)")
        browser.close()  # outside the pool lock: closing waits for the process tree

    def retain(self, browser: Browser) -> Browser:
        """One more holder of a browser already held from this pool (e.g. for a copy of an env).

        Raises:
            BrowserError: ``browser`` is not held from this pool.
        """
        with self._lock:
            for entry in self._entries.values():
                if entry[0] is browser:
                    entry[1] += 1
                    return browser
        raise BrowserError("retain() of a browser that this pool does not hold")

    def adopt(self, browser: Browser) -> Lease:
        """Hold a browser made elsewhere (an unpickled env's) as its own entry with one holder.

        Example:
            >>> pool = BrowserPool(); b = Browser(viewport=(64, 48))
            >>> lease = pool.adopt(b); pool.holders(b), lease.browser is b
            (1, True)
        """
        with self._lock:
            if any(e[0] is browser for e in self._entries.values()):
                raise BrowserError("adopt() of a browser that this pool already holds; use retain()")
            self._entries[("adopted", id(browser))] = [browser, 1, None]
        return Lease(self, browser)

    def lease(self, **settings: Any) -> Lease:
        """:meth:`acquire` wrapped in a :class:`Lease` that releases itself (see :class:`Lease`)."""
        return Lease(self, self.acquire(**settings))

    def holders(self, browser: Browser) -> int:
        """How many holders ``browser`` has in this pool (0 when not held)."""
        with self._lock:
            return next((e[1] for e in self._entries.values() if e[0] is browser), 0)

    def close_all(self) -> int:
        """Close every browser in the pool and forget its holders (for test teardown and shutdown).

        Holders that release later get a :class:`BrowserError`, as for any release of an unheld browser.

        Returns:
            How many browsers were closed.

        Example:
            >>> pool = BrowserPool(); b = pool.acquire(viewport=(64, 48))
            >>> pool.close_all(), len(pool), pool.holders(b)
            (1, 0, 0)
        """
        with self._lock:
            held = [e[0] for e in self._entries.values()]
            self._entries.clear()
        for browser in held:  # outside the pool lock: closing waits for the process tree
            browser.close()
        return len(held)

    def browsers(self) -> list[Browser]:
        """The browsers currently held, in acquisition order of their settings."""
        with self._lock:
            return [e[0] for e in self._entries.values()]

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class Lease:
    """One hold on a pooled browser, released by :meth:`release`, or when the lease is garbage-collected.

    A copy (``copy.copy``/``copy.deepcopy``, e.g. of an env that holds it) is a new hold on the same browser.

    Example:
        >>> pool = BrowserPool()
        >>> lease = pool.lease(viewport=(64, 48))
        >>> import copy; twin = copy.deepcopy(lease)
        >>> twin.browser is lease.browser, pool.holders(lease.browser)
        (True, 2)
        >>> lease.release(); lease.release(); del twin; pool.holders(lease.browser)  # idempotent; GC releases
        0
    """

    def __init__(self, pool: BrowserPool, browser: Browser) -> None:
        self.pool = pool
        self.browser = browser
        self._finalizer = weakref.finalize(self, pool.release, browser)

    @property
    def active(self) -> bool:
        """Whether this lease still holds its browser."""
        return self._finalizer.alive

    def release(self) -> None:
        """Give the hold back (idempotent); the pool stops the browser when no hold is left."""
        self._finalizer()

    def __copy__(self) -> Lease:
        return Lease(self.pool, self.pool.retain(self.browser))

    def __deepcopy__(self, memo: dict[int, Any]) -> Lease:
        return self.__copy__()

    def __reduce__(self) -> tuple[Any, ...]:
        # pickling (e.g. an env sent to another process): the browser pickles as a new, unstarted one with the
        # same settings (see Browser), held there by the receiving process's shared pool
        return (_unpickle_lease, (self.browser,))


def _unpickle_lease(browser: Browser) -> Lease:
    """Unpickle a :class:`Lease`: the receiving process's :func:`shared_pool` adopts the (new) browser."""
    return shared_pool().adopt(browser)


_SHARED = BrowserPool()


def shared_pool() -> BrowserPool:
    """The process-wide pool that envs use by default.

    Example:
        >>> shared_pool() is shared_pool()
        True
    """
    return _SHARED
