"""The observation listing reads back into the elements it was formatted from, whatever their text."""

from __future__ import annotations

from turnkit.envs.web.miniwob.observe import format_page
from turnkit.envs.web.miniwob.view import latest_page, parse_page

ITEMS = [
    {"ref": 1, "tag": "label", "depth": 0, "text": 'tricky "quote" [9] button'},
    {"ref": 2, "tag": "input", "depth": 1, "text": "", "type": "checkbox", "checked": False},
    {"ref": 3, "tag": "input", "depth": 0, "text": "", "type": "text", "value": "line\nbreak", "placeholder": "Name"},
    {"ref": 4, "tag": "select", "depth": 0, "text": "", "options": ["a | b", "c"], "selected": "c", "disabled": True},
    {"ref": 5, "tag": "div", "depth": 0, "text": ""},
    {"ref": 6, "tag": "span", "depth": 1, "text": "\u202eRTL ünïcode"},
]


def test_parse_page_inverts_format_page() -> None:
    page = parse_page("Clicked [1] label.\n" + format_page("Do it.", ITEMS))
    assert page is not None and page.instruction == "Do it."
    got = [
        (e.ref, e.tag, e.type, e.text, e.checked, e.value, e.selected, e.options, e.disabled, e.parent)
        for e in page.elements
    ]
    assert got == [
        (1, "label", "", 'tricky "quote" [9] button', None, None, None, (), False, None),
        (2, "input", "checkbox", "", False, None, None, (), False, 1),
        (3, "input", "text", "", None, "line\nbreak", None, (), False, None),
        (4, "select", "", "", None, None, "c", ("a | b", "c"), True, None),
        (5, "div", "", "", None, None, None, (), False, None),
        (6, "span", "", "\u202eRTL ünïcode", None, None, None, (), False, 5),
    ]
    assert [e.ref for e in page.children(5)] == [6]


def test_feedback_without_a_page_keeps_the_latest_listing() -> None:
    first = format_page("Do it.", ITEMS[:1])
    assert parse_page("Your last message was not accepted: it was empty.") is None
    page = latest_page([first, "no action found", "MiniWoB ended the episode: reward 1.00 (success)."])
    assert page is not None and [e.ref for e in page.elements] == [1]
