"""Viewer fixtures: one folder of real runs, a server on loopback, and a Chromium tab that talks to it over HTTP."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.view import builders
from turnkit.browser import BrowserError, Tab, TabRequest, TabResponse, find_chromium
from turnkit.view import ViewerServer, make_server


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """runs/: a training run, a second run to compare, an eval, an eval with privileged data, a synth folder."""
    base = tmp_path_factory.mktemp("runs")
    builders.write_run(base / "train")
    builders.write_run(base / "train-b", steps=6)
    builders.write_eval(base / "eval")
    builders.write_privileged_eval(base / "eval-privileged")
    builders.write_synth(base / "synth")
    builders.write_scored_rollouts(base / "rollouts")
    return base


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of damaged runs (a cut metrics line, a bad episode line, a missing metrics file)."""
    return builders.write_broken(tmp_path_factory.mktemp("broken"))


def serve(folder: Path) -> Iterator[ViewerServer]:
    server = make_server(folder, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[ViewerServer]:
    yield from serve(root)


@pytest.fixture(scope="module")
def broken_server(broken: Path) -> Iterator[ViewerServer]:
    yield from serve(broken)


@pytest.fixture(scope="module")
def empty_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ViewerServer]:
    folder = tmp_path_factory.mktemp("nothing")
    (folder / "notes.txt").write_text("not a run")
    yield from serve(folder)


PASSED_HEADERS = ("Content-Security-Policy", "X-Content-Type-Options")
"""Server headers handed on to Chromium, so that the page lives under the server's own policy."""


def forward(req: TabRequest) -> TabResponse | None:
    """Answer the page's request by a real HTTP request to the loopback server (nothing else is reachable)."""
    if not req.url.startswith("http://127.0.0.1:"):
        return None
    request = urllib.request.Request(req.url, data=req.post_data, method=req.method)
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            status, body, headers = reply.status, reply.read(), reply.headers
    except urllib.error.HTTPError as exc:
        status, body, headers = exc.code, exc.read(), exc.headers
    passed = {k: headers[k] for k in PASSED_HEADERS if headers.get(k)}
    return TabResponse(status, body, headers.get("Content-Type", ""), passed)


WATCH = """window.violations = [];
window.addEventListener("securitypolicyviolation",
  (e) => window.violations.push(`${e.effectiveDirective} blocked ${e.blockedURI || "inline"}`), true);"""
"""Run in every page before its scripts: collects what the Content-Security-Policy blocked."""


@pytest.fixture(scope="module")
def tab(no_chromium_left: None) -> Iterator[Tab]:
    try:
        find_chromium()
    except BrowserError as exc:
        pytest.skip(f"no Chromium here ({exc}); install it with bash .ci/chromium.sh")
    with Tab(forward, viewport=(1280, 900), timeout_s=15.0, init_script=WATCH) as t:
        yield t


WAIT = """new Promise((ok, fail) => {
  const start = Date.now();
  (function poll() {
    if ((window.renders || 0) > %d) ok(window.renders);
    else if (Date.now() - start > 10000) fail(new Error("the page did not finish rendering"));
    else setTimeout(poll, 10);
  })();
})"""


def visit(tab: Tab, server: ViewerServer, fragment: str) -> None:
    """Show ``server``'s page at ``#fragment`` and wait until the page has rendered it.

    A new fragment of the loaded page is a hash change (the page re-renders); anything else loads the page anew.
    """
    here = tab.evaluate("location.href") if tab.url else ""
    if here.split("?")[0].split("#")[0] == server.url and not here.endswith("#" + fragment):
        before = tab.evaluate("window.renders || 0")
        tab.evaluate(f"location.hash = {fragment!r}")
    else:
        _loads[0] += 1
        tab.goto(f"{server.url}?load={_loads[0]}#{fragment}")
        before = 0
    tab.evaluate(WAIT % before, await_promise=True)


_loads = [0]


def texts(tab: Tab, selector: str) -> list[str]:
    """The text of every element matching ``selector``."""
    return tab.evaluate(f"[...document.querySelectorAll({selector!r})].map(e => e.textContent)")
