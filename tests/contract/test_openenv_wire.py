"""The OpenEnv wire contract over the registry: every ``turnkit/`` env through ``make_remote_env`` is the local env.

Each registered env is served by a real :class:`~turnkit.integrations.openenv.EnvServer` on 127.0.0.1 and played
by scripted episodes that mix valid moves, the generic invalid actions (empty, NUL bytes) and the env's own
malformed commands (rejected by the served env, not by the client). Observations, rewards, end flags and ``info``
must equal the local env's, turn by turn. ``info`` crosses the wire as JSON, so the local side is compared through
the same JSON-safe conversion the server applies (numpy scalars become numbers, tuples lists).
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium
import pytest

from turnkit.errors import BrowserError, SandboxError
from turnkit.integrations.openenv import EnvServer, make_remote_env
from turnkit.integrations.openenv.wire import jsonable

GENERIC = ["garbage ###", "ANSWER: 1"]
"""Moves for an env without its own script below: text the env reads as a (possibly wrong) move."""

SCRIPTS: dict[str, tuple[list[str], list[str]]] = {
    # env id: (moves the env accepts, the env's own malformed commands)
    "turnkit/MathEpisodes-v0": (["no answer yet", "ANSWER: 1", "ANSWER: 2"], []),
    "turnkit/PhysicsPrediction-v0": (["frame 3 A: x=5.0 y=7.0", "garbage"], []),
    "turnkit/CollabCode-v0": (["What should happen for 0 days?", "I WANT TO ANSWER: no code"], []),
    "turnkit/CollabDesign-v0": (["```html\n<p>hi</p>\n```", "what colours?"], []),
    "turnkit/PAVDidactic-v0": (["1 2 3", "garbage"], []),
    "turnkit/WebShop-v0": (["search[phone case]", "look"], ["click[nothing]", "search[]", "click[Buy Now]"]),
    "turnkit/MiniWoB-v0": (["click[5]", "type[1, hello]"], ["click[999]", "garbage", "select[1]"]),
}


def _turnkit_ids() -> list[str]:
    return sorted(env_id for env_id in gymnasium.registry if env_id.startswith("turnkit/"))


def _episodes(env_id: str) -> list[tuple[int, list[Any]]]:
    """Two scripted episodes: moves among invalid actions, and invalid actions until the allowance ends it."""
    moves, malformed = SCRIPTS.get(env_id, (GENERIC, []))
    own = malformed or ["\x00\x01"]
    mixed = [own[0], "", moves[0], "\x00", *own[1:2], *moves[1:]]
    exhaust = ["", *own, "\x00", "", "after the end"]
    return [(0, mixed), (1, exhaust)]


def _transcript(env: gymnasium.Env, seed: int, actions: list[Any], *, wire: bool) -> list[Any]:
    """Reset and step until the episode ends; the local side goes through the server's JSON conversion."""
    out: list[Any] = [list(env.reset(seed=seed))]
    for action in actions:
        out.append(list(env.step(action)))
        if out[-1][2] or out[-1][3]:
            break
    return out if wire else jsonable(out)


def test_every_registered_env_has_a_script() -> None:
    """A newly registered env gets the generic moves; give it its own (with its malformed commands) above."""
    assert set(_turnkit_ids()) <= set(SCRIPTS), sorted(set(_turnkit_ids()) - set(SCRIPTS))


@pytest.mark.parametrize("env_id", _turnkit_ids())
def test_remote_episodes_equal_the_local_env(env_id: str) -> None:
    start = time.perf_counter()
    local = gymnasium.make(env_id)
    try:
        local.reset(seed=0)
    except (SandboxError, BrowserError) as exc:
        local.close()
        pytest.skip(f"{env_id} needs infrastructure that is unavailable here: {exc}")
    try:
        with EnvServer(env_id) as server:
            remote = make_remote_env(server.url, env_id=env_id)
            try:
                for seed, actions in _episodes(env_id):
                    expected = _transcript(local, seed, actions, wire=False)
                    got = _transcript(remote, seed, actions, wire=True)
                    for turn, (want, have) in enumerate(zip(expected, got, strict=True)):
                        assert have == want, f"{env_id} seed {seed}, turn {turn}: {have!r} != {want!r}"
                    counts = [step[4]["invalid_actions"] for step in got[1:]]
                    assert counts[-1] >= 2, f"{env_id} seed {seed}: the script should contain invalid actions"
            finally:
                remote.close()
    finally:
        local.close()
    assert time.perf_counter() - start < 60
