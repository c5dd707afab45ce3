"""A training step's episodes as the learner saw them, kept in the run folder for ``turnkit view``.

Every ``TrainConfig.log.rollouts_every`` steps the GRPO loop writes ``rollouts/step-NNNNNN/trajectories.jsonl``: one
record per episode (:func:`~turnkit.rollout.records.trajectory_to_record` with token ids and the privileged task
data, which the viewer shows only behind its toggle), and three more keys on every step:

=================  =============================================================================================
``critic_rewards``  each part's weighted reward for the turn, ``{"env": r, "<critic>": w·r, ...}``; they add up to
                    the reward the advantages were computed from (only when the run has critics)
``advantage``       the turn's advantage (absent for an errored episode, which is masked)
``mask``            one 0/1 per generated token: 1 where the token entered the policy loss
=================  =============================================================================================

A token is trained when its episode has an advantage and was not left out as a tied row
(``skip_zero_advantage``); an errored episode's tokens never are.

Example:
    >>> from turnkit.types import AgentTurn, Step, Trajectory
    >>> turn = AgentTurn("ANSWER: 4", token_ids=(7, 8), logprobs=(-0.1, -0.2))
    >>> traj = Trajectory("demo", 0, (Step("2+2?", turn, 1.0, terminated=True),))
    >>> [record] = learner_records([traj], [(0.5,)], [True], credit=[{"env": (1.0,), "length": (-0.2,)}])
    >>> step = record["steps"][0]
    >>> step["advantage"], step["mask"], step["critic_rewards"]
    (0.5, [1, 1], {'env': 1.0, 'length': -0.2})
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from turnkit.rollout.records import trajectory_to_record
from turnkit.types import Trajectory

ROLLOUTS_DIR = "rollouts"
"""The run folder's sub-folder of kept training steps."""


def learner_records(
    trajs: Sequence[Trajectory],
    advantages: Sequence[Sequence[float] | None],
    trained: Sequence[bool],
    *,
    credit: Sequence[Mapping[str, Sequence[float]]] | None = None,
) -> list[dict[str, Any]]:
    """JSON-ready records of a rollout batch with the learner's view of every turn.

    Args:
        trajs: The step's episodes.
        advantages: Per episode, one advantage per turn (``None``: errored, masked).
        trained: Per episode, whether its tokens entered the policy loss.
        credit: Per episode, each critic's weighted reward per turn (``CriticScores.credit``); ``None``: the run
            has no critics.

    Raises:
        ValueError: If the sequences do not have one entry per episode, or a turn count disagrees.
    """
    if not len(trajs) == len(advantages) == len(trained) == (len(credit) if credit is not None else len(trajs)):
        raise ValueError("learner_records needs one advantage tuple, trained flag and credit entry per episode")
    records = []
    for i, traj in enumerate(trajs):
        record = trajectory_to_record(traj, include_privileged=True, tokens=True)
        adv = advantages[i]
        parts = credit[i] if credit is not None else {}
        for h, step in enumerate(record["steps"]):
            if parts:
                step["critic_rewards"] = {name: float(rewards[h]) for name, rewards in parts.items()}
            if adv is not None:
                if len(adv) != len(record["steps"]):
                    raise ValueError(f"episode {i}: {len(adv)} advantages for {len(record['steps'])} turns")
                step["advantage"] = float(adv[h])
            step["mask"] = [int(trained[i])] * len(step["token_ids"])
        records.append(record)
    return records


def write_step_rollouts(run_dir: str | Path, step: int, records: Sequence[Mapping[str, Any]]) -> Path:
    """Write one step's records to ``run_dir/rollouts/step-NNNNNN/trajectories.jsonl`` atomically.

    A resumed run that plays the step again replaces the file. Returns the file's path.

    Example:
        >>> folder = Path(tempfile.mkdtemp())
        >>> write_step_rollouts(folder, 3, [{"env_id": "demo", "steps": []}]).relative_to(folder).as_posix()
        'rollouts/step-000003/trajectories.jsonl'
    """
    folder = Path(run_dir) / ROLLOUTS_DIR / f"step-{step:06d}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "trajectories.jsonl"
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".trajectories.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


__all__ = ["ROLLOUTS_DIR", "learner_records", "write_step_rollouts"]
