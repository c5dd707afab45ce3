"""Hand-computed checks of the per-source estimators (python -m pytest tests/learners/test_estimators.py)."""

from __future__ import annotations

import pytest
import torch

from turnkit.errors import ConfigError, DataError
from turnkit.learners.advantages import prime_advantages, trajectory_advantages, turn_advantages
from turnkit.learners.estimators import (
    SOURCE_ESTIMATORS,
    Source,
    dr_grpo_turn_advantages,
    env_sources,
    mrt_turn_advantages,
    pav_turn_advantages,
    prime_turn_advantages,
    source_advantages,
    sweet_turn_advantages,
)
from turnkit.types import AgentTurn, ErrorCause, Step, Trajectory, TrajectoryError

# Group 0 has three episodes of 2, 2 and 1 turns; episode 3 is alone in group 1.
#   outcome (on the last turn): 1, 0, 0 | 1       returns-to-go: [1, 1], [0, 0], [0] | [1]
#   dense term per turn:  [0.1, 0.3] (mean 0.2), [0.0, 0.2] (mean 0.1), [0.6] (mean 0.6) | [0.5]
# Outcome RLOO: baselines 0, 0.5, 0.5, so 1, -0.5, -0.5 on every turn.
# Leave-one-out means of the per-turn means: (0.1 + 0.6)/2 = 0.35, (0.2 + 0.6)/2 = 0.4, (0.2 + 0.1)/2 = 0.15.
MASK = torch.tensor([[True, True], [True, True], [True, False], [True, False]])
OUTCOME = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
DENSE = torch.tensor([[0.1, 0.3], [0.0, 0.2], [0.6, 0.0], [0.5, 0.0]])
GROUPS = [0, 0, 0, 1]


def rows(adv: torch.Tensor) -> list[list[float]]:
    return [[round(float(x), 6) for x in row] for row in adv]


def test_prime_is_rloo_per_source_with_process_returns() -> None:
    adv = prime_turn_advantages(OUTCOME, DENSE, MASK, GROUPS)
    # process centred: [-0.25, -0.05] -> returns [-0.30, -0.05]; [-0.4, -0.2] -> [-0.6, -0.2]; [0.45]
    assert rows(adv) == [[0.7, 0.95], [-1.1, -0.7], [-0.05, 0.0], [0.0, 0.0]]


def test_prime_equals_the_token_level_kernel_without_whitening() -> None:
    token_level = prime_advantages(OUTCOME.sum(dim=1), DENSE, MASK, GROUPS, whiten_result=False)
    assert rows(prime_turn_advantages(OUTCOME, DENSE, MASK, GROUPS)) == rows(token_level)


def test_prime_trains_only_on_groups_with_accuracy_in_its_range() -> None:
    # Group 0 of TWO: one of two solved (accuracy 0.5, kept); group 1: both failed (0, dropped); group 2: both
    # solved (1, dropped). The process reward differs inside every group.
    outcome = torch.tensor([[1.0], [0.0], [0.0], [0.0], [1.0], [1.0]])
    process = torch.tensor([[0.1], [0.3], [0.4], [0.0], [0.2], [-0.2]])
    mask = torch.ones(6, 1, dtype=torch.bool)
    groups = [0, 0, 1, 1, 2, 2]
    # kept group: outcome RLOO ±1, process centred 0.1 - 0.3 = -0.2 and +0.2
    assert rows(prime_turn_advantages(outcome, process, mask, groups)) == [[0.8], [-0.8], [0.0], [0.0], [0.0], [0.0]]
    unfiltered = prime_turn_advantages(outcome, process, mask, groups, accuracy_range=None)
    assert rows(unfiltered) == [[0.8], [-0.8], [0.4], [-0.4], [0.4], [-0.4]]
    # the range is inclusive, and the accuracy can come from elsewhere than the outcome (the env's success)
    wide = prime_turn_advantages(outcome, process, mask, groups, accuracy_range=(0.0, 0.5))
    assert rows(wide) == [[0.8], [-0.8], [0.4], [-0.4], [0.0], [0.0]]
    success = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    assert rows(prime_turn_advantages(outcome, process, mask, groups, accuracy=success))[2:4] == [[0.4], [-0.4]]


def test_prime_filters_on_the_envs_return_not_on_plain_rewards_added_to_it() -> None:
    batch = [episode([0.0, 0.0], 0), episode([0.0, 0.0], 0)]
    judge = Source("reward", [(0.0, 1.0), (0.0, 1.0)])  # lifts both returns to 1: the env still ties at 0
    noise = Source("process", [(0.1, 0.0), (0.0, 0.0)])
    adv = source_advantages(batch, {**env_sources(batch), "judge": judge, "p": noise}, estimator="prime")
    assert adv == [(0.0, 0.0), (0.0, 0.0)]


def test_prime_discounts_both_sources() -> None:
    adv = prime_turn_advantages(OUTCOME[:2], DENSE[:2], MASK[:2], [0, 0], gamma=0.5)
    # outcome returns [0.5, 1] and [0, 0]; RLOO baselines 0 and 0.5 -> [0.5, 1], [-0.5, -0.5]
    # process means 0.2, 0.1; centred [0, 0.2] -> returns [0.1, 0.2]; [-0.2, 0] -> [-0.2, 0]
    assert rows(adv) == [[0.6, 1.2], [-0.7, -0.5]]


def test_mrt_adds_the_progress_of_this_and_every_later_attempt() -> None:
    adv = mrt_turn_advantages(OUTCOME, DENSE, MASK, GROUPS)
    # progress returns-to-go [0.4, 0.3], [0.2, 0.2], [0.6]; no baseline on progress
    assert rows(adv) == [[1.4, 1.3], [-0.3, -0.3], [0.1, 0.0], [0.0, 0.0]]


def test_pav_adds_the_prover_advantage_of_this_step_only() -> None:
    adv = pav_turn_advantages(OUTCOME, DENSE, MASK, GROUPS)
    assert rows(adv) == [[1.1, 1.3], [-0.5, -0.3], [0.1, 0.0], [0.0, 0.0]]


def test_sweet_centres_the_critic_advantage_and_ignores_the_outcome() -> None:
    adv = sweet_turn_advantages(DENSE, MASK, GROUPS)
    assert rows(adv) == [[-0.25, -0.05], [-0.4, -0.2], [0.45, 0.0], [0.0, 0.0]]


def test_dr_grpo_subtracts_the_group_mean_return_without_std() -> None:
    adv = dr_grpo_turn_advantages(OUTCOME + DENSE, MASK, GROUPS)
    # returns [1.4, 1.3], [0.2, 0.2], [0.6]; mean episode return 2.2 / 3
    m = 2.2 / 3
    expected = [[1.4 - m, 1.3 - m], [0.2 - m, 0.2 - m], [0.6 - m, 0.0], [0.0, 0.0]]
    assert rows(adv) == [[round(x, 6) for x in r] for r in expected]
    assert torch.allclose(adv, turn_advantages(OUTCOME + DENSE, MASK, GROUPS, estimator="dr_grpo"))


def test_kernels_check_shapes() -> None:
    with pytest.raises(ValueError, match=r"process must be \[N, K\] like the mask"):
        prime_turn_advantages(OUTCOME, DENSE[:, :1], MASK, GROUPS)


# ---------------------------------------------------------------------------------------------- by source


def episode(env_rewards: list[float], group: int, *, error: bool = False) -> Trajectory:
    steps = tuple(Step("q", AgentTurn("a"), r, terminated=k == len(env_rewards) - 1) for k, r in enumerate(env_rewards))
    err = TrajectoryError(ErrorCause.ENV, "boom") if error else None
    return Trajectory("demo", 0, steps, group=group, error=err)


# Group 0 ties on the outcome (every episode fails), with a small, noisy process reward; group 1 does not tie.
NOISE = [(0.012, -0.007), (-0.004, 0.009), (0.003, 0.001), (-0.011, -0.002)]
TIED = [episode([0.0, 0.0], 0) for _ in NOISE]
UNTIED = [episode([0.0, 1.0], 1), episode([0.0, 0.0], 1), episode([0.0, 1.0], 1), episode([0.0, 0.0], 1)]


@pytest.mark.parametrize("estimator", [*SOURCE_ESTIMATORS, "dr_grpo"])
@pytest.mark.parametrize("outcome", [0.0, 1.0])
def test_a_tied_outcome_group_is_never_scaled_up_by_another_sources_noise(estimator: str, outcome: float) -> None:
    batch = [episode([0.0, outcome], 0) for _ in NOISE] + UNTIED
    noise = [*NOISE, *((0.0, 0.0) for _ in UNTIED)]
    summed = [tuple(s.reward + n for s, n in zip(t.steps, ns, strict=True)) for t, ns in zip(batch, noise, strict=True)]
    if estimator == "dr_grpo":  # the control needs no sources: the loop's summed rewards, without σ
        adv = trajectory_advantages(batch, estimator="dr_grpo", per_turn=True, turn_rewards=summed)
    else:
        kind = {"sweet": "turn_advantage", "mrt": "progress", "pav": "progress"}.get(estimator, "process")
        adv = source_advantages(batch, {**env_sources(batch), "critic": Source(kind, noise)}, estimator=estimator)
    tied = [a for row in adv[:4] for a in row]  # type: ignore[union-attr]
    untied = [a for row in adv[4:] for a in row]  # type: ignore[union-attr]
    assert max(map(abs, tied)) < 0.05  # the noise's own size (|noise| <= 0.012 per turn), never σ-normalised
    if estimator != "sweet":  # SWEET learns from its critic alone
        assert max(map(abs, untied)) >= 0.5  # the untied group keeps its outcome signal
    # The summed-reward GRPO path divides the tied group by the noise's own σ: full-size advantages.
    legacy = trajectory_advantages(batch, per_turn=True, turn_rewards=summed)
    assert max(abs(a) for row in legacy[:4] for a in row) > 0.5  # type: ignore[union-attr]


def test_sources_add_up_by_kind() -> None:
    batch = [episode([0.0, 1.0], 0), episode([0.0, 0.0], 0)]
    judge = Source("reward", [(0.0, 0.5), (0.0, 0.5)])  # a plain reward joins the outcome
    a = Source("process", [(0.1, 0.1), (0.0, 0.0)])
    b = Source("process", [(0.1, -0.1), (0.2, 0.0)])
    adv = source_advantages(batch, {**env_sources(batch), "judge": judge, "a": a, "b": b}, estimator="prime")
    # outcome RLOO ±1 (the judge adds 0.5 to both); process sums [0.2, 0] (mean 0.1) and [0.2, 0] (mean 0.1)
    # centred [0.1, -0.1] -> returns [0, -0.1], twice
    assert [[round(x, 6) for x in r] for r in adv] == [[1.0, 0.9], [-1.0, -1.1]]  # type: ignore[union-attr]


def test_errored_episodes_are_masked_and_left_out_of_the_baselines() -> None:
    batch = [episode([1.0], 0), episode([0.0], 0), episode([5.0], 0, error=True)]
    adv = source_advantages(batch, env_sources(batch), estimator="pav")
    assert adv == [(1.0,), (-1.0,), None]


def test_sweet_needs_a_dense_source() -> None:
    batch = [episode([1.0], 0), episode([0.0], 0)]
    with pytest.raises(ConfigError, match="estimator 'sweet' credits turns with a critic's turn advantages"):
        source_advantages(batch, env_sources(batch), estimator="sweet")


def test_bad_sources_are_named() -> None:
    batch = [episode([1.0], 0), episode([0.0], 0)]
    with pytest.raises(ConfigError, match="kind must be one of"):
        Source("bonus", [(0.0,), (0.0,)])
    with pytest.raises(DataError, match=r"source 'x', trajectory 1: 2 values for 1 steps"):
        source_advantages(batch, {"x": Source("reward", [(0.0,), (0.0, 1.0)])}, estimator="prime")
    with pytest.raises(DataError, match="source 'x' has 1 rows for 2 trajectories"):
        source_advantages(batch, {"x": Source("reward", [(0.0,)])}, estimator="prime")
    with pytest.raises(ConfigError, match="estimator must be one of"):
        source_advantages(batch, env_sources(batch), estimator="grpo")
    with pytest.raises(DataError, match="non-finite"):
        source_advantages(batch, {"x": Source("reward", [(float("nan"),), (0.0,)])}, estimator="mrt")
