"""`PhysicsPredictionEnv`: predict where bodies move, chunk by chunk, in PhyWorld's three scenarios.

## Description
A text version of the PhyWorld study (Kang et al., arXiv 2411.02385). Each episode is one scene (uniform
motion, a 1-D elastic collision of two bodies, or parabolic motion under gravity ``(0, -2.5)``) in a
10 x 10 world filmed at 0.1 s per frame for 32 frames. The policy sees the world rules, the bodies (colour,
shape, radius) and frames 0-2 as coordinates, then predicts the later frames in up to four chunks
(3-9, 10-16, 17-23, 24-31). After each answer the env reveals the true positions of that chunk and asks for
the next one.

## Action
Text with one line per body per frame, ``frame 5 A: x=3.21 y=4.00`` (see
:mod:`turnkit.envs.physics.protocol`); other text is ignored.

## Rewards
Per chunk ``exp(-(e_v + e_p))``: mean finite-difference velocity error plus mean position error over the
bodies in view (see :mod:`turnkit.envs.physics.scoring`). A forfeited chunk scores 0.

## Episode end
After the last chunk (``info["success"]``: episode velocity error <= 0.25 and position error <= 0.25, no
chunk forfeited). An answer that lacks requested lines is a format error: the env explains the format and
asks again, up to ``max_format_retries`` times per episode; after that such a chunk is forfeited (its
missing positions count as "stays where last shown") and the episode moves on.

## Arguments
``split`` (``id``, ``ood``, ``interp_train``, ``interp``, ``combo_train``, ``combo``), ``kind`` (a scene
kind or ``None`` for all three), ``ood_level`` (``v``, ``r``, ``both``, ``any``), ``combo_pair`` (two of
``velocity``, ``radius``, ``color``, ``shape``), ``max_format_retries``, plus the :class:`TextEnv` arguments.

Example:
    >>> import gymnasium, turnkit
    >>> env = gymnasium.make("turnkit/PhysicsPrediction-v0", kind="uniform")
    >>> obs, info = env.reset(seed=0)
    >>> obs.splitlines()[-4]
    'frame 2 A: x=5.70 y=1.35'
    >>> obs, reward, terminated, truncated, info = env.step("frame 3 A: x=3.6 y=3.0")  # incomplete
    >>> reward, terminated, info["format_error"].startswith("missing")
    (0.0, False, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from turnkit.envs.core import TextEnv, Transition
from turnkit.envs.physics.protocol import format_frames, missing_positions, parse_positions, request_text
from turnkit.envs.physics.scenarios import SPLITS, check_options, sample_scene
from turnkit.envs.physics.scoring import (
    SUCCESS_POSITION_ERROR,
    SUCCESS_VELOCITY_ERROR,
    ChunkScore,
    episode_score,
    score_chunk,
)
from turnkit.envs.physics.tasks import EpisodeData, episode_data, scene_task
from turnkit.errors import ConfigError
from turnkit.types import Task

_MAX_MISSING_SHOWN = 4


class PhysicsPredictionEnv(TextEnv):
    """Predict later frames of a PhyWorld scene from its first three (see the module docstring).

    Args:
        split: One of :attr:`splits`.
        kind: ``"uniform"``, ``"collision"``, ``"parabola"``, or ``None`` to draw one of the three per task.
        ood_level: For ``split="ood"``: ``"v"`` (speed), ``"r"`` (radius), ``"both"``, or ``"any"``.
        combo_pair: For combo splits: the attribute pair whose combinations are held out.
        max_format_retries: Unreadable answers the env asks again for, per episode.
        **kwargs: Passed to :class:`~turnkit.envs.core.TextEnv` (``tasks``, ``max_invalid_actions``...).
    """

    splits: ClassVar[tuple[str, ...]] = SPLITS

    def __init__(
        self,
        *,
        split: str = "id",
        kind: str | None = None,
        ood_level: str = "any",
        combo_pair: Sequence[str] = ("color", "shape"),
        max_format_retries: int = 2,
        **kwargs: Any,
    ) -> None:
        super().__init__(split=split, **kwargs)
        check_options(split, kind, ood_level, tuple(combo_pair))
        if max_format_retries < 0:
            raise ConfigError(f"max_format_retries must be >= 0, got {max_format_retries}")
        self.kind = kind
        self.ood_level = ood_level
        self.combo_pair = tuple(combo_pair)
        self.max_format_retries = max_format_retries
        self._episode: EpisodeData | None = None
        self._chunk = 0
        self._retries_left = max_format_retries
        self._scores: list[ChunkScore] = []

    # ------------------------------------------------------------------ TextEnv hooks
    def generate_task(self, rng: np.random.Generator) -> Task:
        """Draw a scene of this env's split and turn it into a task."""
        sampled = sample_scene(rng, self.split, kind=self.kind, ood_level=self.ood_level, combo_pair=self.combo_pair)
        return scene_task(sampled)

    def begin(self, task: Task) -> str:
        """Start asking for the first chunk; the prompt already holds frames 0-2."""
        self._episode = episode_data(task)
        self._chunk = 0
        self._retries_left = self.max_format_retries
        self._scores = []
        return task.prompt

    def respond(self, action: str) -> Transition:
        """Score the answer to the current chunk, or explain the format and ask again."""
        ep = self._data()
        first, last = ep.schedule[self._chunk]
        frames = range(first, last + 1)
        parsed = parse_positions(action, ep.names)
        missing = missing_positions(parsed, frames, ep.names)
        if missing and self._retries_left > 0:
            self._retries_left -= 1
            return self._format_feedback(missing, first, last)
        score = self._score(parsed, first, last, forfeited=bool(missing))
        self._scores.append(score)
        self._chunk += 1
        return self._after_chunk(score, first, last)

    def get_state(self) -> dict[str, Any]:
        """The episode's progress: chunk index, retries left and the chunk scores so far (O(chunks))."""
        return {"chunk": self._chunk, "retries_left": self._retries_left, "scores": tuple(self._scores)}

    def set_state(self, state: dict[str, Any]) -> None:
        """Install a state from :meth:`get_state`; the arrays are re-derived from the restored task."""
        self._episode = episode_data(self.task)
        self._chunk = state["chunk"]
        self._retries_left = state["retries_left"]
        self._scores = list(state["scores"])

    # ------------------------------------------------------------------ internals
    def _data(self) -> EpisodeData:
        if self._episode is None:
            self._episode = episode_data(self.task)
        return self._episode

    def _score(self, parsed: dict, first: int, last: int, *, forfeited: bool) -> ChunkScore:
        ep = self._data()
        anchor = ep.frames[first - 1]
        predicted = np.array(
            [[parsed.get((f, n), tuple(anchor[i])) for i, n in enumerate(ep.names)] for f in range(first, last + 1)],
            dtype=float,
        )
        span = slice(first, last + 1)
        return score_chunk(predicted, ep.frames[span], anchor, ep.scored[span], ep.metric[span], forfeited=forfeited)

    def _format_feedback(self, missing: list[str], first: int, last: int) -> Transition:
        ep = self._data()
        shown = ", ".join(missing[:_MAX_MISSING_SHOWN])
        more = f" and {len(missing) - _MAX_MISSING_SHOWN} more" if len(missing) > _MAX_MISSING_SHOWN else ""
        problem = f"missing {len(missing)} position line(s): {shown}{more}"
        text = (
            f"Your answer could not be read completely ({problem}). "
            f"{self._retries_left} format retr{'y' if self._retries_left == 1 else 'ies'} left; after that an "
            "unreadable answer forfeits its chunk.\n" + request_text(first, last, ep.names)
        )
        info = {"format_error": problem, "format_retries_left": self._retries_left, "chunk": self._chunk}
        return Transition(text, reward=0.0, terminated=False, info=info)

    def _after_chunk(self, score: ChunkScore, first: int, last: int) -> Transition:
        ep = self._data()
        if score.forfeited:
            head = f"Frames {first}-{last}: the answer could not be read and no format retries are left; 0 reward."
        else:
            head = (
                f"Frames {first}-{last}: velocity error {score.velocity_error:.3f}, position error "
                f"{score.position_error:.3f}, reward {score.reward:.3f}."
            )
        lines = [head, "True positions:", *format_frames(ep.frames[first : last + 1], first, ep.names)]
        info: dict[str, Any] = {
            "chunk": self._chunk - 1,
            "frames": (first, last),
            "velocity_error": score.velocity_error,
            "position_error": score.position_error,
            "scored_pairs": score.scored,
            "forfeited": score.forfeited,
        }
        done = self._chunk >= len(ep.schedule)
        if done:
            final = episode_score(self._scores)
            info.update(
                success=final.success,
                episode_velocity_error=final.velocity_error,
                episode_position_error=final.position_error,
                forfeited_chunks=final.forfeited_chunks,
            )
            lines.append(
                f"Episode over: velocity error {final.velocity_error:.3f} (success needs <= "
                f"{SUCCESS_VELOCITY_ERROR}), position error {final.position_error:.3f} (<= "
                f"{SUCCESS_POSITION_ERROR}); {'success' if final.success else 'no success'}."
            )
        else:
            lines.append(request_text(*ep.schedule[self._chunk], ep.names))
        return Transition("\n".join(lines), reward=score.reward, terminated=done, info=info)
