"""turnkit: Gymnasium text environments, sandboxes and learners for multi-turn LLM agents.

Example:
    >>> import gymnasium, turnkit
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
    >>> obs, info = env.reset(seed=0)
    >>> isinstance(obs, str), info["split"]
    (True, 'id')
"""

from turnkit.envs import TextEnv, restore_env, snapshot_env
from turnkit.envs.checker import check_env
from turnkit.rollout.collect import collect, collect_group
from turnkit.types import AgentTurn, Message, Step, Task, Trajectory

__all__ = [
    "AgentTurn",
    "Message",
    "Step",
    "Task",
    "TextEnv",
    "Trajectory",
    "check_env",
    "collect",
    "collect_group",
    "restore_env",
    "snapshot_env",
]
__version__ = "0.2.0.dev0"
