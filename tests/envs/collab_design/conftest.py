"""Fixtures of the design env tests: one browser per module, registration, and a process-leak check."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import gymnasium
import pytest
from gymnasium.envs.registration import register

from turnkit.browser import Browser, BrowserError, RenderCache, find_chromium, launched_profiles, pids_with

ENV_ID = "turnkit/CollabDesign-v0"
if ENV_ID not in gymnasium.registry:  # until turnkit/envs/registration.py registers it
    register(id=ENV_ID, entry_point="turnkit.envs.collab_design.env:CollabDesignEnv", max_episode_steps=10)


@pytest.fixture(scope="module", autouse=True)
def no_chromium_left() -> Iterator[None]:
    """Fail the module if any browser it started still has a process once the module is done."""
    before = len(launched_profiles())
    yield
    gc.collect()
    mine = launched_profiles()[before:]
    deadline = time.monotonic() + 5.0
    while (left := {p: pids_with(p) for p in mine if pids_with(p)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"Chromium processes left behind: {left}"


@pytest.fixture(scope="module")
def browser(no_chromium_left: None) -> Iterator[Browser]:
    """One browser for every env of the module (passed as ``browser=``), with its own render cache."""
    try:
        find_chromium()
    except BrowserError as exc:
        pytest.skip(f"no Chromium here ({exc}); install it with bash .ci/chromium.sh")
    b = Browser(timeout_s=3.0, cache=RenderCache(256))
    yield b
    b.close()
