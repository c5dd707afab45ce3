"""Parse a policy's message into one MiniWoB action: ``click[ref]``, ``type[ref, text]`` or ``select[ref, option]``.

The first action found in the message is taken, so a policy may think aloud before (or after) it. Verbs are
case-insensitive; the ref may be written ``3``, ``[3]`` or ``#3``; the text runs from the first comma to the
last ``]`` of the line (a click's ref ends at its first ``]``), and one pair of surrounding quotes is removed
(``type[4, "Bob"]`` types ``Bob``).
Anything else is a :class:`ParseError` with a reason code and a message for the policy.

Example:
    >>> parse_action("I will press it: click[12]")
    Action(verb='click', ref=12, text='')
    >>> parse_action('TYPE[#4, "hello, world"]')
    Action(verb='type', ref=4, text='hello, world')
    >>> parse_action("select[2, Zimbabwe]")
    Action(verb='select', ref=2, text='Zimbabwe')
    >>> parse_action("press the blue one")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    turnkit.envs.web.miniwob.actions.ParseError: no action found; write click[ref], type[ref, text] or ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VERBS = ("click", "type", "select")
"""The action verbs."""

ACTION_HELP = "click[ref], type[ref, text] or select[ref, option]"
"""How actions are written (for feedback messages)."""

MALFORMED = "malformed_action"
"""``info["invalid_action"]`` of a message without a well-formed action."""

UNKNOWN_REF = "unknown_ref"
"""``info["invalid_action"]`` of an action on a ref that is not on the page (any more)."""

WRONG_ELEMENT = "wrong_element"
"""``info["invalid_action"]`` of an action that does not fit its element (typing into a button, an unknown option)."""

MAX_REF_DIGITS = 9
"""Refs are at most this many digits (no 10,000-digit integer conversions)."""

_START = re.compile(r"\b(click|type|select)\s*\[", re.IGNORECASE)
_REF = re.compile(r"\s*\[?\s*#?\s*(\d+)\s*\]?\s*")


class ParseError(ValueError):
    """A message with no well-formed action.

    Args:
        message: What is wrong, for the policy.
        reason: The ``info["invalid_action"]`` code (:data:`MALFORMED`).
    """

    def __init__(self, message: str, reason: str = MALFORMED) -> None:
        self.reason = reason
        super().__init__(message)


@dataclass(frozen=True)
class Action:
    """One parsed action.

    Attributes:
        verb: ``"click"``, ``"type"`` or ``"select"``.
        ref: The element's ref number from the observation.
        text: What to type, or the option to choose (``""`` for clicks).
    """

    verb: str
    ref: int
    text: str = ""

    def __str__(self) -> str:
        return f"{self.verb}[{self.ref}]" if self.verb == "click" else f"{self.verb}[{self.ref}, {self.text}]"


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        return text[1:-1]
    return text


def _ref(raw: str, verb: str) -> int:
    m = _REF.fullmatch(raw)
    if m is None or len(m.group(1)) > MAX_REF_DIGITS:
        shown = raw.strip()[:40]
        raise ParseError(f"{verb}[...] needs an element ref number from the page listing, got {shown!r}")
    return int(m.group(1))


def parse_action(message: str) -> Action:
    """The first action in ``message``.

    Raises:
        ParseError: No action, or a malformed one (the message says what is wrong).

    Example:
        >>> parse_action("type[3]")
        Traceback (most recent call last):
        ...
        turnkit.envs.web.miniwob.actions.ParseError: type needs a ref and a text: type[ref, text]
    """
    m = _START.search(message)
    if m is None:
        raise ParseError(f"no action found; write {ACTION_HELP}")
    verb = m.group(1).lower()
    line_end = message.find("\n", m.end())
    line = message[m.end() : len(message) if line_end < 0 else line_end]
    if verb == "click":  # the ref ends at its first "]" (or the second one of "click[[3]]")
        close = line.find("]", line.find("[") + 1 if line.lstrip().startswith("[") else 0)
    else:  # the text may contain "]": it ends at the line's last one
        close = line.rfind("]")
    if close < 0:
        raise ParseError(f"{verb}[ is not closed with ]; write {ACTION_HELP} on one line")
    args = line[:close]
    if verb == "click":
        if "," in args:
            raise ParseError("click takes only a ref: click[ref]")
        return Action("click", _ref(args, verb))
    ref_part, comma, rest = args.partition(",")
    if not comma:
        what = "text" if verb == "type" else "option"
        raise ParseError(f"{verb} needs a ref and a{'n' if what == 'option' else ''} {what}: {verb}[ref, {what}]")
    text = _unquote(rest.strip())
    if verb == "select" and not text.strip():
        raise ParseError("select needs an option: select[ref, option]")
    return Action(verb, _ref(ref_part, verb), text)
