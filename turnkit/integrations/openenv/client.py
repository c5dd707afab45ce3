"""A remote OpenEnv env as a turnkit env: :class:`OpenEnvTextEnv` over one WebSocket session, :func:`make_remote_env`.

Speaks the protocol with ``websockets`` and never imports openenv-core (whose import pulls in gradio: seconds).
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Literal

import gymnasium
import numpy as np
from gymnasium.envs.registration import EnvSpec

from turnkit.envs import TextEnv
from turnkit.envs.core import Transition
from turnkit.errors import EnvError
from turnkit.types import Task

from .wire import BASE_INFO_KEYS, MAX_MESSAGE_BYTES, PUBLIC_MODULE, REMOTE_ENV_ID, SPEC_PATH


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
            opening = connect(ws_url, open_timeout=connect_timeout_s, max_size=MAX_MESSAGE_BYTES, proxy=proxy)
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
        >>> from turnkit.integrations.openenv import EnvServer
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
        self._extras = {k: v for k, v in reply.info.items() if k not in BASE_INFO_KEYS}
        self._server_turn = 0
        return reply.text

    def respond(self, action: str) -> Transition:
        """Send one valid action (after mirroring any earlier invalid ones) and map the reply.

        A turnkit server may reject text the client passed (a malformed env command such as WebShop's
        ``click[nothing]``); its ``invalid_actions`` count is adopted, so the next ``info`` and the invalid-action
        allowance agree with the local env.
        """
        self._mirror_invalid(self._turn - 1)
        reply = self._remote_step(action)
        served = reply.info.get("invalid_actions") if self.turnkit_server else None
        if isinstance(served, int) and not isinstance(served, bool):
            self._invalid = served
        info = {k: v for k, v in reply.info.items() if k not in BASE_INFO_KEYS}
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
            skip = (*BASE_INFO_KEYS, "invalid_action", "success")
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
        >>> from turnkit.integrations.openenv import EnvServer
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
    entry = f"{PUBLIC_MODULE}:OpenEnvTextEnv"
    spec = EnvSpec(REMOTE_ENV_ID, entry, max_episode_steps=max_episode_steps, kwargs={"base_url": url, **kwargs})
    return gymnasium.make(spec)
