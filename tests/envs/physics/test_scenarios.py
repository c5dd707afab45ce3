"""Split ranges, disjointness and determinism of the scene sampler."""

import numpy as np
import pytest

from turnkit.envs.physics.scenarios import (
    COMBO_HELD_OUT,
    COMBO_TRAIN,
    COMBO_VALUES,
    ID_RADIUS,
    ID_SPEED,
    INTERP_TEST_SPEED,
    INTERP_TRAIN_SPEED,
    MIN_FRAMES_IN_VIEW,
    OOD_RADIUS,
    OOD_SPEED,
    sample_scene,
)
from turnkit.envs.physics.simulate import DT, NUM_FRAMES, WORLD_SIZE, collision_time, in_view, simulate
from turnkit.errors import ConfigError

KINDS = ("uniform", "collision", "parabola")
N = 150


def _inside(value, intervals):
    return any(lo <= value <= hi for lo, hi in intervals)


def _scenes(split, kind, n=N, seed=0, **kw):
    rng = np.random.default_rng(seed)
    return [sample_scene(rng, split, kind=kind, **kw) for _ in range(n)]


@pytest.mark.parametrize("kind", KINDS)
def test_id_ranges(kind):
    for s in _scenes("id", kind):
        for b in s.scene.bodies:
            assert _inside(abs(b.vx), ID_SPEED)
            assert _inside(b.radius, ID_RADIUS[kind])
            assert b.shape == "ball"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("level", ["v", "r", "both"])
def test_ood_ranges_per_level(kind, level):
    for s in _scenes("ood", kind, ood_level=level):
        assert s.ood_level == level
        for b in s.scene.bodies:
            speed_ood, radius_ood = level in ("v", "both"), level in ("r", "both")
            assert _inside(abs(b.vx), OOD_SPEED if speed_ood else ID_SPEED)
            assert _inside(b.radius, OOD_RADIUS[kind] if radius_ood else ID_RADIUS[kind])


def test_ood_speeds_and_radii_avoid_id_ranges():
    for kind in KINDS:
        for s in _scenes("ood", kind, ood_level="both"):
            for b in s.scene.bodies:
                assert not (1.0 <= abs(b.vx) <= 4.0)
                lo, hi = ID_RADIUS[kind][0]
                assert not (lo < b.radius < hi)


def test_ood_any_mixes_the_three_levels():
    assert {s.ood_level for s in _scenes("ood", "uniform", ood_level="any")} == {"v", "r", "both"}


@pytest.mark.parametrize("kind", KINDS)
def test_interp_train_and_test_speeds_are_disjoint(kind):
    train = [abs(b.vx) for s in _scenes("interp_train", kind) for b in s.scene.bodies]
    test = [abs(b.vx) for s in _scenes("interp", kind) for b in s.scene.bodies]
    assert all(_inside(v, INTERP_TRAIN_SPEED) and not 1.25 < v < 3.75 for v in train)
    assert all(_inside(v, INTERP_TEST_SPEED) for v in test)
    assert min(train) < 1.25 and max(train) > 3.75  # both sides of the gap are used


def _combo_of(body, pair):
    values = {"velocity": abs(body.vx), "radius": body.radius, "color": body.color, "shape": body.shape}
    return tuple(COMBO_VALUES[a].index(values[a]) for a in pair)


@pytest.mark.parametrize("pair", [("color", "shape"), ("velocity", "radius"), ("radius", "color")])
@pytest.mark.parametrize("kind", KINDS)
def test_combo_splits_hold_out_combinations(pair, kind):
    train = {_combo_of(b, pair) for s in _scenes("combo_train", kind, combo_pair=pair) for b in s.scene.bodies}
    test = {_combo_of(b, pair) for s in _scenes("combo", kind, combo_pair=pair) for b in s.scene.bodies}
    assert train == set(COMBO_TRAIN)
    assert test == set(COMBO_HELD_OUT)


def test_combo_attributes_take_only_the_two_values():
    for s in _scenes("combo", "collision", combo_pair=("velocity", "shape")):
        for b in s.scene.bodies:
            assert abs(b.vx) in COMBO_VALUES["velocity"] and b.radius in COMBO_VALUES["radius"]
            assert b.color in COMBO_VALUES["color"] and b.shape in COMBO_VALUES["shape"]


@pytest.mark.parametrize("split", ["id", "ood", "combo"])
def test_heights(split):
    for kind in ("uniform", "parabola"):
        for s in _scenes(split, kind):
            b = s.scene.bodies[0]
            top = WORLD_SIZE - 0.5 - b.radius
            lo = top - 1.0 if kind == "parabola" else b.radius + 0.5
            assert lo <= b.y <= top


@pytest.mark.parametrize("split", ["id", "ood", "interp"])
@pytest.mark.parametrize("kind", ["uniform", "parabola"])
def test_bodies_stay_horizontally_in_view_for_24_frames_when_possible(split, kind):
    for s in _scenes(split, kind):
        b = s.scene.bodies[0]
        x = simulate(s.scene)[:, 0, 0]
        visible = (x + b.radius > 0) & (x - b.radius < WORLD_SIZE)
        if b.vx * (MIN_FRAMES_IN_VIEW - 1) * DT <= WORLD_SIZE + b.radius:
            assert visible[:MIN_FRAMES_IN_VIEW].all()
        else:
            assert b.x == pytest.approx(0.0)  # too fast: starts at the left edge


@pytest.mark.parametrize("split", ["id", "ood", "interp_train", "combo"])
def test_collisions_have_eight_frames_before_and_after(split):
    for s in _scenes(split, "collision"):
        a, b = s.scene.bodies
        t_c = collision_time(s.scene)
        assert 8 * DT <= t_c <= (NUM_FRAMES - 1 - 8) * DT
        assert a.y == b.y and a.vx > 0 >= b.vx
        frames = simulate(s.scene)
        assert in_view(frames[0], np.array([a.radius, b.radius])).all()


@pytest.mark.parametrize("split", ["id", "ood", "interp", "combo_train"])
def test_same_seed_same_scene(split):
    assert _scenes(split, None, n=20, seed=5) == _scenes(split, None, n=20, seed=5)
    assert _scenes(split, None, n=20, seed=5) != _scenes(split, None, n=20, seed=6)


def test_kind_none_draws_all_kinds():
    assert {s.scene.kind for s in _scenes("id", None, n=60)} == set(KINDS)


def test_radii_are_shown_exactly():
    for s in _scenes("ood", None, ood_level="r"):
        for b in s.scene.bodies:
            assert b.radius == round(b.radius, 2)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"split": "train"}, "unknown split"),
        ({"split": "id", "kind": "orbit"}, "kind must be"),
        ({"split": "ood", "ood_level": "x"}, "ood_level"),
        ({"split": "combo", "combo_pair": ("color", "color")}, "combo_pair"),
    ],
)
def test_bad_options_raise_config_error(kw, match):
    with pytest.raises(ConfigError, match=match):
        sample_scene(np.random.default_rng(0), **kw)
