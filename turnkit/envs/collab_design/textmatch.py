"""Text-block agreement of two rendered pages: the part of the reward that reads the words.

Pixel metrics (SSIM, CLIP) barely see wording: a page whose heading says something else entirely still
scores ~0.96 visually, because the glyphs cover few pixels and have the same shape statistics. Design2Code
(Si et al., 2024) therefore scores generated pages also on matched *text blocks* (block-match by area,
character-level text similarity, position, colour). :func:`text_similarity` is a single-number version of
that, computed on the DOM summaries of both renders (:mod:`turnkit.browser.dom`: each element's own visible
text with the box of its glyphs, colour and font size), so no OCR is needed:

1. Every pair (reference block ``r``, agent block ``a``) gets a quality
   ``q = t² · (0.6 + 0.2·p + 0.1·c + 0.1·s)`` where

   * ``t`` = :func:`difflib.SequenceMatcher` ratio of the whitespace-collapsed, case-folded texts
     (character-level Sørensen-Dice, as in Design2Code); squared, because unrelated English sentences still
     share ~30 % of their characters and should earn next to nothing;
   * ``p`` = ``1 - max(|dx| / width, |dy| / height)`` of the glyph-box centres (Design2Code's Chebyshev
     position score), clipped at 0;
   * ``c`` = ``1 - min(ΔE76 / 50, 1)`` of the text colours; ``s`` = the smaller font size over the larger.

   The words gate the score; right words in the wrong place, colour or size lose up to 40 %.
2. Pairs are matched greedily, best quality first (ties: document order), each block at most once; pairs of
   quality 0 stay unmatched.
3. Score = ``Σ_pairs q · (area_r + area_a) / (Σ area of all reference blocks + Σ area of all agent blocks)``
   (Design2Code's block-match weighting: big, visible text counts more; missing and extra text both count
   against the page).

Identical summaries score exactly 1; two pages without text score 1; a page with no text against one with
text scores 0. The score is symmetric.

Example:
    >>> from turnkit.browser import DomItem
    >>> def t(text, x=40, y=30, size=34):
    ...     return DomItem("text", "h1", text, (x, y, 12 * len(text), size * 1.2), (0, 0, 0), None, size, 700)
    >>> ref = [t("Fresh Coffee Daily"), t("Open every morning", y=90, size=16)]
    >>> text_similarity(ref, ref, (640, 480))
    1.0
    >>> typo = text_similarity(ref, [t("Fresh Cofee Daily"), ref[1]], (640, 480))
    >>> other = text_similarity(ref, [t("Tune-ups Done Right"), ref[1]], (640, 480))
    >>> missing = text_similarity(ref, [ref[1]], (640, 480))
    >>> round(typo, 3), round(other, 3), round(missing, 3)  # other words: about as bad as no heading
    (0.961, 0.412, 0.485)
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from turnkit.browser import DomItem
from turnkit.envs.collab_design.colours import delta_e

WORDING_POWER = 2.0
"""Exponent applied to the character-level text similarity (see the module docstring)."""
STYLE_WEIGHTS = (0.6, 0.2, 0.1, 0.1)
"""Weights of (words present, position, colour, font size) inside a matched block's quality."""
COLOUR_DE_MAX = 50.0
"""Text-colour distance (CIE76) at which the colour counts as entirely different."""


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def wording_similarity(a: str, b: str) -> float:
    """Character-level similarity of two texts (``SequenceMatcher`` ratio, case-folded), in [0, 1].

    Example:
        >>> wording_similarity("Fresh  Coffee", "fresh coffee"), wording_similarity("abc", "xyz")
        (1.0, 0.0)
    """
    na, nb = _norm(a), _norm(b)
    if na == nb:
        return 1.0
    return difflib.SequenceMatcher(None, na, nb, autojunk=False).ratio()


def block_quality(r: DomItem, a: DomItem, viewport: tuple[int, int]) -> float:
    """The quality ``q`` of matching reference text block ``r`` with agent text block ``a`` (module docstring).

    Example:
        >>> r = DomItem("text", "h1", "Hello", (0, 0, 100, 40), (0, 0, 0), None, 32, 700)
        >>> moved = DomItem("text", "h1", "Hello", (320, 0, 100, 40), (0, 0, 0), None, 32, 700)
        >>> block_quality(r, r, (640, 480)), round(block_quality(r, moved, (640, 480)), 3)
        (1.0, 0.9)
    """
    t = wording_similarity(r.text, a.text) ** WORDING_POWER
    if t == 0.0:
        return 0.0
    w, h = viewport
    (rx, ry), (ax, ay) = r.center, a.center
    p = max(0.0, 1.0 - max(abs(rx - ax) / w, abs(ry - ay) / h))
    c = 1.0 - min(delta_e(r.color, a.color) / COLOUR_DE_MAX, 1.0)
    big = max(r.font_size, a.font_size)
    s = min(r.font_size, a.font_size) / big if big > 0 else 1.0
    k_words, k_pos, k_col, k_size = STYLE_WEIGHTS
    return float(t * (k_words + k_pos * p + k_col * c + k_size * s))


def match_blocks(
    reference: Sequence[DomItem], agent: Sequence[DomItem], viewport: tuple[int, int]
) -> list[tuple[int, int, float]]:
    """Greedy best-first matching: ``(reference index, agent index, quality)`` for every matched pair.

    Example:
        >>> a = DomItem("text", "p", "alpha", (0, 0, 50, 20), (0, 0, 0), None, 16, 400)
        >>> b = DomItem("text", "p", "beta", (0, 40, 50, 20), (0, 0, 0), None, 16, 400)
        >>> [(i, j) for i, j, _ in match_blocks([a, b], [b, a], (640, 480))]
        [(0, 1), (1, 0)]
    """
    candidates = [
        (q, i, j)
        for i, r in enumerate(reference)
        for j, a in enumerate(agent)
        if (q := block_quality(r, a, viewport)) > 0.0
    ]
    used_r: set[int] = set()
    used_a: set[int] = set()
    pairs = []
    for q, i, j in sorted(candidates, key=lambda c: (-c[0], c[1], c[2])):
        if i not in used_r and j not in used_a:
            used_r.add(i)
            used_a.add(j)
            pairs.append((i, j, q))
    return sorted(pairs)


def text_similarity(reference: Sequence[DomItem], agent: Sequence[DomItem], viewport: tuple[int, int]) -> float:
    """Area-weighted text-block agreement of two pages, in [0, 1] (see the module docstring).

    Args:
        reference: The reference page's text items (``Render.dom.texts``).
        agent: The agent page's text items.
        viewport: ``(width, height)`` of the renders, for the position score.
    """
    total = sum(r.area for r in reference) + sum(a.area for a in agent)
    if total <= 0.0:
        return 1.0 if not reference and not agent else 0.0
    pairs = match_blocks(reference, agent, viewport)
    if len(pairs) == len(reference) == len(agent) and all(q == 1.0 for _, _, q in pairs):
        return 1.0
    matched = sum(q * (reference[i].area + agent[j].area) for i, j, q in pairs)
    return float(min(1.0, matched / total))
