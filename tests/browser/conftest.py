"""Browser fixtures: one Chromium per test module (the root conftest checks that none outlives its module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from turnkit.browser import Browser, BrowserError, RenderCache, find_chromium


def _chromium_or_skip() -> None:
    try:
        find_chromium()
    except BrowserError as exc:
        pytest.skip(f"no Chromium here ({exc}); install it with bash .ci/chromium.sh")


@pytest.fixture(scope="module")
def browser(no_chromium_left: None) -> Iterator[Browser]:
    """A browser shared by the module's tests, without a render cache (tests measure real renders)."""
    _chromium_or_skip()
    b = Browser(timeout_s=3.0, cache=RenderCache(0))
    yield b
    b.close()
