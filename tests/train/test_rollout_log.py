import json
from pathlib import Path

import pytest

from turnkit.train.config import TrainConfig
from turnkit.train.loop import step_advantages, trained_episodes
from turnkit.train.rollout_log import learner_records, write_step_rollouts
from turnkit.types import AgentTurn, ErrorCause, Step, Trajectory, TrajectoryError


def episode(seed: int, rewards: tuple[float, ...], *, group: int = 0, error: bool = False) -> Trajectory:
    steps = tuple(
        Step(f"obs {h}", AgentTurn(f"act {h}", token_ids=(h, h + 1, h + 2), logprobs=(-0.1,) * 3), r,
             terminated=h == len(rewards) - 1)
        for h, r in enumerate(rewards)
    )  # fmt: skip
    err = TrajectoryError(ErrorCause.SANDBOX, "bwrap died") if error else None
    return Trajectory("demo", seed, steps, error=err, group=group)


def test_tied_and_errored_episodes_are_kept_untrained_and_the_rest_trained() -> None:
    # group 0 ties (both return 1), group 1 differs (1 vs 0), and one errored episode in group 1
    trajs = [episode(0, (0.0, 1.0)), episode(1, (1.0, 0.0)), episode(2, (1.0,), group=1),
             episode(3, (0.0,), group=1), episode(4, (1.0,), group=1, error=True)]  # fmt: skip
    cfg = TrainConfig(grpo={"group_size": 2, "estimator": "rloo"})
    advantages = step_advantages(trajs, cfg)
    assert advantages == [(0.0, 0.0), (0.0, 0.0), (1.0,), (-1.0,), None]
    trained = trained_episodes(advantages, cfg)
    assert trained == [False, False, True, True, False]
    records = learner_records(trajs, advantages, trained)
    masks = [[s["mask"] for s in r["steps"]] for r in records]
    assert masks[0] == [[0, 0, 0], [0, 0, 0]] and masks[2] == [[1, 1, 1]] and masks[4] == [[0, 0, 0]]
    assert "advantage" not in records[4]["steps"][0] and records[4]["error"]["cause"] == "sandbox"
    assert [s["advantage"] for s in records[3]["steps"]] == [-1.0]
    assert all("critic_rewards" not in s for r in records for s in r["steps"])  # no critics: the env reward only
    # skip_zero_advantage=false trains the tied rows too
    assert trained_episodes(advantages, TrainConfig(update={"skip_zero_advantage": False})) == [True] * 4 + [False]


def test_credit_is_written_per_turn_and_mismatches_are_refused(tmp_path: Path) -> None:
    trajs = [episode(0, (0.0, 1.0))]
    credit = [{"env": (0.0, 1.0), "length": (-0.25, -0.5)}]
    records = learner_records(trajs, [(0.5, -0.5)], [True], credit=credit)
    assert [s["critic_rewards"] for s in records[0]["steps"]] == [{"env": 0.0, "length": -0.25},
                                                                   {"env": 1.0, "length": -0.5}]  # fmt: skip
    path = write_step_rollouts(tmp_path, 12, records)
    assert path == tmp_path / "rollouts" / "step-000012" / "trajectories.jsonl"
    assert [json.loads(line) for line in path.read_text().splitlines()] == records
    assert [p.name for p in path.parent.iterdir()] == ["trajectories.jsonl"]  # no temporary file left behind
    with pytest.raises(ValueError, match="1 advantages for 2 turns"):
        learner_records(trajs, [(0.5,)], [True])
    with pytest.raises(ValueError, match="one advantage tuple"):
        learner_records(trajs, [], [True])
