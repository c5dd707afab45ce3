"""Exact, analytic physics of the PhyWorld scenes: uniform motion, 1-D elastic collision, parabolic motion.

No numerical integration: every position is a closed-form function of time, so the trajectories are exact up
to floating-point rounding. The world follows the PhyWorld simulator (Kang et al., arXiv 2411.02385): a
10 x 10 box viewed from the side, frames 0.1 s apart, 32 frames, restitution 1 and mass proportional to the
squared radius (density 1 in 2-D). There are no walls and no floor: bodies may leave the view.

Example:
    >>> scene = Scene("parabola", (Body(x=1.0, y=8.0, vx=2.0, radius=1.0),), gravity=GRAVITY)
    >>> frames = simulate(scene)
    >>> frames.shape
    (32, 1, 2)
    >>> [round(float(c), 4) for c in frames[10, 0]]  # t = 1 s: x = 1 + 2*1, y = 8 - 2.5/2
    [3.0, 6.75]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from turnkit.errors import ConfigError

WORLD_SIZE = 10.0
"""Side of the square view, in world units; the view spans ``0 <= x, y <= WORLD_SIZE``."""
DT = 0.1
"""Seconds between frames."""
NUM_FRAMES = 32
"""Frames per scene (frame ``k`` is at ``t = k * DT``)."""
GIVEN_FRAMES = 3
"""Frames shown to the policy as conditioning (frames 0, 1, 2)."""
GRAVITY = 2.5
"""Downward acceleration of parabolic scenes: gravity is the vector ``(0, -GRAVITY)``."""
SCENE_KINDS = ("uniform", "collision", "parabola")
"""The three PhyWorld scenario kinds."""


@dataclass(frozen=True)
class Body:
    """A rigid body at ``t = 0``: position and velocity of its centre, size and looks.

    Colour and shape are shown to the policy but never change the physics; ``radius`` is the half-side of
    a square. Mass is ``radius ** 2``.

    Attributes:
        x: Centre x at ``t = 0``.
        y: Centre y at ``t = 0``.
        vx: Velocity x at ``t = 0``.
        vy: Velocity y at ``t = 0``.
        radius: Radius (ball) or half-side (square), > 0.
        color: Colour name, shown in the text.
        shape: ``"ball"`` or ``"square"``, shown in the text.

    Example:
        >>> Body(x=1.0, y=2.0, vx=3.0, radius=1.5).mass
        2.25
    """

    x: float
    y: float
    vx: float
    vy: float = 0.0
    radius: float = 1.0
    color: str = "red"
    shape: str = "ball"

    @property
    def mass(self) -> float:
        """Mass, proportional to the area (density 1, constant factor dropped): ``radius ** 2``."""
        return self.radius**2


@dataclass(frozen=True)
class Scene:
    """A scenario: its kind, its bodies at ``t = 0`` and the downward gravity.

    Args:
        kind: One of :data:`SCENE_KINDS`. ``"collision"`` has two bodies at the same height, the first to the
            left of the second; the others have one body.
        bodies: The bodies.
        gravity: Downward acceleration (the gravity vector is ``(0, -gravity)``).

    Raises:
        ConfigError: For an unknown kind, a wrong number of bodies, a non-positive radius, non-finite numbers,
            or collision bodies that overlap, are out of order or are not at the same height.

    Example:
        >>> Scene("uniform", (Body(x=0.0, y=5.0, vx=1.0),)).kind
        'uniform'
        >>> Scene("collision", (Body(x=0.0, y=5.0, vx=1.0),))
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: a 'collision' scene needs 2 bodies, got 1
    """

    kind: str
    bodies: tuple[Body, ...]
    gravity: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in SCENE_KINDS:
            raise ConfigError(f"unknown scene kind {self.kind!r}; choose one of {list(SCENE_KINDS)}")
        want = 2 if self.kind == "collision" else 1
        if len(self.bodies) != want:
            raise ConfigError(f"a {self.kind!r} scene needs {want} bodies, got {len(self.bodies)}")
        for b in self.bodies:
            if not all(math.isfinite(v) for v in (b.x, b.y, b.vx, b.vy, b.radius)):
                raise ConfigError(f"body has a non-finite value: {b}")
            if b.radius <= 0:
                raise ConfigError(f"body radius must be > 0, got {b.radius}")
        if not math.isfinite(self.gravity):
            raise ConfigError(f"gravity must be finite, got {self.gravity}")
        if self.kind == "collision":
            a, b = self.bodies
            if a.y != b.y or a.vy != b.vy:
                raise ConfigError("collision bodies must share height and vertical velocity (1-D collision)")
            if b.x - a.x < a.radius + b.radius:
                raise ConfigError("collision bodies must start apart, the first to the left of the second")


def elastic_collision_velocities(m1: float, u1: float, m2: float, u2: float) -> tuple[float, float]:
    """Velocities after a 1-D perfectly elastic collision (restitution 1).

    Args:
        m1: Mass of body 1.
        u1: Velocity of body 1 before the collision.
        m2: Mass of body 2.
        u2: Velocity of body 2 before the collision.

    Returns:
        ``(v1, v2)``, which conserve momentum and kinetic energy.

    Example:
        >>> elastic_collision_velocities(1.0, 2.0, 1.0, -1.0)  # equal masses swap velocities
        (-1.0, 2.0)
        >>> elastic_collision_velocities(1.0, 3.0, 3.0, -1.0)
        (-3.0, 1.0)
    """
    total = m1 + m2
    v1 = ((m1 - m2) * u1 + 2.0 * m2 * u2) / total
    v2 = ((m2 - m1) * u2 + 2.0 * m1 * u1) / total
    return v1, v2


def collision_time(scene: Scene) -> float | None:
    """When the two bodies of a collision scene first touch, or ``None`` if they never approach.

    Example:
        >>> a, b = Body(x=1.0, y=5.0, vx=2.0, radius=0.5), Body(x=5.0, y=5.0, vx=-1.0, radius=0.5)
        >>> collision_time(Scene("collision", (a, b)))  # gap 3, closing speed 3
        1.0
        >>> collision_time(Scene("uniform", (a,))) is None
        True
    """
    if scene.kind != "collision":
        return None
    a, b = scene.bodies
    closing = a.vx - b.vx
    if closing <= 0.0:
        return None
    gap = (b.x - a.x) - (a.radius + b.radius)
    return gap / closing


def post_collision_velocities(scene: Scene) -> tuple[float, float] | None:
    """The x velocities of both bodies after their collision, or ``None`` without a collision.

    Example:
        >>> a, b = Body(x=1.0, y=5.0, vx=3.0, radius=1.0), Body(x=5.0, y=5.0, vx=-1.0, radius=3**0.5)
        >>> [round(v, 12) for v in post_collision_velocities(Scene("collision", (a, b)))]
        [-3.0, 1.0]
    """
    if collision_time(scene) is None:
        return None
    a, b = scene.bodies
    return elastic_collision_velocities(a.mass, a.vx, b.mass, b.vx)


def state_at(scene: Scene, t: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact positions and velocities of every body at time(s) ``t``.

    Args:
        scene: The scene.
        t: A time or an array of times (seconds).

    Returns:
        ``(positions, velocities)``, each of shape ``t.shape + (num_bodies, 2)``. At the collision instant
        the velocities are the pre-collision ones.

    Example:
        >>> a, b = Body(x=1.0, y=5.0, vx=2.0, radius=0.5), Body(x=5.0, y=5.0, vx=-1.0, radius=0.5)
        >>> pos, vel = state_at(Scene("collision", (a, b)), 2.0)
        >>> pos.tolist(), vel.tolist()  # collide at t=1 (x=3, 4), then swap velocities (equal masses)
        ([[2.0, 5.0], [6.0, 5.0]], [[-1.0, 0.0], [2.0, 0.0]])
    """
    times = np.asarray(t, dtype=float)
    t_c = collision_time(scene)
    after = post_collision_velocities(scene)
    positions = np.empty((*times.shape, len(scene.bodies), 2))
    velocities = np.empty_like(positions)
    for i, body in enumerate(scene.bodies):
        if t_c is None or after is None:
            x, vx = body.x + body.vx * times, np.full_like(times, body.vx)
        else:
            hit = times > t_c
            x_before = body.x + body.vx * times
            x_after = body.x + body.vx * t_c + after[i] * (times - t_c)
            x, vx = np.where(hit, x_after, x_before), np.where(hit, after[i], body.vx)
        positions[..., i, 0] = x
        positions[..., i, 1] = body.y + body.vy * times - 0.5 * scene.gravity * times**2
        velocities[..., i, 0] = vx
        velocities[..., i, 1] = body.vy - scene.gravity * times
    return positions, velocities


def frame_times(num_frames: int = NUM_FRAMES, dt: float = DT) -> np.ndarray:
    """Times of frames ``0 .. num_frames - 1``.

    Example:
        >>> frame_times(4).tolist()
        [0.0, 0.1, 0.2, 0.30000000000000004]
    """
    return np.arange(num_frames) * dt


def simulate(scene: Scene, num_frames: int = NUM_FRAMES, dt: float = DT) -> np.ndarray:
    """The exact trajectory: body centres at every frame, shape ``(num_frames, num_bodies, 2)``.

    Example:
        >>> simulate(Scene("uniform", (Body(x=0.0, y=5.0, vx=2.0),)), num_frames=3)[:, 0].tolist()
        [[0.0, 5.0], [0.2, 5.0], [0.4, 5.0]]
    """
    return state_at(scene, frame_times(num_frames, dt))[0]


def in_view(positions: np.ndarray, radii: np.ndarray, size: float = WORLD_SIZE) -> np.ndarray:
    """Whether some part of each body is inside the view ``[0, size] x [0, size]``.

    Args:
        positions: Centres, shape ``(..., num_bodies, 2)``.
        radii: Radii, shape ``(num_bodies,)``.
        size: Side of the view.

    Returns:
        A boolean array of shape ``(..., num_bodies)``.

    Example:
        >>> in_view(np.array([[[-0.5, 5.0], [10.9, 5.0], [5.0, -1.0]]]), np.array([0.6, 1.0, 1.0])).tolist()
        [[True, True, False]]
    """
    radii = np.asarray(radii, dtype=float)
    x, y = positions[..., 0], positions[..., 1]
    return (x + radii > 0) & (x - radii < size) & (y + radii > 0) & (y - radii < size)
