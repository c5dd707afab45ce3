"""find_differences on synthetic renders (DOM summaries and pixels built by hand; no browser)."""

from __future__ import annotations

import numpy as np

from turnkit.browser import DomItem, DomSummary, Render
from turnkit.envs.collab_design.differences import find_differences, page_background, shape, where

VP = (640, 480)
NAVY, ORANGE, WHITE, BLACK = (15, 55, 95), (240, 110, 30), (255, 255, 255), (12, 12, 14)


def text(t: str, x: float, y: float, size: float = 16, colour=BLACK, weight: int = 400, w: float = 100) -> DomItem:
    return DomItem("text", "p", t, (x, y, w, size * 1.2), colour, None, size, weight)


def box(x: float, y: float, w: float, h: float, colour, tag: str = "div") -> DomItem:
    return DomItem("box", tag, "", (x, y, w, h), BLACK, colour, 16, 400)


def render(bg=WHITE, texts=(), boxes=()) -> Render:
    px = np.zeros((VP[1], VP[0], 3), np.uint8)
    px[:] = bg
    for b in boxes:
        x, y, w, h = (int(v) for v in b.box)
        px[y : y + h, x : x + w] = b.background
    return Render("k", px, DomSummary(tuple(texts), tuple(boxes), bg))


def kinds(agent: Render, ref: Render) -> list[str]:
    return [d.kind for d in find_differences(agent, ref)]


def test_identical_pages_have_no_differences() -> None:
    page = render(texts=[text("Hi", 10, 10)], boxes=[box(0, 0, 640, 56, NAVY)])
    assert find_differences(page, page) == []


def test_background_colour_is_named() -> None:
    (d,) = find_differences(render(bg=WHITE), render(bg=NAVY))
    assert d.sentence == "The main background colour should be navy, not white."


def test_a_full_page_wrapper_counts_as_the_background() -> None:
    wrapped = render(bg=WHITE, boxes=[box(0, 0, 640, 480, NAVY)])
    assert page_background(wrapped) == NAVY
    assert find_differences(wrapped, render(bg=NAVY)) == []


def test_missing_box_gives_colour_shape_place_and_geometry() -> None:
    (d,) = find_differences(render(), render(boxes=[box(0, 0, 640, 56, NAVY)]))
    assert d.kind == "missing_box"
    assert d.sentence == "Add a navy bar across the top (about 640x56 px at x=0, y=0)."


def test_recoloured_box_names_both_colours_and_where_the_agent_put_it() -> None:
    ref = render(boxes=[box(20, 200, 200, 120, ORANGE)])
    agent = render(boxes=[box(20, 200, 200, 120, NAVY)])
    (d,) = find_differences(agent, ref)
    assert d.sentence == "The box on the left (x=20, y=200) should be orange, not navy."


def test_moved_box_is_reported_with_its_target_geometry() -> None:
    ref = render(boxes=[box(20, 200, 200, 120, ORANGE)])
    agent = render(boxes=[box(120, 260, 200, 120, ORANGE)])
    (d,) = find_differences(agent, ref)
    assert d.kind == "box_geometry"
    assert d.sentence.endswith("(x=120, y=260) should be about 200x120 px at x=20, y=200.")


def test_extra_box_and_extra_text_are_to_be_removed() -> None:
    agent = render(texts=[text("Lorem", 300, 300)], boxes=[box(400, 20, 100, 80, NAVY)])
    got = {d.kind: d.sentence for d in find_differences(agent, render())}
    assert got["extra_box"] == "Remove the navy box at the top right (x=400, y=20)."
    assert got["extra_text"] == 'Remove the text "Lorem".'


def test_text_differences_cover_wording_position_size_colour_and_weight() -> None:
    ref = render(texts=[text("Fresh Coffee Daily", 40, 100, size=34, colour=NAVY, weight=700)])
    agent = render(texts=[text("Fresh Coffee Dailly", 40, 160, size=20, colour=ORANGE, weight=400)])
    got = {d.kind: d.sentence for d in find_differences(agent, ref)}
    assert got == {
        "text_wording": 'Change "Fresh Coffee Dailly" to "Fresh Coffee Daily".',
        "text_position": 'Move "Fresh Coffee Daily" up (to about x=40, y=100).',
        "text_size": 'Make "Fresh Coffee Daily" bigger (about 34 px).',
        "text_colour": 'Make "Fresh Coffee Daily" navy, not orange.',
        "text_weight": 'Make "Fresh Coffee Daily" bold.',
    }


def test_missing_text_gives_size_weight_colour_and_position() -> None:
    ref = render(texts=[text('Say "hi"', 32, 110, size=34, colour=WHITE, weight=700)])
    (d,) = find_differences(render(), ref)
    assert d.sentence == "Add the text \"Say 'hi'\" (34 px, bold, white) at the top left (at x=32, y=110)."


def test_bigger_changes_come_first() -> None:
    ref = render(bg=NAVY, texts=[text("Big title", 40, 100, size=40, w=300), text("tiny", 40, 400, size=10, w=20)])
    order = kinds(render(bg=WHITE), ref)
    assert order == ["background", "missing_text", "missing_text"]
    assert "Big title" in find_differences(render(bg=WHITE), ref)[1].sentence


def test_small_differences_are_found_by_the_fine_pass() -> None:
    ref = render(boxes=[box(0, 0, 320, 480, NAVY)])
    agent = render(boxes=[box(0, 0, 320, 480, (25, 68, 110))])  # also navy, ΔE 5.7: below the first pass (12)
    (d,) = find_differences(agent, ref)
    assert d.sentence == "The column along the left side (x=0, y=0) should be a bit darker."


def test_pixel_only_differences_fall_back_to_a_region() -> None:
    ref, agent = render(), render()
    ref.pixels.flags.writeable = True
    ref.pixels[400:480, 0:200] = 0  # a dark area that no DOM item explains
    (d,) = find_differences(agent, ref)
    assert d.sentence == "The bottom left part of the page still looks different."


def test_phrasing_helpers() -> None:
    assert where((0, 0, 200, 480), VP) == "along the left side"
    assert where((250, 200, 100, 60), VP) == "in the middle"
    assert shape(box(10, 10, 100, 40, ORANGE, tag="a"), VP) == "button"
    assert shape(box(0, 0, 640, 200, ORANGE), VP) == "banner"
    assert shape(box(0, 0, 20, 20, ORANGE), VP) == "small square"
