"""Read an observation back into elements: what scripted policies (and tests) use instead of the DOM.

:func:`parse_page` inverts :func:`~turnkit.envs.web.miniwob.observe.format_page`: the instruction and one
:class:`Element` per listed line, with the ref of the listed element that contains it.

Example:
    >>> page = parse_page(
    ...     'Instruction: Select AlWW and click Submit.\\nPage:\\n[1] label "AlWW"\\n'
    ...     '  [2] input checkbox checked=false\\n[5] select selected="a" options="a" | "b \\\\"c\\\\""\\n'
    ...     '[6] button "Submit" (focused)'
    ... )
    >>> page.instruction
    'Select AlWW and click Submit.'
    >>> [(e.ref, e.tag, e.type, e.text, e.checked, e.parent) for e in page.elements[:2]]
    [(1, 'label', '', 'AlWW', None, None), (2, 'input', 'checkbox', '', False, 1)]
    >>> page.elements[2].options, page.elements[3].focused
    (('a', 'b "c"'), True)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from turnkit.envs.web.miniwob.observe import INDENT

_LINE = re.compile(r"^(?P<indent>(?: {2})*)\[(?P<ref>\d+)\] (?P<tag>[\w:-]+)(?P<rest>.*)$")
_KEY = re.compile(r"(\w+)=")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Element:
    """One listed element.

    Attributes:
        ref: Its ref number.
        tag: Lower-case tag name.
        type: The ``type`` of an ``input`` (``""`` otherwise).
        text: Its text (``""`` without).
        value: A field's value, or ``None``.
        checked: A checkbox's or radio button's state, or ``None``.
        selected: A list's chosen option, or ``None``.
        options: A list's options.
        focused: Whether it has the focus.
        disabled: Whether it is disabled.
        parent: The ref of the listed element it is nested in, or ``None``.
    """

    ref: int
    tag: str
    type: str = ""
    text: str = ""
    value: str | None = None
    checked: bool | None = None
    selected: str | None = None
    options: tuple[str, ...] = ()
    focused: bool = False
    disabled: bool = False
    parent: int | None = None


@dataclass(frozen=True)
class PageView:
    """An observation's instruction and elements.

    Attributes:
        instruction: MiniWoB's utterance.
        elements: The listed elements in page order.
    """

    instruction: str
    elements: tuple[Element, ...]

    def find(self, tag: str | None = None, text: str | None = None, *, type: str | None = None) -> list[Element]:
        """Elements with this tag (``None``: any), exact text (``None``: any) and input type (``None``: any).

        Example:
            >>> page = PageView("", (Element(1, "button", text="OK"), Element(2, "input", type="text")))
            >>> [e.ref for e in page.find("button", "OK")], [e.ref for e in page.find(type="text")]
            ([1], [2])
        """
        return [
            e
            for e in self.elements
            if (tag is None or e.tag == tag) and (text is None or e.text == text) and (type is None or e.type == type)
        ]

    def children(self, ref: int) -> list[Element]:
        """The elements listed directly under ``ref``."""
        return [e for e in self.elements if e.parent == ref]


def _value(rest: str, pos: int) -> tuple[object, int]:
    if rest.startswith(("true", "false"), pos):
        word = "true" if rest.startswith("true", pos) else "false"
        return word == "true", pos + len(word)
    return _DECODER.raw_decode(rest, pos)


def _element(ref: int, tag: str, rest: str, parent: int | None) -> Element:
    fields: dict[str, object] = {"ref": ref, "tag": tag, "parent": parent}
    pos = 0
    while pos < len(rest):
        if rest[pos] == " ":
            pos += 1
        elif rest[pos] == '"':
            fields["text"], pos = _DECODER.raw_decode(rest, pos)
        elif rest.startswith(("(focused)", "(disabled)"), pos):
            word = rest[pos + 1 : rest.index(")", pos)]
            fields[word] = True
            pos += len(word) + 2
        elif (m := _KEY.match(rest, pos)) is not None:
            key, pos = m.group(1), m.end()
            if key == "options":
                options: list[str] = []
                while True:
                    option, pos = _DECODER.raw_decode(rest, pos)
                    options.append(str(option))
                    if not rest.startswith(" | ", pos):
                        break
                    pos += 3
                fields["options"] = tuple(options)
            else:
                value, pos = _value(rest, pos)
                if key in ("value", "checked", "selected"):
                    fields[key] = value
        else:
            end = rest.find(" ", pos)
            end = len(rest) if end < 0 else end
            fields["type"] = rest[pos:end]
            pos = end
    return Element(**fields)  # type: ignore[arg-type]


def parse_page(observation: str) -> PageView | None:
    """The page in an observation, or ``None`` when it shows none (feedback only, or the final reward)."""
    head, sep, listing = observation.partition("\nPage:\n")
    if not sep or "Instruction: " not in head:
        return None
    instruction = head.rsplit("Instruction: ", 1)[1].strip()
    elements: list[Element] = []
    stack: list[int] = []  # refs of the open ancestors, by depth
    for line in listing.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        depth = len(m.group("indent")) // len(INDENT)
        del stack[depth:]
        parent = stack[-1] if stack else None
        try:
            element = _element(int(m.group("ref")), m.group("tag"), m.group("rest"), parent)
        except (ValueError, TypeError):  # a line a page's text made unreadable: skip it
            continue
        elements.append(element)
        stack.append(element.ref)
    return PageView(instruction, tuple(elements))


def latest_page(observations: Iterable[str]) -> PageView | None:
    """The last page shown in a sequence of observations (invalid-action feedback shows none)."""
    page = None
    for obs in observations:
        parsed = parse_page(obs)
        if parsed is not None:
            page = parsed
    return page
