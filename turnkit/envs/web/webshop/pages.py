"""The shop's HTML pages: home (search box), result pages, product pages and the purchase page.

Every line a shopper reads is an element of class ``line``; clickable things are ``<a href>`` links whose
text is their label (``Back to Search``, ``Next >``, product ids, option values, ``Buy Now``). Both
renderers read the page this way (:mod:`~turnkit.envs.web.webshop.view`), so they give the same labels.

Example:
    >>> html = home_page("/s/1")
    >>> '<input name="q"' in html and 'class="line"' in html
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from urllib.parse import quote, urlencode

from turnkit.envs.web.webshop.catalogue import Product
from turnkit.envs.web.webshop.reward import RewardParts

BACK_TO_SEARCH = "Back to Search"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BUY_NOW = "Buy Now"

_STYLE = """body{font-family:sans-serif;margin:16px;color:#222;background:#fafafa}
.line{margin:4px 0}a{color:#0645ad;margin-right:8px}h1{font-size:20px}.price{color:#b12704}
.selected{font-weight:bold;background:#ffe9a8;padding:1px 4px}.note{color:#666}.product{font-family:monospace}"""


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>{body}</body></html>"
    )


def _link(href: str, label: str, css: str = "") -> str:
    cls = f' class="{css}"' if css else ""
    return f'<a href="{escape(href, quote=True)}"{cls}>{escape(label)}</a>'


def search_url(base: str, query: str, page: int) -> str:
    """The URL of result page ``page`` (1-based) of ``query``.

    Example:
        >>> search_url("/s/1", "red shirt", 2), item_url("/s/1", "B0ABCDEFGH")
        ('/s/1/search?q=red+shirt&p=2', '/s/1/item/B0ABCDEFGH')
    """
    return f"{base}/search?{urlencode({'q': query, 'p': page})}"


def item_url(base: str, pid: str) -> str:
    """The URL of product ``pid``'s page."""
    return f"{base}/item/{quote(pid)}"


def home_page(base: str) -> str:
    """The start page: a search box."""
    form = (
        f'<form class="line" action="{escape(base, quote=True)}/search" method="get">'
        '<input name="q" size="60" placeholder="Search"><button type="submit">Search</button></form>'
    )
    return _page("WebShop", f'<h1 class="line">WebShop</h1><div class="line">Search for a product.</div>{form}')


def results_page(base: str, query: str, hits: Sequence[Product], page: int, per_page: int) -> str:
    """One page of search results for ``query``."""
    pages = max(1, -(-len(hits) // per_page))
    shown = hits[(page - 1) * per_page : page * per_page]
    nav = [_link(base + "/", BACK_TO_SEARCH)]
    if page > 1:
        nav.append(_link(search_url(base, query, page - 1), PREV_PAGE))
    if page < pages:
        nav.append(_link(search_url(base, query, page + 1), NEXT_PAGE))
    head = f"Page {page} of {pages} ({len(hits)} results) for: {escape(query)}"
    rows = [
        f'<div class="line">{_link(item_url(base, p.pid), p.pid, "product")}'
        f'<span>{escape(p.title)}</span> <span class="price">${p.price:.2f}</span></div>'
        for p in shown
    ]
    if not shown:
        rows = ['<div class="line">No products match your search.</div>']
    body = f'<div class="line">{"".join(nav)}</div><div class="line">{head}</div>{"".join(rows)}'
    return _page("WebShop results", body)


def item_page(base: str, product: Product, selected: Mapping[str, str], back_href: str | None) -> str:
    """Product ``product``'s page: title, price, features, option buttons and Buy Now."""
    nav = [_link(base + "/", BACK_TO_SEARCH)]
    if back_href is not None:
        nav.append(_link(back_href, PREV_PAGE))
    lines = [
        f'<div class="line">{"".join(nav)}</div>',
        f'<h1 class="line">{escape(product.title)}</h1>',
        f'<div class="line">Price: <span class="price">${product.price:.2f}</span></div>',
        f'<div class="line">Features: {escape(", ".join(product.attributes))}</div>',
    ]
    for group, values in product.options:
        buttons = []
        for value in values:
            href = f"{item_url(base, product.pid)}/select?{urlencode({'group': group, 'value': value})}"
            chosen = selected.get(group) == value
            buttons.append(_link(href, value, "option selected" if chosen else "option"))
            if chosen:
                buttons.append('<span class="note">(selected)</span> ')
        lines.append(f'<div class="line">{escape(group)}: {"".join(buttons)}</div>')
    lines.append(f'<div class="line">{_link(item_url(base, product.pid) + "/buy", BUY_NOW, "buy")}</div>')
    return _page(product.title, "".join(lines))


def done_page(product: Product, selected: Mapping[str, str], parts: RewardParts) -> str:
    """The purchase confirmation with the reward."""
    options = ", ".join(f"{g}: {v}" for g, v in selected.items()) or "none"
    body = (
        '<h1 class="line">Thank you for shopping with us!</h1>'
        f'<div class="line">You bought {escape(product.pid)}: {escape(product.title)} '
        f'for <span class="price">${product.price:.2f}</span> (options: {escape(options)}).</div>'
        f'<div class="line" id="reward" data-reward="{parts.total!r}">Your score: {parts.total:.3f}</div>'
    )
    return _page("WebShop done", body)


def error_page(message: str) -> str:
    """A page for a bad request (unknown product, unknown option)."""
    return _page("WebShop error", f'<div class="line">{escape(message)}</div>')
