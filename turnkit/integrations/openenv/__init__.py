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

Layout, one job per module: :mod:`.wire` (the ids, endpoint and limits both sides share; JSON-safe ``info``),
:mod:`.models` (the pydantic wire models ``TextAction``/``TextObservation``, built on first use), :mod:`.server`
(one env per session behind openenv-core's FastAPI app: :func:`make_app`), :mod:`.serving` (uvicorn on a bound
socket: :class:`AppServer`, :class:`EnvServer`, :func:`serve`) and :mod:`.client` (:class:`OpenEnvTextEnv`,
:func:`make_remote_env`). Import everything from here.

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

from typing import Any

from .client import OpenEnvTextEnv, make_remote_env
from .server import make_app
from .serving import AppServer, EnvServer, serve
from .wire import REMOTE_ENV_ID, SPEC_PATH

__all__ = [
    "REMOTE_ENV_ID",
    "SPEC_PATH",
    "AppServer",
    "EnvServer",
    "OpenEnvTextEnv",
    "make_app",
    "make_remote_env",
    "serve",
]


def __getattr__(name: str) -> Any:
    """``TextAction`` and ``TextObservation``, the wire models, built from openenv-core on first access."""
    if name in ("TextAction", "TextObservation"):
        from .models import wire_models

        action, observation = wire_models()
        return action if name == "TextAction" else observation
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
