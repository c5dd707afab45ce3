from __future__ import annotations

import http.server
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import ClassVar

import numpy as np
import pytest

from turnkit.browser import Browser, BrowserError, PageError, RenderCache

RED_PAGE = "<!doctype html><body style='margin:0;background:#ff0000'></body>"


def test_renders_pixels_at_the_viewport_size(browser: Browser) -> None:
    r = browser.render(RED_PAGE)
    assert r.pixels.shape == (480, 640, 3) and r.pixels.dtype == np.uint8
    assert (r.pixels == (255, 0, 0)).all()
    assert not r.pixels.flags.writeable


def test_dom_summary_reports_text_boxes_colours_and_sizes(browser: Browser) -> None:
    html = (
        "<!doctype html><body style='margin:0;background:rgb(10,20,30)'>"
        "<div style='position:absolute;left:40px;top:50px;width:200px;height:100px;background:hsl(120,100%,25%)'>"
        "<h1 style='margin:0;font-size:24px;color:#ffffff'>Hello  World</h1></div>"
        "<p style='display:none'>hidden</p></body>"
    )
    r = browser.render(html)
    assert r.dom.background == (10, 20, 30)
    (text,) = r.dom.texts
    assert (text.tag, text.text, text.color, text.font_size, text.font_weight) == (
        "h1",
        "Hello World",
        (255, 255, 255),
        24.0,
        700,
    )
    assert text.box[0] == pytest.approx(40, abs=1) and text.box[1] == pytest.approx(50, abs=1)
    box = next(b for b in r.dom.boxes if b.tag == "div")
    assert box.box == (40.0, 50.0, 200.0, 100.0) and box.background == (0, 128, 0)


def test_same_html_renders_the_same_pixels_even_with_math_random(browser: Browser) -> None:
    html = (
        "<body style='margin:0'><div id=d style='height:50px'></div><script>"
        "document.getElementById('d').style.background = `rgb(${Math.floor(Math.random()*255)},0,0)`;"
        "</script></body>"
    )
    a, b = browser.render(html), browser.render(html)
    assert np.array_equal(a.pixels, b.pixels)


class _Counter(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Counter.hits.append(self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def local_server() -> Iterator[int]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Counter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Counter.hits = []
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_pages_cannot_reach_the_network_or_the_disk(browser: Browser, local_server: int) -> None:
    url = f"http://127.0.0.1:{local_server}"
    html = (
        f"<img src='{url}/img.png'><link rel=stylesheet href='{url}/x.css'><iframe src='{url}/frame'></iframe>"
        f"<img src='file:///etc/hostname'><img src='relative.png'>"
        f"<script>fetch('{url}/fetch').catch(() => {{}}); window.open('{url}/popup');"
        f"new Image().src = 'http://localhost:{local_server}/img2';</script><p>done</p>"
    )
    r = browser.render(html)
    time.sleep(0.5)  # give stray requests time to arrive
    assert "done" in [t.text for t in r.dom.texts]
    assert _Counter.hits == []


def test_data_urls_still_load(browser: Browser) -> None:
    png = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"  # one red pixel
    )
    r = browser.render(f"<body style='margin:0'><img style='width:64px;height:64px' src='data:image/png;base64,{png}'>")
    assert tuple(r.pixels[30, 30]) == (255, 0, 0)


def test_dialogs_do_not_block_rendering(browser: Browser) -> None:
    r = browser.render("<script>alert('x'); confirm('y'); prompt('z')</script><p>after</p>")
    assert [t.text for t in r.dom.texts] == ["after"]


def test_an_infinite_script_is_a_page_timeout_and_the_browser_recovers(browser: Browser) -> None:
    restarts = browser.restarts
    start = time.monotonic()
    with pytest.raises(PageError) as info:
        browser.render("<script>while (true) {}</script>")
    assert info.value.reason == "timeout"
    assert time.monotonic() - start < browser.timeout_s + 15
    assert browser.restarts == restarts + 1
    assert (browser.render(RED_PAGE).pixels == (255, 0, 0)).all()


def test_a_killed_browser_is_restarted_by_the_next_render(browser: Browser) -> None:
    browser.render(RED_PAGE)
    pid, restarts = browser.pid, browser.restarts
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    r = browser.render("<body style='margin:0;background:#0000ff'></body>")
    assert (r.pixels == (0, 0, 255)).all()
    assert browser.pid != pid and browser.restarts == restarts + 1


def test_cache_hits_skip_the_browser(browser: Browser, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser, "cache", RenderCache(4))
    renders = browser.renders
    first = browser.render(RED_PAGE)
    again = browser.render(RED_PAGE)
    assert again is first and browser.renders == renders + 1 and browser.cache.hits == 1


def test_a_broken_browser_is_a_browser_error_not_a_page_error() -> None:
    b = Browser(executable="/bin/true", cache=RenderCache(0), start_timeout_s=5.0)
    with pytest.raises(BrowserError) as info:
        b.render(RED_PAGE)
    assert not isinstance(info.value, PageError)


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(BrowserError, match="viewport"):
        Browser(viewport=(8, 8))
    with pytest.raises(BrowserError, match="timeout_s"):
        Browser(timeout_s=0)


def test_close_is_idempotent_and_rendering_again_restarts(browser: Browser) -> None:
    browser.close()
    browser.close()
    assert not browser.running and browser.pid is None
    assert (browser.render(RED_PAGE).pixels == (255, 0, 0)).all()
    assert browser.running


@pytest.mark.parametrize(
    "trick",
    [
        "<script>location.href = 'http://example.com/'</script>",
        "<meta http-equiv=refresh content='0;url=http://example.com/'>",
        "<script>location.href = 'about:blank'</script>",
        "<script>window.close()</script>",
    ],
)
def test_pages_cannot_navigate_away(browser: Browser, trick: str) -> None:
    r = browser.render(f"{trick}<p>still here</p>")
    assert [t.text for t in r.dom.texts] == ["still here"]
