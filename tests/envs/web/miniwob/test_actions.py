"""Action parsing: the first well-formed action wins; everything else is a ParseError with a reason."""

from __future__ import annotations

import pytest

from turnkit.envs.web.miniwob.actions import MALFORMED, Action, ParseError, parse_action


@pytest.mark.parametrize(
    ("message", "action"),
    [
        ("click[3]", Action("click", 3)),
        ("  CLICK [ 3 ]  ", Action("click", 3)),
        ("click[[3]]", Action("click", 3)),
        ("click[#3] and then nothing", Action("click", 3)),
        ("Thinking... the Submit button is [7].\nclick[7]", Action("click", 7)),
        ("type[2, hello world]", Action("type", 2, "hello world")),
        ("type[2, 'quoted, with comma']", Action("type", 2, "quoted, with comma")),
        ('type[2, "a]b"]', Action("type", 2, "a]b")),
        ("type[2, ]", Action("type", 2, "")),
        ("select[5, United States]", Action("select", 5, "United States")),
        ("click[1] then click[2]", Action("click", 1)),
    ],
)
def test_well_formed_actions_parse(message: str, action: Action) -> None:
    assert parse_action(message) == action


@pytest.mark.parametrize(
    ("message", "match"),
    [
        ("", "no action"),
        ("press Submit", "no action"),
        ("click[3", "not closed"),
        ("click[three]", "ref number"),
        ("click[3, 4]", "only a ref"),
        ("type[3]", "a ref and a text"),
        ("select[3, ]", "needs an option"),
        ("select[3]", "a ref and an option"),
        ("click[" + "9" * 10_000 + "]", "ref number"),
        ("type[x" * 1000, "not closed"),
    ],
)
def test_malformed_actions_are_parse_errors(message: str, match: str) -> None:
    with pytest.raises(ParseError, match=match) as info:
        parse_action(message)
    assert info.value.reason == MALFORMED


def test_actions_print_as_they_are_written() -> None:
    assert [str(parse_action(a)) for a in ("click[ 4 ]", "type[1,'x']", "select[2, b]")] == [
        "click[4]",
        "type[1, x]",
        "select[2, b]",
    ]
