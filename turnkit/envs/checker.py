"""`check_env`: verify that an env follows the turnkit text-env contract (work in progress stub)."""

from __future__ import annotations

from typing import Any

import gymnasium

from turnkit.errors import ContractError


def check_env(env: gymnasium.Env, *, seeds: tuple[int, ...] = (0, 1, 2), **kwargs: Any) -> None:
    """Check ``env`` against the text-env contract; raise :class:`ContractError` on failure."""
    from turnkit.envs.core import TextEnv

    if not isinstance(env.unwrapped, TextEnv):
        raise ContractError(f"not a turnkit.TextEnv: {type(env.unwrapped).__name__}")
