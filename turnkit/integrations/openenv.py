"""OpenEnv interop: serve turnkit envs as OpenEnv servers, and play remote OpenEnv envs as turnkit envs.

`OpenEnv <https://github.com/meta-pytorch/OpenEnv>`_ (``openenv-core``, tested with 0.3.0) runs envs behind a
FastAPI server; a client opens a WebSocket session (``/ws``) and sends ``reset`` / ``step`` messages. Both ways:

* **Serve** (:class:`EnvServer`, :func:`make_app`, :func:`serve`; ``turnkit serve-env ENV_ID``): a registered
  turnkit env (``gymnasium.make(env_id, **env_kwargs)``, time limit included) behind openenv-core's own
  ``create_fastapi_app``, one env instance per session, plus ``GET /turnkit/spec`` (env id and limits).
* **Wrap** (:func:`make_remote_env`, :class:`OpenEnvTextEnv`): any running OpenEnv server becomes a
  :class:`~turnkit.TextEnv`, so ``collect``, eval, MCTS, critics, training and ``check_env`` work on it.

==========================  ================================================================================
turnkit ``TextEnv``         OpenEnv 0.3 wire (WebSocket ``/ws``, JSON text frames)
==========================  ================================================================================
``reset(seed=s)``           ``{"type": "reset", "data": {"seed": s}}``
``step(text)``              ``{"type": "step", "data": {"message": text}}`` (``TextAction``)
observation (``str``)       reply ``data.observation.message`` (``TextObservation``)
``info`` (``dict``)         ``data.observation.info`` (JSON: numpy scalars and tuples become numbers, lists)
``reward``                  ``data.reward`` (``null`` from other servers reads as 0)
``terminated/truncated``    ``data.observation.terminated/truncated`` (other servers: ``data.done``)
``snapshot()/restore()``    client side: restore resets the server to the episode's seed and replays actions
``privileged()``            never sent: it stays on the server; the client's ``Task.privileged`` is ``{}``
==========================  ================================================================================

Only what a policy may see crosses the wire; an unexpected exception in a served env reaches clients as its
type only (its message may quote task internals and goes to the server's log). ``reset(seed=s)`` sends ``s``
unchanged, so the wrapped env plays the local env's episodes; ``reset()`` draws the seed from the client's RNG.
Invalid actions are answered by the client with :class:`~turnkit.TextEnv`'s own code and, for a turnkit server,
mirrored as empty messages, so the server's turn counter, limits and ``info`` stay in step. Failures are
:class:`~turnkit.errors.EnvError` naming the URL. The client speaks the protocol with ``websockets`` and never
imports openenv-core (whose import pulls in gradio: seconds, see BENCHMARKS.md). Details: docs/integrations.md,
section OpenEnv.

Example:
    >>> import gymnasium
    >>> from turnkit.integrations.openenv import EnvServer, make_remote_env
    >>> kwargs = {"kinds": ["arithmetic"]}
    >>> with EnvServer("turnkit/MathEpisodes-v0", env_kwargs=kwargs) as server:
    ...     remote = make_remote_env(server.url)
    ...     local = gymnasium.make("turnkit/MathEpisodes-v0", **kwargs)
    ...     same_reset = remote.reset(seed=3) == local.reset(seed=3)
    ...     same_steps = [remote.step(a) == local.step(a) for a in ("ANSWER: 0", "", "ANSWER: 1")]
    ...     remote.close()
    >>> same_reset, same_steps, remote.unwrapped.task.privileged
    (True, [True, True, True], {})
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import difflib
import enum
import functools
import ipaddress
import json
import logging
import math
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

import gymnasium
import numpy as np
from gymnasium.envs.registration import EnvSpec

from turnkit.envs import TextEnv
from turnkit.envs.core import Transition
from turnkit.errors import EnvError, TurnkitError
from turnkit.types import Task

__all__ = ["REMOTE_ENV_ID", "AppServer", "EnvServer", "OpenEnvTextEnv", "make_app", "make_remote_env", "serve"]

REMOTE_ENV_ID = "openenv/Remote-v0"
"""The Gymnasium id of envs made by :func:`make_remote_env` (not registered; the spec travels with the env)."""

SPEC_PATH = "/turnkit/spec"
"""turnkit's extension endpoint: the served env id and limits (JSON); other OpenEnv servers answer 404."""

# The keys TextEnv puts into every info; the client recomputes them from its own state.
_BASE_INFO_KEYS = ("task_id", "family", "split", "difficulty", "turn", "invalid_actions")

_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_Server = TypeVar("_Server", bound="AppServer")
_log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------------- serving
def _jsonable(value: Any) -> Any:
    """A JSON-safe copy of a public ``info`` value (numpy scalars -> numbers, tuples/sets -> lists)."""
    if isinstance(value, enum.Enum):
        return _jsonable(value.value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (np.generic, np.ndarray)):
        return _jsonable(value.tolist())  # numpy scalars' tolist() is the Python scalar
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(v) for v in value), key=repr)
    return str(value)


def _make_env(env_id: str, env_kwargs: Mapping[str, Any]) -> gymnasium.Env:
    """``gymnasium.make`` with turnkit errors: unknown ids (with the closest registered id), bad kwargs."""
    try:
        env = gymnasium.make(env_id, **copy.deepcopy(dict(env_kwargs)))
    except gymnasium.error.Error as exc:
        close = difflib.get_close_matches(env_id, list(gymnasium.registry), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else "; `turnkit list` shows the registered ids"
        raise EnvError(f"unknown env id {env_id!r} ({exc}){hint}") from exc
    except TypeError as exc:
        raise EnvError(f"cannot make {env_id!r} with {dict(env_kwargs)}: {exc}") from exc
    if not isinstance(env.unwrapped, TextEnv):
        env.close()
        raise EnvError(f"{env_id!r} is a {type(env.unwrapped).__name__}, not a turnkit TextEnv; only text envs serve")
    return env


@functools.cache
def _server_types() -> tuple[type, type, type]:
    """openenv-core's ``Action``/``Observation``/``Environment`` subclasses, built on first use (slow import)."""
    try:
        from openenv.core.env_server.interfaces import Environment
        from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
    except ImportError as exc:  # pragma: no cover - the openenv extra is part of every test set-up
        raise EnvError("serving needs openenv-core: pip install 'turnkit[openenv]'") from exc
    from pydantic import Field

    class TextAction(Action):
        """One agent message for a turnkit env (``{"message": "..."}`` on the wire)."""

        message: Any = Field(
            description="The agent's reply. Anything but acceptable text (empty, too long, not a string) is "
            "answered with invalid-action feedback, as turnkit envs do."
        )

    class TextObservation(Observation):
        """A turnkit env's reply: its new message, the public ``info`` and the two end flags."""

        message: str = Field(default="", description="The env's new message to the agent.")
        info: dict[str, Any] = Field(default_factory=dict, description="Public info (never privileged data).")
        terminated: bool = Field(default=False, description="The episode reached a terminal state.")
        truncated: bool = Field(default=False, description="The time limit cut the episode.")

    class TurnkitEnvironment(Environment):
        """One served env instance (one per OpenEnv session) around ``gymnasium.make(env_id, **env_kwargs)``."""

        SUPPORTS_CONCURRENT_SESSIONS = True  # every session makes its own env; turnkit envs share no state

        def __init__(self, env_id: str, env_kwargs: Mapping[str, Any]) -> None:
            super().__init__()
            self.env_id = env_id
            self._env = _make_env(env_id, env_kwargs)
            self._episode_id: str | None = None
            self._steps = 0

        def reset(self, seed: int | None = None, episode_id: str | None = None) -> TextObservation:
            if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
                raise EnvError(f"seed must be a non-negative integer or null, got {seed!r}")
            obs, info = self._guard("reset", lambda: self._env.reset(seed=seed))
            self._episode_id = episode_id or uuid.uuid4().hex
            self._steps = 0
            return TextObservation(message=obs, info=_jsonable(info))

        def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> TextObservation:
            obs, reward, terminated, truncated, info = self._guard("step", lambda: self._env.step(action.message))
            self._steps += 1
            return TextObservation(
                message=obs,
                info=_jsonable(info),
                terminated=bool(terminated),
                truncated=bool(truncated),
                reward=float(reward),
                done=bool(terminated or truncated),
            )

        @property
        def state(self) -> State:
            return State(episode_id=self._episode_id, step_count=self._steps)

        def get_metadata(self) -> EnvironmentMetadata:
            doc = (type(self._env.unwrapped).__doc__ or "").strip().splitlines()
            return EnvironmentMetadata(
                name=self.env_id, description=doc[0] if doc else self.env_id, author="turnkit", version="1"
            )

        def close(self) -> None:
            self._env.close()

        def _guard(self, what: str, call: Callable[[], Any]) -> Any:
            try:
                return call()
            except (TurnkitError, gymnasium.error.Error):
                raise  # turnkit's and gymnasium's own messages say what was misused
            except Exception as exc:  # may quote task internals: log here, send only the type
                _log.exception("%s raised in %s", self.env_id, what)
                raise EnvError(f"{self.env_id} raised {type(exc).__name__} in {what} (see the server log)") from None

    for cls in (TextAction, TextObservation, TurnkitEnvironment):
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
    return TextAction, TextObservation, TurnkitEnvironment


def __getattr__(name: str) -> Any:
    """``TextAction`` and ``TextObservation``, the wire models, built from openenv-core on first access."""
    if name in ("TextAction", "TextObservation"):
        action, observation, _ = _server_types()
        return action if name == "TextAction" else observation
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _QuietDisconnects:
    """ASGI middleware: a WebSocket client that went away (a killed worker) is routine, not a logged traceback.

    openenv-core 0.3's session handler closes the socket in a ``finally`` that raises if the client is gone.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        from starlette.websockets import WebSocketDisconnect

        try:
            await self.app(scope, receive, send)
        except (WebSocketDisconnect, OSError) as exc:  # uvicorn's ClientDisconnected is an OSError
            _log.debug("websocket client went away: %r", exc)


def make_app(env_id: str, env_kwargs: Mapping[str, Any] | None = None, *, max_sessions: int = 64) -> Any:
    """Build the OpenEnv server (a FastAPI app) of a registered turnkit env.

    The app is openenv-core's ``create_fastapi_app`` around one env per session, plus ``GET /turnkit/spec``
    (the env id and limits that :class:`OpenEnvTextEnv` adopts). Serve it with any ASGI server, or use
    :class:`EnvServer` / :func:`serve`.

    Args:
        env_id: A registered env id, e.g. ``"turnkit/MathEpisodes-v0"``.
        env_kwargs: Keyword arguments of ``gymnasium.make`` (``split``, ``difficulty``, ``max_episode_steps``...).
        max_sessions: Most concurrent WebSocket sessions (one env instance each).

    Returns:
        The ``fastapi.FastAPI`` application.

    Raises:
        EnvError: Unknown env id, kwargs the env does not take, or an env that is not a turnkit ``TextEnv``.

    Example:
        >>> app = make_app("turnkit/MathEpisodes-v0", {"split": "ood"})
        >>> sorted(r.path for r in app.routes if r.path in ("/ws", "/reset", "/step", "/turnkit/spec"))
        ['/reset', '/step', '/turnkit/spec', '/ws']
    """
    if max_sessions < 1:
        raise EnvError(f"max_sessions must be >= 1, got {max_sessions}")
    kwargs = dict(env_kwargs or {})
    probe = _make_env(env_id, kwargs)
    base = probe.unwrapped
    assert isinstance(base, TextEnv)  # _make_env refuses other envs
    spec = {
        "env_id": env_id,
        "max_episode_steps": probe.spec.max_episode_steps if probe.spec is not None else None,
        "split": base.split,
        "max_invalid_actions": base.max_invalid_actions,
        "max_action_chars": base.max_action_chars,
    }
    probe.close()
    action_cls, observation_cls, environment_cls = _server_types()
    from openenv.core.env_server.http_server import create_fastapi_app

    factory = functools.partial(environment_cls, env_id, kwargs)
    app = create_fastapi_app(factory, action_cls, observation_cls, max_concurrent_envs=max_sessions)
    app.add_middleware(_QuietDisconnects)

    @app.get(SPEC_PATH, tags=["turnkit"], summary="The served turnkit env id and limits")
    def turnkit_spec() -> dict[str, Any]:
        return dict(spec)

    return app


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
        config = uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=2, ws_max_size=_MAX_MESSAGE_BYTES)
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


# ---------------------------------------------------------------------------------------------------- wrapping
def _is_loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _http_base(base_url: str) -> str:
    """``http(s)://host:port[/prefix]`` from an http, https, ws or wss base URL."""
    url = base_url.strip().rstrip("/")
    for ws, http in (("ws://", "http://"), ("wss://", "https://")):
        if url.startswith(ws):
            url = http + url[len(ws) :]
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise EnvError(f"not an OpenEnv base URL: {base_url!r} (expected e.g. 'http://127.0.0.1:8000')")
    return url


def _get_json(url: str, timeout_s: float) -> Any | None:
    """GET a JSON document; ``None`` for 404. Unreachable servers raise ``EnvError`` naming the URL."""
    handlers = [urllib.request.ProxyHandler({})] if _is_loopback(url) else []
    try:
        with urllib.request.build_opener(*handlers).open(url, timeout=timeout_s) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise EnvError(f"bad response from {url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EnvError(f"no OpenEnv server answers at {url}: {reason}") from exc
    try:
        return json.loads(body)
    except ValueError as exc:
        raise EnvError(f"bad response from {url}: not JSON ({body[:60]!r})") from exc


@dataclasses.dataclass(frozen=True)
class _Reply:
    text: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class _Session:
    """One OpenEnv WebSocket session (``/ws``): one env instance on the server."""

    def __init__(self, ws_url: str, *, connect_timeout_s: float, timeout_s: float) -> None:
        from websockets.sync.client import connect

        self.url, self.timeout_s = ws_url, timeout_s
        try:
            proxy: Literal[True] | None = None if _is_loopback(ws_url) else True
            opening = connect(ws_url, open_timeout=connect_timeout_s, max_size=_MAX_MESSAGE_BYTES, proxy=proxy)
            self._ws = opening.__enter__()  # the context-manager form (websockets >= 16 asks for it); close() ends it
        except Exception as exc:  # refused, handshake rejected, timeout: all mean no session
            raise EnvError(f"cannot open an OpenEnv session at {ws_url}: {type(exc).__name__}: {exc}") from exc

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed

        kind = message["type"]
        try:
            self._ws.send(json.dumps(message))
            raw = self._ws.recv(timeout=self.timeout_s)
        except TimeoutError as exc:
            raise EnvError(f"the OpenEnv server at {self.url} did not answer {kind} within {self.timeout_s} s") from exc
        except (ConnectionClosed, OSError) as exc:
            raise EnvError(f"lost the OpenEnv session at {self.url} during {kind}: {exc}") from exc
        try:
            reply = json.loads(raw)
        except ValueError as exc:
            raise EnvError(f"bad response from {self.url} to {kind}: not JSON ({str(raw)[:60]!r})") from exc
        if not isinstance(reply, dict):
            raise EnvError(f"bad response from {self.url} to {kind}: {type(reply).__name__}, not an object")
        if reply.get("type") == "error":
            data = reply.get("data")
            data = data if isinstance(data, dict) else {}
            detail = f"{data.get('message', 'no message')} ({data.get('code', 'no code')})"
            raise EnvError(f"the OpenEnv server at {self.url} answered {kind} with an error: {detail}")
        return reply

    def close(self) -> None:
        """End the session the protocol's way: a ``close`` message, then the server closes the connection."""
        from websockets.exceptions import ConnectionClosed

        with contextlib.suppress(ConnectionClosed, OSError, TimeoutError):
            self._ws.send(json.dumps({"type": "close"}))
            self._ws.recv(timeout=2.0)  # returns when the server closes (closing first makes it log errors)
        self._ws.close()


class OpenEnvTextEnv(TextEnv):
    """A remote OpenEnv env as a turnkit :class:`~turnkit.TextEnv` (see the module docstring for the mapping).

    Prefer :func:`make_remote_env`, which adds the server's time limit as ``gymnasium.make`` does. The server is
    probed when the env is built (none: :class:`EnvError`); the WebSocket session opens on the first ``reset``
    and a lost one is reopened by the next ``reset``. A turnkit server (one that answers ``GET /turnkit/spec``)
    sets the split and invalid-action limits, its observation fields give ``info``/``terminated``/``truncated``,
    and invalid actions are mirrored to it. For other OpenEnv servers the text is the ``observation_key`` field,
    the other fields become ``info``, ``done`` means terminated, and the reset seed is sent as ``seed``.

    Args:
        base_url: The server, e.g. ``"http://127.0.0.1:8000"`` (``ws://`` works too).
        env_id: If given, the id (turnkit) or metadata name (other servers) the server must serve.
        action_key: The action field that carries the agent's text (``"message"`` for turnkit servers).
        observation_key: The observation field that carries the env's text.
        timeout_s: Longest wait for one reply.
        connect_timeout_s: Longest wait for the probe and for opening a session.
        max_invalid_actions: Invalid actions allowed per episode, for other servers (default 3); a turnkit
            server's own limit applies to it (a different value is an :class:`EnvError`).
        max_action_chars: Longest accepted action, for other servers (default 16 384); likewise.
        render_mode: As for :class:`~turnkit.TextEnv`.

    Attributes:
        remote_env_id: The env id (turnkit servers) or metadata name (other servers) behind the URL.
        turnkit_server: Whether the server is a turnkit server.
        server_spec: What ``GET /turnkit/spec`` returned (``{}`` for other servers).

    Example:
        >>> with EnvServer("turnkit/MathEpisodes-v0") as server:
        ...     env = OpenEnvTextEnv(server.url)
        ...     obs, info = env.reset(seed=0)
        ...     reply = env.step("ANSWER: 0")
        ...     env.close()
        >>> env.turnkit_server, info["family"], reply[4]["turn"], env.task.privileged
        (True, 'math', 1, {})
    """

    splits = ("remote",)  # replaced per instance by the served split

    def __init__(
        self,
        base_url: str,
        *,
        env_id: str | None = None,
        action_key: str = "message",
        observation_key: str = "message",
        timeout_s: float = 60.0,
        connect_timeout_s: float = 10.0,
        max_invalid_actions: int | None = None,
        max_action_chars: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.base_url = _http_base(base_url)
        self.action_key, self.observation_key = action_key, observation_key
        self.timeout_s, self.connect_timeout_s = timeout_s, connect_timeout_s
        spec = _get_json(self.base_url + SPEC_PATH, connect_timeout_s)
        if spec is not None and not (isinstance(spec, dict) and isinstance(spec.get("env_id"), str)):
            raise EnvError(f"bad response from {self.base_url}{SPEC_PATH}: {str(spec)[:80]}")
        self.turnkit_server = spec is not None
        self.server_spec: dict[str, Any] = dict(spec or {})
        if spec is None:
            if _get_json(self.base_url + "/health", connect_timeout_s) is None:
                raise EnvError(f"no OpenEnv server at {self.base_url}: GET /health answered 404")
            meta = _get_json(self.base_url + "/metadata", connect_timeout_s)
            self.remote_env_id = str(meta.get("name", "openenv")) if isinstance(meta, dict) else "openenv"
        else:
            self.remote_env_id = spec["env_id"]
        if env_id is not None and env_id != self.remote_env_id:
            raise EnvError(f"{self.base_url} serves {self.remote_env_id!r}, not {env_id!r}")
        split = str(self.server_spec.get("split", "remote"))
        self.splits = (split,)  # type: ignore[misc]
        super().__init__(
            split=split,
            max_invalid_actions=self._limit("max_invalid_actions", max_invalid_actions, 3),
            max_action_chars=self._limit("max_action_chars", max_action_chars, 16_384),
            render_mode=render_mode,
        )
        self._session: _Session | None = None
        self._broken = False
        self._next_seed: int | None = None
        self._fresh: tuple[int, _Reply] | None = None  # the reset generate_task just did, for begin()
        self._extras: dict[str, Any] = {}
        self._server_turn = 0

    def _limit(self, name: str, given: int | None, default: int) -> int:
        """A turnkit server's limit (the client must agree with it, or mirroring breaks), else ``given``."""
        served = self.server_spec.get(name)
        if not isinstance(served, int) or isinstance(served, bool):
            return default if given is None else given
        if given is not None and given != served:
            raise EnvError(f"{self.base_url} serves {name}={served}; serve it with --env-kwarg {name}={given} instead")
        return served

    # ------------------------------------------------------------------ TextEnv hooks
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        """Start an episode; ``seed`` is sent to the server unchanged (see the module docstring)."""
        self._next_seed = seed
        try:
            return super().reset(seed=seed, options=options)
        finally:
            self._next_seed = None

    def generate_task(self, rng: np.random.Generator) -> Task:
        """Reset the server with the reset seed (or one drawn from ``rng``); the task is its public part."""
        seed = self._next_seed if self._next_seed is not None else int(rng.integers(2**31 - 1))
        reply = self._remote_reset(seed)
        self._fresh = (seed, reply)
        info = reply.info
        return Task(
            task_id=str(info.get("task_id", f"{self.remote_env_id}-seed{seed}")),
            prompt=reply.text,
            privileged={},  # stays on the server
            family=str(info.get("family", "")),
            split=str(info.get("split", self.split)),
            difficulty=float(info.get("difficulty", 0.0)),
            metadata={"openenv_seed": seed},
        )

    def begin(self, task: Task) -> str:
        """Use the reset just done, or (restoring a snapshot) reset the server to the task's seed again."""
        fresh, self._fresh = self._fresh, None
        seed = task.metadata.get("openenv_seed")
        if fresh is not None and fresh[0] == seed:
            reply = fresh[1]
        else:
            if not isinstance(seed, int):
                raise EnvError(f"task {task.task_id!r} did not come from an OpenEnv server (no 'openenv_seed')")
            reply = self._remote_reset(seed)
            if reply.text != task.prompt:
                raise EnvError(f"{self.base_url} is not deterministic: reset(seed={seed}) gave another first message")
        self._extras = {k: v for k, v in reply.info.items() if k not in _BASE_INFO_KEYS}
        self._server_turn = 0
        return reply.text

    def respond(self, action: str) -> Transition:
        """Send one valid action (after mirroring any earlier invalid ones) and map the reply."""
        self._mirror_invalid(self._turn - 1)
        reply = self._remote_step(action)
        info = {k: v for k, v in reply.info.items() if k not in _BASE_INFO_KEYS}
        return Transition(reply.text, reward=reply.reward, terminated=reply.terminated, info=info)

    def extra_info(self) -> dict[str, Any]:
        """The server's public extras; after an invalid action, mirrored first so they are current."""
        if self.turnkit_server and self._task is not None and self._server_turn < self._turn:
            self._mirror_invalid(self._turn)
        return dict(self._extras)

    def close(self) -> None:
        """Close the WebSocket session (the server then closes its env instance)."""
        self._drop_session()
        super().close()

    # ------------------------------------------------------------------ wire
    def _mirror_invalid(self, upto: int) -> None:
        """Send an empty message per invalid action the server has not seen (turnkit servers only)."""
        while self.turnkit_server and self._server_turn < upto:
            reply = self._remote_step("")
            if "invalid_action" not in reply.info:
                raise EnvError(f"{self.base_url} accepted an empty message; it does not follow the TextEnv contract")
            skip = (*_BASE_INFO_KEYS, "invalid_action", "success")
            self._extras = {k: v for k, v in reply.info.items() if k not in skip}

    def _remote_reset(self, seed: int) -> _Reply:
        if self._broken:
            self._drop_session()
        if self._session is None:
            ws_url = "ws" + self.base_url[len("http") :] + "/ws"
            self._session = _Session(ws_url, connect_timeout_s=self.connect_timeout_s, timeout_s=self.timeout_s)
        self._server_turn = 0
        return self._call({"type": "reset", "data": {"seed": seed}})

    def _remote_step(self, text: str) -> _Reply:
        if self._session is None:
            raise EnvError(f"the OpenEnv session at {self.base_url} was lost; call reset() to start a new one")
        reply = self._call({"type": "step", "data": {self.action_key: text}})
        self._server_turn += 1
        turn = reply.info.get("turn") if self.turnkit_server else None
        if turn is not None and turn != self._server_turn:
            raise EnvError(f"{self.base_url} is at turn {turn}, this env at {self._server_turn}: out of step")
        return reply

    def _call(self, message: dict[str, Any]) -> _Reply:
        assert self._session is not None
        try:
            return self._parse(self._session.request(message), message["type"])
        except EnvError:
            self._broken = True  # the session's state is unknown now: the next reset opens a new one
            raise

    def _parse(self, reply: dict[str, Any], kind: str) -> _Reply:
        def bad(why: str) -> EnvError:
            return EnvError(f"bad response from {self.base_url} to {kind}: {why}")

        data = reply.get("data")
        if reply.get("type") != "observation" or not isinstance(data, dict):
            raise bad(f"expected an observation message, got type {reply.get('type')!r}")
        obs = data.get("observation")
        if not isinstance(obs, dict):
            raise bad("no observation object")
        text = obs.get(self.observation_key)
        if not isinstance(text, str):
            raise bad(f"observation field {self.observation_key!r} is not text (fields: {sorted(obs)})")
        reward = 0.0 if data.get("reward") is None else data["reward"]
        if isinstance(reward, bool) or not isinstance(reward, (int, float)):
            raise bad(f"reward {reward!r} is not a number")
        done = data.get("done", False)
        if not isinstance(done, bool):
            raise bad(f"done {done!r} is not a boolean")
        if self.turnkit_server:
            info = obs.get("info")
            if not isinstance(info, dict):
                raise bad("observation has no info object")
            terminated, truncated = bool(obs.get("terminated", done)), bool(obs.get("truncated", False))
        else:
            info = {k: v for k, v in obs.items() if k != self.observation_key}
            terminated, truncated = done, False
        return _Reply(text, float(reward), terminated, truncated, info)

    def _drop_session(self) -> None:
        session, self._session, self._broken = self._session, None, False
        if session is not None:
            with contextlib.suppress(Exception):  # closing a dead connection: nothing left to release
                session.close()


def make_remote_env(base_url: str, *, max_episode_steps: int | None = None, **kwargs: Any) -> gymnasium.Env[str, str]:
    """Wrap the OpenEnv server at ``base_url`` as a turnkit env, made like ``gymnasium.make`` makes envs.

    The env is :class:`OpenEnvTextEnv` under Gymnasium's standard wrappers, with the server's time limit (a
    turnkit server's ``max_episode_steps``) unless ``max_episode_steps`` says otherwise. Its ``spec`` carries the
    URL, so ``gymnasium.make(env.spec)`` (fresh instances, other processes) connects to the same server.

    Args:
        base_url: The server, e.g. ``"http://127.0.0.1:8000"``.
        max_episode_steps: Time limit; default the turnkit server's (none for other servers).
        **kwargs: Passed to :class:`OpenEnvTextEnv` (``env_id``, ``action_key``, ``timeout_s``...).

    Returns:
        The wrapped env (``env.unwrapped`` is the :class:`OpenEnvTextEnv`).

    Raises:
        EnvError: No OpenEnv server answers at ``base_url``, or it serves another env than ``env_id``.

    Example:
        >>> import turnkit
        >>> from turnkit.agents.scripted import ScriptedAgent
        >>> with EnvServer("turnkit/MathEpisodes-v0") as server:
        ...     env = make_remote_env(server.url, env_id="turnkit/MathEpisodes-v0")
        ...     traj = turnkit.collect(env, ScriptedAgent(["ANSWER: 0"] * 3), seed=1)
        ...     env.close()
        >>> env.spec.id, env.spec.max_episode_steps, traj.task.privileged, len(traj.steps) > 0
        ('openenv/Remote-v0', 10, {}, True)
    """
    url = _http_base(base_url)
    if max_episode_steps is None:
        served = _get_json(url + SPEC_PATH, kwargs.get("connect_timeout_s", 10.0))
        if isinstance(served, dict) and isinstance(served.get("max_episode_steps"), int):
            max_episode_steps = served["max_episode_steps"]
    entry = f"{__name__}:OpenEnvTextEnv"
    spec = EnvSpec(REMOTE_ENV_ID, entry, max_episode_steps=max_episode_steps, kwargs={"base_url": url, **kwargs})
    return gymnasium.make(spec)
