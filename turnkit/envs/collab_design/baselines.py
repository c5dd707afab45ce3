"""Reference policies without privileged data: a feedback follower and its answer-at-once ablation.

:class:`FeedbackFollower` keeps a *sketch* of the page (background, absolutely positioned boxes and
texts), starts from a generic guess and applies every instruction of the rule-based human (the sentence
shapes of :data:`~turnkit.envs.collab_design.differences.SENTENCE_SHAPES`), mapping colour names back with
:func:`~turnkit.envs.collab_design.colours.colour_value`. It is stateless: each turn it replays all the
human's replies of the conversation, so it batches, branches and snapshots like any agent. It answers
(``I WANT TO ANSWER:``) when the human says the page is close, or on the last turn.

``FeedbackFollower(answer_at_once=True)`` submits the generic first guess immediately: the baseline that
shows what the dialogue adds.

Example:
    >>> from turnkit.agents.base import Context
    >>> from turnkit.types import Message
    >>> follower = FeedbackFollower()
    >>> sketch = follower.sketch([
    ...     "The main background colour should be navy, not white.",
    ...     'Add the text "Hi there" (30 px, bold, white) at the top left (at x=20, y=40).',
    ... ])
    >>> sketch.background, [(t.text, t.x, t.y, t.size, t.colour, t.bold) for t in sketch.texts][-1]
    ((15, 55, 95), ('Hi there', 20, 40, 30, (255, 255, 255), True))
    >>> ctx = Context(messages=(Message("user", "I need a page..."),), turn=0)
    >>> FeedbackFollower(answer_at_once=True).act([ctx])[0].text.startswith("I WANT TO ANSWER:")
    True
"""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from turnkit.agents.base import Context
from turnkit.envs.collab_design.colours import NAMED_COLOURS, colour_value
from turnkit.envs.collab_design.human import CLOSE_ENOUGH
from turnkit.envs.collab_design.protocol import ANSWER_MARKER
from turnkit.types import AgentTurn

RGB = tuple[int, int, int]
_C = r"(?P<c>[a-z][a-z -]*?)"
_SHAPE = r"(?P<shape>button|bar|banner|column|small square|box)"
_XY = r"x=(?P<x>-?\d+), y=(?P<y>-?\d+)"
_T = r'"(?P<t>[^"]*)"'

PATTERNS: dict[str, re.Pattern[str]] = {
    "background": re.compile(
        r"The main background colour should be (?:a bit (?P<ld>lighter|darker)|" + _C + r", not )"
    ),
    "add_box": re.compile(rf"Add a {_C} {_SHAPE} [a-z ]+? \(about (?P<w>\d+)x(?P<h>\d+) px at {_XY}\)\."),
    "box_colour": re.compile(
        rf"The {_SHAPE} [a-z ]+? \({_XY}\) should be (?:a bit (?P<ld>lighter|darker)|{_C}, not [a-z -]+)\."
    ),
    "box_geometry": re.compile(
        rf"The [a-z -]+? {_SHAPE} [a-z ]+? \({_XY}\) should be about (?P<w>\d+)x(?P<h>\d+) px at "
        r"x=(?P<nx>-?\d+), y=(?P<ny>-?\d+)\."
    ),
    "remove_box": re.compile(rf"Remove the [a-z -]+? {_SHAPE} [a-z ]+? \({_XY}\)\."),
    "add_text": re.compile(
        rf"Add the text {_T} \((?P<size>\d+) px, (?P<bold>bold|normal), {_C}\) [a-z ]+? \(at {_XY}\)\."
    ),
    "wording": re.compile(r'Change "(?P<a>[^"]*)" to ' + _T + r"\."),
    "move_text": re.compile(rf"Move {_T} [a-z ]+? \(to about {_XY}\)\."),
    "text_size": re.compile(rf"Make {_T} (?:bigger|smaller) \(about (?P<size>\d+) px\)\."),
    "text_colour": re.compile(rf"Make {_T} (?:a bit (?P<ld>lighter|darker)|{_C}, not [a-z -]+)\."),
    "text_weight": re.compile(rf"Make {_T} (?P<b>bold|not bold)\."),
    "remove_text": re.compile(rf"Remove the text {_T}\."),
}
"""One pattern per instruction the follower understands."""


@dataclass
class Box:
    """An absolutely positioned coloured rectangle."""

    x: int
    y: int
    w: int
    h: int
    colour: RGB


@dataclass
class Text:
    """An absolutely positioned single-line text."""

    text: str
    x: int
    y: int
    size: int
    colour: RGB
    bold: bool


@dataclass
class Sketch:
    """The follower's model of the page."""

    background: RGB = (255, 255, 255)
    boxes: list[Box] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)

    def html(self) -> str:
        """The sketch as HTML (boxes largest first, so that small ones stay visible; texts on top).

        Example:
            >>> "background:rgb(1,2,3)" in Sketch(background=(1, 2, 3)).html()
            True
        """

        def rgb(c: RGB) -> str:
            return f"rgb({c[0]},{c[1]},{c[2]})"

        parts = [
            "<!doctype html><html><head><meta charset='utf-8'><style>*{margin:0;padding:0}"
            f"body{{background:{rgb(self.background)};font-family:'DejaVu Sans',sans-serif}}"
            "div{position:absolute}</style></head><body>"
        ]
        for b in sorted(self.boxes, key=lambda b: -(b.w * b.h)):
            parts.append(
                f'<div style="left:{b.x}px;top:{b.y}px;width:{b.w}px;height:{b.h}px;background:{rgb(b.colour)}"></div>'
            )
        for t in self.texts:
            weight = "bold" if t.bold else "normal"
            parts.append(
                f'<div style="left:{t.x}px;top:{t.y}px;font-size:{t.size}px;color:{rgb(t.colour)};'
                f'font-weight:{weight};white-space:nowrap">{html_lib.escape(t.text)}</div>'
            )
        parts.append("</body></html>")
        return "".join(parts)


def _initial_sketch() -> Sketch:
    return Sketch(
        texts=[
            Text("Welcome", 32, 32, 32, (17, 17, 17), True),
            Text("We are glad you are here.", 32, 84, 16, (80, 80, 80), False),
        ]
    )


def _lighten(c: RGB, how: str) -> RGB:
    step = 6 if how == "lighter" else -24
    r, g, b = (min(255, max(0, v + step)) for v in c)
    return (r, g, b)


def _colour(name: str | None) -> RGB | None:
    return colour_value(name) if name in NAMED_COLOURS else None


def _nearest_box(sketch: Sketch, x: int, y: int) -> Box | None:
    best = min(sketch.boxes, key=lambda b: abs(b.x - x) + abs(b.y - y), default=None)
    if best is None or abs(best.x - x) + abs(best.y - y) > 8:
        return None
    return best


def _text(sketch: Sketch, text: str) -> Text | None:
    return next((t for t in sketch.texts if t.text == text), None)


def apply_feedback(sketch: Sketch, reply: str) -> None:
    """Apply every instruction found in one human reply to ``sketch`` (in place; unknown text is ignored).

    Example:
        >>> s = Sketch(); apply_feedback(s, "Add a navy bar across the top (about 640x56 px at x=0, y=0).")
        >>> s.boxes
        [Box(x=0, y=0, w=640, h=56, colour=(15, 55, 95))]
    """
    for kind, pattern in PATTERNS.items():
        for m in pattern.finditer(reply):
            g = m.groupdict()
            if kind == "background":
                colour = _colour(g.get("c"))
                sketch.background = _lighten(sketch.background, g["ld"]) if g.get("ld") else colour or sketch.background
            elif kind == "add_box":
                colour = _colour(g["c"])
                if colour is not None:
                    sketch.boxes.append(Box(int(g["x"]), int(g["y"]), int(g["w"]), int(g["h"]), colour))
            elif kind == "box_colour":
                box = _nearest_box(sketch, int(g["x"]), int(g["y"]))
                if box is not None:
                    box.colour = _lighten(box.colour, g["ld"]) if g.get("ld") else _colour(g["c"]) or box.colour
            elif kind == "box_geometry":
                box = _nearest_box(sketch, int(g["x"]), int(g["y"]))
                if box is not None:
                    box.x, box.y, box.w, box.h = int(g["nx"]), int(g["ny"]), int(g["w"]), int(g["h"])
            elif kind == "remove_box":
                box = _nearest_box(sketch, int(g["x"]), int(g["y"]))
                if box is not None:
                    sketch.boxes.remove(box)
            elif kind == "add_text":
                colour = _colour(g["c"]) or (0, 0, 0)
                sketch.texts.append(Text(g["t"], int(g["x"]), int(g["y"]), int(g["size"]), colour, g["bold"] == "bold"))
            else:
                _edit_text(sketch, kind, g)


def _edit_text(sketch: Sketch, kind: str, g: dict[str, str | None]) -> None:
    if kind == "wording":
        t = _text(sketch, str(g["a"]))
        if t is not None:
            t.text = str(g["t"])
        return
    t = _text(sketch, str(g["t"]))
    if t is None:
        return
    if kind == "move_text":
        t.x, t.y = int(str(g["x"])), int(str(g["y"]))
    elif kind == "text_size":
        t.size = int(str(g["size"]))
    elif kind == "text_colour":
        t.colour = _lighten(t.colour, str(g["ld"])) if g.get("ld") else _colour(g.get("c")) or t.colour
    elif kind == "text_weight":
        t.bold = g["b"] == "bold"
    elif kind == "remove_text":
        sketch.texts.remove(t)


class FeedbackFollower:
    """A scripted designer that follows the rule-based human's instructions (see the module docstring).

    Args:
        max_turns: The env's turn limit (the follower answers on the last turn).
        answer_at_once: Submit the first guess as the final answer (the no-dialogue baseline).
    """

    def __init__(self, max_turns: int = 10, answer_at_once: bool = False) -> None:
        self.max_turns = max_turns
        self.answer_at_once = answer_at_once

    def sketch(self, replies: Sequence[str]) -> Sketch:
        """The sketch after applying ``replies`` (the human's messages, oldest first) to the first guess."""
        s = _initial_sketch()
        for reply in replies:
            apply_feedback(s, reply)
        return s

    def reply(self, context: Context) -> str:
        """This turn's message: the sketch's HTML, as the answer when done."""
        replies = [m.content for m in context.messages[1:] if m.role == "user"]
        html = self.sketch(replies).html()
        done = self.answer_at_once or context.turn >= self.max_turns - 1
        done = done or bool(replies and replies[-1].strip() == CLOSE_ENOUGH)
        return f"{ANSWER_MARKER}\n```html\n{html}\n```" if done else f"```html\n{html}\n```"

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One reply per context."""
        return [AgentTurn(text=self.reply(c)) for c in contexts]
