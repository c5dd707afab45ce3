"""Keyword search over a shop: products ranked by how many distinct query words they contain.

A product's searchable text is its title, attributes and category path. Ties keep the shop's own order,
so results are deterministic. WebShop searches 1.18M products with Lucene BM25; a 35-product shop needs
no index.

Example:
    >>> from turnkit.envs.web.webshop.catalogue import generate_shop, find_target
    >>> shop, goal = generate_shop(3, "id")
    >>> hits = search(shop, goal.instruction())
    >>> find_target(shop, goal).pid in [p.pid for p in hits[:RESULTS_PER_PAGE]]
    True
"""

from __future__ import annotations

from functools import lru_cache

from turnkit.envs.web.webshop.catalogue import Product, Shop
from turnkit.envs.web.webshop.reward import words

RESULTS_PER_PAGE = 10
"""Products per result page (as in WebShop)."""

MAX_RESULTS = 50
"""Results kept per search (WebShop shows the top 50)."""

STOPWORDS = frozenset(
    (
        *("a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "i", "in", "is", "it", "looking"),
        *("lower", "me", "my", "need", "of", "on", "or", "price", "than", "the", "to", "want", "with", "dollars"),
    )
)
"""Query words that never count."""


@lru_cache(maxsize=4096)
def _doc_words(product: Product) -> frozenset[str]:
    return frozenset(words(" ".join((product.title, *product.attributes, *product.path))))


def search(shop: Shop, query: str) -> list[Product]:
    """Products matching at least one query word, best first, at most :data:`MAX_RESULTS`."""
    wanted = {w for w in words(query) if w not in STOPWORDS}
    scored = [(len(wanted & _doc_words(p)), i, p) for i, p in enumerate(shop.products)]
    hits = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
    return [p for _, _, p in hits[:MAX_RESULTS]]
