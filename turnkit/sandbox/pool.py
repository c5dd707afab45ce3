"""``SandboxPool``: sandboxes started ahead of time, one per task, replaced in the background.

Starting a container takes about a second (the vfs storage driver copies the image); a pool hides that by
keeping ``size`` sandboxes ready. Each :meth:`SandboxPool.acquire` hands out a fresh sandbox that no earlier
task has touched; when the task is done the sandbox is closed and a background thread starts its
replacement. Works with any backend through a factory.

Example:
    >>> from turnkit.sandbox import LocalSandbox
    >>> with SandboxPool(lambda: LocalSandbox(persistent=True), size=1) as pool:
    ...     with pool.acquire() as sb:
    ...         sb.run_python("print('pooled')", timeout=5).stdout
    'pooled\\n'
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from types import TracebackType

from turnkit.errors import ConfigError, SandboxError
from turnkit.sandbox.base import Sandbox


class SandboxPool:
    """A pool of ready sandboxes.

    Args:
        factory: Creates one sandbox (e.g. ``lambda: DockerSandbox(limits)``).
        size: How many sandboxes to keep ready.

    Raises:
        ConfigError: If ``size`` is not positive.

    Example:
        >>> SandboxPool(lambda: None, size=0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: SandboxPool size must be a positive integer, got 0
    """

    def __init__(self, factory: Callable[[], Sandbox], size: int = 2) -> None:
        if not isinstance(size, int) or size <= 0:
            raise ConfigError(f"SandboxPool size must be a positive integer, got {size!r}")
        self._factory = factory
        self.size = size
        self._ready: queue.Queue[Sandbox | BaseException] = queue.Queue()
        self._lock = threading.Lock()
        self._filled = threading.Condition()
        self._closed = False
        self._threads: list[threading.Thread] = []
        for _ in range(size):
            self._refill()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _refill(self, retire: Sandbox | None = None) -> None:
        """In the background: close the used sandbox (if any), then start its replacement."""
        with self._lock:
            if self._closed:
                if retire is not None:
                    retire.close()
                return
            thread = threading.Thread(target=self._make, args=(retire,), name="turnkit-sandbox-pool", daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            thread.start()

    def _make(self, retire: Sandbox | None = None) -> None:
        if retire is not None:
            retire.close()
        try:
            sandbox: Sandbox | BaseException = self._factory()
        except Exception as exc:  # handed to the next acquire() as the cause of its SandboxError
            sandbox = exc
        with self._lock:
            closed = self._closed
        if closed and not isinstance(sandbox, BaseException):
            sandbox.close()
            return
        with self._filled:
            self._ready.put(sandbox)
            self._filled.notify_all()

    @contextlib.contextmanager
    def acquire(self, timeout: float | None = 120.0) -> Iterator[Sandbox]:
        """Take a ready sandbox for one task; when the block exits it is closed and replaced in the background.

        Args:
            timeout: Seconds to wait for a sandbox to become ready.

        Raises:
            SandboxError: If none became ready in time, the pool is closed, or the factory failed.
        """
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        try:
            item = self._ready.get(timeout=timeout)
        except queue.Empty:
            raise SandboxError(f"no sandbox became ready within {timeout} s") from None
        if isinstance(item, BaseException):
            self._refill()
            raise SandboxError(f"the sandbox factory failed: {item}") from item
        try:
            yield item
        finally:
            self._refill(retire=item)

    def wait_ready(self, timeout: float | None = 120.0) -> None:
        """Block until every sandbox of the pool is ready (e.g. before timing a warm acquire).

        Raises:
            SandboxError: If the pool did not fill up in time.

        Example:
            >>> from turnkit.sandbox import LocalSandbox
            >>> with SandboxPool(LocalSandbox, size=2) as pool:
            ...     pool.wait_ready(timeout=30)
            ...     pool.ready
            2
        """
        with self._filled:
            if not self._filled.wait_for(lambda: self._ready.qsize() >= self.size or self._closed, timeout):
                raise SandboxError(f"the pool did not fill up within {timeout} s")

    @property
    def ready(self) -> int:
        """How many sandboxes are ready now."""
        return self._ready.qsize()

    def close(self) -> None:
        """Close every ready sandbox and stop refilling; waits for sandboxes being started. Idempotent."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=300)
        while True:
            try:
                item = self._ready.get_nowait()
            except queue.Empty:
                return
            if not isinstance(item, BaseException):
                item.close()
