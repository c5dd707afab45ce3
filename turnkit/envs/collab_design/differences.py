"""Find the most visible differences between an agent's render and the reference render.

Both pages are compared through their DOM summaries (:mod:`turnkit.browser.dom`) and pixels:

* **background**: the colour behind everything (:func:`page_background`);
* **boxes** (coloured blocks, buttons, images): paired greedily by overlap (IoU) and, for boxes that moved,
  by colour and size; a pair can differ in colour or in position/size; unpaired reference boxes are
  missing, unpaired agent boxes are extra;
* **texts**: paired by normalised text, then by fuzzy wording (``difflib`` ratio >= 0.6); a pair can differ
  in wording, position, size, colour or weight; unpaired reference texts are missing, unpaired agent texts
  are extra;
* **region** (fallback, when nothing above is found even with every threshold scaled by
  :data:`FINE_SCALE`, but the pixels still differ): the ninth of the page whose pixels differ most.

Each :class:`Difference` carries a *visibility weight* (the affected area in square pixels times the size
of the change, between 0 and 1) and one English sentence. Positions and sizes are in CSS pixels of the
viewport, e.g. ``Add a navy bar across the top (about 640x56 px at x=0, y=0).``; colours are names from
:mod:`turnkit.envs.collab_design.colours`. The sentence shapes are listed in :data:`SENTENCE_SHAPES` (the
scripted feedback-following agent in :mod:`turnkit.envs.collab_design.baselines` parses them).

Example:
    >>> import numpy as np
    >>> from turnkit.browser import DomItem, DomSummary, Render
    >>> def page(bg, texts=()):
    ...     px = np.zeros((480, 640, 3), np.uint8); px[:] = bg
    ...     return Render("k", px, DomSummary(tuple(texts), (), bg))
    >>> title = DomItem("text", "h1", "Fresh Coffee", (40, 30, 220, 40), (0, 0, 0), None, 34, 700)
    >>> diffs = find_differences(page((255, 255, 255)), page((15, 55, 95), [title]))
    >>> [d.kind for d in diffs]
    ['background', 'missing_text']
    >>> diffs[0].sentence
    'The main background colour should be navy, not white.'
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from turnkit.browser import DomItem, Render
from turnkit.envs.collab_design.colours import colour_name, delta_e, lighter_or_darker

SENTENCE_SHAPES: tuple[str, ...] = (
    "The main background colour should be {colour}, not {colour}.",
    "The main background colour should be a bit {lighter|darker}.",
    "Add a {colour} {shape} {where} (about {w}x{h} px at x={x}, y={y}).",
    "The {shape} {where} (x={x}, y={y}) should be {colour}, not {colour}.",
    "The {shape} {where} (x={x}, y={y}) should be a bit {lighter|darker}.",
    "The {colour} {shape} {where} (x={x}, y={y}) should be about {w}x{h} px at x={x}, y={y}.",
    "Remove the {colour} {shape} {where} (x={x}, y={y}).",
    'Add the text "{text}" ({size} px, {bold|normal}, {colour}) {where} (at x={x}, y={y}).',
    'Change "{text}" to "{text}".',
    'Move "{text}" {direction} (to about x={x}, y={y}).',
    'Make "{text}" {bigger|smaller} (about {size} px).',
    'Make "{text}" {colour}, not {colour}.',
    'Make "{text}" a bit {lighter|darker}.',
    'Make "{text}" {bold|not bold}.',
    'Remove the text "{text}".',
    "The {where} part of the page still looks different.",
)
"""Every sentence shape the rule-based human uses."""

MIN_BOX_AREA = 150.0
"""Boxes smaller than this (square pixels) are ignored."""
BOX_COLOUR_DE = 12.0
"""Colour distance above which a box's colour is reported."""
TEXT_COLOUR_DE = 20.0
"""Colour distance above which a text's colour is reported."""
TEXT_MOVE_PX = 12.0
"""Displacement above which a text is reported as misplaced."""
TEXT_SIZE_RATIO = 1.15
"""Font-size ratio above which a text is reported as too big or too small."""
FINE_SCALE = 0.35
"""When nothing passes the thresholds above, they are scaled by this factor for a second, finer pass."""


@dataclass(frozen=True)
class Difference:
    """One visible difference.

    Attributes:
        kind: ``background``, ``missing_box``, ``box_colour``, ``box_geometry``, ``extra_box``,
            ``missing_text``, ``text_wording``, ``text_position``, ``text_size``, ``text_colour``,
            ``text_weight``, ``extra_text`` or ``region``.
        weight: Visibility: affected area (px²) times the size of the change in [0, 1].
        sentence: What the human says about it.
    """

    kind: str
    weight: float
    sentence: str


# ---------------------------------------------------------------------------------------------- phrasing
def where(box: Sequence[float], viewport: tuple[int, int]) -> str:
    """Where a box sits, in words.

    Example:
        >>> where((0, 0, 640, 56), (640, 480)), where((20, 300, 100, 50), (640, 480))
        ('across the top', 'at the bottom left')
    """
    x, y, w, h = box
    W, H = viewport
    cx, cy = x + w / 2, y + h / 2
    v = "top" if cy < H / 3 else "bottom" if cy > 2 * H / 3 else "middle"
    hz = "left" if cx < W / 3 else "right" if cx > 2 * W / 3 else "centre"
    if w >= 0.9 * W:
        return f"across the {v}"
    if h >= 0.9 * H:
        return {"left": "along the left side", "right": "along the right side"}.get(hz, "down the middle")
    if v == "middle":
        return "in the middle" if hz == "centre" else f"on the {hz}"
    return f"at the {v}" if hz == "centre" else f"at the {v} {hz}"


def shape(item: DomItem, viewport: tuple[int, int]) -> str:
    """What a box looks like: ``button``, ``bar``, ``banner``, ``column``, ``small square`` or ``box``.

    Example:
        >>> shape(DomItem("box", "div", "", (0, 0, 640, 56), (0, 0, 0), (1, 2, 3), 16, 400), (640, 480))
        'bar'
    """
    _, _, w, h = item.box
    W, H = viewport
    if item.tag in ("a", "button"):
        return "button"
    if w >= 0.9 * W:
        return "banner" if h >= 120 else "bar"
    if h >= 0.9 * H:
        return "column"
    if w * h < 0.01 * W * H:
        return "small square"
    return "box"


def _xy(box: Sequence[float]) -> str:
    return f"x={round(box[0])}, y={round(box[1])}"


def _quote(text: str) -> str:
    text = text.replace('"', "'")
    return text if len(text) <= 60 else text[:57] + "..."


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().strip(".,:;!?").casefold()


# ---------------------------------------------------------------------------------------------- pieces
def page_background(render: Render) -> tuple[int, int, int]:
    """The colour behind everything: the topmost box covering 90 % of the viewport, else the body's.

    Example:
        >>> from turnkit.browser import DomSummary
        >>> wrapper = DomItem("box", "div", "", (0, 0, 640, 480), (0, 0, 0), (15, 55, 95), 16, 400)
        >>> page = Render("k", np.zeros((480, 640, 3), np.uint8), DomSummary((), (wrapper,), (255, 255, 255)))
        >>> page_background(page)
        (15, 55, 95)
    """
    W, H = render.size
    covering = [b for b in render.dom.boxes if b.background is not None and b.area >= 0.9 * W * H]
    return covering[-1].background if covering and covering[-1].background else render.dom.background


def _iou(a: Sequence[float], b: Sequence[float]) -> float:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    iw = max(0.0, min(ax + aw, bx + bw) - max(ax, bx))
    ih = max(0.0, min(ay + ah, by + bh) - max(ay, by))
    inter = iw * ih
    union = aw * ah + bw * bh - inter
    return inter / union if union > 0 else 0.0


def _boxes(render: Render) -> list[tuple[DomItem, tuple[int, int, int]]]:
    """Visible boxes with their colour (background, else the mean pixel colour of the box)."""
    W, H = render.size
    out = []
    for b in render.dom.boxes:
        x, y, w, h = b.box
        x0, y0, x1, y1 = max(0, int(x)), max(0, int(y)), min(W, int(x + w)), min(H, int(y + h))
        if (x1 - x0) * (y1 - y0) < MIN_BOX_AREA or w * h >= 0.9 * W * H:
            continue
        if b.background is not None:
            colour = b.background
        else:
            m = render.pixels[y0:y1, x0:x1].reshape(-1, 3).mean(axis=0)
            colour = (int(m[0]), int(m[1]), int(m[2]))
        out.append((b, colour))
    return out


def _background(agent: Render, ref: Render, scale: float) -> list[Difference]:
    rc, ac = page_background(ref), page_background(agent)
    de = delta_e(rc, ac)
    if de <= 8 * scale:
        return []
    W, H = ref.size
    weight = 0.5 * W * H * min(1.0, de / 50)
    rn, an = colour_name(rc), colour_name(ac)
    if rn != an:
        return [Difference("background", weight, f"The main background colour should be {rn}, not {an}.")]
    return [
        Difference("background", weight, f"The main background colour should be a bit {lighter_or_darker(rc, ac)}.")
    ]


def _box_differences(agent: Render, ref: Render, scale: float) -> list[Difference]:
    vp = ref.size
    rb, ab = _boxes(ref), _boxes(agent)
    pairs = []
    for i, (r, rcol) in enumerate(rb):
        for j, (a, acol) in enumerate(ab):
            iou = _iou(r.box, a.box)
            size_sim = min(r.area, a.area) / max(r.area, a.area)
            de = delta_e(rcol, acol)
            if iou > 0.05 or (de < 15 and size_sim > 0.5):
                pairs.append((iou + 0.5 * (1 - min(de / 50, 1)) * size_sim, i, j))
    used_r, used_a, out = set(), set(), []
    for _, i, j in sorted(pairs, key=lambda t: (-t[0], t[1], t[2])):
        if i in used_r or j in used_a:
            continue
        used_r.add(i)
        used_a.add(j)
        (r, rcol), (a, acol) = rb[i], ab[j]
        de = delta_e(rcol, acol)
        sh, wh = shape(r, vp), where(r.box, vp)
        if de > BOX_COLOUR_DE * scale:
            rn, an = colour_name(rcol), colour_name(acol)
            target = rn if rn != an else f"a bit {lighter_or_darker(rcol, acol)}"
            tail = f", not {an}" if rn != an else ""
            out.append(
                Difference(
                    "box_colour", r.area * min(1.0, de / 50), f"The {sh} {wh} ({_xy(a.box)}) should be {target}{tail}."
                )
            )
        iou = _iou(r.box, a.box)
        if iou < 1 - 0.2 * scale:
            _, _, w, h = r.box
            out.append(
                Difference(
                    "box_geometry",
                    max(r.area, a.area) * (1 - iou),
                    f"The {colour_name(acol)} {shape(a, vp)} {where(a.box, vp)} ({_xy(a.box)}) should be about "
                    f"{round(w)}x{round(h)} px at {_xy(r.box)}.",
                )
            )
    for i, (r, rcol) in enumerate(rb):
        if i not in used_r:
            _, _, w, h = r.box
            out.append(
                Difference(
                    "missing_box",
                    r.area,
                    f"Add a {colour_name(rcol)} {shape(r, vp)} {where(r.box, vp)} "
                    f"(about {round(w)}x{round(h)} px at {_xy(r.box)}).",
                )
            )
    for j, (a, acol) in enumerate(ab):
        if j not in used_a:
            out.append(
                Difference(
                    "extra_box",
                    0.5 * a.area,
                    f"Remove the {colour_name(acol)} {shape(a, vp)} {where(a.box, vp)} ({_xy(a.box)}).",
                )
            )
    return out


def _text_pairs(rt: Sequence[DomItem], at: Sequence[DomItem]) -> tuple[list[tuple[int, int, float]], set, set]:
    pairs: list[tuple[int, int, float]] = []
    used_r: set[int] = set()
    used_a: set[int] = set()
    for i, r in enumerate(rt):  # exact matches in document order
        for j, a in enumerate(at):
            if j not in used_a and _norm(r.text) == _norm(a.text):
                pairs.append((i, j, 1.0))
                used_r.add(i)
                used_a.add(j)
                break
    fuzzy = []
    for i, r in enumerate(rt):
        if i in used_r:
            continue
        for j, a in enumerate(at):
            if j not in used_a:
                ratio = difflib.SequenceMatcher(None, _norm(r.text), _norm(a.text)).ratio()
                if ratio >= 0.6:
                    fuzzy.append((ratio, i, j))
    for ratio, i, j in sorted(fuzzy, key=lambda t: (-t[0], t[1], t[2])):
        if i not in used_r and j not in used_a:
            pairs.append((i, j, ratio))
            used_r.add(i)
            used_a.add(j)
    return pairs, used_r, used_a


def _direction(dx: float, dy: float) -> str:
    parts = []
    if abs(dy) > TEXT_MOVE_PX / 2:
        parts.append("down" if dy > 0 else "up")
    if abs(dx) > TEXT_MOVE_PX / 2:
        parts.append("right" if dx > 0 else "left")
    return " and ".join(parts) or "slightly"


def _text_differences(agent: Render, ref: Render, scale: float) -> list[Difference]:
    vp = ref.size
    rt, at = list(ref.dom.texts), list(agent.dom.texts)
    pairs, used_r, used_a = _text_pairs(rt, at)
    out = []
    for i, j, ratio in pairs:
        r, a = rt[i], at[j]
        q = _quote(r.text)
        if ratio < 1.0:
            out.append(Difference("text_wording", r.area * (1 - ratio), f'Change "{_quote(a.text)}" to "{q}".'))
        dx, dy = r.box[0] - a.box[0], r.box[1] - a.box[1]
        dist = math.hypot(dx, dy)
        if dist > TEXT_MOVE_PX * scale:
            out.append(
                Difference(
                    "text_position",
                    r.area * min(1.0, dist / 100),
                    f'Move "{q}" {_direction(dx, dy)} (to about {_xy(r.box)}).',
                )
            )
        size_ratio = r.font_size / max(a.font_size, 1.0)
        if abs(math.log(max(size_ratio, 1e-6))) > math.log(TEXT_SIZE_RATIO) * scale:
            word = "bigger" if size_ratio > 1 else "smaller"
            out.append(
                Difference(
                    "text_size",
                    r.area * min(1.0, 2 * abs(math.log(size_ratio))),
                    f'Make "{q}" {word} (about {round(r.font_size)} px).',
                )
            )
        de = delta_e(r.color, a.color)
        if de > TEXT_COLOUR_DE * scale:
            rn, an = colour_name(r.color), colour_name(a.color)
            target = f"{rn}, not {an}" if rn != an else f"a bit {lighter_or_darker(r.color, a.color)}"
            out.append(Difference("text_colour", 0.8 * r.area * min(1.0, de / 50), f'Make "{q}" {target}.'))
        if (r.font_weight >= 600) != (a.font_weight >= 600):
            word = "bold" if r.font_weight >= 600 else "not bold"
            out.append(Difference("text_weight", 0.3 * r.area, f'Make "{q}" {word}.'))
    for i, r in enumerate(rt):
        if i not in used_r:
            bold = "bold" if r.font_weight >= 600 else "normal"
            out.append(
                Difference(
                    "missing_text",
                    r.area,
                    f'Add the text "{_quote(r.text)}" ({round(r.font_size)} px, {bold}, {colour_name(r.color)}) '
                    f"{where(r.box, vp)} (at {_xy(r.box)}).",
                )
            )
    for j, a in enumerate(at):
        if j not in used_a:
            out.append(Difference("extra_text", 0.5 * a.area, f'Remove the text "{_quote(a.text)}".'))
    return out


def _region(agent: Render, ref: Render) -> list[Difference]:
    W, H = ref.size
    worst, worst_box = 0.0, (0.0, 0.0, 0.0, 0.0)
    for gy in range(3):
        for gx in range(3):
            x0, x1, y0, y1 = gx * W // 3, (gx + 1) * W // 3, gy * H // 3, (gy + 1) * H // 3
            d = float(np.abs(ref.pixels[y0:y1, x0:x1].astype(np.int16) - agent.pixels[y0:y1, x0:x1]).mean())
            if d > worst:
                worst, worst_box = d, (x0, y0, x1 - x0, y1 - y0)
    if worst < 2.0:
        return []
    place = where(worst_box, (W, H)).replace("at the ", "").replace("on the ", "").replace("in the ", "")
    return [
        Difference(
            "region",
            worst_box[2] * worst_box[3] * min(1.0, worst / 64),
            f"The {place} part of the page still looks different.",
        )
    ]


def find_differences(agent: Render, reference: Render) -> list[Difference]:
    """Every difference found, most visible first (ties keep a fixed order, so replies are deterministic).

    Raises:
        ValueError: The renders have different sizes.
    """
    if agent.size != reference.size:
        raise ValueError(f"renders differ in size: {agent.size} vs {reference.size}")
    diffs: list[Difference] = []
    for scale in (1.0, FINE_SCALE):  # a second, finer pass before giving up on words
        diffs = _background(agent, reference, scale) + _box_differences(agent, reference, scale)
        diffs += _text_differences(agent, reference, scale)
        if diffs:
            break
    if not diffs:
        diffs = _region(agent, reference)
    order = {k: i for i, k in enumerate(_KINDS)}
    return sorted(diffs, key=lambda d: (-round(d.weight, 6), order[d.kind], d.sentence))


_KINDS = (
    "background",
    "missing_box",
    "box_colour",
    "box_geometry",
    "extra_box",
    "missing_text",
    "text_wording",
    "text_position",
    "text_size",
    "text_colour",
    "text_weight",
    "extra_text",
    "region",
)
