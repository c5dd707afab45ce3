"""Browser fixtures: one Chromium per test module, and a check that no process outlives its module."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import pytest

from turnkit.browser import Browser, BrowserError, RenderCache, find_chromium, launched_profiles, pids_with


def _chromium_or_skip() -> None:
    try:
        find_chromium()
    except BrowserError as exc:
        pytest.skip(f"no Chromium here ({exc}); install it with bash .ci/chromium.sh")


@pytest.fixture(scope="module", autouse=True)
def no_chromium_left() -> Iterator[None]:
    """Fail the module if any browser it started still has a process once the module is done."""
    before = len(launched_profiles())
    yield
    gc.collect()  # unreachable browsers are killed by their finalizers
    mine = launched_profiles()[before:]
    deadline = time.monotonic() + 5.0
    while (left := {p: pids_with(p) for p in mine if pids_with(p)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"Chromium processes left behind: {left}"


@pytest.fixture(scope="module")
def browser(no_chromium_left: None) -> Iterator[Browser]:
    """A browser shared by the module's tests, without a render cache (tests measure real renders)."""
    _chromium_or_skip()
    b = Browser(timeout_s=3.0, cache=RenderCache(0))
    yield b
    b.close()
