"""Task schema: privileged trajectory, public metadata, chunk schedule and metric masks."""

import numpy as np
import pytest

from turnkit.envs.physics.scenarios import SampledScene, sample_scene
from turnkit.envs.physics.simulate import DT, Body, Scene, collision_time
from turnkit.envs.physics.tasks import CHUNKS, episode_data, scene_task
from turnkit.errors import EnvError
from turnkit.types import Task


def _task(kind, split="id", seed=0, **kw):
    return scene_task(sample_scene(np.random.default_rng(seed), split, kind=kind, **kw))


def test_task_id_is_stable_and_distinct():
    assert _task("uniform", seed=1).task_id == _task("uniform", seed=1).task_id
    assert _task("uniform", seed=1).task_id != _task("uniform", seed=2).task_id


def test_privileged_holds_the_full_trajectory():
    task = _task("collision")
    assert np.asarray(task.privileged["frames"]).shape == (32, 2, 2)
    assert task.privileged["collision_time"] is not None


def test_prompt_holds_no_privileged_number():
    for kind in ("uniform", "collision", "parabola"):
        task = _task(kind, seed=7)
        hidden = [task.privileged["collision_time"], *np.ravel(task.privileged["velocities"])]
        hidden += list(np.ravel(task.privileged["frames"])[6:])
        for value in hidden:
            if value is not None and value != 0.0:
                assert repr(float(value)) not in task.prompt


def test_metric_mask_keeps_post_collision_frames_only():
    task = _task("collision", seed=4)
    ep = episode_data(task)
    t_c = task.privileged["collision_time"]
    first_post = int(np.ceil(t_c / DT - 1e-12)) + 1
    assert not ep.metric[:first_post].any()
    np.testing.assert_array_equal(ep.metric[first_post:], ep.scored[first_post:])


def test_metric_equals_scored_without_collision():
    ep = episode_data(_task("parabola"))
    np.testing.assert_array_equal(ep.metric, ep.scored)
    assert not ep.scored[:3].any()


def test_schedule_skips_chunks_with_nothing_in_view():
    # Starts at the left edge at speed 6: in view while x - 0.5 < 10, i.e. until frame 17.
    scene = Scene("uniform", (Body(x=0.0, y=5.0, vx=6.0, radius=0.5),))
    ep = episode_data(scene_task(SampledScene(scene, "ood", ood_level="v")))
    assert ep.schedule == CHUNKS[:3]
    assert ep.scored[17, 0] and not ep.scored[18, 0]


def test_collision_time_is_consistent_with_the_scene():
    sampled = sample_scene(np.random.default_rng(9), "ood", kind="collision", ood_level="both")
    assert scene_task(sampled).privileged["collision_time"] == collision_time(sampled.scene)


@pytest.mark.parametrize(
    ("task", "match"),
    [
        (Task(task_id="t", prompt=""), "metadata lacks 'bodies'"),
        (Task(task_id="t", prompt="", metadata={"bodies": [], "gravity": 0.0}), "privileged lacks 'frames'"),
        (
            Task(
                task_id="t",
                prompt="",
                metadata={"bodies": [{"name": "A", "radius": 1.0}], "gravity": 0.0},
                privileged={"frames": [[[0.0, 0.0]]], "collision_time": None},
            ),
            "frames have shape",
        ),
    ],
)
def test_malformed_tasks_raise_env_error(task, match):
    with pytest.raises(EnvError, match=match):
        episode_data(task)
