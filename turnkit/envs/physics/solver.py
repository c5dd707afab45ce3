"""A law-based policy: infer each body's state from the shown (rounded) coordinates, then apply the stated laws.

It reads only the conversation, never privileged data, so it shows what the success threshold asks of a
policy that knows the physics: estimate velocities from 2-decimal coordinates, add gravity, and resolve the
elastic collision from the radii (mass = radius squared).

State estimate: subtract the stated gravity term (``q = p + (0, g t^2 / 2)`` is piecewise linear in t),
keep the most recent run of at least three frames whose per-frame steps agree within the rounding noise (so
a window never spans a collision), fit a line to it by least squares, and predict forward from the end of
that run, replaying a collision if the bodies are still approaching.

Example:
    >>> import gymnasium, turnkit
    >>> from turnkit.agents.scripted import ScriptedAgent
    >>> env = gymnasium.make("turnkit/PhysicsPrediction-v0", kind="collision")
    >>> turnkit.collect(env, ScriptedAgent(law_based_reply), seed=0).success
    True
"""

from __future__ import annotations

import numpy as np

from turnkit.agents.base import Context
from turnkit.envs.physics.protocol import format_position, parse_positions, parse_request, parse_world
from turnkit.envs.physics.simulate import DT, elastic_collision_velocities
from turnkit.errors import AgentError

STEP_TOLERANCE = 0.025
"""Largest disagreement (world units per frame) between per-frame steps of one straight run."""


def estimate_states(tracks: np.ndarray, gravity: float) -> tuple[int, np.ndarray, np.ndarray]:
    """Positions and velocities of all bodies at the end of their most recent straight run of frames.

    Args:
        tracks: Shown centres at frames ``0 .. n-1``, shape ``(n, bodies, 2)`` (n >= 2).
        gravity: Downward acceleration.

    Returns:
        ``(frame, positions, velocities)``: the run's last frame and the fitted state there. The latest frames
        are dropped while their run is shorter than two steps, so that a step that straddles a collision
        never sets a velocity (the prediction then replays the collision from the earlier state).

    Example:
        >>> t = np.arange(5) * 0.1
        >>> track = np.stack([1 + 2 * t, 8 - 1.25 * t**2], axis=1).round(2)[:, None, :]
        >>> frame, p, v = estimate_states(track, 2.5)
        >>> frame, bool(np.abs(v[0] - [2.0, -1.0]).max() < 0.05)
        (4, True)
    """
    t = np.arange(len(tracks)) * DT
    q = tracks + np.stack([np.zeros_like(t), 0.5 * gravity * t**2], axis=1)[:, None, :]
    steps = np.diff(q, axis=0)  # steps[j] goes from frame j to frame j + 1

    def run_start(end: int) -> int:
        start = end
        while start > 0 and np.all(np.abs(steps[start - 1] - steps[end]) <= STEP_TOLERANCE):
            start -= 1
        return start

    end = len(steps) - 1
    while end > 0 and end - run_start(end) < 1:
        end -= 1
    start = run_start(end)
    window_t = t[start : end + 2]
    window_q = q[start : end + 2].reshape(len(window_t), -1)
    slope, intercept = np.polyfit(window_t, window_q, 1)
    t_ref = t[end + 1]
    fall = np.array([0.0, 0.5 * gravity * t_ref**2])
    positions = (intercept + slope * t_ref).reshape(-1, 2) - fall
    velocities = slope.reshape(-1, 2) - np.array([0.0, gravity * t_ref])
    return end + 1, positions, velocities


def predict(
    positions: np.ndarray, velocities: np.ndarray, radii: np.ndarray, gravity: float, dt: np.ndarray
) -> np.ndarray:
    """Positions after times ``dt`` from the given state; two bodies at one height collide elastically.

    Example:
        >>> pos = np.array([[1.0, 5.0], [5.0, 5.0]]); vel = np.array([[2.0, 0.0], [-1.0, 0.0]])
        >>> predict(pos, vel, np.array([0.5, 0.5]), 0.0, np.array([2.0]))[0, :, 0].round(6).tolist()
        [2.0, 6.0]
    """
    dt = np.asarray(dt, dtype=float)[:, None]
    x = positions[:, 0] + velocities[:, 0] * dt
    y = positions[:, 1] + velocities[:, 1] * dt - 0.5 * gravity * dt**2
    if len(radii) == 2 and abs(positions[0, 1] - positions[1, 1]) < radii.sum():
        left, right = np.argsort(positions[:, 0])
        closing = velocities[left, 0] - velocities[right, 0]
        gap = positions[right, 0] - positions[left, 0] - radii[left] - radii[right]
        if closing > 0:
            t_c = max(gap, 0.0) / closing
            after = elastic_collision_velocities(
                radii[left] ** 2, velocities[left, 0], radii[right] ** 2, velocities[right, 0]
            )
            for body, v_after in zip((left, right), after, strict=True):
                hit = dt[:, 0] > t_c
                x_c = positions[body, 0] + velocities[body, 0] * t_c
                x[hit, body] = x_c + v_after * (dt[hit, 0] - t_c)
    return np.stack([x, y], axis=-1)


def law_based_reply(context: Context) -> str:
    """Answer the requested frames from the shown coordinates and the world's stated laws.

    Raises:
        AgentError: When the last message asks for no frames or the first one lists no bodies.
    """
    request = parse_request(context.messages[-1].content) if context.messages else None
    if request is None:
        raise AgentError("the last message asks for no frames")
    radii_by_name, gravity = parse_world(context.messages[0].content)
    if not radii_by_name:
        raise AgentError("the first message lists no bodies")
    names = sorted(radii_by_name)
    known: dict[tuple[int, str], tuple[float, float]] = {}
    for message in context.messages:
        if message.role == "user":
            known.update(parse_positions(message.content, names))
    last = max(f for f, _ in known)
    tracks = np.array([[known[(f, n)] for n in names] for f in range(last + 1)])
    frame, positions, velocities = estimate_states(tracks, gravity)
    first, final = request
    wanted = np.arange(first, final + 1)
    radii = np.array([radii_by_name[n] for n in names])
    out = predict(positions, velocities, radii, gravity, (wanted - frame) * DT)
    return "\n".join(
        format_position(int(f), n, float(out[k, i, 0]), float(out[k, i, 1]), decimals=4)
        for k, f in enumerate(wanted)
        for i, n in enumerate(names)
    )
