"""Sampling PhyWorld scenes for each split: in-distribution, out-of-distribution, interpolation gap, combos.

Ranges follow the PhyWorld study (Kang et al., arXiv 2411.02385, see docs/envs/physics.md):

* ``id``: speed in [1, 4]; radius in [0.7, 1.4] (uniform, parabola) or [0.5, 1.5] (collision).
* ``ood``: speed in [0, 0.8] U [4.5, 6.0] and/or radius in [0.3, 0.6] U [1.5, 2.0]
  (collision: [0.3, 0.4] U [1.7, 2.0]); ``ood_level`` picks ``"v"`` (speed only), ``"r"`` (radius only),
  ``"both"``, or ``"any"`` (one of the three per task, uniformly).
* ``interp_train`` / ``interp``: speed in [1.0, 1.25] U [3.75, 4.0] / in [1.25, 3.75]; radius as ``id``.
* ``combo_train`` / ``combo``: every attribute takes one of two values (speed 1.0 / 4.0, radius 0.7 / 1.4,
  colour red / blue, shape ball / square). For the chosen attribute pair, ``combo_train`` bodies carry the
  combinations (first, first) and (second, second) and ``combo`` bodies the held-out (first, second) and
  (second, first); the other two attributes take either value in both.

Radii are rounded to 2 decimals, as the text shows them, so a policy knows the masses exactly.

Example:
    >>> import numpy as np
    >>> s = sample_scene(np.random.default_rng(0), "ood", kind="uniform", ood_level="v")
    >>> s.scene.kind, s.ood_level
    ('uniform', 'v')
    >>> speed = abs(s.scene.bodies[0].vx)
    >>> 0.0 <= speed <= 0.8 or 4.5 <= speed <= 6.0
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from turnkit.envs.physics.simulate import DT, GRAVITY, SCENE_KINDS, WORLD_SIZE, Body, Scene
from turnkit.errors import ConfigError

Intervals = tuple[tuple[float, float], ...]
"""A union of closed intervals ``((lo, hi), ...)``."""

SPLITS = ("id", "ood", "interp_train", "interp", "combo_train", "combo")
OOD_LEVELS = ("v", "r", "both", "any")

ID_SPEED: Intervals = ((1.0, 4.0),)
OOD_SPEED: Intervals = ((0.0, 0.8), (4.5, 6.0))
INTERP_TRAIN_SPEED: Intervals = ((1.0, 1.25), (3.75, 4.0))
INTERP_TEST_SPEED: Intervals = ((1.25, 3.75),)
ID_RADIUS: dict[str, Intervals] = {"uniform": ((0.7, 1.4),), "parabola": ((0.7, 1.4),), "collision": ((0.5, 1.5),)}
OOD_RADIUS: dict[str, Intervals] = {
    "uniform": ((0.3, 0.6), (1.5, 2.0)),
    "parabola": ((0.3, 0.6), (1.5, 2.0)),
    "collision": ((0.3, 0.4), (1.7, 2.0)),
}
COMBO_VALUES: dict[str, tuple] = {
    "velocity": (1.0, 4.0),
    "radius": (0.7, 1.4),
    "color": ("red", "blue"),
    "shape": ("ball", "square"),
}
COMBO_TRAIN = ((0, 0), (1, 1))
"""Index combinations of the chosen attribute pair seen in ``combo_train``."""
COMBO_HELD_OUT = ((0, 1), (1, 0))
"""Index combinations of the chosen attribute pair seen only in ``combo``."""
PALETTE = ("red", "blue", "green", "orange", "purple")
"""Colours of the non-combo splits (two bodies get different colours)."""

MIN_FRAMES_IN_VIEW = 24
"""Uniform and parabolic bodies stay horizontally in view for this many frames when the speed allows it."""
COLLISION_MARGIN_FRAMES = 8
"""Collisions happen at least this many frames after frame 0 and before the last frame (31)."""
TOP_MARGIN = 0.5
"""Gap kept between a body and the top (and, for uniform motion, the bottom) of the view."""


@dataclass(frozen=True)
class SampledScene:
    """A scene and the public labels of how it was drawn.

    Attributes:
        scene: The scene.
        split: The split it was drawn for.
        ood_level: The resolved OOD level (``"v"``, ``"r"``, ``"both"``) for ``ood``; ``""`` otherwise.
        combo_pair: The attribute pair of the combinatorial study for combo splits; ``()`` otherwise.
    """

    scene: Scene
    split: str
    ood_level: str = ""
    combo_pair: tuple[str, ...] = ()


def check_options(split: str, kind: str | None, ood_level: str, combo_pair: tuple[str, ...]) -> None:
    """Raise :class:`ConfigError` naming the first bad option.

    Example:
        >>> check_options("combo", None, "any", ("color", "mood"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: combo_pair must be two different names from [...], got ('color', 'mood')
    """
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; choose one of {list(SPLITS)}")
    if kind is not None and kind not in SCENE_KINDS:
        raise ConfigError(f"kind must be None or one of {list(SCENE_KINDS)}, got {kind!r}")
    if ood_level not in OOD_LEVELS:
        raise ConfigError(f"ood_level must be one of {list(OOD_LEVELS)}, got {ood_level!r}")
    pair = tuple(combo_pair)
    if len(pair) != 2 or pair[0] == pair[1] or not all(a in COMBO_VALUES for a in pair):
        raise ConfigError(
            f"combo_pair must be two different names from {list(COMBO_VALUES)}, got {tuple(combo_pair)!r}"
        )


def sample_union(rng: np.random.Generator, intervals: Intervals) -> float:
    """Draw uniformly from a union of disjoint intervals (each weighted by its length).

    Example:
        >>> rng = np.random.default_rng(1)
        >>> all(0 <= v <= 0.8 or 4.5 <= v <= 6 for v in (sample_union(rng, OOD_SPEED) for _ in range(50)))
        True
    """
    lengths = np.array([hi - lo for lo, hi in intervals])
    u = float(rng.uniform(0.0, float(lengths.sum())))
    for (lo, _hi), length in zip(intervals, lengths, strict=True):
        if u <= length:
            return lo + u
        u -= float(length)
    return intervals[-1][1]


def continuous_ranges(split: str, kind: str, ood_level: str) -> tuple[Intervals, Intervals]:
    """The ``(speed, radius)`` intervals of a non-combo split, for a resolved OOD level.

    Example:
        >>> continuous_ranges("ood", "collision", "r")
        (((1.0, 4.0),), ((0.3, 0.4), (1.7, 2.0)))
        >>> continuous_ranges("interp_train", "uniform", "")[0]
        ((1.0, 1.25), (3.75, 4.0))
    """
    speed, radius = ID_SPEED, ID_RADIUS[kind]
    if split == "ood":
        if ood_level in ("v", "both"):
            speed = OOD_SPEED
        if ood_level in ("r", "both"):
            radius = OOD_RADIUS[kind]
    elif split == "interp_train":
        speed = INTERP_TRAIN_SPEED
    elif split == "interp":
        speed = INTERP_TEST_SPEED
    return speed, radius


def _attributes(
    rng: np.random.Generator, split: str, kind: str, ood_level: str, combo_pair: tuple[str, ...], n: int
) -> list[dict]:
    """Speed, radius, colour and shape of each of ``n`` bodies."""
    if split in ("combo_train", "combo"):
        combos = COMBO_TRAIN if split == "combo_train" else COMBO_HELD_OUT
        out = []
        for _ in range(n):
            index = {name: int(rng.integers(2)) for name in COMBO_VALUES}
            first, second = combos[int(rng.integers(len(combos)))]
            index[combo_pair[0]], index[combo_pair[1]] = first, second
            out.append({name: COMBO_VALUES[name][i] for name, i in index.items()})
        return out
    speeds, radii = continuous_ranges(split, kind, ood_level)
    colors = rng.choice(len(PALETTE), size=n, replace=False)
    return [
        {
            "velocity": sample_union(rng, speeds),
            "radius": round(sample_union(rng, radii), 2),
            "color": PALETTE[int(c)],
            "shape": "ball",
        }
        for c in colors
    ]


def start_x_high(speed: float, radius: float) -> float:
    """Largest start x that keeps a rightward body in view for :data:`MIN_FRAMES_IN_VIEW` frames.

    The start x is drawn from ``[0, start_x_high]``: the body is in view while ``x - radius < WORLD_SIZE``.
    The bound is capped at ``WORLD_SIZE - radius`` (slow bodies start wholly inside) and floored at 0 (fast
    bodies start at the left edge and stay in view as long as they can).

    Example:
        >>> round(start_x_high(1.0, 0.7), 6), start_x_high(6.0, 0.5), start_x_high(0.1, 1.0)
        (8.4, 0.0, 9.0)
    """
    reach = WORLD_SIZE + radius - speed * (MIN_FRAMES_IN_VIEW - 1) * DT
    return max(0.0, min(WORLD_SIZE - radius, reach))


def _single_body(rng: np.random.Generator, kind: str, attrs: dict) -> Scene:
    speed, r = float(attrs["velocity"]), float(attrs["radius"])
    top = WORLD_SIZE - TOP_MARGIN - r
    y = rng.uniform(top - 1.0, top) if kind == "parabola" else rng.uniform(r + TOP_MARGIN, top)
    x = rng.uniform(0.0, start_x_high(speed, r))
    body = Body(x=float(x), y=float(y), vx=speed, radius=r, color=attrs["color"], shape=attrs["shape"])
    return Scene(kind, (body,), gravity=GRAVITY if kind == "parabola" else 0.0)


def _collision(rng: np.random.Generator, left: dict, right: dict) -> Scene:
    """Two bodies at one height approaching each other; they touch at a time within the margins."""
    v1, v2 = float(left["velocity"]), float(right["velocity"])
    r1, r2 = float(left["radius"]), float(right["radius"])
    r_max = max(r1, r2)
    y = float(rng.uniform(r_max + TOP_MARGIN, WORLD_SIZE - TOP_MARGIN - r_max))
    first = COLLISION_MARGIN_FRAMES * DT
    last = (31 - COLLISION_MARGIN_FRAMES) * DT
    # Both bodies start at least partly in view: their contact point x_c satisfies v1*t_c <= x_c <= W - v2*t_c.
    closing = v1 + v2
    t_high = min(last, WORLD_SIZE / closing) if closing > 0 else last
    t_c = float(rng.uniform(first, max(first, t_high)))
    x_c = float(rng.uniform(v1 * t_c, max(v1 * t_c, WORLD_SIZE - v2 * t_c)))
    a = Body(x=x_c - r1 - v1 * t_c, y=y, vx=v1, radius=r1, color=left["color"], shape=left["shape"])
    b = Body(x=x_c + r2 + v2 * t_c, y=y, vx=-v2, radius=r2, color=right["color"], shape=right["shape"])
    return Scene("collision", (a, b))


def sample_scene(
    rng: np.random.Generator,
    split: str,
    *,
    kind: str | None = None,
    ood_level: str = "any",
    combo_pair: tuple[str, ...] = ("color", "shape"),
) -> SampledScene:
    """Draw one scene of ``split`` using only ``rng``.

    Args:
        rng: The episode's generator.
        split: One of :data:`SPLITS`.
        kind: A scene kind, or ``None`` to draw one of the three uniformly.
        ood_level: For ``ood``: ``"v"``, ``"r"``, ``"both"`` or ``"any"``.
        combo_pair: For combo splits: the two attributes whose combinations are split.

    Returns:
        The scene with its public labels.

    Raises:
        ConfigError: For an unknown split, kind, OOD level or attribute pair.

    Example:
        >>> s = sample_scene(np.random.default_rng(3), "combo", kind="collision", combo_pair=("velocity", "shape"))
        >>> [(abs(b.vx), b.shape) in {(1.0, "square"), (4.0, "ball")} for b in s.scene.bodies]
        [True, True]
    """
    check_options(split, kind, ood_level, combo_pair)
    pair = tuple(combo_pair)
    chosen = kind if kind is not None else SCENE_KINDS[int(rng.integers(len(SCENE_KINDS)))]
    level = ""
    if split == "ood":
        level = ood_level if ood_level != "any" else OOD_LEVELS[int(rng.integers(3))]
    n = 2 if chosen == "collision" else 1
    attrs = _attributes(rng, split, chosen, level, pair, n)
    scene = _collision(rng, *attrs) if chosen == "collision" else _single_body(rng, chosen, attrs[0])
    is_combo = split in ("combo_train", "combo")
    return SampledScene(scene, split, ood_level=level, combo_pair=pair if is_combo else ())
