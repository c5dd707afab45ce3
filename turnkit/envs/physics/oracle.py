"""The physics oracle: answers each chunk with the exact privileged trajectory (4 decimals).

Example:
    >>> import gymnasium, turnkit
    >>> from turnkit.agents.oracle import OracleAgent
    >>> env = gymnasium.make("turnkit/PhysicsPrediction-v0", split="ood", kind="collision")
    >>> traj = turnkit.collect(env, OracleAgent(), seed=0)
    >>> traj.success, len(traj.steps)
    (True, 4)
"""

from __future__ import annotations

import numpy as np

from turnkit.agents.base import Context
from turnkit.envs.physics.protocol import format_frames, parse_request
from turnkit.errors import AgentError

ORACLE_DECIMALS = 4
"""Decimals of the oracle's coordinates (finite-difference rounding error <= 0.0014 units/s)."""


def oracle_reply(context: Context) -> str:
    """Predict the requested frames exactly from ``context.task.privileged["frames"]``.

    Args:
        context: The episode so far; its task (with privileged data) must be set.

    Returns:
        One position line per body per requested frame.

    Raises:
        AgentError: Without a task, or when the last message asks for no frames.

    Example:
        >>> import numpy as np
        >>> from turnkit.envs.physics.scenarios import sample_scene
        >>> from turnkit.envs.physics.tasks import scene_task
        >>> from turnkit.types import Message
        >>> task = scene_task(sample_scene(np.random.default_rng(0), "id", kind="uniform"))
        >>> oracle_reply(Context(messages=(Message("user", task.prompt),), task=task)).splitlines()[0]
        'frame 3 A: x=5.8848 y=1.3546'
    """
    if context.task is None:
        raise AgentError("the physics oracle needs Context.task")
    if not context.messages:
        raise AgentError("the physics oracle needs the env's last message")
    request = parse_request(context.messages[-1].content)
    if request is None:
        raise AgentError("the last message asks for no frames")
    first, last = request
    frames = np.asarray(context.task.privileged["frames"], dtype=float)
    names = [str(b["name"]) for b in context.task.metadata["bodies"]]
    return "\n".join(format_frames(frames[first : last + 1], first, names, decimals=ORACLE_DECIMALS))
