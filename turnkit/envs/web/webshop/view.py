"""What a shopper sees of a page: its text lines with clickable labels in brackets, the links, the search box.

Two readers of the same page give the same :class:`PageView`: :func:`parse_page` reads the server's HTML
with Python's ``html.parser`` (the fast ``render="text"`` path), and :data:`PAGE_VIEW_JS` reads the live DOM
in Chromium (``render="chromium"``). Both walk the elements of class ``line`` (outermost only) in document
order: text is kept, ``<a href>`` becomes ``[label]``, inputs, scripts and styles are skipped, and runs of
whitespace collapse to one space.

Example:
    >>> view = parse_page('<div class="line"><a href="/s/1/">Back to Search</a> Page 1 &amp; more</div>')
    >>> view.lines, view.labels, view.href("Back to Search")
    (('[Back to Search] Page 1 & more',), ('Back to Search',), '/s/1/')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

_SPACE = re.compile(r"\s+")
_VOID = frozenset(("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track"))
_SKIP = frozenset(("script", "style", "input", "textarea", "select"))


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


@dataclass(frozen=True)
class PageView:
    """A page as text.

    Attributes:
        lines: The page's lines, links shown as ``[label]``.
        links: ``(label, href)`` of every link, in document order.
        has_search: The page has the search box (``search[...]`` is possible).
    """

    lines: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    has_search: bool

    @property
    def labels(self) -> tuple[str, ...]:
        """The clickable labels, in document order."""
        return tuple(label for label, _ in self.links)

    def href(self, label: str) -> str | None:
        """The target of the first link labelled ``label`` (case-insensitive), or ``None``."""
        want = label.strip().lower()
        for name, href in self.links:
            if name.lower() == want:
                return href
        return None

    @classmethod
    def from_json(cls, data: dict) -> PageView:
        """Build from :data:`PAGE_VIEW_JS`'s result."""
        return cls(tuple(data["lines"]), tuple((str(a), str(b)) for a, b in data["links"]), bool(data["has_search"]))


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.links: list[tuple[str, str]] = []
        self.has_search = False
        self._depth = 0  # open elements inside the current line (0: not in a line)
        self._parts: list[str] = []
        self._link: tuple[str, list[str], int] | None = None  # href, label parts, depth at open
        self._skip_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "input" and a.get("name") == "q":
            self.has_search = True
        if tag in _VOID:
            return
        if self._depth == 0:
            if "line" in (a.get("class") or "").split():
                self._depth, self._parts = 1, []
            return
        self._depth += 1
        if self._skip_depth or tag in _SKIP:
            self._skip_depth += 1
        elif tag == "a" and a.get("href") is not None and self._link is None:
            self._link = (a["href"] or "", [], self._depth)

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID or self._depth == 0:
            return
        if self._skip_depth:
            self._skip_depth -= 1
        elif self._link is not None and self._link[2] == self._depth:
            label = _norm("".join(self._link[1]))
            self.links.append((label, self._link[0]))
            self._parts.append(f" [{label}] ")
            self._link = None
        self._depth -= 1
        if self._depth == 0:
            self.lines.append(_norm("".join(self._parts)))

    def handle_data(self, data: str) -> None:
        if self._depth and not self._skip_depth:
            (self._link[1] if self._link is not None else self._parts).append(data)


def parse_page(html: str) -> PageView:
    """Read a shop page's HTML into a :class:`PageView` (the ``render="text"`` reader)."""
    reader = _Reader()
    reader.feed(html)
    reader.close()
    return PageView(tuple(reader.lines), tuple(reader.links), reader.has_search)


PAGE_VIEW_JS = r"""(() => {
  const norm = (s) => s.replace(/\s+/g, ' ').trim();
  const skip = new Set(['SCRIPT', 'STYLE', 'INPUT', 'TEXTAREA', 'SELECT']);
  const lines = [], links = [];
  for (const el of document.querySelectorAll('.line')) {
    if (el.parentElement && el.parentElement.closest('.line')) continue;
    const parts = [];
    const walk = (node) => {
      for (const c of node.childNodes) {
        if (c.nodeType === Node.TEXT_NODE) parts.push(c.data);
        else if (c.nodeType === Node.ELEMENT_NODE && !skip.has(c.tagName)) {
          if (c.tagName === 'A' && c.hasAttribute('href')) {
            const label = norm(c.textContent);
            links.push([label, c.getAttribute('href')]);
            parts.push(' [' + label + '] ');
          } else walk(c);
        }
      }
    };
    walk(el);
    lines.push(norm(parts.join('')));
  }
  return {lines, links, has_search: !!document.querySelector('input[name="q"]')};
})()"""
"""Reads the live DOM into :meth:`PageView.from_json`'s input (the ``render="chromium"`` reader)."""
