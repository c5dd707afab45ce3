"""Controlled perturbations of a reference design: the calibration table of the reward.

:func:`perturbations` returns named HTML variants of a design's reference page, each changing one thing a
person would notice (or, for the shifts, barely notice). The tests render them in Chromium and pin the
reward's ordering and bounds; ``studies/collab_design_quality.py`` reports their medians.

Example:
    >>> import numpy as np
    >>> from turnkit.envs.collab_design.generator import sample_design
    >>> d = sample_design(np.random.default_rng(0), "id")
    >>> variants = perturbations(d)
    >>> len(variants), sorted(variants)[:3]
    (16, ['blank page, same background', 'empty white page', 'heading 8 px bigger'])
    >>> d.headline in variants["shifted by 1 px"] and d.headline not in variants["wrong heading text"]
    True
"""

from __future__ import annotations

import dataclasses

from turnkit.envs.collab_design.generator import ID_LAYOUTS, ID_PALETTES, OOD_PALETTES, Design, reference_html
from turnkit.envs.collab_design.palettes import PALETTES

OTHER_HEADLINE = "Something Else Entirely"
"""The heading of the ``wrong heading text`` variant (shares no word with any generated headline)."""


def _shift(html: str, px: int) -> str:
    return html.replace("<body>", f"<body style='transform:translate({px}px,{px}px)'>", 1)


def _typo(text: str) -> str:
    """Swap two adjacent letters in the middle of ``text`` (a one-character slip)."""
    i = max(1, len(text) // 2)
    return text[: i - 1] + text[i] + text[i - 1] + text[i + 1 :] if len(text) > 2 else text + "x"


def perturbations(d: Design) -> dict[str, str]:
    """Named single-change variants of ``d``'s reference page (HTML strings; see the module docstring).

    Variants: shifted by 1/2/4/16 px; a typo in the heading; a wrong heading text; other brand, heading and
    tagline; other alignment; heading 8 px bigger; the next palette; the next layout; layout mirrored
    (flex rows reversed); missing button (layouts that have one); missing first item; a blank page in the
    right background colour; an empty white page.
    """
    html = reference_html(d)
    palettes = OOD_PALETTES if d.palette in OOD_PALETTES else ID_PALETTES
    layout = ID_LAYOUTS[(ID_LAYOUTS.index(d.layout) + 1) % len(ID_LAYOUTS)] if d.layout in ID_LAYOUTS else "hero"
    n = 2 if layout == "sidebar" else 3 if layout in ("hero", "split") else len(d.items)
    mirrored = html.replace(
        "</style>",
        ".wrap,.nav,.features,.tiers{flex-direction:row-reverse}"
        ".grid{direction:rtl}.top,.main,.left,.hero{text-align:right}</style>",
        1,
    )
    variants = {
        "shifted by 1 px": _shift(html, 1),
        "shifted by 2 px": _shift(html, 2),
        "shifted by 4 px": _shift(html, 4),
        "shifted by 16 px": _shift(html, 16),
        "typo in heading": reference_html(dataclasses.replace(d, headline=_typo(d.headline))),
        "wrong heading text": reference_html(dataclasses.replace(d, headline=OTHER_HEADLINE)),
        "other brand, heading, tagline": reference_html(
            dataclasses.replace(d, brand="Northwind Co", headline=OTHER_HEADLINE, tagline="Nothing to see here.")
        ),
        "other alignment": reference_html(dataclasses.replace(d, align="left" if d.align == "center" else "center")),
        "heading 8 px bigger": reference_html(dataclasses.replace(d, heading_px=d.heading_px + 8)),
        "next palette": reference_html(
            dataclasses.replace(d, palette=palettes[(palettes.index(d.palette) + 1) % len(palettes)])
        ),
        "layout mirrored": mirrored,
        "next layout": reference_html(
            dataclasses.replace(d, layout=layout, items=(d.items * 3)[:n], descriptions=(d.descriptions * 3)[:n])
        ),
        "missing button": html.replace("</style>", ".btn{display:none}</style>", 1),
        "missing first item": html.replace(
            "</style>",
            ".feature:first-child,.grid>.card:first-child,.main>.panel,.right>.row:first-of-type,"
            ".tier:first-child{display:none}</style>",
            1,
        ),
        "blank page, same background": f"<body style='background:{PALETTES[d.palette]['bg']}'></body>",
        "empty white page": "<body></body>",
    }
    if 'class="btn"' not in html:  # card grids have no button
        del variants["missing button"]
    return variants
