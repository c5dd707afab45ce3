"""Start sandbox processes from one long-lived thread.

``bwrap --die-with-parent`` (``PR_SET_PDEATHSIG``) kills the sandbox when the *thread* that forked it exits,
not the process. A persistent sandbox started from a short-lived worker thread would die with that thread,
so every sandbox process is forked by a single daemon thread that lives as long as the process.

Example:
    >>> in_spawner_thread(lambda x: x + 1, 41)
    42
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_queue: queue.Queue[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], Future[Any]]] = queue.Queue()
_thread: threading.Thread | None = None
_pid = -1


def _loop() -> None:
    while True:
        fn, args, kwargs, fut = _queue.get()
        if not fut.set_running_or_notify_cancel():
            continue
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the caller, which re-raises it
            fut.set_exception(exc)


def in_spawner_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` on the spawner thread and return its result (or raise its exception)."""
    global _thread, _pid, _queue
    if threading.current_thread() is _thread:
        return fn(*args, **kwargs)
    with _lock:
        if _thread is None or _pid != os.getpid() or not _thread.is_alive():
            _queue = queue.Queue()
            _pid = os.getpid()
            _thread = threading.Thread(target=_loop, name="turnkit-sandbox-spawner", daemon=True)
            _thread.start()
        fut: Future[T] = Future()
        _queue.put((fn, args, kwargs, fut))
    return fut.result()
