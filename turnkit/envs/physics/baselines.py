r"""Baseline policies that read only the conversation (no privileged data), for floors and sanity checks.

* :func:`constant_velocity_reply`: extrapolates each body from its last two shown frames. Exact (up to the
  2-decimal rounding) for uniform motion; it misses gravity and collisions.
* :func:`random_positions_reply`: well-formed lines with uniformly random coordinates in the view.

Example:
    >>> from turnkit.agents.base import Context
    >>> from turnkit.types import Message
    >>> msg = "frame 1 A: x=1.00 y=5.00\nframe 2 A: x=1.20 y=5.00\nPredict frames 3 to 4: ..."
    >>> print(constant_velocity_reply(Context(messages=(Message("user", msg),))))
    frame 3 A: x=1.40 y=5.00
    frame 4 A: x=1.60 y=5.00
"""

from __future__ import annotations

import numpy as np

from turnkit.agents.base import Context
from turnkit.envs.physics.protocol import format_position, parse_positions, parse_request
from turnkit.envs.physics.simulate import WORLD_SIZE
from turnkit.errors import AgentError


def _request(context: Context) -> tuple[int, int]:
    request = parse_request(context.messages[-1].content) if context.messages else None
    if request is None:
        raise AgentError("the last message asks for no frames")
    return request


def constant_velocity_reply(context: Context) -> str:
    """Extrapolate every body at the velocity between its last two positions the env has shown.

    Example:
        >>> from turnkit.types import Message
        >>> constant_velocity_reply(Context(messages=(Message("user", "no request"),)))
        Traceback (most recent call last):
        ...
        turnkit.errors.AgentError: the last message asks for no frames
    """
    first, last = _request(context)
    known: dict[tuple[int, str], tuple[float, float]] = {}
    for message in context.messages:
        if message.role == "user":
            known.update(parse_positions(message.content))
    lines = []
    for name in sorted({n for _, n in known}):
        seen = sorted(f for f, n in known if n == name)
        k = seen[-1]
        p = np.array(known[(k, name)])
        prev = seen[-2] if len(seen) > 1 else k
        v = (p - np.array(known[(prev, name)])) / max(k - prev, 1)
        lines += [(f, name, p + v * (f - k)) for f in range(first, last + 1)]
    return "\n".join(format_position(f, n, float(q[0]), float(q[1])) for f, n, q in sorted(lines))


def random_positions_reply(context: Context) -> str:
    r"""Well-formed lines with random coordinates, deterministic per (episode seed, turn).

    Example:
        >>> from turnkit.types import Message
        >>> ctx = Context(messages=(Message("user", "frame 0 A: x=1 y=1\nPredict frames 3 to 3"),))
        >>> random_positions_reply(ctx) == random_positions_reply(ctx)
        True
    """
    first, last = _request(context)
    names = sorted({n for m in context.messages if m.role == "user" for _, n in parse_positions(m.content)})
    rng = np.random.default_rng([context.episode_seed or 0, context.turn])
    coords = rng.uniform(0.0, WORLD_SIZE, size=(last + 1 - first, len(names), 2))
    return "\n".join(
        format_position(first + k, n, float(coords[k, i, 0]), float(coords[k, i, 1]))
        for k in range(last + 1 - first)
        for i, n in enumerate(names)
    )
