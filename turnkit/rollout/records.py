"""Trajectories as JSON records (one per line in ``trajectories.jsonl``).

Privileged task data is left out unless asked for, so that eval outputs can be shared as they are.

Example:
    >>> from turnkit.types import AgentTurn, Step, Trajectory
    >>> t = Trajectory("turnkit/MathEpisodes-v0", 3, (Step("2+2?", AgentTurn("ANSWER: 4", (5, 6)), 1.0, True),))
    >>> rec = trajectory_to_record(t)
    >>> rec["steps"][0]["action"], rec["total_reward"], rec["success"]
    ('ANSWER: 4', 1.0, True)
"""

from __future__ import annotations

import json
from typing import Any

from turnkit.types import Trajectory


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return repr(value)


def trajectory_to_record(traj: Trajectory, *, include_privileged: bool = False, tokens: bool = False) -> dict:
    """A JSON-ready dict of a trajectory (token ids only when ``tokens=True``)."""
    steps = []
    for s in traj.steps:
        step: dict[str, Any] = {
            "observation": s.observation,
            "action": s.action.text,
            "reward": s.reward,
            "terminated": s.terminated,
            "truncated": s.truncated,
            "info": _jsonable(dict(s.info)),
        }
        if tokens:
            step["token_ids"] = list(s.action.token_ids)
            step["logprobs"] = list(s.action.logprobs)
        steps.append(step)
    rec: dict[str, Any] = {
        "env_id": traj.env_id,
        "seed": traj.seed,
        "group": traj.group,
        "task_id": traj.task.task_id if traj.task else None,
        "split": traj.task.split if traj.task else None,
        "initial_observation": traj.initial_observation,
        "steps": steps,
        "final_observation": traj.final_observation,
        "total_reward": traj.total_reward,
        "success": traj.success,
        "error": None if traj.error is None else {"cause": traj.error.cause.value, "message": traj.error.message},
    }
    if include_privileged and traj.task is not None:
        rec["privileged"] = _jsonable(dict(traj.task.privileged))
    return rec


def write_jsonl(path: str, trajectories: list[Trajectory], **kwargs: Any) -> None:
    """Write trajectories as JSON lines (keyword arguments go to :func:`trajectory_to_record`)."""
    with open(path, "w", encoding="utf-8") as f:
        for t in trajectories:
            f.write(json.dumps(trajectory_to_record(t, **kwargs), ensure_ascii=False) + "\n")
