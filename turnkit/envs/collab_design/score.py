"""The reward of the design env: a visual score of the pixels mixed with a text-block score of the DOM.

``design_score = VISUAL_WEIGHT · visual + TEXT_WEIGHT · text`` where

* ``visual`` = :func:`~turnkit.envs.collab_design.similarity.visual_similarity` of the two screenshots
  (multi-scale SSIM of lightness + block colour agreement): layout, colours, sizes, blocks;
* ``text`` = :func:`~turnkit.envs.collab_design.textmatch.text_similarity` of the two pages' visible text
  blocks (wording first, then position, colour and font size of each block, area-weighted; missing and
  extra text count against the page): what the page *says*, which pixels barely register.

This follows Design2Code (Si et al., 2024), which scores a generated page by matched text blocks (size,
text, position, colour) next to a visual CLIP score, rather than ColBench's CLIP similarity alone. The
weights and the calibration on real renders are in ``docs/envs/collab_design.md``.

The score is in [0, 1], rounded to 4 decimals (identical across processes), exactly 1 for identical
screenshots with identical text blocks (the oracle), and symmetric.

Example:
    >>> import numpy as np
    >>> from turnkit.browser import DomItem, DomSummary, Render
    >>> def page(heading):
    ...     px = np.full((48, 64, 3), 255, np.uint8); px[8:16, 8:40] = 0   # "the heading's glyphs"
    ...     t = DomItem("text", "h1", heading, (8, 8, 32, 8), (0, 0, 0), None, 8, 700)
    ...     return Render("k", px, DomSummary((t,), (), (255, 255, 255)))
    >>> s = design_score(page("Welcome"), page("Welcome"))
    >>> s.total, s.visual, s.text
    (1.0, 1.0, 1.0)
    >>> s = design_score(page("Goodbye"), page("Welcome"))   # same pixels here, other words
    >>> s.visual, s.text < 0.2, s.total < 0.6
    (1.0, True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from turnkit.browser import Render
from turnkit.envs.collab_design.similarity import visual_similarity
from turnkit.envs.collab_design.textmatch import text_similarity

VISUAL_WEIGHT = 0.5
"""Weight of the pixel score."""
TEXT_WEIGHT = 0.5
"""Weight of the text-block score."""


@dataclass(frozen=True)
class DesignScore:
    """The reward of one render against the reference, with its two parts.

    Attributes:
        total: The reward, ``VISUAL_WEIGHT * visual + TEXT_WEIGHT * text`` rounded to 4 decimals.
        visual: The pixel score in [0, 1].
        text: The text-block score in [0, 1] (4 decimals).

    Example:
        >>> s = DesignScore(total=0.75, visual=0.9, text=0.6)
        >>> s.total == round(VISUAL_WEIGHT * s.visual + TEXT_WEIGHT * s.text, 4)
        True
    """

    total: float
    visual: float
    text: float


def design_score(agent: Render, reference: Render) -> DesignScore:
    """Score ``agent``'s render against ``reference`` (see the module docstring).

    Raises:
        ValueError: The screenshots differ in shape.
    """
    visual = visual_similarity(agent.pixels, reference.pixels)
    text = round(text_similarity(reference.dom.texts, agent.dom.texts, reference.size), 4)
    if visual == 1.0 and text == 1.0:
        return DesignScore(1.0, 1.0, 1.0)
    total = round(VISUAL_WEIGHT * visual + TEXT_WEIGHT * text, 4)
    if total >= 1.0:  # rounding must not make a different page perfect
        total = 0.9999
    return DesignScore(float(np.clip(total, 0.0, 1.0)), visual, text)
