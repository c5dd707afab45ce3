"""The OpenEnv server of a turnkit env: one env per session behind openenv-core's FastAPI app (:func:`make_app`)."""

from __future__ import annotations

import asyncio
import copy
import difflib
import functools
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium

from turnkit.envs import TextEnv
from turnkit.errors import EnvError, TurnkitError

from .models import wire_models
from .wire import FIRST_MESSAGE_WAIT_S, PUBLIC_MODULE, SPEC_PATH, STEP_OVER_HTTP, jsonable

_log = logging.getLogger(PUBLIC_MODULE)


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
def environment_type() -> type:
    """openenv-core's ``Environment`` subclass serving one turnkit env instance, built on first use (slow import)."""
    try:
        from openenv.core.env_server.interfaces import Environment
        from openenv.core.env_server.types import EnvironmentMetadata, Observation, State
    except ImportError as exc:  # pragma: no cover - the openenv extra is part of every test set-up
        raise EnvError("serving needs openenv-core: pip install 'turnkit[openenv]'") from exc
    TextObservation = wire_models()[1]

    class TurnkitEnvironment(Environment):
        """One served env instance (one per OpenEnv session) around ``gymnasium.make(env_id, **env_kwargs)``."""

        SUPPORTS_CONCURRENT_SESSIONS = True  # every session makes its own env; turnkit envs share no state

        def __init__(self, env_id: str, env_kwargs: Mapping[str, Any]) -> None:
            super().__init__()
            self.env_id = env_id
            self._env = _make_env(env_id, env_kwargs)
            self._episode_id: str | None = None
            self._steps = 0

        def reset(self, seed: int | None = None, episode_id: str | None = None) -> Observation:
            if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
                raise EnvError(f"seed must be a non-negative integer or null, got {seed!r}")
            obs, info = self._guard("reset", lambda: self._env.reset(seed=seed))
            self._episode_id = episode_id or uuid.uuid4().hex
            self._steps = 0
            return TextObservation(message=obs, info=jsonable(info))

        def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
            obs, reward, terminated, truncated, info = self._guard("step", lambda: self._env.step(action.message))
            self._steps += 1
            return TextObservation(
                message=obs,
                info=jsonable(info),
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

    TurnkitEnvironment.__module__, TurnkitEnvironment.__qualname__ = PUBLIC_MODULE, "TurnkitEnvironment"
    return TurnkitEnvironment


MESSAGE_TYPES = ("reset", "step", "state", "close", "mcp")
"""The message types openenv-core's ``/ws`` session understands."""

EXPECTED_FRAME = (
    'expected a text frame holding a JSON object with a "type" field '
    '("reset", "step", "state" or "close"), e.g. {"type": "step", "data": {"message": "..."}}'
)
"""What a malformed WebSocket frame is answered with (after what was received instead)."""


_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def _frame_problem(message: Mapping[str, Any]) -> str | None:
    """Why a received WebSocket frame is not a protocol message (``None`` if it is one openenv-core can read)."""
    text = message.get("text")
    if text is None:
        return "a binary frame" if message.get("bytes") is not None else "an empty frame"
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        return f"text that is not JSON ({exc})"
    if not isinstance(parsed, dict):
        return f"a JSON {_JSON_KINDS.get(type(parsed), 'value')}"
    if not isinstance(parsed.get("type"), str):
        return 'a JSON object without a string "type" field'
    return None


def _error_frame(message: str, code: str) -> dict[str, Any]:
    """An ASGI send event carrying openenv-core's error message (``{"type": "error", "data": {...}}``)."""
    return {"type": "websocket.send", "text": json.dumps({"type": "error", "data": {"message": message, "code": code}})}


class _SessionFrames:
    """ASGI middleware for openenv-core's ``/ws`` sessions: malformed frames and refused sessions, readably.

    * A frame openenv-core cannot read (binary, not JSON, a JSON array or scalar, no ``"type"``) is answered with
      an ``INVALID_JSON`` error naming what was expected; the session stays open and usable.
    * A frame the server sends before the client has sent anything (a refused session: ``CAPACITY_REACHED``, a
      failing env factory) is held until the client's first message arrives (at most ``FIRST_MESSAGE_WAIT_S``),
      so a client that sends ``reset`` right after the handshake reads the error instead of a closed socket.
    """

    def __init__(self, app: Any, hold_s: float = FIRST_MESSAGE_WAIT_S) -> None:
        self.app, self.hold_s = app, hold_s

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket" or not str(scope.get("path", "")).endswith("/ws"):
            return await self.app(scope, receive, send)
        state = {"spoke": False, "gone": False}

        async def checked_receive() -> Any:
            while True:
                message = await receive()
                if message["type"] != "websocket.receive":
                    state["gone"] = state["gone"] or message["type"] == "websocket.disconnect"
                    return message
                state["spoke"] = True
                problem = _frame_problem(message)
                if problem is None:
                    return message
                await send(_error_frame(f"malformed message: got {problem}; {EXPECTED_FRAME}", "INVALID_JSON"))

        async def held_send(message: Any) -> None:
            if message["type"] == "websocket.send" and not state["spoke"] and not state["gone"]:
                state["spoke"] = True  # the client's first message is consumed: the session was refused
                try:
                    first = await asyncio.wait_for(receive(), self.hold_s)
                except asyncio.TimeoutError:
                    first = {"type": "websocket.receive"}
                state["gone"] = first["type"] == "websocket.disconnect"
            if state["gone"] and message["type"] in ("websocket.send", "websocket.close"):
                return  # nobody left to tell
            await send(message)

        await self.app(scope, checked_receive, held_send)


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


def _refuse_stateless_step(app: Any) -> None:
    """Replace openenv-core's ``POST /step`` (a fresh env per request: always a 500) by a 405 naming ``/ws``."""
    from fastapi.responses import JSONResponse

    routes = app.router.routes
    routes[:] = [r for r in routes if not (getattr(r, "path", None) == "/step" and "POST" in getattr(r, "methods", ()))]

    @app.post(
        "/step",
        tags=["Environment Control"],
        summary="Not served: step through a WebSocket session (/ws)",
        status_code=405,
        responses={405: {"description": STEP_OVER_HTTP}},
        response_model=None,
    )
    def step_over_http() -> Any:
        body = {"detail": STEP_OVER_HTTP, "code": "SESSION_REQUIRED"}
        return JSONResponse(body, status_code=405, headers={"Allow": ""})


def make_app(env_id: str, env_kwargs: Mapping[str, Any] | None = None, *, max_sessions: int = 64) -> Any:
    """Build the OpenEnv server (a FastAPI app) of a registered turnkit env.

    The app is openenv-core's ``create_fastapi_app`` around one env per session, plus ``GET /turnkit/spec``
    (the env id and limits that :class:`OpenEnvTextEnv` adopts). Episodes are played over the WebSocket session
    (``/ws``): ``POST /step`` over plain HTTP answers 405 naming it, malformed frames get an ``INVALID_JSON``
    error and the session goes on, and a session refused at ``max_sessions`` is answered ``CAPACITY_REACHED``
    on the client's first message. Serve it with any ASGI server, or use :class:`EnvServer` / :func:`serve`.

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
    action_cls, observation_cls = wire_models()
    environment_cls = environment_type()
    from openenv.core.env_server.http_server import create_fastapi_app

    factory = functools.partial(environment_cls, env_id, kwargs)
    app = create_fastapi_app(factory, action_cls, observation_cls, max_concurrent_envs=max_sessions)
    _refuse_stateless_step(app)
    app.add_middleware(_SessionFrames)
    app.add_middleware(_QuietDisconnects)

    @app.get(SPEC_PATH, tags=["turnkit"], summary="The served turnkit env id and limits")
    def turnkit_spec() -> dict[str, Any]:
        return dict(spec)

    return app
