"""Exact physics: uniform motion, parabolas and elastic collisions. Run: python -m pytest tests/envs/physics -q"""

import numpy as np
import pytest

from turnkit.envs.physics.scenarios import sample_scene
from turnkit.envs.physics.simulate import (
    DT,
    GRAVITY,
    NUM_FRAMES,
    Body,
    Scene,
    collision_time,
    elastic_collision_velocities,
    in_view,
    simulate,
    state_at,
)
from turnkit.errors import ConfigError


def _collision_scenes(n=200):
    rng = np.random.default_rng(123)
    out = []
    for split, level in [("id", "any"), ("ood", "r"), ("ood", "v"), ("ood", "both"), ("combo", "any")]:
        out += [sample_scene(rng, split, kind="collision", ood_level=level).scene for _ in range(n // 5)]
    return out


def test_uniform_motion_is_linear_in_time():
    body = Body(x=1.25, y=3.5, vx=2.75, radius=0.9)
    frames = simulate(Scene("uniform", (body,)))
    t = np.arange(NUM_FRAMES) * DT
    np.testing.assert_allclose(frames[:, 0, 0], 1.25 + 2.75 * t, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(frames[:, 0, 1], np.full(NUM_FRAMES, 3.5))


def test_parabola_matches_closed_form():
    body = Body(x=0.5, y=8.0, vx=3.0, radius=1.0)
    frames = simulate(Scene("parabola", (body,), gravity=GRAVITY))
    t = np.arange(NUM_FRAMES) * DT
    np.testing.assert_allclose(frames[:, 0, 0], 0.5 + 3.0 * t, atol=1e-12)
    np.testing.assert_allclose(frames[:, 0, 1], 8.0 - 0.5 * 2.5 * t**2, atol=1e-12)
    assert frames[10, 0, 1] == pytest.approx(8.0 - 1.25)  # t = 1 s, hand-computed


def test_parabola_second_difference_is_gravity():
    frames = simulate(Scene("parabola", (Body(x=0.0, y=9.0, vx=1.0),), gravity=GRAVITY))
    accel = np.diff(frames[:, 0, 1], n=2) / DT**2
    np.testing.assert_allclose(accel, -GRAVITY, atol=1e-9)


def test_elastic_velocities_hand_computed():
    # m1=1, u1=3, m2=3, u2=-1: v1 = ((1-3)*3 + 2*3*(-1))/4 = -3; v2 = ((3-1)*(-1) + 2*1*3)/4 = 1
    assert elastic_collision_velocities(1.0, 3.0, 3.0, -1.0) == (-3.0, 1.0)


@pytest.mark.parametrize("quantity", ["momentum", "energy"])
def test_collisions_conserve(quantity):
    for scene in _collision_scenes():
        t_c = collision_time(scene)
        assert t_c is not None
        masses = np.array([b.mass for b in scene.bodies])
        _, before = state_at(scene, t_c - 1e-6)
        _, after = state_at(scene, t_c + 1e-6)
        if quantity == "momentum":
            lhs, rhs = masses @ before[:, 0], masses @ after[:, 0]
        else:
            lhs, rhs = 0.5 * masses @ (before**2).sum(-1), 0.5 * masses @ (after**2).sum(-1)
        assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs))


def test_bodies_touch_at_collision_time_and_never_overlap():
    for scene in _collision_scenes(50):
        t_c = collision_time(scene)
        radii = sum(b.radius for b in scene.bodies)
        pos, _ = state_at(scene, t_c)
        assert pos[1, 0] - pos[0, 0] == pytest.approx(radii, abs=1e-9)
        fine = state_at(scene, np.linspace(0, (NUM_FRAMES - 1) * DT, 2000))[0]
        assert np.all(fine[:, 1, 0] - fine[:, 0, 0] >= radii - 1e-9)


def test_collision_positions_are_piecewise_linear():
    a, b = Body(x=1.0, y=5.0, vx=2.0, radius=0.5), Body(x=5.0, y=5.0, vx=-1.0, radius=0.5)
    frames = simulate(Scene("collision", (a, b)))  # touch at t=1 (x = 3, 4); equal masses swap velocities
    assert frames[20, 0, 0] == pytest.approx(3.0 - 1.0)
    assert frames[20, 1, 0] == pytest.approx(4.0 + 2.0)


def test_receding_bodies_never_collide():
    a, b = Body(x=1.0, y=5.0, vx=-1.0), Body(x=5.0, y=5.0, vx=1.0)
    assert collision_time(Scene("collision", (a, b))) is None


@pytest.mark.parametrize(
    ("kind", "bodies", "match"),
    [
        ("spiral", (Body(0.0, 5.0, 1.0),), "unknown scene kind"),
        ("uniform", (), "needs 1 bodies"),
        ("uniform", (Body(0.0, 5.0, 1.0, radius=0.0),), "radius must be > 0"),
        ("uniform", (Body(float("nan"), 5.0, 1.0),), "non-finite"),
        ("collision", (Body(0.0, 5.0, 1.0), Body(1.0, 5.0, -1.0)), "start apart"),
        ("collision", (Body(0.0, 5.0, 1.0), Body(5.0, 6.0, -1.0)), "share height"),
    ],
)
def test_invalid_scenes_raise_config_error(kind, bodies, match):
    with pytest.raises(ConfigError, match=match):
        Scene(kind, bodies)


def test_in_view_counts_partly_visible_bodies():
    pos = np.array([[0.2 - 0.3, 5.0], [10.2, 5.0], [10.4, 5.0]])
    assert in_view(pos, np.array([0.3, 0.3, 0.3])).tolist() == [True, True, False]
