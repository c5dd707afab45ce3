r"""The text protocol of the physics env: how scenes and positions are written and how answers are read.

Positions travel as one line per body per frame::

    frame 5 A: x=3.21 y=4.00

Bodies are named ``A``, ``B``, ... in the order of the scene. Reading is lenient: matching is
case-insensitive, other text is ignored (a policy may reason before answering), the colon and the comma
between ``x`` and ``y`` are optional, the body name may be left out when there is one body, and when a
(frame, body) pair appears twice the last line counts. Coordinates are clipped to ``[-1000, 1000]``.

Example:
    >>> text = "Thinking...\nframe 3 A: x=1.5 y=2\nFRAME 4 a x = 1.6, y = 2.0"
    >>> parse_positions(text, ("A",))
    {(3, 'A'): (1.5, 2.0), (4, 'A'): (1.6, 2.0)}
    >>> format_position(7, "B", 1.0, -0.004)
    'frame 7 B: x=1.00 y=0.00'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from turnkit.envs.physics.simulate import DT, NUM_FRAMES, WORLD_SIZE

OBJECT_NAMES = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""Names given to the bodies of a scene, in order."""
SHOWN_DECIMALS = 2
"""Decimals of the coordinates the env shows."""
COORDINATE_LIMIT = 1000.0
"""Parsed coordinates are clipped to ``[-COORDINATE_LIMIT, COORDINATE_LIMIT]``."""

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_LINE = re.compile(
    rf"frame\s*(?P<frame>\d+)\s*(?:(?P<name>[A-Za-z])\s*)?:?\s*x\s*=\s*(?P<x>{_NUM})\s*[,;]?\s*y\s*=\s*(?P<y>{_NUM})",
    re.IGNORECASE,
)
_REQUEST = re.compile(r"Predict frames (\d+) to (\d+)")
_BODY = re.compile(r"^([A-Z]): (\w+) (ball|square), radius (\d+(?:\.\d+)?)$", re.MULTILINE)
_GRAVITY = re.compile(r"Gravity is \(0, -(\d+(?:\.\d+)?)\)")


def format_position(frame: int, name: str, x: float, y: float, decimals: int = SHOWN_DECIMALS) -> str:
    """One position line, e.g. ``frame 5 A: x=3.21 y=4.00``.

    Example:
        >>> format_position(5, "A", 3.214, 4.0)
        'frame 5 A: x=3.21 y=4.00'
    """
    x, y = round(x, decimals) + 0.0, round(y, decimals) + 0.0  # + 0.0 turns -0.0 into 0.0
    return f"frame {frame} {name}: x={x:.{decimals}f} y={y:.{decimals}f}"


def format_frames(frames: np.ndarray, first: int, names: Sequence[str], decimals: int = SHOWN_DECIMALS) -> list[str]:
    """Position lines for consecutive frames starting at ``first``; ``frames`` has shape ``(T, bodies, 2)``.

    Example:
        >>> format_frames(np.array([[[0.0, 1.0]], [[0.5, 1.0]]]), 3, ("A",))
        ['frame 3 A: x=0.00 y=1.00', 'frame 4 A: x=0.50 y=1.00']
    """
    return [
        format_position(first + k, name, float(frames[k, i, 0]), float(frames[k, i, 1]), decimals)
        for k in range(len(frames))
        for i, name in enumerate(names)
    ]


def parse_positions(text: str, names: Sequence[str] | None = None) -> dict[tuple[int, str], tuple[float, float]]:
    r"""Read every position line of ``text``; the last line for a (frame, body) pair wins.

    Args:
        text: Any text.
        names: The valid body names; with exactly one, lines without a name belong to it. ``None`` accepts
            any single-letter name and drops lines without one.

    Returns:
        ``{(frame, name): (x, y)}`` with upper-case names.

    Example:
        >>> parse_positions("frame 3 B: x=1 y=2\nframe 3 C: x=0 y=0", ("A", "B"))
        {(3, 'B'): (1.0, 2.0)}
        >>> parse_positions("frame 3: x=1e9 y=2")
        {}
        >>> parse_positions("frame 3: x=1e9 y=2", ("A",))
        {(3, 'A'): (1000.0, 2.0)}
    """
    valid = None if names is None else {n.upper() for n in names}
    default = next(iter(valid)) if valid is not None and len(valid) == 1 else None
    out: dict[tuple[int, str], tuple[float, float]] = {}
    for match in _LINE.finditer(text):
        name = (match["name"] or "").upper() or default
        if name is None or (valid is not None and name not in valid):
            continue
        x, y = (float(np.clip(float(match[k]), -COORDINATE_LIMIT, COORDINATE_LIMIT)) for k in ("x", "y"))
        out[(int(match["frame"]), name)] = (x, y)
    return out


def missing_positions(
    parsed: Mapping[tuple[int, str], tuple[float, float]], frames: Iterable[int], names: Sequence[str]
) -> list[str]:
    """The ``"frame N X"`` labels of requested pairs that ``parsed`` lacks, in order.

    Example:
        >>> missing_positions({(3, "A"): (0.0, 0.0)}, range(3, 5), ("A", "B"))
        ['frame 3 B', 'frame 4 A', 'frame 4 B']
    """
    return [f"frame {f} {n}" for f in frames for n in names if (f, n) not in parsed]


def describe_world(bodies: Sequence[Mapping[str, object]], gravity: float) -> str:
    """The world rules and the body list shown at the start of every episode.

    Args:
        bodies: ``{"name", "color", "shape", "radius"}`` per body.
        gravity: Downward acceleration.

    Example:
        >>> print(describe_world([{"name": "A", "color": "red", "shape": "ball", "radius": 0.7}], 0.0))
        ... # doctest: +ELLIPSIS
        Predict how objects move in a 2-D physics world...
        A: red ball, radius 0.70
    """
    g = f"Gravity is (0, -{gravity:g}) units/s^2." if gravity else "There is no gravity."
    lines = [
        "Predict how objects move in a 2-D physics world.",
        f"The view is {WORLD_SIZE:g} x {WORLD_SIZE:g} units (x to the right, y up, 0 <= x, y <= {WORLD_SIZE:g}); "
        "there are no walls and no floor, so objects may leave the view.",
        f"{g} Collisions between objects are perfectly elastic (restitution 1), and mass is proportional to "
        "radius squared (for a square the radius is half its side). Colour and shape do not affect motion.",
        f"Frames are {DT:g} s apart (frame k is at t = {DT:g}*k s), numbered 0 to {NUM_FRAMES - 1}.",
        "Objects:",
    ]
    for b in bodies:
        lines.append(f"{b['name']}: {b['color']} {b['shape']}, radius {float(b['radius']):.2f}")  # type: ignore[arg-type]
    return "\n".join(lines)


def request_text(first: int, last: int, names: Sequence[str]) -> str:
    """Ask for the positions of frames ``first .. last`` (inclusive) in the line format.

    Example:
        >>> parse_request(request_text(10, 16, ("A", "B")))
        (10, 16)
    """
    body_list = ", ".join(names)
    return (
        f"Predict frames {first} to {last}: the centre of every object ({body_list}) at each frame, "
        f"one line per object per frame, in this form:\n"
        f"frame {first} {names[0]}: x=<x> y=<y>\n"
        "Other text is ignored; if a line for the same frame and object appears twice, the last one counts."
    )


def parse_request(text: str) -> tuple[int, int] | None:
    """The ``(first, last)`` frames an env message asks for, or ``None``.

    Example:
        >>> parse_request("Predict frames 3 to 9: ..."), parse_request("hello")
        ((3, 9), None)
    """
    match = _REQUEST.search(text)
    return (int(match[1]), int(match[2])) if match else None


def parse_world(text: str) -> tuple[dict[str, float], float]:
    """Read the body radii and the gravity back from a :func:`describe_world` text.

    Returns:
        ``({name: radius}, gravity)``; gravity is 0 when the text states none.

    Example:
        >>> parse_world(describe_world([{"name": "A", "color": "red", "shape": "ball", "radius": 0.7}], 2.5))
        ({'A': 0.7}, 2.5)
    """
    radii = {m[1]: float(m[4]) for m in _BODY.finditer(text)}
    gravity = _GRAVITY.search(text)
    return radii, float(gravity[1]) if gravity else 0.0
