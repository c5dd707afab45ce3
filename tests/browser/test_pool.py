"""The shared browser pool: reference counting, one Chromium per setting, clean-up, typed failures."""

from __future__ import annotations

import copy
import gc

import pytest

from turnkit.browser import BrowserError, BrowserPool, RenderCache, launched_profiles, pids_with

PAGE = "<body style='margin:0;background:#00ff00'><p>pooled</p></body>"


def test_holders_share_one_process_and_the_last_release_stops_it(browser: object) -> None:
    pool = BrowserPool()
    cache = RenderCache(0)
    held = [pool.acquire(viewport=(64, 48), timeout_s=3.0, cache=cache) for _ in range(4)]
    assert all(b is held[0] for b in held) and pool.holders(held[0]) == 4
    before = len(launched_profiles())
    for b in held:
        assert tuple(int(v) for v in b.render(PAGE).pixels[40, 60]) == (0, 255, 0)
    assert len(launched_profiles()) == before + 1  # four holders, one Chromium
    profile = launched_profiles()[-1]
    for b in held[:3]:
        pool.release(b)
    assert held[0].running and pids_with(profile)
    pool.release(held[3])
    assert not held[0].running and pids_with(profile) == [] and len(pool) == 0


def test_releasing_too_often_is_an_error() -> None:
    pool = BrowserPool()
    b = pool.acquire(viewport=(64, 48))
    pool.release(b)
    with pytest.raises(BrowserError, match="does not hold"):
        pool.release(b)
    with pytest.raises(BrowserError, match="does not hold"):
        pool.retain(b)


def test_a_lease_is_released_by_garbage_collection_and_copies_hold_their_own() -> None:
    pool = BrowserPool()
    lease = pool.lease(viewport=(64, 48), timeout_s=3.0, cache=RenderCache(0))
    b = lease.browser
    b.render(PAGE)
    profile = launched_profiles()[-1]
    twin = copy.deepcopy(lease)
    assert pool.holders(b) == 2
    lease.release()
    assert b.running and lease.active is False and twin.active
    del twin
    gc.collect()
    assert len(pool) == 0 and not b.running and pids_with(profile) == []


def test_a_broken_shared_browser_raises_a_typed_error_for_every_holder() -> None:
    pool = BrowserPool()
    a = pool.acquire(viewport=(64, 48), executable="/bin/true", start_timeout_s=3.0, cache=RenderCache(0))
    b = pool.acquire(viewport=(64, 48), executable="/bin/true", start_timeout_s=3.0, cache=RenderCache(0))
    assert a is not b  # distinct caches are distinct settings
    for x in (a, b):
        with pytest.raises(BrowserError):
            x.render(PAGE)
        pool.release(x)
    assert len(pool) == 0


def test_a_pickled_lease_is_adopted_by_the_receiving_pool_with_a_fresh_browser() -> None:
    import pickle

    from turnkit.browser import shared_pool

    pool = BrowserPool()
    lease = pool.lease(viewport=(64, 48), timeout_s=3.0)
    clone = pickle.loads(pickle.dumps(lease))
    assert clone.browser is not lease.browser and clone.browser.viewport == (64, 48)
    assert shared_pool().holders(clone.browser) == 1 and not clone.browser.running
    clone.release()
    lease.release()
    assert shared_pool().holders(clone.browser) == 0 and len(pool) == 0
    with pytest.raises(BrowserError, match="already holds"):
        b = pool.acquire(viewport=(64, 48))
        try:
            pool.adopt(b)
        finally:
            pool.release(b)
