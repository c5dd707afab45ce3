"""How the page answers people: tabs that follow the picked folder, Enter in the filters, quick changes, wording."""

from __future__ import annotations

from pathlib import Path

from tests.view.conftest import serve, texts, visit
from tests.view.test_pages import count, text
from turnkit.browser import Tab
from turnkit.view import ViewerServer

SETTLED = """new Promise((ok, fail) => {
  const start = Date.now();
  (function poll() {
    if ((window.settled || 0) >= %d) ok(window.settled);
    else if (Date.now() - start > 10000) fail(new Error("the page did not finish its renders"));
    else setTimeout(poll, 10);
  })();
})"""


def settle(tab: Tab, renders: int) -> None:
    """Wait until the page has ended ``renders`` more renders (drawn, or dropped as stale) than before the action."""
    tab.evaluate(SETTLED % renders, await_promise=True)


def settled(tab: Tab) -> int:
    return tab.evaluate("window.settled || 0")


def seeds(tab: Tab) -> list[int]:
    return tab.evaluate("[...document.querySelectorAll('#episode-list tr[data-index]')].map(r => +r.dataset.seed)")


def test_tabs_open_the_folder_picked_in_runs(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "runs?id=eval-privileged")
    assert (
        tab.evaluate("document.querySelector('#nav-episodes').getAttribute('href')") == "#episodes?id=eval-privileged"
    )
    before = settled(tab)
    tab.evaluate("document.querySelector('#nav-episodes').click()")
    settle(tab, before + 1)
    assert text(tab, "#view h2") == "Episodes of eval-privileged"
    assert tab.evaluate("document.querySelector('#nav-runs').getAttribute('href')") == "#runs?id=eval-privileged"
    visit(tab, server, "runs?id=synth")
    assert tab.evaluate("document.querySelector('#nav-search').getAttribute('href')") == "#search?id=synth"
    assert tab.evaluate("document.querySelector('#nav-episodes').getAttribute('href')") == "#episodes"  # none here


def test_enter_in_a_filter_box_applies_it(tab: Tab, server: ViewerServer) -> None:
    for box, typed, wanted in (("#f-seed", "17", [17]), ("#f-q", "t-42", [42])):
        visit(tab, server, "episodes?id=eval")
        tab.evaluate(f"document.querySelector({box!r}).focus()")
        tab.insert_text(typed)
        before = settled(tab)
        tab.press("Enter")
        settle(tab, before + 1)
        assert seeds(tab) == wanted, box
        assert text(tab, "#count") == "1–1 of 1 (filtered from 60)"


def test_two_quick_changes_both_count(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "episodes?id=eval")
    before = settled(tab)
    tab.evaluate(
        "for (const [id, value] of [['#f-sort', 'seed'], ['#f-order', 'desc']]) {"
        " const el = document.querySelector(id); el.value = value; el.dispatchEvent(new Event('change')); }"
    )
    settle(tab, before + 2)
    assert "sort=seed" in tab.evaluate("location.hash") and "order=desc" in tab.evaluate("location.hash")
    assert seeds(tab)[:3] == [59, 58, 57]


HOLD = """(() => {
  window.realFetch = window.realFetch || window.fetch;
  window.held = [];
  window.fetch = (url, ...rest) => String(url).includes("sort=return")
    ? new Promise((ok) => window.held.push(() => ok(window.realFetch(url, ...rest))))
    : window.realFetch(url, ...rest);
})()"""


def test_the_view_asked_for_last_wins_over_a_slower_answer(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "episodes?id=eval")
    tab.evaluate(HOLD)  # the page's fetch of a return-sorted list waits until the test lets it go
    try:
        before = settled(tab)
        tab.evaluate("location.hash = 'episodes?id=eval&sort=return'")
        tab.evaluate("new Promise((ok) => setTimeout(ok, 50))", await_promise=True)  # its request is out, held
        tab.evaluate("location.hash = 'episodes?id=eval&sort=seed&order=desc'")
        settle(tab, before + 1)  # the later view, drawn while the earlier answer is still held
        assert tab.evaluate("window.held.length") == 1
        tab.evaluate("window.held.forEach((go) => go())")
        settle(tab, before + 2)  # the earlier answer arrived, and its render ended
    finally:
        tab.evaluate("window.fetch = window.realFetch")
    assert tab.evaluate("document.querySelector('#f-sort').value") == "seed"
    assert seeds(tab)[:3] == [59, 58, 57]


def test_wording_for_people(tab: Tab, server: ViewerServer, root: Path) -> None:
    visit(tab, server, "episodes?id=eval-privileged&ep=3")  # errored after its first turn
    card = text(tab, "#episode .card")
    assert "· 1 turn" in card and "1 turns" not in card
    assert texts(tab, "#episode .turn .head b")[:1] == ["turn 1"]
    assert text(tab, "#episode .tokens .muted").startswith("3 generated tokens")
    visit(tab, server, "episodes?id=eval-privileged&ep=2")
    assert "· 2 turns" in text(tab, "#episode .card")
    visit(tab, server, "search?id=synth&tree=iter_000/seed_1")
    assert texts(tab, "#pairs tr[data-pair] td.turn-number") == ["1", "2"]  # turns count from 1, as episodes do
    for folder in serve(root / "eval"):  # the root itself is the eval folder: it is named, not "."
        visit(tab, folder, "episodes?id=.")
        assert text(tab, "#view h2") == "Episodes of eval"
        assert texts(tab, "aside a[data-source]") == ["evaleval"]  # its name, then its kind
        visit(tab, folder, "runs?id=.")
        assert text(tab, "#run-title") == "Run eval"
    assert count(tab, "#error") == 0
