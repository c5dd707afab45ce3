"""Procedural page designs for the collaborative design env: sampling, reference HTML, prompts, splits.

A :class:`Design` is a layout, a palette, a topic (the text content) and sizes. :func:`sample_design`
draws one for a split, :func:`reference_html` builds its self-contained HTML (inline CSS, system fonts,
no external assets), :func:`public_prompt` is the vague request the policy sees, and
:func:`hidden_description` is the exact description kept in the task's privileged data (for LLM human
simulators and critics).

Splits (``split=``):

=========  ==========================================================================================
``id``     layouts hero, card_grid, sidebar, split x the 6 ID palettes, minus the held-out pairs;
           ID topics; heading 30/34/38 px, body 15/16 px; 2-4 cards
``combo``  only the 6 held-out (layout, palette) pairs (every layout and palette is seen in ``id``,
           these combinations never are); everything else as ``id``
``ood``    any layout incl. ``pricing`` (OOD only) x the 3 OOD palettes; OOD topics; heading 24/46 px,
           body 13/18 px; 5-6 cards
=========  ==========================================================================================

Example:
    >>> import numpy as np
    >>> d = sample_design(np.random.default_rng(0), "combo")
    >>> (d.layout, d.palette) in HELD_OUT_PAIRS
    True
    >>> html = reference_html(d)
    >>> html.startswith("<!doctype html>") and d.headline in html and "http" not in html
    True
"""

from __future__ import annotations

import hashlib
import html as html_lib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TypeVar

import numpy as np

from turnkit.envs.collab_design.palettes import (
    DESCRIPTIONS,
    ID_PALETTES,
    ID_TOPICS,
    OOD_PALETTES,
    OOD_TOPICS,
    PALETTES,
    TOPICS,
)
from turnkit.errors import EnvError
from turnkit.types import Task

T = TypeVar("T")

ID_LAYOUTS: tuple[str, ...] = ("hero", "card_grid", "sidebar", "split")
OOD_LAYOUTS: tuple[str, ...] = (*ID_LAYOUTS, "pricing")
SPLITS: tuple[str, ...] = ("id", "ood", "combo")

HELD_OUT_PAIRS: frozenset[tuple[str, str]] = frozenset(
    (layout, palette)
    for i, layout in enumerate(ID_LAYOUTS)
    for j, palette in enumerate(ID_PALETTES)
    if j % len(ID_LAYOUTS) == i
)
"""The (layout, palette) pairs of the ``combo`` split, never drawn in ``id``: a Latin-square pattern that
holds out 6 of the 24 pairs, every palette once and every layout at least once."""

VIEWPORT: tuple[int, int] = (640, 480)
"""The width and height at which pages are rendered and compared."""

_LAYOUT_PHRASES = {
    "hero": "a landing page with a navigation bar, a big banner and a few highlights",
    "card_grid": "a page with a short header and a grid of cards",
    "sidebar": "a page with a navigation menu on the side and a content area",
    "split": "a page split into two halves, a bold one and a lighter one with a short list",
    "pricing": "a page that shows a few price plans side by side",
}
_DIFFICULTY = {"split": 1.0, "card_grid": 1.0, "hero": 2.0, "sidebar": 2.0, "pricing": 3.0}


@dataclass(frozen=True)
class Design:
    """One target page (every field is public except through the rendered page itself).

    Attributes:
        layout: One of :data:`OOD_LAYOUTS`.
        palette: A key of :data:`~turnkit.envs.collab_design.palettes.PALETTES`.
        topic: A key of :data:`~turnkit.envs.collab_design.palettes.TOPICS`.
        brand: The site's name.
        headline: The main heading.
        tagline: The sentence under the heading.
        items: Card, feature or plan titles.
        descriptions: One short description per item.
        button: The call-to-action label.
        links: Navigation links.
        align: ``"center"`` or ``"left"`` (headings and banner text).
        heading_px: Main heading font size.
        body_px: Body font size.
        split: The split it was drawn for.
    """

    layout: str
    palette: str
    topic: str
    brand: str
    headline: str
    tagline: str
    items: tuple[str, ...]
    descriptions: tuple[str, ...]
    button: str
    links: tuple[str, ...]
    align: str
    heading_px: int
    body_px: int
    split: str = "id"


def _pick(rng: np.random.Generator, options: Sequence[T]) -> T:
    return options[int(rng.integers(len(options)))]


def sample_design(rng: np.random.Generator, split: str) -> Design:
    """Draw a design of ``split`` using only ``rng``.

    Raises:
        EnvError: Unknown split.

    Example:
        >>> a = sample_design(np.random.default_rng(5), "ood"); b = sample_design(np.random.default_rng(5), "ood")
        >>> a == b, a.palette in OOD_PALETTES
        (True, True)
    """
    if split not in SPLITS:
        raise EnvError(f"unknown split {split!r}; choose one of {list(SPLITS)}")
    heads: tuple[int, ...]
    bodies: tuple[int, ...]
    counts: tuple[int, ...]
    if split == "ood":
        layout, palette = str(_pick(rng, OOD_LAYOUTS)), str(_pick(rng, OOD_PALETTES))
        topics, heads, bodies, counts = OOD_TOPICS, (24, 46), (13, 18), (5, 6)
    else:
        pairs = sorted(
            (lay, pal)
            for lay in ID_LAYOUTS
            for pal in ID_PALETTES
            if ((lay, pal) in HELD_OUT_PAIRS) == (split == "combo")
        )
        layout, palette = pairs[int(rng.integers(len(pairs)))]
        topics, heads, bodies, counts = ID_TOPICS, (30, 34, 38), (15, 16), (2, 3, 4)
    topic = str(_pick(rng, topics))
    content = TOPICS[topic]
    n_items = 3 if layout in ("hero", "split", "pricing") else int(_pick(rng, counts))
    if layout == "sidebar":
        n_items = 2
    items = tuple(str(x) for x in rng.permutation(content["items"])[:n_items])
    descriptions = tuple(str(x) for x in rng.choice(DESCRIPTIONS, size=n_items, replace=False))
    return Design(
        layout=layout,
        palette=palette,
        topic=topic,
        brand=str(_pick(rng, content["brands"])),
        headline=str(_pick(rng, content["headlines"])),
        tagline=str(_pick(rng, content["taglines"])),
        items=items,
        descriptions=descriptions,
        button=str(_pick(rng, content["button"])),
        links=tuple(content["links"][: 3 + int(rng.integers(2))]),
        align=str(_pick(rng, ("center", "left"))),
        heading_px=int(_pick(rng, heads)),
        body_px=int(_pick(rng, bodies)),
        split=split,
    )


# ---------------------------------------------------------------------------------------------- HTML
def _e(text: str) -> str:
    return html_lib.escape(text, quote=True)


def _body(d: Design) -> str:
    items = list(zip(d.items, d.descriptions, strict=True))
    links = "".join(f'<a href="#">{_e(x)}</a>' for x in d.links)
    if d.layout == "hero":
        feats = "".join(f'<div class="feature"><h3>{_e(t)}</h3><p>{_e(s)}</p></div>' for t, s in items)
        return (
            f'<nav class="nav"><div class="brand">{_e(d.brand)}</div><div class="links">{links}</div></nav>'
            f'<section class="hero"><h1>{_e(d.headline)}</h1><p>{_e(d.tagline)}</p>'
            f'<a class="btn" href="#">{_e(d.button)}</a></section>'
            f'<section class="features">{feats}</section>'
        )
    if d.layout == "card_grid":
        cards = "".join(f'<div class="card"><h3>{_e(t)}</h3><p>{_e(s)}</p></div>' for t, s in items)
        return (
            f'<header class="top"><h1>{_e(d.headline)}</h1><p>{_e(d.tagline)}</p></header>'
            f'<main class="grid">{cards}</main>'
        )
    if d.layout == "sidebar":
        side_links = "".join(f'<a href="#">{_e(x)}</a>' for x in d.links)
        (t1, s1), (t2, s2) = items
        return (
            f'<div class="wrap"><aside class="side"><div class="brand">{_e(d.brand)}</div>{side_links}</aside>'
            f'<main class="main"><h1>{_e(d.headline)}</h1><p>{_e(d.tagline)}</p>'
            f'<div class="panel"><h3>{_e(t1)}</h3><p>{_e(s1)}</p></div>'
            f'<div class="card"><h3>{_e(t2)}</h3><p>{_e(s2)}</p></div>'
            f'<a class="btn" href="#">{_e(d.button)}</a></main></div>'
        )
    if d.layout == "split":
        rows = "".join(f'<div class="row"><span class="dot"></span><span>{_e(t)}</span></div>' for t, _ in items)
        return (
            f'<div class="wrap"><section class="left"><div class="brand">{_e(d.brand)}</div>'
            f'<h1>{_e(d.headline)}</h1><p>{_e(d.tagline)}</p><a class="btn" href="#">{_e(d.button)}</a></section>'
            f'<section class="right"><h2>What We Offer</h2>{rows}</section></div>'
        )
    if d.layout == "pricing":
        prices = ("$9", "$19", "$39")
        tiers = "".join(
            f'<div class="tier{" best" if i == 1 else ""}"><h3>{_e(t)}</h3><div class="price">{prices[i]}</div>'
            f'<p>{_e(s)}</p><a class="btn" href="#">{_e(d.button if i == 1 else "Choose")}</a></div>'
            for i, (t, s) in enumerate(items)
        )
        return (
            f'<header class="top"><h1>{_e(d.headline)}</h1><p>{_e(d.tagline)}</p></header>'
            f'<main class="tiers">{tiers}</main>'
        )
    raise EnvError(f"unknown layout {d.layout!r}; choose one of {list(OOD_LAYOUTS)}")


def _css(d: Design) -> str:
    p = PALETTES[d.palette]
    cols = len(d.items) if len(d.items) <= 4 else 3
    common = (
        "*{box-sizing:border-box;margin:0;padding:0}"
        f"body{{background:{p['bg']};color:{p['text']};font-family:'DejaVu Sans',sans-serif;"
        f"font-size:{d.body_px}px;line-height:1.4}}"
        f"h1{{font-size:{d.heading_px}px;line-height:1.2}}h2{{font-size:22px}}h3{{font-size:18px}}"
        "a{text-decoration:none;color:inherit}"
        f".btn{{display:inline-block;padding:10px 22px;border-radius:6px;background:{p['accent']};"
        f"color:{p['on_accent']};font-weight:bold;margin-top:18px}}"
    )
    per_layout = {
        "hero": (
            f".nav{{display:flex;justify-content:space-between;align-items:center;height:56px;padding:0 24px;"
            f"background:{p['nav']};color:{p['on_nav']}}}.brand{{font-size:20px;font-weight:bold}}"
            ".links a{margin-left:20px}"
            f".hero{{background:{p['accent']};color:{p['on_accent']};padding:44px 32px;height:240px;"
            f"text-align:{d.align}}}.hero p{{margin-top:12px}}"
            f".hero .btn{{background:{p['surface']};color:{p['accent']}}}"
            ".features{display:flex;gap:16px;padding:24px}.feature{flex:1}"
            f".feature p{{color:{p['muted']};margin-top:6px}}"
        ),
        "card_grid": (
            f".top{{padding:28px 32px 8px;text-align:{d.align}}}.top p{{color:{p['muted']};margin-top:8px}}"
            f".grid{{display:grid;grid-template-columns:repeat({cols},1fr);gap:16px;padding:16px 32px}}"
            f".card{{background:{p['surface']};border-top:6px solid {p['accent']};border-radius:8px;"
            f"padding:16px;min-height:110px}}.card p{{color:{p['muted']};margin-top:8px}}"
        ),
        "sidebar": (
            ".wrap{display:flex;height:100vh}"
            f".side{{width:180px;background:{p['nav']};color:{p['on_nav']};padding:24px 18px}}"
            ".side .brand{font-size:20px;font-weight:bold;margin-bottom:18px}.side a{display:block;margin-top:12px}"
            f".main{{flex:1;padding:32px;text-align:{d.align}}}.main p{{margin-top:10px}}"
            f".panel{{background:{p['accent']};color:{p['on_accent']};padding:18px;border-radius:8px;margin-top:20px}}"
            f".card{{background:{p['surface']};padding:18px;border-radius:8px;margin-top:14px}}"
        ),
        "split": (
            ".wrap{display:flex;height:100vh}"
            f".left{{width:50%;background:{p['accent']};color:{p['on_accent']};padding:48px 32px;"
            f"text-align:{d.align}}}.left .brand{{font-weight:bold;margin-bottom:40px}}.left p{{margin-top:12px}}"
            f".left .btn{{background:{p['nav']};color:{p['on_nav']}}}"
            ".right{width:50%;padding:64px 32px}.right h2{margin-bottom:18px}"
            ".row{display:flex;align-items:center;margin-top:16px}"
            f".dot{{width:16px;height:16px;background:{p['accent']};margin-right:12px;border-radius:3px}}"
        ),
        "pricing": (
            f".top{{padding:28px 32px 8px;text-align:{d.align}}}.top p{{color:{p['muted']};margin-top:8px}}"
            ".tiers{display:flex;gap:16px;padding:20px 32px}"
            f".tier{{flex:1;background:{p['surface']};padding:18px;border-radius:8px;text-align:center}}"
            f".tier.best{{background:{p['accent']};color:{p['on_accent']}}}"
            ".price{font-size:30px;font-weight:bold;margin-top:8px}.tier p{margin-top:8px}"
            f".tier .btn{{background:{p['nav']};color:{p['on_nav']}}}"
        ),
    }
    return common + per_layout[d.layout]


def reference_html(d: Design) -> str:
    """The design's self-contained HTML page (deterministic in ``d``)."""
    return (
        f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{_e(d.brand)}</title>"
        f"<style>{_css(d)}</style></head>\n<body>{_body(d)}</body></html>\n"
    )


# ---------------------------------------------------------------------------------------------- text
def public_prompt(d: Design, max_turns: int = 10) -> str:
    """The vague request the policy sees: page kind, topic and colour mood, never the exact design.

    Example:
        >>> d = sample_design(np.random.default_rng(0), "id")
        >>> "I WANT TO ANSWER:" in public_prompt(d) and d.headline not in public_prompt(d)
        True
    """
    p = PALETTES[d.palette]
    w, h = VIEWPORT
    return (
        f"I need {_LAYOUT_PHRASES[d.layout]} for {TOPICS[d.topic]['what']}, in {p['mood']}. "
        "I have a design in mind and will compare your page with it.\n"
        f"Write one self-contained HTML file with inline CSS; nothing external loads (no CDN, no images "
        f"from the web, no web fonts). I view it at {w}x{h} pixels. Put the HTML in a ```html code block. "
        "After each version I will tell you the most visible differences from my design. "
        f"You have {max_turns} turns; when you are done, write I WANT TO ANSWER: followed by the final HTML."
    )


def hidden_description(d: Design) -> str:
    """An exact description of the design (privileged: for LLM human simulators and critics).

    Example:
        >>> d = sample_design(np.random.default_rng(0), "id")
        >>> hidden_description(d).startswith(f"Layout: {d.layout}.")
        True
    """
    p = PALETTES[d.palette]
    colours = ", ".join(f"{k} {v}" for k, v in p.items() if k != "mood")
    return (
        f"Layout: {d.layout}. Colours: {colours}. Fonts: DejaVu Sans, heading {d.heading_px} px, body "
        f"{d.body_px} px; headings aligned {d.align}. Brand: {d.brand!r}. Heading: {d.headline!r}. "
        f"Tagline: {d.tagline!r}. Items: "
        + "; ".join(f"{t!r} ({s!r})" for t, s in zip(d.items, d.descriptions, strict=True))
        + f". Button: {d.button!r}. Links: {', '.join(d.links)}."
    )


def design_task(d: Design, max_turns: int = 10) -> Task:
    """The :class:`~turnkit.types.Task` of a design: public prompt, privileged reference HTML + description.

    Example:
        >>> t = design_task(sample_design(np.random.default_rng(1), "ood"))
        >>> t.family, t.split, sorted(t.privileged)
        ('collab_design', 'ood', ['description', 'reference_html'])
    """
    html = reference_html(d)
    digest = hashlib.sha256(html.encode()).hexdigest()[:12]
    meta = {k: v for k, v in asdict(d).items() if k in ("layout", "palette", "topic", "align", "heading_px")}
    return Task(
        task_id=f"design-{d.split}-{digest}",
        prompt=public_prompt(d, max_turns),
        privileged={"reference_html": html, "description": hidden_description(d)},
        family="collab_design",
        split=d.split,
        difficulty=_DIFFICULTY[d.layout],
        metadata=meta,
    )
