"""Browser fixtures: one Chromium per test module (the root conftest checks that none outlives its module)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from turnkit.browser import Browser, BrowserError, RenderCache, find_chromium


def exit_code_in_forked_child(action: Callable[[], None]) -> int:
    """Run ``action`` in a forked child that then leaves with ``os._exit(0)``; the child's exit code."""
    child = os.fork()
    if child == 0:
        try:
            action()
        finally:
            os._exit(0)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


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
