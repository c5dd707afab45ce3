from __future__ import annotations

import pytest

from turnkit.browser import RenderCache


def test_key_depends_on_html_viewport_and_javascript() -> None:
    keys = {
        RenderCache.key("<p>a</p>", (640, 480), True),
        RenderCache.key("<p>b</p>", (640, 480), True),
        RenderCache.key("<p>a</p>", (320, 480), True),
        RenderCache.key("<p>a</p>", (640, 480), False),
    }
    assert len(keys) == 4
    assert RenderCache.key("<p>a</p>", (640, 480), True) == RenderCache.key("<p>a</p>", (640, 480), True)


def test_key_accepts_lone_surrogates() -> None:
    assert RenderCache.key("\ud800", (64, 48), True) != RenderCache.key("\ud801", (64, 48), True)


def test_evicts_least_recently_used() -> None:
    cache = RenderCache(max_entries=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3)
    assert cache.get("b") is None
    assert (cache.get("a"), cache.get("c"), len(cache)) == (1, 3, 2)


def test_counts_hits_and_misses_and_clears() -> None:
    cache = RenderCache(max_entries=4)
    cache.put("a", 1)
    cache.get("a")
    cache.get("zzz")
    assert (cache.hits, cache.misses) == (1, 1)
    cache.clear()
    assert (len(cache), cache.hits, cache.misses) == (0, 0, 0)


def test_zero_entries_disables_caching() -> None:
    cache = RenderCache(max_entries=0)
    cache.put("a", 1)
    assert cache.get("a") is None


def test_rejects_negative_size() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        RenderCache(max_entries=-1)
