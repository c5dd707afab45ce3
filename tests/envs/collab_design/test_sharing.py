"""Envs share one Chromium through the process-wide pool: groups, batches, crashes and clean-up."""

from __future__ import annotations

import gc
import os
import signal
import time

import gymnasium
import pytest

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.browser import launched_profiles, pids_with, shared_pool
from turnkit.envs.collab_design.baselines import FeedbackFollower
from turnkit.rollout.collect import collect_batch
from turnkit.types import ErrorCause

from .conftest import ENV_ID


@pytest.fixture(autouse=True)
def empty_pool(browser: object) -> None:  # the module's browser fixture skips without Chromium
    gc.collect()
    assert len(shared_pool()) == 0, "an earlier test left a shared browser held"


def test_a_group_of_eight_envs_costs_one_chromium_and_leaves_nothing_behind() -> None:
    before = len(launched_profiles())
    env = gymnasium.make(ENV_ID, split="ood")
    trajs = turnkit.collect_group(env, OracleAgent(), seed=7, group_size=8)
    assert all(t.success and t.total_reward == 1.0 for t in trajs)
    started = launched_profiles()[before:]
    assert len(started) == 1 and pids_with(started[0])
    env.close()
    del trajs
    gc.collect()  # the group's clones were never closed: their leases go with them
    assert len(shared_pool()) == 0
    deadline = time.monotonic() + 5.0
    while pids_with(started[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids_with(started[0]) == []


def test_a_batch_shares_one_browser_and_share_browser_false_does_not() -> None:
    envs = [gymnasium.make(ENV_ID) for _ in range(3)]
    private = gymnasium.make(ENV_ID, share_browser=False)
    before = len(launched_profiles())
    trajs = collect_batch([*envs, private], FeedbackFollower(max_turns=2), [1, 2, 3, 4], max_turns=2)
    assert all(t.error is None for t in trajs)
    assert len(launched_profiles()) == before + 2  # the pool's one and the private one
    assert envs[0].unwrapped.browser is envs[2].unwrapped.browser is not private.unwrapped.browser
    for e in [*envs, private]:
        e.close()
    assert len(shared_pool()) == 0 and not private.unwrapped._browser


def test_a_browser_killed_mid_group_restarts_for_everyone() -> None:
    envs = [gymnasium.make(ENV_ID) for _ in range(3)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
        e.step("<p>first</p>")
    shared = envs[0].unwrapped.browser
    pid, restarts = shared.pid, shared.restarts
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    for i, e in enumerate(envs):
        _, _, _, _, info = e.step(f"<p>after the crash {i}</p>")
        assert info["rendered"]
    assert shared.pid != pid and shared.restarts == restarts + 1
    for e in envs:
        e.close()


def test_a_page_that_hangs_is_the_env_s_fault_not_its_neighbours() -> None:
    envs = [gymnasium.make(ENV_ID, render_timeout_s=2.0) for _ in range(2)]
    envs[0].reset(seed=0)
    envs[1].reset(seed=1)
    _, _, _, _, info = envs[0].step("<p>x</p><script>while (true) {}</script>")
    assert info["page_error"] == "timeout" and info["similarity"] == 0.0
    _, _, _, _, info = envs[1].step("<p>fine</p>")
    assert info["rendered"] and info["page_error"] is None
    for e in envs:
        e.close()


def test_a_broken_browser_is_a_recorded_error_for_the_whole_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNKIT_CHROMIUM", "/bin/true")
    env = gymnasium.make(ENV_ID, split="combo", render_timeout_s=2.0)
    # a seed no test renders: the reference is not in the process-wide render cache
    trajs = turnkit.collect_group(env, OracleAgent(), seed=987_654, group_size=3)
    assert all(t.error is not None and t.error.cause == ErrorCause.BROWSER for t in trajs)
    env.close()
    del trajs
    gc.collect()
    assert len(shared_pool()) == 0


def test_an_env_that_rendered_with_the_shared_browser_still_pickles() -> None:
    import pickle

    env = gymnasium.make(ENV_ID)
    env.reset(seed=0)
    env.step("<p>before pickling</p>")
    twin = pickle.loads(pickle.dumps(env))
    assert twin.unwrapped.browser is not env.unwrapped.browser
    twin.reset(seed=0)
    _, _, _, _, info = twin.step("<p>after pickling</p>")
    assert info["rendered"]
    twin.close()
    env.close()
    assert len(shared_pool()) == 0
