"""The feedback follower parses exactly what the rule-based human says (round trips through find_differences)."""

from __future__ import annotations

import numpy as np

from turnkit.agents.base import Context
from turnkit.browser import DomItem, DomSummary, Render
from turnkit.envs.collab_design.baselines import Box, FeedbackFollower, Sketch, Text, apply_feedback
from turnkit.envs.collab_design.colours import colour_value
from turnkit.envs.collab_design.differences import find_differences
from turnkit.envs.collab_design.human import CLOSE_ENOUGH
from turnkit.envs.collab_design.protocol import ANSWER_MARKER, extract_html
from turnkit.types import Message

NAVY, ORANGE, WHITE, BLACK = colour_value("navy"), colour_value("orange"), colour_value("white"), (12, 12, 14)


def render(bg=WHITE, texts=(), boxes=()) -> Render:
    px = np.zeros((480, 640, 3), np.uint8)
    px[:] = bg
    return Render("k", px, DomSummary(tuple(texts), tuple(boxes), bg))


def text(t: str, x: float, y: float, size: float = 16, colour=BLACK, weight: int = 400) -> DomItem:
    return DomItem("text", "p", t, (x, y, 100, size * 1.2), colour, None, size, weight)


def box(x: float, y: float, w: float, h: float, colour) -> DomItem:
    return DomItem("box", "div", "", (x, y, w, h), BLACK, colour, 16, 400)


def say(agent: Render, ref: Render) -> str:
    return " ".join(d.sentence for d in find_differences(agent, ref))


def test_background_and_missing_box_and_text_are_applied() -> None:
    ref = render(bg=NAVY, texts=[text("Hello there", 32, 110, 34, WHITE, 700)], boxes=[box(0, 0, 640, 56, ORANGE)])
    sketch = Sketch()
    apply_feedback(sketch, say(render(), ref))
    assert sketch.background == NAVY
    assert sketch.boxes == [Box(0, 0, 640, 56, ORANGE)]
    assert sketch.texts == [Text("Hello there", 32, 110, 34, WHITE, True)]


def test_box_colour_geometry_and_removal_find_the_right_box() -> None:
    sketch = Sketch(boxes=[Box(20, 200, 200, 120, NAVY), Box(400, 20, 100, 80, NAVY), Box(300, 300, 100, 100, ORANGE)])
    agent = render(boxes=[box(b.x, b.y, b.w, b.h, b.colour) for b in sketch.boxes])
    ref = render(boxes=[box(20, 200, 200, 120, ORANGE), box(330, 330, 100, 100, ORANGE)])
    apply_feedback(sketch, say(agent, ref))
    assert sorted((b.x, b.y, b.w, b.h, b.colour) for b in sketch.boxes) == [
        (20, 200, 200, 120, ORANGE),
        (330, 330, 100, 100, ORANGE),
    ]


def test_text_edits_are_applied() -> None:
    sketch = Sketch(texts=[Text("Fresh Cofee", 40, 160, 20, ORANGE, False), Text("Lorem", 300, 300, 16, BLACK, False)])
    agent = render(texts=[text(t.text, t.x, t.y, t.size, t.colour, 700 if t.bold else 400) for t in sketch.texts])
    ref = render(texts=[text("Fresh Coffee", 40, 100, 34, NAVY, 700)])
    apply_feedback(sketch, say(agent, ref))
    assert sketch.texts == [Text("Fresh Coffee", 40, 100, 34, NAVY, True)]


def test_following_the_human_reaches_the_reference_of_a_synthetic_page() -> None:
    ref = render(bg=NAVY, texts=[text("Title", 50, 60, 30, WHITE, 700)], boxes=[box(0, 300, 640, 100, ORANGE)])
    sketch = Sketch(texts=[Text("Welcome", 32, 32, 32, BLACK, True)])
    for _ in range(3):
        agent = render(
            sketch.background,
            [text(t.text, t.x, t.y, t.size, t.colour, 700 if t.bold else 400) for t in sketch.texts],
            [box(b.x, b.y, b.w, b.h, b.colour) for b in sketch.boxes],
        )
        apply_feedback(sketch, say(agent, ref))
    assert find_differences(agent, ref) == []


def test_unknown_sentences_change_nothing() -> None:
    sketch = Sketch()
    apply_feedback(sketch, "I like it, but make it pop. The bottom part of the page still looks different.")
    assert sketch == Sketch()


def context(replies: list[str], turn: int) -> Context:
    messages = [Message("user", "I need a page...")]
    for r in replies:
        messages += [Message("assistant", "```html\n<p>x</p>\n```"), Message("user", r)]
    return Context(messages=tuple(messages), turn=turn)


def test_follower_replies_with_html_and_answers_when_close_or_out_of_turns() -> None:
    follower = FeedbackFollower(max_turns=4)
    first = follower.reply(context([], 0))
    assert not first.startswith(ANSWER_MARKER) and extract_html(first) is not None
    assert follower.reply(context(["x"] * 3, 3)).startswith(ANSWER_MARKER)
    assert follower.reply(context([CLOSE_ENOUGH], 1)).startswith(ANSWER_MARKER)


def test_follower_is_stateless_and_deterministic() -> None:
    ctx = context(["The main background colour should be navy, not white."], 1)
    assert FeedbackFollower().act([ctx, ctx])[0].text == FeedbackFollower().reply(ctx)
    assert "background:rgb(15,55,95)" in FeedbackFollower().reply(ctx)
