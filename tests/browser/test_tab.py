"""Tab: a live page whose requests a Python resolver answers; sharing, isolation, typed failures and recovery."""

from __future__ import annotations

import copy
import gc
import os
import pickle
import signal
import time
from collections.abc import Iterator

import numpy as np
import pytest

from turnkit.browser import BrowserError, PageError, Tab, TabRequest, TabResponse, launched_profiles, pids_with
from turnkit.browser.tab import running_hosts

from .conftest import _chromium_or_skip, exit_code_in_forked_child

SITE = "http://site.invalid/"
PAGES = {
    "": b"<!doctype html><body style='margin:0;background:#0000ff'><script src='/app.js'></script>"
    b"<img src='http://elsewhere.invalid/x.png'><img src='/missing.png'><p id=p>static</p></body>",
    "app.js": b"window.appLoaded = (window.appLoaded || 0) + 1;",
    "form": b"<form method=post action='/submit'><input name=q value='a b'><button id=go>go</button></form>",
    "submit": b"<p id=p>thanks</p>",
    "store": b"<script>localStorage.setItem('k', (localStorage.getItem('k') || '') + 'x')</script>",
}


class Site:
    """A resolver over :data:`PAGES` that records every request; ``/moved`` redirects, ``/boom`` raises."""

    def __init__(self) -> None:
        self.requests: list[TabRequest] = []

    def __call__(self, req: TabRequest) -> TabResponse | None:
        self.requests.append(req)
        if not req.url.startswith(SITE):
            return None
        path = req.url[len(SITE) :].split("?")[0]
        if path == "moved":
            return TabResponse(status=302, headers={"Location": SITE + "submit"})
        if path == "boom":
            raise KeyError("resolver bug")
        if path == "blocked":
            return None
        if path.endswith(".js") and path in PAGES:
            return TabResponse(body=PAGES[path], content_type="text/javascript")
        if path in PAGES:
            return TabResponse(body=PAGES[path])
        return TabResponse(status=404, body=b"not found", content_type="text/plain")


@pytest.fixture(scope="module")
def tab(no_chromium_left: None) -> Iterator[Tab]:
    """One tab for the module (its browser is shared by the other tabs the tests open)."""
    _chromium_or_skip()
    t = Tab(Site(), viewport=(320, 240), timeout_s=5.0)
    yield t
    t.close()


def _centre(tab: Tab, selector: str) -> tuple[float, float]:
    x, y = tab.evaluate(
        f"(() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect();"
        " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
    )
    return x, y


def test_the_resolver_serves_the_page_and_blocks_everything_else(tab: Tab) -> None:
    site: Site = tab.resolver  # type: ignore[assignment]
    site.requests.clear()
    served, blocked = tab.requests_served, tab.requests_blocked
    tab.goto(SITE)
    assert tab.evaluate("window.appLoaded") == 1 and tab.url == SITE
    assert tab.evaluate("document.getElementById('p').textContent") == "static"
    by_url = {r.url: r for r in site.requests}
    assert by_url[SITE].method == "GET" and by_url[SITE].resource_type == "Document" and by_url[SITE].post_data is None
    assert by_url[SITE + "app.js"].resource_type == "Script"
    assert "http://elsewhere.invalid/x.png" in by_url and SITE + "missing.png" in by_url
    assert tab.requests_blocked > blocked and tab.requests_served >= served + 3


def test_screenshot_is_the_viewport_as_rgb(tab: Tab) -> None:
    tab.goto(SITE)
    shot = tab.screenshot()
    assert shot.shape == (240, 320, 3) and shot.dtype == np.uint8
    assert tuple(int(v) for v in shot[200, 300]) == (0, 0, 255)


def test_clicks_submit_forms_and_the_post_reaches_the_resolver(tab: Tab) -> None:
    site: Site = tab.resolver  # type: ignore[assignment]
    tab.goto(SITE + "form")
    tab.click(*_centre(tab, "#go"))  # waits for the navigation the click started
    assert tab.url == SITE + "submit" and tab.evaluate("document.getElementById('p').textContent") == "thanks"
    post = next(r for r in reversed(site.requests) if r.url == SITE + "submit")
    assert post.method == "POST" and post.post_data == b"q=a+b"


def test_typing_and_keys_reach_the_focused_field(tab: Tab) -> None:
    tab.goto(SITE + "form")
    tab.evaluate("document.querySelector('input').select()")
    tab.insert_text("héllo")
    tab.press("Backspace")
    assert tab.evaluate("document.querySelector('input').value") == "héll"
    with pytest.raises(BrowserError, match="unknown key"):
        tab.press("F13")


def test_redirects_are_followed(tab: Tab) -> None:
    tab.goto(SITE + "moved")
    assert tab.url == SITE + "submit"


def test_a_script_error_is_a_page_error_with_the_javascript_message(tab: Tab) -> None:
    tab.goto(SITE)
    with pytest.raises(PageError, match="ReferenceError: nope is not defined") as info:
        tab.evaluate("nope + 1")
    assert info.value.reason == "script"
    with pytest.raises(PageError, match="custom failure"):
        tab.evaluate("Promise.reject(new Error('custom failure'))", await_promise=True)
    assert tab.evaluate("Promise.resolve(41).then((x) => x + 1)", await_promise=True) == 42
    assert tab.evaluate("undefined") is None  # the tab stays usable


def test_a_blocked_document_is_a_navigation_page_error(tab: Tab) -> None:
    with pytest.raises(PageError) as info:
        tab.goto(SITE + "blocked")
    assert info.value.reason == "navigation" and "BLOCKED_BY_CLIENT" in str(info.value)
    tab.goto(SITE)
    assert tab.evaluate("window.appLoaded") == 1


def test_a_resolver_exception_is_raised_from_the_call(tab: Tab) -> None:
    with pytest.raises(KeyError, match="resolver bug"):
        tab.goto(SITE + "boom")
    tab.goto(SITE)


def test_init_script_runs_before_the_page(tab: Tab) -> None:
    with Tab(tab.resolver, init_script="window.appLoaded = 10;") as other:
        other.goto(SITE)
        assert other.evaluate("window.appLoaded") == 11
        assert other.pid == tab.pid  # same settings: the same Chromium


def test_tabs_share_one_chromium_but_not_their_storage(tab: Tab) -> None:
    tab.goto(SITE)
    before = len(launched_profiles())
    tabs = [Tab(tab.resolver) for _ in range(3)]
    for t in tabs:
        t.goto(SITE + "store")
    assert [t.evaluate("localStorage.getItem('k')") for t in tabs] == ["x", "x", "x"]  # own browser contexts
    assert len({t.pid for t in tabs} | {tab.pid}) == 1 and len(launched_profiles()) == before
    for t in tabs:
        t.close()
        t.close()  # idempotent
    assert tab.running and not tabs[0].running


def test_the_last_tab_stops_the_browser_also_when_collected(no_chromium_left: None) -> None:
    before = len(launched_profiles())
    t = Tab(Site(), executable=None, start_timeout_s=19.0)  # other launch settings: a browser of its own
    t.goto(SITE)
    profile = launched_profiles()[before]
    assert pids_with(profile)
    del t
    gc.collect()
    deadline = time.monotonic() + 5.0
    while pids_with(profile) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids_with(profile) == []


def test_a_crashed_renderer_is_a_browser_error_and_goto_recovers(tab: Tab) -> None:
    tab.goto(SITE)
    page = tab._page
    assert page is not None and page.host is not None
    page.host.proc.conn.fire("Page.crash", {}, page.session)
    with pytest.raises(BrowserError, match="crashed"):
        tab.evaluate("1")
    assert not tab.running
    with pytest.raises(BrowserError, match="goto"):
        tab.evaluate("1")
    rebuilds = tab.rebuilds
    tab.goto(SITE)
    assert tab.evaluate("window.appLoaded") == 1 and tab.rebuilds == rebuilds + 1


def test_a_hung_page_is_a_timeout_and_goto_recovers(tab: Tab) -> None:
    with Tab(tab.resolver, timeout_s=1.0) as hung:
        hung.goto(SITE)
        start = time.monotonic()
        with pytest.raises(PageError) as info:
            hung.evaluate("while (true) {}")
        assert info.value.reason == "timeout" and time.monotonic() - start < 10
        hung.goto(SITE)
        assert hung.evaluate("window.appLoaded") == 1


def test_a_killed_browser_is_a_browser_error_and_goto_starts_a_new_one(tab: Tab) -> None:
    tab.goto(SITE)
    pid = tab.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    with pytest.raises(BrowserError):
        tab.evaluate("1")
    tab.goto(SITE)
    assert tab.pid != pid and tab.evaluate("window.appLoaded") == 1 and running_hosts() >= 1


def test_copies_and_pickles_are_new_unloaded_tabs(tab: Tab) -> None:
    tab.goto(SITE)
    for twin in (copy.copy(tab), copy.deepcopy(tab), pickle.loads(pickle.dumps(Tab({}.get, timeout_s=2.0)))):
        assert twin is not tab and not twin.running and twin.url == ""
        with pytest.raises(BrowserError, match="goto"):
            twin.evaluate("1")
        twin.close()


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(BrowserError, match="viewport"):
        Tab(Site(), viewport=(8, 8))
    with pytest.raises(BrowserError, match="timeout_s"):
        Tab(Site(), timeout_s=0)
    with pytest.raises(BrowserError, match="callable"):
        Tab("not a resolver")  # type: ignore[arg-type]


def test_a_forked_child_closing_its_copy_of_a_tab_leaves_the_parents_tab_working(no_chromium_left: None) -> None:
    """close() in a forked child (the tab's last hold there) must not stop the browser the parent's tab still uses.

    Fails without ChromiumProcess's owner check; the context is not disposed either (the child sees no live host).
    """
    _chromium_or_skip()
    own = Tab(Site(), viewport=(320, 240), timeout_s=5.0)
    try:
        own.goto(SITE)
        assert exit_code_in_forked_child(own.close) == 0
        assert own.evaluate("document.getElementById('p').textContent") == "static"
        own.goto(SITE)
        assert own.evaluate("window.appLoaded") == 1
    finally:
        own.close()
