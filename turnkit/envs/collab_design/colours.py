"""Colour names the simulated human uses ("dark blue", not ``#0b3c5d``), and their representative values.

Names are chosen by the smallest CIELAB distance to :data:`NAMED_COLOURS`; agents that follow the human's
feedback map a name back with :func:`colour_value`.

Example:
    >>> colour_name((11, 60, 93)), colour_name((250, 250, 250)), colour_value("orange")
    ('navy', 'white', (240, 110, 30))
    >>> round(delta_e((255, 255, 255), (0, 0, 0)))
    100
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from turnkit.envs.collab_design.similarity import srgb_to_lab

NAMED_COLOURS: dict[str, tuple[int, int, int]] = {
    "white": (255, 255, 255),
    "off-white": (244, 243, 240),
    "light grey": (215, 215, 215),
    "grey": (140, 140, 140),
    "dark grey": (75, 75, 75),
    "charcoal": (38, 43, 52),
    "black": (12, 12, 14),
    "red": (210, 40, 40),
    "dark red": (130, 25, 25),
    "pink": (225, 85, 155),
    "light pink": (255, 228, 240),
    "purple": (125, 60, 165),
    "plum": (105, 35, 80),
    "dark purple": (28, 10, 50),
    "navy": (15, 55, 95),
    "blue": (35, 125, 195),
    "sky blue": (110, 185, 230),
    "light blue": (226, 242, 252),
    "teal": (0, 150, 150),
    "dark green": (30, 62, 43),
    "green": (65, 145, 80),
    "light green": (228, 240, 222),
    "neon green": (60, 255, 20),
    "yellow": (240, 210, 40),
    "cream": (255, 245, 234),
    "beige": (238, 228, 212),
    "orange": (240, 110, 30),
    "brown": (125, 70, 35),
    "dark brown": (85, 60, 45),
}
"""Colour name -> representative sRGB value."""

_NAMES = list(NAMED_COLOURS)
_LABS = srgb_to_lab(np.array([list(NAMED_COLOURS.values())], dtype=np.uint8))[0]


def delta_e(a: Sequence[float], b: Sequence[float]) -> float:
    """CIE76 colour distance between two sRGB colours (0 = same, ~2.3 just noticeable, 100 = black/white)."""
    la, lb = srgb_to_lab(np.array([[a, b]], dtype=np.float64))[0]
    return float(np.linalg.norm(la - lb))


def colour_name(rgb: Sequence[float]) -> str:
    """The closest name in :data:`NAMED_COLOURS`."""
    lab = srgb_to_lab(np.array([[rgb]], dtype=np.float64))[0, 0]
    return _NAMES[int(np.argmin(np.linalg.norm(_LABS - lab, axis=1)))]


def colour_value(name: str) -> tuple[int, int, int]:
    """The representative sRGB value of a colour name (``KeyError`` for unknown names)."""
    return NAMED_COLOURS[name]


def lighter_or_darker(target: Sequence[float], current: Sequence[float]) -> str:
    """``"lighter"`` or ``"darker"``: how ``current`` must change to approach ``target`` in lightness.

    Example:
        >>> lighter_or_darker((200, 200, 200), (100, 100, 100))
        'lighter'
    """
    lt, lc = srgb_to_lab(np.array([[target, current]], dtype=np.float64))[0, :, 0]
    return "lighter" if lt > lc else "darker"
