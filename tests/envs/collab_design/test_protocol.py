from __future__ import annotations

from turnkit.envs.collab_design.protocol import extract_html, split_answer


def test_answer_marker_anywhere_splits_off_the_answer() -> None:
    assert split_answer("ok. I WANT TO ANSWER: ```html\n<p>x</p>\n```") == (True, " ```html\n<p>x</p>\n```")
    assert split_answer("<p>x</p>") == (False, "<p>x</p>")


def test_html_fence_wins_over_other_fences() -> None:
    msg = "```css\nbody{}\n```\n```html\n<p>page</p>\n```"
    assert extract_html(msg) == "<p>page</p>"


def test_untagged_fence_with_markup_is_html() -> None:
    assert extract_html("```\n<div>a</div>\n```") == "<div>a</div>"


def test_unclosed_fence_runs_to_the_end() -> None:
    assert extract_html("```html\n<body><p>cut off") == "<body><p>cut off"


def test_raw_markup_is_trimmed_to_the_tags() -> None:
    assert extract_html("Here it is: <!doctype html><html><body>x</body></html> Enjoy!") == (
        "<!doctype html><html><body>x</body></html>"
    )


def test_text_and_code_without_markup_have_no_html() -> None:
    for msg in ("What colours do you like?", "```python\nprint('<')\n```", "a < b and c > d", "9**9**9"):
        assert extract_html(msg) is None, msg


def test_uppercase_doctype_is_kept() -> None:
    assert extract_html("Page: <!DOCTYPE html><p>x</p>") == "<!DOCTYPE html><p>x</p>"
