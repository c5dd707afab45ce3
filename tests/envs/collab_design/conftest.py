"""Fixtures of the design env tests: one browser per module and registration (leak check: the root conftest)."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium
import pytest
from gymnasium.envs.registration import register

from turnkit.browser import Browser, BrowserError, RenderCache, find_chromium

ENV_ID = "turnkit/CollabDesign-v0"
if ENV_ID not in gymnasium.registry:  # until turnkit/envs/registration.py registers it
    register(id=ENV_ID, entry_point="turnkit.envs.collab_design.env:CollabDesignEnv", max_episode_steps=10)


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
