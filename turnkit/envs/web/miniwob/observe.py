"""Turn the page listing of :data:`~.scripts.OBSERVE_JS` into the text a policy reads.

One line per listed element, in DOM order, indented under the listed element that contains it::

    [4] label "kpx"
      [5] input checkbox checked=false
    [9] input text value="" (focused)
    [11] select selected="Ana" options="Ana" | "Bo"
    [12] button "Submit"

A ref is the element's number for the whole episode (new elements get new numbers). Texts are quoted with
JSON escapes (so quotes and line breaks in page text cannot fake a line). Coordinates and styles are left
out on purpose: they depend on fonts and the Chromium build, and the text must be the same in any process.

Example:
    >>> items = [
    ...     {"ref": 1, "tag": "label", "depth": 0, "text": "kpx"},
    ...     {"ref": 2, "tag": "input", "depth": 1, "text": "", "type": "checkbox", "checked": True},
    ...     {"ref": 3, "tag": "input", "depth": 0, "text": "", "type": "text", "value": "Bo", "focused": True},
    ...     {"ref": 4, "tag": "select", "depth": 0, "text": "", "options": ["Ana", "Bo"], "selected": "Ana"},
    ... ]
    >>> print(format_elements(items))
    [1] label "kpx"
      [2] input checkbox checked=true
    [3] input text value="Bo" (focused)
    [4] select selected="Ana" options="Ana" | "Bo"
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

INDENT = "  "
MAX_DEPTH = 8
"""Deeper nesting is shown at this depth (keeps lines short on deep pages)."""


def _q(text: Any) -> str:
    return json.dumps(str(text), ensure_ascii=False)


def format_element(item: Mapping[str, Any]) -> str:
    """One element's line without indentation.

    Example:
        >>> format_element({"ref": 7, "tag": "button", "text": "OK", "disabled": True})
        '[7] button "OK" (disabled)'
    """
    parts = [f"[{int(item['ref'])}]", str(item.get("tag", "?"))]
    if "type" in item:
        parts.append(str(item["type"]))
    if item.get("text"):
        parts.append(_q(item["text"]))
    if "checked" in item:
        parts.append(f"checked={'true' if item['checked'] else 'false'}")
    if "value" in item:
        parts.append(f"value={_q(item['value'])}")
    if item.get("placeholder"):
        parts.append(f"placeholder={_q(item['placeholder'])}")
    if "options" in item:
        if item.get("selected") is not None:
            parts.append(f"selected={_q(item['selected'])}")
        parts.append("options=" + " | ".join(_q(o) for o in item["options"]))
    if item.get("focused"):
        parts.append("(focused)")
    if item.get("disabled"):
        parts.append("(disabled)")
    return " ".join(parts)


def format_elements(items: Sequence[Mapping[str, Any]], *, truncated: bool = False) -> str:
    """The page listing: one indented line per element (``(no elements)`` for an empty page)."""
    lines = [INDENT * min(int(it.get("depth", 0)), MAX_DEPTH) + format_element(it) for it in items]
    if truncated:
        lines.append("(more elements not shown)")
    return "\n".join(lines) if lines else "(no elements)"


def format_page(utterance: str, items: Sequence[Mapping[str, Any]], *, truncated: bool = False) -> str:
    """The instruction and the page listing: what every observation of a running episode shows.

    Example:
        >>> print(format_page("Click on the \\"ok\\" button.", [{"ref": 1, "tag": "button", "text": "ok"}]))
        Instruction: Click on the "ok" button.
        Page:
        [1] button "ok"
    """
    return f"Instruction: {utterance}\nPage:\n{format_elements(items, truncated=truncated)}"
