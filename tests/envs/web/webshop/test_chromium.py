"""render="chromium": the real page in Chromium gives the same view as the Python parser, page for page."""

from __future__ import annotations

import gymnasium
import pytest

import turnkit
from turnkit.agents.base import Context
from turnkit.agents.oracle import OracleAgent
from turnkit.envs.web.webshop.baselines import RandomClicker
from turnkit.types import Message


@pytest.fixture(scope="module")
def chromium_env():
    env = gymnasium.make("turnkit/WebShop-v0", render="chromium")
    yield env
    env.close()


def _lockstep(text_env, chromium_env, seed: int, agent, max_steps: int = 6) -> list[tuple]:
    """Play both envs with the same actions; return (text view, chromium view, text obs, chromium obs) per page."""
    pages = []
    obs_t, _ = text_env.reset(seed=seed)
    obs_c, _ = chromium_env.reset(seed=seed)
    messages = [Message("user", obs_t)]
    pages.append((text_env.unwrapped.page, chromium_env.unwrapped.page, obs_t, obs_c))
    for turn in range(max_steps):
        ctx = Context(tuple(messages), "turnkit/WebShop-v0", turn, seed, text_env.unwrapped.task)
        action = agent.act([ctx])[0].text
        obs_t, _, done, _, _ = text_env.step(action)
        obs_c, *_ = chromium_env.step(action)
        pages.append((text_env.unwrapped.page, chromium_env.unwrapped.page, obs_t, obs_c))
        messages += [Message("assistant", action), Message("user", obs_t)]
        if done:
            break
    return pages


def test_text_and_chromium_renderers_agree_on_50_pages(chromium_env) -> None:
    text_env = gymnasium.make("turnkit/WebShop-v0")
    pages = []
    seed = 0
    while len(pages) < 50:  # oracle episodes (home, results, product, options, purchase) and random clicks
        agent = OracleAgent() if seed % 2 == 0 else RandomClicker()
        pages += _lockstep(text_env, chromium_env, seed, agent)
        seed += 1
    text_env.close()
    kinds = set()
    for text_view, chromium_view, obs_t, obs_c in pages:
        assert chromium_view.labels == text_view.labels
        assert chromium_view == text_view and obs_c == obs_t
        kinds.add((text_view.has_search, "[Buy Now]" in obs_t, "Your score" in obs_t, "[Next >]" in obs_t))
    assert len(pages) >= 50 and len(kinds) >= 4  # home, result pages with and without Next, product, purchase


def test_chromium_oracle_episode_and_screenshot(chromium_env) -> None:
    traj = turnkit.collect(chromium_env, OracleAgent(), seed=3)
    assert traj.success and traj.error is None
    pixels = chromium_env.unwrapped.screenshot()
    assert pixels.shape == (600, 800, 3) and pixels.std() > 0  # the purchase page, not a blank frame


def test_screenshot_needs_chromium() -> None:
    env = gymnasium.make("turnkit/WebShop-v0")
    env.reset(seed=0)
    with pytest.raises(turnkit.errors.EnvError, match="render='chromium'"):
        env.unwrapped.screenshot()
    env.close()


def test_chromium_renderer_passes_check_env(chromium_env) -> None:
    report = turnkit.check_env(chromium_env, seeds=(0, 1), cross_process=False, raise_on_failure=False)
    assert report.ok, str(report)
