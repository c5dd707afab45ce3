"""Physics tasks: building a :class:`~turnkit.types.Task` from a scene, and reading one back for an episode.

A task's parts:

* ``prompt``: the world rules, the body list, frames 0-2 (2 decimals) and the request for the first chunk.
* ``privileged``: ``frames`` (the exact trajectory, ``32 x bodies x [x, y]``), ``velocities`` (initial
  ``[vx, vy]`` per body) and ``collision_time`` (seconds, or ``None``). Never shown before it is revealed.
* ``metadata`` (public): ``kind``, ``gravity``, ``bodies`` (name, colour, shape, radius: all shown in the
  prompt), ``ood_level`` and ``combo_pair``.

Example:
    >>> import numpy as np
    >>> from turnkit.envs.physics.scenarios import sample_scene
    >>> task = scene_task(sample_scene(np.random.default_rng(0), "id", kind="uniform"))
    >>> task.family, task.metadata["kind"], len(task.privileged["frames"])
    ('physics', 'uniform', 32)
    >>> ep = episode_data(task)
    >>> ep.schedule[0], ep.names
    ((3, 9), ('A',))
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from turnkit.envs.physics.protocol import OBJECT_NAMES, describe_world, format_frames, request_text
from turnkit.envs.physics.scenarios import SampledScene
from turnkit.envs.physics.simulate import DT, GIVEN_FRAMES, NUM_FRAMES, collision_time, in_view, simulate
from turnkit.errors import EnvError
from turnkit.types import Task

CHUNKS = ((3, 9), (10, 16), (17, 23), (24, 31))
"""The frame ranges (inclusive) asked for, in order; chunks with no body in view are skipped."""
DIFFICULTY = {"uniform": 1.0, "parabola": 2.0, "collision": 3.0}
"""Task difficulty by scene kind."""


@dataclass(frozen=True)
class EpisodeData:
    """Everything an episode derives from its task (recomputed on reset and restore; never mutated).

    Attributes:
        frames: True centres, shape ``(32, bodies, 2)``.
        names: Body names.
        scored: Bodies in view, shape ``(32, bodies)``: the pairs that are scored.
        metric: Pairs of the episode metric (post-collision frames for collisions), shape ``(32, bodies)``.
        schedule: The chunks asked for, in order.
        description: The world rules and body list (public).
    """

    frames: np.ndarray
    names: tuple[str, ...]
    scored: np.ndarray
    metric: np.ndarray
    schedule: tuple[tuple[int, int], ...]
    description: str


def _task_id(sampled: SampledScene) -> str:
    digest = hashlib.sha1(repr((sampled.split, sampled.scene)).encode()).hexdigest()[:12]
    return f"physics-{sampled.scene.kind}-{digest}"


def scene_task(sampled: SampledScene) -> Task:
    """Build the task of a sampled scene (the prompt asks for the first chunk).

    Example:
        >>> import numpy as np
        >>> from turnkit.envs.physics.scenarios import sample_scene
        >>> t = scene_task(sample_scene(np.random.default_rng(1), "ood", kind="collision", ood_level="r"))
        >>> t.split, t.metadata["ood_level"], [b["name"] for b in t.metadata["bodies"]]
        ('ood', 'r', ['A', 'B'])
    """
    scene = sampled.scene
    frames = simulate(scene)
    bodies = [
        {"name": OBJECT_NAMES[i], "color": b.color, "shape": b.shape, "radius": b.radius}
        for i, b in enumerate(scene.bodies)
    ]
    metadata = {
        "kind": scene.kind,
        "gravity": scene.gravity,
        "bodies": bodies,
        "ood_level": sampled.ood_level,
        "combo_pair": list(sampled.combo_pair),
    }
    privileged = {
        "frames": frames.tolist(),
        "velocities": [[b.vx, b.vy] for b in scene.bodies],
        "collision_time": collision_time(scene),
    }
    draft = Task(task_id=_task_id(sampled), prompt="", privileged=privileged, metadata=metadata)
    data = episode_data(draft)
    names = data.names
    given = format_frames(data.frames[:GIVEN_FRAMES], 0, names)
    prompt = "\n".join(
        [
            data.description,
            "Known positions of the object centres:",
            *given,
            request_text(*data.schedule[0], names),
        ]
    )
    return Task(
        task_id=draft.task_id,
        prompt=prompt,
        privileged=privileged,
        family="physics",
        split=sampled.split,
        difficulty=DIFFICULTY[scene.kind],
        metadata=metadata,
    )


def _field(mapping: Mapping, key: str, where: str) -> object:
    if key not in mapping:
        raise EnvError(f"physics task {where} lacks {key!r}")
    return mapping[key]


def episode_data(task: Task) -> EpisodeData:
    """Derive the episode arrays, masks and chunk schedule from a task.

    Raises:
        EnvError: When the task lacks a field of the physics schema (see the module docstring).

    Example:
        >>> episode_data(Task(task_id="x", prompt=""))
        Traceback (most recent call last):
        ...
        turnkit.errors.EnvError: physics task metadata lacks 'bodies'
    """
    bodies = _field(task.metadata, "bodies", "metadata")
    gravity = float(_field(task.metadata, "gravity", "metadata"))  # type: ignore[arg-type]
    frames = np.asarray(_field(task.privileged, "frames", "privileged"), dtype=float)
    t_c = _field(task.privileged, "collision_time", "privileged")
    names = tuple(str(b["name"]) for b in bodies)  # type: ignore[attr-defined]
    if frames.shape != (NUM_FRAMES, len(names), 2):
        raise EnvError(f"physics task frames have shape {frames.shape}, expected ({NUM_FRAMES}, {len(names)}, 2)")
    radii = np.array([float(b["radius"]) for b in bodies])  # type: ignore[attr-defined]
    scored = in_view(frames, radii)
    scored[:GIVEN_FRAMES] = False
    metric = scored.copy()
    if t_c is not None:
        after = (np.arange(NUM_FRAMES) - 1) * DT >= float(t_c)  # type: ignore[arg-type]
        metric &= after[:, None]
    schedule = tuple(c for c in CHUNKS if scored[c[0] : c[1] + 1].any())
    if not schedule:
        schedule = CHUNKS[:1]
    return EpisodeData(
        frames=frames,
        names=names,
        scored=scored,
        metric=metric,
        schedule=schedule,
        description=describe_world(bodies, gravity),  # type: ignore[arg-type]
    )
