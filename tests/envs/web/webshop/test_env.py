"""WebShop-v0 end to end over the real loopback server: the oracle, bad input, snapshots and server faults."""

from __future__ import annotations

import socket

import gymnasium
import pytest

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.envs.core import restore_env, snapshot_env
from turnkit.envs.web.webshop.baselines import RandomClicker, SearchThenBuy
from turnkit.envs.web.webshop.catalogue import SPLITS, find_target, goal_for, shop_for
from turnkit.envs.web.webshop.client import ShopClient, ShopServerError
from turnkit.envs.web.webshop.server import shop_server
from turnkit.types import ErrorCause


@pytest.mark.parametrize("split", SPLITS)
def test_oracle_buys_the_target_on_200_tasks(split: str) -> None:
    env = gymnasium.make("turnkit/WebShop-v0", split=split)
    trajectories = [turnkit.collect(env, OracleAgent(), seed=s) for s in range(200)]
    env.close()
    assert all(t.success and t.total_reward == 1.0 for t in trajectories)
    assert max(len(t.steps) for t in trajectories) <= 6  # search, open, up to 2 options, buy (+ 1 page)


def test_baselines_score_between_random_and_oracle() -> None:
    env = gymnasium.make("turnkit/WebShop-v0")
    rule = [turnkit.collect(env, SearchThenBuy(), seed=s).total_reward for s in range(40)]
    rand = [turnkit.collect(env, RandomClicker(), seed=s).total_reward for s in range(40)]
    env.close()
    assert 0.0 < sum(rand) < sum(rule) < 40.0


def _started(seed: int = 3, **kwargs):
    env = gymnasium.make("turnkit/WebShop-v0", **kwargs)
    obs, _ = env.reset(seed=seed)
    return env, obs


def test_bad_commands_get_feedback_and_the_same_page() -> None:
    env, first = _started(max_invalid_actions=10)
    page = first.split("\n\n", 1)[1]
    cases = {
        "buy the lamp please": "no_command",
        "click[Buy Now]": "unknown_label",  # not on the start page
        "search[]": "empty_query",
        "click[" + "x" * 3000 + "]": "unknown_label",
    }
    for action, why in cases.items():
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["invalid_action"] == why and obs.endswith(page) and "more invalid message(s)" in obs
        assert (reward, terminated, truncated) == (0.0, False, False)
    obs, *_, info = env.step("search[" + "lamp " * 700 + "]")  # 3.5k characters: searched, cut to 500
    assert info["page"] == "results" and "results) for: lamp lamp" in obs
    obs, *_, info = env.step("search[desk lamp]")  # a results page has no search box
    assert info["invalid_action"] == "no_search"
    obs, *_, info = env.step("x" * 1_000_000)  # 1 MB: an invalid action, not an exception
    assert info["invalid_action"] == "too_long"
    env.close()


def test_bad_commands_use_up_the_invalid_allowance() -> None:
    env, _ = _started(max_invalid_actions=2)
    results = [env.step("click[nothing]") for _ in range(3)]
    assert [r[2] for r in results] == [False, False, True]  # the third exceeds the allowance of 2
    assert results[-1][4]["success"] is False and "The episode is over." in results[-1][0]
    env.close()


def test_options_select_and_the_purchase_reports_reward_parts() -> None:
    env, _ = _started(seed=4)
    seed = env.unwrapped.task.metadata["shop_seed"]
    goal = goal_for(seed, "id")
    assert len(goal.options) == 2  # this seed's goal has two option groups; one is left unselected
    target = find_target(shop_for(seed, "id"), goal)
    env.step(f"search[{goal.type_name}]")
    obs, *_ = env.step(f"click[{target.pid}]")
    _, value = goal.options[0]
    obs, *_ = env.step(f"click[{value}]")
    assert f"[{value}] (selected)" in obs
    obs, reward, terminated, _, info = env.step("click[Buy Now]")  # the other options left unselected
    n = len(goal.attributes) + len(goal.options) + 1
    assert terminated and not info["success"]
    assert reward == pytest.approx((len(goal.attributes) + 1 + 1) / n)
    assert info["reward_parts"]["options_matched"] == 1 and f"Your score: {reward:.3f}" in obs
    env.close()


def test_snapshot_restores_into_another_env_and_continues_identically() -> None:
    env, _ = _started(seed=8)
    env.step(f"search[{env.unwrapped.task.metadata['product_type']}]")
    snap = snapshot_env(env)
    labels = [line for line in env.unwrapped.page.labels if line.startswith("B0")]
    a = env.step(f"click[{labels[0]}]")
    other = gymnasium.make("turnkit/WebShop-v0")
    other.reset(seed=99)
    restore_env(other, snap)
    b = other.step(f"click[{labels[0]}]")
    assert a[0] == b[0] and a[1:4] == b[1:4]
    restore_env(env, snap)  # the original session is rewound too
    assert env.step(f"click[{labels[0]}]")[0] == a[0]
    env.close()
    other.close()


def test_a_dead_server_is_a_typed_error_on_the_trajectory_and_the_next_episode_gets_a_new_one() -> None:
    env = gymnasium.make("turnkit/WebShop-v0")

    class KillServerMidway:
        def __init__(self) -> None:
            self.oracle = OracleAgent()
            self.uses_privileged = True

        def act(self, contexts):
            if contexts[0].turn == 1:
                shop_server().close()  # the server dies between two steps
            return self.oracle.act(contexts)

    broken = turnkit.collect(env, KillServerMidway(), seed=0)
    assert broken.error is not None and broken.error.cause is ErrorCause.ENV
    assert "shop server" in broken.error.message and broken.error.step == 1
    again = turnkit.collect(env, OracleAgent(), seed=0)
    assert again.error is None and again.success
    env.close()


def test_a_server_that_never_answers_times_out() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts connections, never answers

    class Silent:
        alive = True
        server_address = listener.getsockname()
        url = "http://{}:{}".format(*listener.getsockname())

    client = ShopClient(timeout_s=0.3)
    client.server = Silent()  # type: ignore[assignment]
    with pytest.raises(ShopServerError, match="failed: TimeoutError"):
        client.get("/s/1/")
    client.close()
    listener.close()


def test_copies_and_pickles_get_their_own_session() -> None:
    import copy
    import pickle

    env, _ = _started(seed=2)
    env.step("search[lamp]")
    clones = [copy.deepcopy(env.unwrapped), pickle.loads(pickle.dumps(env.unwrapped))]
    for clone in clones:
        obs, _ = clone.reset(seed=2)
        assert obs.startswith("Instruction:") and "search[your query]" in obs
        clone.close()
    obs, *_, info = env.step("click[Back to Search]")  # the original's session was not touched by the clones
    assert info["page"] == "home"
    env.close()


def test_a_forked_child_neither_hangs_nor_stops_the_parents_server() -> None:
    import os

    env, _ = _started(seed=6)
    pid = os.fork()
    if pid == 0:  # the child runs the exit hooks of a normal interpreter shutdown
        import atexit

        atexit._run_exitfuncs()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0
    obs, *_, info = env.step("search[lamp]")  # the parent's server still serves this session
    assert info["page"] == "results" and "for: lamp" in obs
    env.close()
