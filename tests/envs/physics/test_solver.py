"""The law-based policy: solves every split from the conversation alone (no privileged data)."""

import gymnasium
import numpy as np
import pytest

import turnkit
from turnkit.agents.scripted import ScriptedAgent
from turnkit.envs.physics.protocol import describe_world, parse_world
from turnkit.envs.physics.solver import estimate_states, law_based_reply, predict

ENV_ID = "turnkit/PhysicsPrediction-v0"


def test_parse_world_inverts_describe_world():
    bodies = [
        {"name": "A", "color": "red", "shape": "ball", "radius": 0.55},
        {"name": "B", "color": "blue", "shape": "square", "radius": 1.4},
    ]
    assert parse_world(describe_world(bodies, 0.0)) == ({"A": 0.55, "B": 1.4}, 0.0)


def test_estimate_skips_a_step_that_straddles_a_collision():
    # x moves +0.2 per frame for frames 0..3, then a collision inside frame 3 -> 4, then -0.1 per frame.
    x = np.array([0.0, 0.2, 0.4, 0.6, 0.65, 0.55])
    tracks = np.stack([x, np.full_like(x, 5.0)], axis=1)[:, None, :]
    frame, _, vel = estimate_states(tracks[:5], 0.0)  # frames 0..4: the last step is mixed
    assert frame == 3 and vel[0, 0] == pytest.approx(2.0)
    frame, _, _ = estimate_states(tracks, 0.0)  # frames 0..5: still only one clean post step
    assert frame == 3


def test_predict_replays_an_elastic_collision():
    pos = np.array([[1.0, 5.0], [5.0, 5.0]])
    vel = np.array([[3.0, 0.0], [-1.0, 0.0]])
    radii = np.array([1.0, 3**0.5])  # masses 1 and 3: velocities -3 and 1 after touching at t = (4-2.732)/4
    out = predict(pos, vel, radii, 0.0, np.array([1.0]))
    t_c = (4.0 - 1.0 - 3**0.5) / 4.0
    assert out[0, 0, 0] == pytest.approx(1.0 + 3.0 * t_c - 3.0 * (1.0 - t_c))
    assert out[0, 1, 0] == pytest.approx(5.0 - t_c + (1.0 - t_c))


@pytest.mark.parametrize("split", ["id", "ood", "interp", "combo"])
@pytest.mark.parametrize("kind", ["uniform", "parabola", "collision"])
def test_law_based_policy_succeeds_without_privileged_data(split, kind):
    env = gymnasium.make(ENV_ID, split=split, kind=kind)
    trajs = [turnkit.collect(env, ScriptedAgent(law_based_reply), seed=s) for s in range(25)]
    assert np.mean([t.success for t in trajs]) >= 0.95
