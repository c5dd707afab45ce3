"""The text protocol of the design env: the answer marker, HTML extraction and the env's fixed replies.

Example:
    >>> split_answer("I WANT TO ANSWER: <p>hi</p>")
    (True, ' <p>hi</p>')
    >>> extract_html("Here you go:\\n```html\\n<h1>Hi</h1>\\n```\\nThanks")
    '<h1>Hi</h1>'
    >>> extract_html("Sure! <div>raw</div> hope it helps"), extract_html("What colour do you like?")
    ('<div>raw</div>', None)
"""

from __future__ import annotations

import re

ANSWER_MARKER = "I WANT TO ANSWER:"
"""Starts the final answer (ColBench's convention); the HTML after it is final."""

NO_HTML_REPLY = (
    "I can only judge the page itself: please send the complete HTML (ideally in a ```html code block) and "
    "I will tell you how it differs from what I want."
)
"""The human's reply to a message without HTML."""

PAGE_ERROR_REPLY = {
    "timeout": "Your page never finished loading (did a script loop forever?), so I see nothing. Please send "
    "plain HTML and CSS.",
    "crash": "Your page crashed the browser, so I see nothing. Please send plain HTML and CSS.",
}
"""The human's reply when the agent's page hangs or crashes the renderer."""

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_TAG = re.compile(r"<(!doctype\b|[a-zA-Z][a-zA-Z0-9-]*)(\s[^<>]*)?/?>", re.IGNORECASE)


def split_answer(message: str) -> tuple[bool, str]:
    """``(True, text after the marker)`` for a final answer, else ``(False, message)``."""
    at = message.find(ANSWER_MARKER)
    if at < 0:
        return False, message
    return True, message[at + len(ANSWER_MARKER) :]


def extract_html(message: str) -> str | None:
    """The HTML in a message, or ``None``.

    The first fenced block tagged ``html`` (or untagged, or any tag, if it contains markup) wins; without
    a fence, the span from the first tag to the last ``>`` is taken, so prose around raw HTML is dropped.

    Example:
        >>> extract_html("```python\\nprint(1)\\n```") is None
        True
    """
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(message)]
    for wanted in (lambda lang: lang == "html", lambda lang: lang in ("", "htm", "xhtml"), lambda lang: True):
        for lang, body in blocks:
            if wanted(lang) and _TAG.search(body):
                return body.strip()
    m = _TAG.search(message)
    if m is None:
        return None
    end = message.rfind(">")
    return message[m.start() : end + 1].strip()
