"""Serving an ASGI app with uvicorn on a socket bound at once: :class:`AppServer`, :class:`EnvServer`, :func:`serve`."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from turnkit.errors import EnvError

from .server import make_app
from .wire import MAX_MESSAGE_BYTES

_Server = TypeVar("_Server", bound="AppServer")


def _listen(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        raise EnvError(f"cannot listen on {host}:{port}: {exc}") from exc


class AppServer:
    """Runs an ASGI app (any OpenEnv server) with uvicorn on a socket it binds at once.

    The port is known (and connections queue) as soon as the object exists; :meth:`start` serves in a
    background thread, :meth:`serve_forever` in the calling thread (Ctrl-C stops it).

    Args:
        app: The ASGI application, e.g. from :func:`make_app` or openenv-core's ``create_fastapi_app``.
        host: Interface to listen on (loopback by default: the protocol has no authentication).
        port: TCP port; 0 picks a free one (read it from :attr:`port` or :attr:`url`).
        log_level: uvicorn's log level.

    Example:
        >>> with AppServer(make_app("turnkit/MathEpisodes-v0")) as server:
        ...     server.url.startswith("http://127.0.0.1:"), server.port > 0
        (True, True)
    """

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning") -> None:
        import uvicorn

        self._sock = _listen(host, port)
        self.host = host
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=2, ws_max_size=MAX_MESSAGE_BYTES)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL clients connect to, e.g. ``http://127.0.0.1:8000``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> AppServer:
        """Serve in a daemon thread; returns once the server accepts connections."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise EnvError(f"the OpenEnv server on {self.url} did not start within {timeout_s} s")
            time.sleep(0.01)
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted (uvicorn handles SIGINT/SIGTERM)."""
        try:
            self._server.run(sockets=[self._sock])
        finally:
            self._sock.close()

    def stop(self) -> None:
        """Stop serving (open sessions are closed) and release the port. Idempotent."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._sock.close()

    def __enter__(self: _Server) -> _Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class EnvServer(AppServer):
    """A turnkit env served over OpenEnv (:func:`make_app`) by an :class:`AppServer`.

    Args:
        env_id: A registered env id.
        env_kwargs: Keyword arguments of ``gymnasium.make``.
        host, port, log_level: As for :class:`AppServer`.
        max_sessions: Most concurrent WebSocket sessions.

    Example:
        >>> from turnkit.integrations.openenv import OpenEnvTextEnv
        >>> with EnvServer("turnkit/MathEpisodes-v0", env_kwargs={"split": "ood"}) as server:
        ...     OpenEnvTextEnv(server.url).remote_env_id
        'turnkit/MathEpisodes-v0'
    """

    def __init__(
        self,
        env_id: str,
        *,
        env_kwargs: Mapping[str, Any] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        max_sessions: int = 64,
        log_level: str = "warning",
    ) -> None:
        self.env_id = env_id
        app = make_app(env_id, env_kwargs, max_sessions=max_sessions)
        super().__init__(app, host=host, port=port, log_level=log_level)


def serve(
    env_id: str,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: int = 64,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve a turnkit env over OpenEnv until interrupted (what ``turnkit serve-env`` runs).

    Args:
        env_id: A registered env id.
        env_kwargs: Keyword arguments of ``gymnasium.make``.
        host: Interface to listen on.
        port: TCP port (default OpenEnv's usual 8000); 0 picks a free one.
        max_sessions: Most concurrent WebSocket sessions.
        on_ready: Called with the base URL once the port is bound (connections queue from then on).

    Raises:
        EnvError: Unknown env id or bad kwargs, or the port cannot be bound.

    Example:
        >>> serve("turnkit/NoSuchEnv-v0")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        turnkit.errors.EnvError: unknown env id 'turnkit/NoSuchEnv-v0' ...
    """
    server = EnvServer(env_id, env_kwargs=env_kwargs, host=host, port=port, max_sessions=max_sessions)
    if on_ready is not None:
        on_ready(server.url)
    server.serve_forever()
