"""Text environments: the :class:`TextEnv` contract, the checker and the built-in families."""

from turnkit.envs import registration as _registration  # noqa: F401  (registers the built-in ids)
from turnkit.envs.core import EnvSnapshot, InvalidAction, TextEnv, Transition, restore_env, snapshot_env

__all__ = ["EnvSnapshot", "InvalidAction", "TextEnv", "Transition", "restore_env", "snapshot_env"]
