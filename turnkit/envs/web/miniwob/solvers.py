"""Scripted solvers: one rule per MiniWoB task, reading only what a policy reads (the observations).

A solver gets the latest page (:class:`~turnkit.envs.web.miniwob.view.PageView`) and the env's
observations so far (for tasks whose progress the page does not show, like ``click-button-sequence``) and
returns the next action. None of them reads ``task.privileged``. They back the family's oracle
(:mod:`turnkit.envs.web.miniwob.oracle`) and the success rates in ``docs/envs/miniwob.md``.

Example:
    >>> from turnkit.envs.web.miniwob.view import Element, PageView
    >>> page = PageView('Enter "Bo" into the text field and press Submit.',
    ...                 (Element(1, "input", "text", value=""), Element(2, "button", text="Submit")))
    >>> SOLVERS["enter-text"](page, ())
    'type[1, Bo]'
    >>> filled = PageView(page.instruction, (Element(1, "input", "text", value="Bo"), page.elements[1]))
    >>> SOLVERS["enter-text"](filled, ())
    'click[2]'
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Callable, Sequence

from turnkit.envs.web.miniwob.view import Element, PageView

Solver = Callable[[PageView, Sequence[str]], str]
"""``(latest page, observations so far) -> action``."""

_TEXT_FIELDS = ("text", "password", "number", "email", "search", "tel", "url")


class Unsolvable(ValueError):
    """The page does not look the way the solver expects (the message says what is missing)."""


def _match(pattern: str, instruction: str) -> re.Match[str]:
    m = re.search(pattern, instruction)
    if m is None:
        raise Unsolvable(f"instruction {instruction!r} does not match {pattern!r}")
    return m


def _one(elements: Sequence[Element], what: str) -> Element:
    if not elements:
        raise Unsolvable(f"no {what} on the page")
    return elements[0]


def _click(e: Element) -> str:
    return f"click[{e.ref}]"


def _button(page: PageView, text: str) -> Element:
    exact = page.find("button", text)
    loose = [e for e in page.find("button") if e.text.lower() == text.lower()]
    return _one(exact or loose, f"button {text!r}")


def _fields(page: PageView) -> list[Element]:
    return [e for e in page.elements if (e.tag == "input" and e.type in _TEXT_FIELDS) or e.tag == "textarea"]


def _fill_then(page: PageView, values: Sequence[str], submit: str) -> str:
    """Type ``values`` into the page's text fields in order, then click the ``submit`` button."""
    fields = _fields(page)
    if len(fields) < len(values):
        raise Unsolvable(f"{len(values)} values but only {len(fields)} text fields")
    for field, value in zip(fields, values, strict=False):
        if field.value != value:
            return f"type[{field.ref}, {value}]"
    return _click(_button(page, submit))


def _ordinal(text: str) -> int:
    return int(re.match(r"\d+", text).group(0))  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------- the solvers
def click_button(page: PageView, _: Sequence[str]) -> str:
    """Instruction: ``Click on the "X" button``."""
    return _click(_button(page, _match(r'Click on the "(.*)" button', page.instruction).group(1)))


def click_link(page: PageView, _: Sequence[str]) -> str:
    """``Click on the link "X".``: the first link-like element (``span``/``a``) with that text."""
    want = _match(r'Click on the link "(.*)"\.?$', page.instruction).group(1)
    return _click(_one([e for e in page.elements if e.tag in ("span", "a") and e.text == want], f"link {want!r}"))


def click_test(page: PageView, _: Sequence[str]) -> str:
    """``Click the button.``: the only button."""
    return _click(_one(page.find("button"), "button"))


def click_test_2(page: PageView, _: Sequence[str]) -> str:
    """Instruction: ``Click button ONE``."""
    return _click(_button(page, _match(r"Click button (\w+)", page.instruction).group(1)))


def click_button_sequence(page: PageView, observations: Sequence[str]) -> str:
    """``Click button ONE, then click button TWO.``: TWO once an observation says ONE was clicked."""
    first, second = _match(r"Click button (\w+), then click button (\w+)", page.instruction).groups()
    done = any(re.search(rf'^Clicked \[\d+\] button "{re.escape(first)}"', o) for o in observations)
    return _click(_button(page, second if done else first))


def _boxes(page: PageView, kind: str) -> list[tuple[str, Element]]:
    """``(label text, box)`` for each labelled checkbox or radio button."""
    out = []
    for label in page.find("label"):
        boxes = [c for c in page.children(label.ref) if c.tag == "input" and c.type == kind]
        if boxes:
            out.append((label.text, boxes[0]))
    return out


def click_checkboxes(page: PageView, _: Sequence[str]) -> str:
    """``Select A, B and click Submit.`` (or ``Select nothing``): fix one wrong box per turn, then submit."""
    names = _match(r"Select (.*) and click Submit", page.instruction).group(1)
    wanted = set() if names == "nothing" else {n.strip() for n in names.split(",")}
    for label, box in _boxes(page, "checkbox"):
        if bool(box.checked) != (label in wanted):
            return _click(box)
    return _click(_button(page, "Submit"))


def click_option(page: PageView, _: Sequence[str]) -> str:
    """``Select X and click Submit.`` with radio buttons."""
    want = _match(r"Select (.*) and click Submit", page.instruction).group(1)
    for label, box in _boxes(page, "radio"):
        if label == want and not box.checked:
            return _click(box)
    return _click(_button(page, "Submit"))


def choose_list(page: PageView, _: Sequence[str]) -> str:
    """Instruction: ``Select X from the list and click Submit``."""
    want = _match(r"Select (.*) from the list and click Submit", page.instruction).group(1)
    lst = _one(page.find("select"), "list")
    return f"select[{lst.ref}, {want}]" if lst.selected != want else _click(_button(page, "Submit"))


def enter_text(page: PageView, _: Sequence[str]) -> str:
    """Instruction: ``Enter "X" into the text field and press Submit``."""
    return _fill_then(page, [_match(r'Enter "(.*)" into the text field', page.instruction).group(1)], "Submit")


def enter_text_2(page: PageView, _: Sequence[str]) -> str:
    """Instruction: ``Type "X" in all upper/lower case letters in the text input and press Submit``."""
    text, case = _match(r'Type "(.*)" in all (upper|lower) case letters', page.instruction).groups()
    return _fill_then(page, [text.upper() if case == "upper" else text.lower()], "Submit")


def enter_password(page: PageView, _: Sequence[str]) -> str:
    """Instruction: ``Enter the password "X" into both text fields and press submit``."""
    word = _match(r'Enter the password "(.*)" into both', page.instruction).group(1)
    return _fill_then(page, [word, word], "Submit")


def login_user(page: PageView, _: Sequence[str]) -> str:
    """Instruction: ``Enter the username "U" and the password "P" into the text fields and press login``."""
    user, word = _match(r'username "(.*)" and the password "(.*)" into', page.instruction).groups()
    return _fill_then(page, [user, word], "Login")


def focus_text(page: PageView, _: Sequence[str]) -> str:
    """``Focus into the textbox.``: click it."""
    return _click(_one(_fields(page), "text field"))


def focus_text_2(page: PageView, _: Sequence[str]) -> str:
    """Instruction: ``Focus into the 2nd input textbox``."""
    n = _ordinal(_match(r"Focus into the (\d+\w*) input textbox", page.instruction).group(1))
    fields = _fields(page)
    if not 1 <= n <= len(fields):
        raise Unsolvable(f"no text field number {n}")
    return _click(fields[n - 1])


def click_dialog(page: PageView, _: Sequence[str]) -> str:
    """``Close the dialog box by clicking the "x".``: the dialog's close button."""
    return _click(_button(page, "Close"))


def click_dialog_2(page: PageView, _: Sequence[str]) -> str:
    """``Click the button in the dialog box labeled "X".`` (``"x"`` is the close button)."""
    want = _match(r'labeled "(.*)"', page.instruction).group(1)
    return _click(_button(page, "Close" if want == "x" else want))


def click_tab(page: PageView, _: Sequence[str]) -> str:
    """Instruction: ``Click on Tab #N``."""
    n = _match(r"Click on Tab #(\d+)", page.instruction).group(1)
    return _click(_one(page.find("a", f"Tab #{n}"), f"tab {n}"))


_OPS: dict[str, Callable[[int, int], int]] = {
    "+": operator.add,
    "-": operator.sub,
    "x": operator.mul,
    "*": operator.mul,
}


def simple_arithmetic(page: PageView, _: Sequence[str]) -> str:
    """A ``"3 + 8 ="`` problem: type the result, then submit."""
    for e in page.elements:
        m = re.fullmatch(r"(-?\d+) ([-+x*]) (-?\d+) =", e.text)
        if m is not None:
            answer = _OPS[m.group(2)](int(m.group(1)), int(m.group(3)))
            return _fill_then(page, [str(answer)], "Submit")
    raise Unsolvable("no arithmetic problem on the page")


def read_table(page: PageView, _: Sequence[str]) -> str:
    """``Enter the value of KEY into the text field``: the table cell after KEY's."""
    key = _match(r"Enter the value of (.*) into the text field", page.instruction).group(1)
    cells = page.find("td")
    for cell, value in itertools.pairwise(cells):
        if cell.text == key:
            return _fill_then(page, [value.text], "Submit")
    raise Unsolvable(f"no table row {key!r}")


SOLVERS: dict[str, Solver] = {
    "click-button": click_button,
    "click-link": click_link,
    "click-test": click_test,
    "click-test-2": click_test_2,
    "click-button-sequence": click_button_sequence,
    "click-checkboxes": click_checkboxes,
    "click-option": click_option,
    "choose-list": choose_list,
    "enter-text": enter_text,
    "enter-text-dynamic": enter_text,
    "enter-text-2": enter_text_2,
    "enter-password": enter_password,
    "login-user": login_user,
    "focus-text": focus_text,
    "focus-text-2": focus_text_2,
    "click-dialog": click_dialog,
    "click-dialog-2": click_dialog_2,
    "click-tab": click_tab,
    "simple-arithmetic": simple_arithmetic,
    "read-table": read_table,
}
"""The scripted solver of each solved task."""
