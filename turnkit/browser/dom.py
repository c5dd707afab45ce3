"""A compact summary of a rendered page's DOM: visible text runs and coloured boxes, with geometry.

The summary is computed in the page by :data:`DOM_SUMMARY_JS`, run in an isolated JavaScript world (the
page's own scripts cannot redefine the functions it uses). Colours are normalised by painting them on a
canvas, so any CSS colour syntax comes back as sRGB bytes.

* A **text** item is an element's own (direct) text, whitespace-collapsed, with the box of the rendered
  glyphs (not of the element), its colour, font size and weight.
* A **box** item is an element with a visible background colour, or a replaced element (``img``, ``svg``,
  ``canvas``, ``video``, ``input``, ``button``), with its border box.

Items outside the viewport, invisible (``display: none``, ``visibility: hidden``, zero opacity) or empty
are skipped; at most :data:`MAX_ITEMS` of each kind are kept, in document order.

Example:
    >>> item = DomItem.from_json({"kind": "text", "tag": "h1", "text": "Hi", "box": [10, 20, 30, 18],
    ...                            "color": [0, 0, 0], "background": None, "font_size": 32, "font_weight": 700})
    >>> item.center, item.area
    ((25.0, 29.0), 540.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_ITEMS = 200
"""Most items of each kind kept per page."""

RGB = tuple[int, int, int]

DOM_SUMMARY_JS = r"""
(() => {
  const MAX = __MAX__, W = innerWidth, H = innerHeight;
  const cv = document.createElement('canvas'); cv.width = cv.height = 1;
  const cx = cv.getContext('2d', {willReadFrequently: true});
  const memo = new Map();
  const rgba = (css) => {
    if (memo.has(css)) return memo.get(css);
    cx.clearRect(0, 0, 1, 1); cx.fillStyle = '#000'; cx.fillStyle = css; cx.fillRect(0, 0, 1, 1);
    const d = cx.getImageData(0, 0, 1, 1).data, out = [d[0], d[1], d[2], d[3]];
    memo.set(css, out); return out;
  };
  const opacities = new Map();
  const opaque = (el) => {  // product of the opacities up to the root, memoised (deep trees stay linear)
    if (!el || el.nodeType !== 1) return 1;
    if (!opacities.has(el)) opacities.set(el, parseFloat(getComputedStyle(el).opacity) * opaque(el.parentElement));
    return opacities.get(el);
  };
  const onScreen = (r) => r.width > 0 && r.height > 0 && r.right > 0 && r.bottom > 0 && r.left < W && r.top < H;
  const box = (r) => [r.left, r.top, r.width, r.height].map((v) => Math.round(v * 10) / 10);
  const REPLACED = new Set(['IMG', 'SVG', 'CANVAS', 'VIDEO', 'INPUT', 'BUTTON', 'TEXTAREA', 'SELECT', 'IFRAME']);
  const texts = [], boxes = [];
  const root = document.body || document.documentElement;
  const all = root ? [root, ...root.querySelectorAll('*')] : [];
  for (const el of all) {
    if (texts.length >= MAX && boxes.length >= MAX) break;
    const cs = getComputedStyle(el);
    if (cs.display === 'none' || cs.visibility !== 'visible') continue;
    const tag = el.tagName.toUpperCase();
    if (tag === 'SCRIPT' || tag === 'STYLE' || tag === 'HEAD' || tag === 'TITLE') continue;
    let op = null;
    if (texts.length < MAX) {
      const nodes = [...el.childNodes].filter((n) => n.nodeType === 3 && n.data.trim());
      if (nodes.length) {
        const range = document.createRange();
        let l = Infinity, t = Infinity, r = -Infinity, b = -Infinity;
        for (const n of nodes) {
          range.selectNodeContents(n);
          for (const q of range.getClientRects()) {
            if (q.width <= 0 || q.height <= 0) continue;
            l = Math.min(l, q.left); t = Math.min(t, q.top); r = Math.max(r, q.right); b = Math.max(b, q.bottom);
          }
        }
        const rect = {left: l, top: t, width: r - l, height: b - t, right: r, bottom: b};
        op = opaque(el);
        const c = rgba(cs.color);
        if (isFinite(l) && onScreen(rect) && op > 0.05 && c[3] > 12) {
          const text = nodes.map((n) => n.data).join(' ').replace(/\s+/g, ' ').trim().slice(0, 200);
          texts.push({kind: 'text', tag: tag.toLowerCase(), text, box: box(rect), color: c.slice(0, 3),
                      background: null, font_size: parseFloat(cs.fontSize) || 0,
                      font_weight: parseInt(cs.fontWeight, 10) || 400});
        }
      }
    }
    if (boxes.length < MAX) {
      const bg = rgba(cs.backgroundColor);
      const replaced = REPLACED.has(tag);
      if (bg[3] > 12 || replaced) {
        const rect = el.getBoundingClientRect();
        if (op === null) op = opaque(el);
        if (onScreen(rect) && op > 0.05) {
          boxes.push({kind: 'box', tag: tag.toLowerCase(), text: '', box: box(rect), color: rgba(cs.color).slice(0, 3),
                      background: bg[3] > 12 ? bg.slice(0, 3) : null, font_size: parseFloat(cs.fontSize) || 0,
                      font_weight: parseInt(cs.fontWeight, 10) || 400});
        }
      }
    }
  }
  const docBg = (() => {
    for (const el of [document.body, document.documentElement]) {
      if (!el) continue;
      const c = rgba(getComputedStyle(el).backgroundColor);
      if (c[3] > 12) return c.slice(0, 3);
    }
    return [255, 255, 255];
  })();
  return {texts, boxes, background: docBg, title: document.title || ''};
})()
""".replace("__MAX__", str(MAX_ITEMS))
"""The page-side summary script; returns ``{"texts": [...], "boxes": [...], "background": [r, g, b], "title"}``."""


@dataclass(frozen=True)
class DomItem:
    """One visible text run or coloured box of a rendered page.

    Attributes:
        kind: ``"text"`` or ``"box"``.
        tag: The element's lower-case tag name.
        text: The element's own text (``""`` for boxes).
        box: ``(x, y, width, height)`` in CSS pixels from the viewport's top-left corner.
        color: The text colour as sRGB bytes.
        background: The background colour (``None`` when transparent).
        font_size: Computed font size in pixels.
        font_weight: Computed font weight (400 normal, 700 bold).
    """

    kind: str
    tag: str
    text: str
    box: tuple[float, float, float, float]
    color: RGB
    background: RGB | None
    font_size: float
    font_weight: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> DomItem:
        """Build an item from the summary script's JSON object."""
        bg = d.get("background")
        return cls(
            kind=str(d["kind"]),
            tag=str(d["tag"]),
            text=str(d.get("text", "")),
            box=tuple(float(v) for v in d["box"]),  # type: ignore[arg-type]
            color=tuple(int(v) for v in d["color"]),  # type: ignore[arg-type]
            background=tuple(int(v) for v in bg) if bg is not None else None,  # type: ignore[arg-type]
            font_size=float(d.get("font_size", 0.0)),
            font_weight=int(d.get("font_weight", 400)),
        )

    @property
    def center(self) -> tuple[float, float]:
        """The box centre ``(x, y)``."""
        x, y, w, h = self.box
        return (x + w / 2, y + h / 2)

    @property
    def area(self) -> float:
        """The box area in square pixels."""
        return self.box[2] * self.box[3]


@dataclass(frozen=True)
class DomSummary:
    """The visible content of a page.

    Attributes:
        texts: Text runs in document order.
        boxes: Coloured or replaced boxes in document order.
        background: The page background (body, else html, else white).
        title: The document title.

    Example:
        >>> s = DomSummary.from_json({"texts": [], "boxes": [], "background": [255, 255, 255], "title": "x"})
        >>> s.background, s.title
        ((255, 255, 255), 'x')
    """

    texts: tuple[DomItem, ...]
    boxes: tuple[DomItem, ...]
    background: RGB
    title: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> DomSummary:
        """Build a summary from the summary script's return value."""
        return cls(
            texts=tuple(DomItem.from_json(t) for t in d.get("texts", ())),
            boxes=tuple(DomItem.from_json(b) for b in d.get("boxes", ())),
            background=tuple(int(v) for v in d.get("background", (255, 255, 255))),  # type: ignore[arg-type]
            title=str(d.get("title", "")),
        )
