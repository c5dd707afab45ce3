"""The wire both sides agree on: the remote env id, turnkit's spec endpoint, message limits, JSON-safe ``info``."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

PUBLIC_MODULE = "turnkit.integrations.openenv"
"""Where users import everything from (the wire models and the client's entry point name this module)."""

REMOTE_ENV_ID = "openenv/Remote-v0"
"""The Gymnasium id of envs made by :func:`~turnkit.integrations.openenv.make_remote_env` (not registered; the
spec travels with the env)."""

SPEC_PATH = "/turnkit/spec"
"""turnkit's extension endpoint: the served env id and limits (JSON); other OpenEnv servers answer 404."""

BASE_INFO_KEYS = ("task_id", "family", "split", "difficulty", "turn", "invalid_actions")
"""The keys TextEnv puts into every info; the client recomputes them from its own state (a turnkit server's
``invalid_actions`` count is adopted after each valid step: the served env may reject text the client passed)."""

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Largest WebSocket message either side accepts."""

FIRST_MESSAGE_WAIT_S = 10.0
"""How long a refused session (server at ``max_sessions``) waits for the client's first message to answer it."""

STEP_OVER_HTTP = (
    "POST /step is not served over plain HTTP: every HTTP request gets a fresh env, so there is no episode to step. "
    'Open a WebSocket session at /ws and send {"type": "reset", "data": {"seed": 0}}, then '
    '{"type": "step", "data": {"message": "..."}} (openenv\'s EnvClient and turnkit\'s make_remote_env do this).'
)
"""The body's ``detail`` of the HTTP 405 that ``POST /step`` answers."""


# ----------------------------------------------------------------------------------------------------- serving
def jsonable(value: Any) -> Any:
    """A JSON-safe copy of a public ``info`` value (numpy scalars -> numbers, tuples/sets -> lists)."""
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (np.generic, np.ndarray)):
        return jsonable(value.tolist())  # numpy scalars' tolist() is the Python scalar
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=repr)
    return str(value)
