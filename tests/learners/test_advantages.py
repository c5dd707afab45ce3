"""Hand-computed checks of the advantage estimators (python -m pytest tests/learners/test_advantages.py)."""

from __future__ import annotations

import math

import pytest
import torch

from turnkit.errors import ConfigError, DataError
from turnkit.learners.advantages import (
    group_advantages,
    prime_advantages,
    returns_to_go,
    rloo_advantages,
    trajectory_advantages,
    turn_advantages,
    whiten,
)
from turnkit.types import AgentTurn, ErrorCause, Step, Trajectory, TrajectoryError

# Two groups of three rewards used throughout:
#   group 0: [1, 2, 3]  mean 2, deviations [-1, 0, 1], sample var (1 + 0 + 1)/2 = 1, std 1
#   group 1: [0, 0, 3]  mean 1, deviations [-1, -1, 2], sample var (1 + 1 + 4)/2 = 3, std sqrt(3)
REWARDS = torch.tensor([1.0, 2.0, 3.0, 0.0, 0.0, 3.0])
GROUPS = torch.tensor([0, 0, 0, 1, 1, 1])
S3 = math.sqrt(3.0)


def test_grpo_two_groups_of_three() -> None:
    adv = group_advantages(REWARDS, GROUPS, eps=0.0)
    expected = [-1.0, 0.0, 1.0, -1 / S3, -1 / S3, 2 / S3]  # deviations / std
    assert adv.tolist() == pytest.approx(expected)


def test_grpo_eps_enters_the_denominator() -> None:
    adv = group_advantages(REWARDS, GROUPS, eps=1.0)
    # group 0: [-1, 0, 1] / (1 + 1); group 1: [-1, -1, 2] / (sqrt(3) + 1)
    expected = [-0.5, 0.0, 0.5, -1 / (S3 + 1), -1 / (S3 + 1), 2 / (S3 + 1)]
    assert adv.tolist() == pytest.approx(expected)


def test_dr_grpo_does_not_divide_by_std() -> None:
    adv = group_advantages(REWARDS, GROUPS, scale_by_std=False)
    assert adv.tolist() == pytest.approx([-1.0, 0.0, 1.0, -1.0, -1.0, 2.0])  # deviations only


def test_rloo_two_groups_of_three() -> None:
    adv = rloo_advantages(REWARDS, GROUPS)
    # group 0: 1 - (2+3)/2 = -1.5; 2 - (1+3)/2 = 0; 3 - (1+2)/2 = 1.5
    # group 1: 0 - (0+3)/2 = -1.5 (twice); 3 - (0+0)/2 = 3
    assert adv.tolist() == pytest.approx([-1.5, 0.0, 1.5, -1.5, -1.5, 3.0])


def test_groups_need_not_be_contiguous() -> None:
    order = torch.tensor([0, 3, 1, 4, 2, 5])  # interleave the two groups, with non-contiguous ids 7 and 42
    ids = torch.where(GROUPS == 0, 7, 42)[order]
    adv = group_advantages(REWARDS[order], ids, eps=0.0)
    assert adv.tolist() == pytest.approx(group_advantages(REWARDS, GROUPS, eps=0.0)[order].tolist())


@pytest.mark.parametrize("fn", [group_advantages, rloo_advantages])
def test_singleton_group_gives_zero(fn) -> None:
    adv = fn(torch.tensor([5.0, 1.0, 3.0]), torch.tensor([0, 1, 1]))
    assert adv[0].item() == 0.0  # alone in group 0: no baseline, documented as 0


@pytest.mark.parametrize("fn", [group_advantages, rloo_advantages])
def test_all_equal_rewards_give_zero_not_nan(fn) -> None:
    adv = fn(torch.tensor([0.7, 0.7, 0.7, 0.7]), torch.zeros(4, dtype=torch.long))
    assert torch.equal(adv, torch.zeros(4))


def test_mismatched_shapes_raise() -> None:
    with pytest.raises(ValueError, match="group_ids"):
        group_advantages(torch.ones(3), torch.zeros(2, dtype=torch.long))


def test_returns_to_go_discounted() -> None:
    rewards = torch.tensor([[1.0, 0.0, 2.0], [3.0, 1.0, 0.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    # row 0, gamma 0.5: G2 = 2; G1 = 0 + 0.5*2 = 1; G0 = 1 + 0.5*1 = 1.5
    # row 1: G1 = 1; G0 = 3 + 0.5*1 = 3.5; padded position -> 0
    assert returns_to_go(rewards, 0.5, mask).tolist() == [[1.5, 1.0, 2.0], [3.5, 1.0, 0.0]]


def test_returns_to_go_ignores_rewards_outside_mask() -> None:
    rewards = torch.tensor([[1.0, 100.0]])
    mask = torch.tensor([[True, False]])
    assert returns_to_go(rewards, 1.0, mask).tolist() == [[1.0, 0.0]]  # the 100 is padding


def test_returns_to_go_rejects_bad_gamma() -> None:
    with pytest.raises(ConfigError, match="gamma"):
        returns_to_go(torch.zeros(1, 2), gamma=1.5)


# Per-turn case used below: one group of two trajectories, gamma = 1.
#   A: turn rewards [1, 0, 1] -> returns-to-go [2, 1, 1], episode return 2
#   B: turn rewards [0, 4]    -> returns-to-go [4, 4],    episode return 4
#   episode returns [2, 4]: mean 3, sample std sqrt(((2-3)^2 + (4-3)^2)/1) = sqrt(2)
TURN_REWARDS = torch.tensor([[1.0, 0.0, 1.0], [0.0, 4.0, 0.0]])
TURN_MASK = torch.tensor([[True, True, True], [True, True, False]])
S2 = math.sqrt(2.0)


def test_turn_advantages_grpo_uses_episode_statistics() -> None:
    adv = turn_advantages(TURN_REWARDS, TURN_MASK, [0, 0], estimator="grpo", eps=0.0)
    # (G - 3) / sqrt(2): A -> [-1, -2, -2]/sqrt(2); B -> [1, 1]/sqrt(2), padding 0
    expected = [[-1 / S2, -2 / S2, -2 / S2], [1 / S2, 1 / S2, 0.0]]
    assert adv.tolist() == [pytest.approx(row) for row in expected]


def test_turn_advantages_rloo() -> None:
    adv = turn_advantages(TURN_REWARDS, TURN_MASK, [0, 0], estimator="rloo")
    # baseline of A = B's episode return 4; of B = A's 2: A -> [2-4, 1-4, 1-4]; B -> [4-2, 4-2]
    assert adv.tolist() == [[-2.0, -3.0, -3.0], [2.0, 2.0, 0.0]]


def test_turn_advantages_tied_group_stays_finite() -> None:
    # both episode returns are 2 (std 0): scale falls back to 1, so A = G - 2
    rewards = torch.tensor([[1.0, 1.0], [0.0, 2.0]])  # returns-to-go [2, 1] and [2, 2]
    adv = turn_advantages(rewards, torch.ones(2, 2, dtype=torch.bool), [0, 0], estimator="grpo")
    assert adv.tolist() == [[0.0, -1.0], [0.0, 0.0]]


def test_turn_advantages_reduce_to_episode_grpo_for_outcome_rewards() -> None:
    # outcome reward on the last turn only, gamma = 1: every turn gets the episode GRPO advantage
    outcome = torch.tensor([1.0, 0.0, 0.0, 1.0])
    rewards = torch.zeros(4, 3)
    rewards[:, 2] = outcome
    adv = turn_advantages(rewards, torch.ones(4, 3, dtype=torch.bool), [0, 0, 0, 0])
    episode = group_advantages(outcome, [0, 0, 0, 0])
    assert torch.allclose(adv, episode[:, None].expand(4, 3))


def test_turn_advantages_singleton_is_zero_even_with_dense_rewards() -> None:
    adv = turn_advantages(torch.tensor([[1.0, 2.0]]), torch.ones(1, 2, dtype=torch.bool), [0])
    assert adv.tolist() == [[0.0, 0.0]]


def test_turn_advantages_unknown_estimator() -> None:
    with pytest.raises(ConfigError, match="estimator"):
        turn_advantages(TURN_REWARDS, TURN_MASK, [0, 0], estimator="ppo")  # type: ignore[arg-type]


def test_whiten_population_statistics() -> None:
    # [1, 2, 3, 4]: mean 2.5, population var (2.25 + .25 + .25 + 2.25)/4 = 1.25
    out = whiten(torch.tensor([1.0, 2.0, 3.0, 4.0]), eps=0.0)
    expected = [x / math.sqrt(1.25) for x in (-1.5, -0.5, 0.5, 1.5)]
    assert out.tolist() == pytest.approx(expected)


def test_whiten_only_counts_masked_entries() -> None:
    values = torch.tensor([[1.0, 3.0, 1000.0]])
    mask = torch.tensor([[True, True, False]])
    # masked entries [1, 3]: mean 2, var 1 -> [-1, 1]; the masked-out entry becomes 0
    assert whiten(values, mask, eps=0.0).tolist() == [[-1.0, 1.0, 0.0]]


def test_whiten_without_shift_keeps_the_mean() -> None:
    # [1, 3]: mean 2, std 1 -> (x - 2)/1 + 2 = [1, 3]
    assert whiten(torch.tensor([1.0, 3.0]), shift_mean=False, eps=0.0).tolist() == [1.0, 3.0]


def test_prime_advantages_hand_computed() -> None:
    # one group of two responses, 2 positions each, gamma = 1
    #   outcome [1, 0] -> RLOO [1 - 0, 0 - 1] = [1, -1], placed on the last position, returns [[1, 1], [-1, -1]]
    #   process [[0, 1], [1, 1]], per-response means [0.5, 1]; leave-one-out baselines [1, 0.5]
    #     -> [[-1, 0], [0.5, 0.5]], returns-to-go [[-1, 0], [1, 0.5]]
    #   sum: [[0, 1], [0, -0.5]]
    process = torch.tensor([[0.0, 1.0], [1.0, 1.0]])
    mask = torch.ones(2, 2, dtype=torch.bool)
    out = prime_advantages([1.0, 0.0], process, mask, [0, 0], whiten_result=False)
    assert out.tolist() == [[0.0, 1.0], [0.0, -0.5]]


def test_prime_advantages_outcome_sits_on_each_rows_last_valid_position() -> None:
    mask = torch.tensor([[True, True, True], [True, False, False]])
    out = prime_advantages([2.0, 0.0], torch.zeros(2, 3), mask, [0, 0], whiten_result=False)
    # RLOO [2, -2]; row 0 last valid is 2 -> returns [2, 2, 2]; row 1 last valid is 0 -> [-2, 0, 0]
    assert out.tolist() == [[2.0, 2.0, 2.0], [-2.0, 0.0, 0.0]]


def _traj(rewards: list[float], group: int | None, error: bool = False) -> Trajectory:
    steps = tuple(Step("obs", AgentTurn("act"), r) for r in rewards)
    err = TrajectoryError(ErrorCause.SANDBOX, "executor died", 0) if error else None
    return Trajectory("demo", seed=0, steps=steps, group=group, error=err)


def test_trajectory_advantages_exclude_errored_from_statistics() -> None:
    trajs = [_traj([1.0], 0), _traj([3.0], 0), _traj([100.0], 0, error=True)]
    out = trajectory_advantages(trajs, estimator="dr_grpo")
    # clean totals [1, 3], mean 2 -> [-1, 1]; the errored one is None, not a 0 reward in the mean
    assert out == [(-1.0,), (1.0,), None]


def test_trajectory_advantages_broadcast_episode_advantage_to_turns() -> None:
    trajs = [_traj([0.0, 1.0], 0), _traj([0.0, 0.0, 0.0], 0)]
    out = trajectory_advantages(trajs, estimator="rloo")
    # totals [1, 0]: RLOO [1 - 0, 0 - 1]
    assert out == [(1.0, 1.0), (-1.0, -1.0, -1.0)]


def test_trajectory_advantages_per_turn_matches_turn_advantages() -> None:
    trajs = [_traj([1.0, 0.0, 1.0], 3), _traj([0.0, 4.0], 3)]
    out = trajectory_advantages(trajs, estimator="rloo", per_turn=True)
    assert out == [(-2.0, -3.0, -3.0), (2.0, 2.0)]  # same numbers as test_turn_advantages_rloo


def test_trajectory_advantages_turn_rewards_override() -> None:
    trajs = [_traj([0.0], 0), _traj([0.0], 0)]
    out = trajectory_advantages(trajs, estimator="dr_grpo", turn_rewards=[[2.0], [0.0]])
    assert out == [(1.0,), (-1.0,)]


def test_trajectory_advantages_need_group_ids() -> None:
    with pytest.raises(DataError, match="trajectory 1 has no group id"):
        trajectory_advantages([_traj([1.0], 0), _traj([1.0], None)])


def test_trajectory_advantages_all_errored() -> None:
    assert trajectory_advantages([_traj([1.0], 0, error=True)]) == [None]
