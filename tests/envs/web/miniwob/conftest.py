"""MiniWoB test fixtures: skip without Chromium or the miniwob wheel (leak check: the root conftest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from turnkit.browser import BrowserError, find_chromium


@pytest.fixture(scope="module")
def chromium(no_chromium_left: None) -> Iterator[None]:
    """Skip the module's browser tests where Chromium or the MiniWoB pages are missing."""
    try:
        find_chromium()
    except BrowserError as exc:
        pytest.skip(f"no Chromium here ({exc}); install it with bash .ci/chromium.sh")
    pytest.importorskip("miniwob", reason="MiniWoB-v0 needs pip install 'turnkit[web]'")
    yield
