"""The AfD study's evaluation (studies/common/afd.py): success against one sample, reference selectors, the run.

Run: python -m pytest -q tests/studies/test_afd_study.py
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from studies.common.afd import (
    AfDStudyConfig,
    best_of_n_eval,
    compare_success,
    distinct_reply_success,
    plurality_choice,
    run_afd,
    summary_table,
    within_task_spearman,
)
from tests.train.conftest import MICRO_RECIPE, make_policy
from tests.train.test_afd import _one_thread, ep  # noqa: F401  (the autouse one-thread fixture, the episode maker)
from turnkit.critics.afd import AfDCritic
from turnkit.critics.base import CriticResult
from turnkit.errors import ConfigError
from turnkit.types import Trajectory


class Cheat:
    """An oracle critic: 1 for a successful episode (reads the env's verdict), else 0."""

    name = "cheat"

    def score(self, trajectory: Trajectory) -> CriticResult:
        return CriticResult(tuple(float(trajectory.success) for _ in trajectory.steps))


def test_compare_success_counts_wins_ties_and_losses() -> None:
    chosen = [ep("1", success=s) for s in (True, True, False, False, True)]
    baseline = [ep("1", success=s) for s in (False, True, True, False, False)]
    r = compare_success(chosen, baseline)
    assert (r["win"], r["tie"], r["lose"]) == (2.0, 2.0, 1.0)
    assert r["success"] == pytest.approx(0.6) and r["success_lo"] < 0.6 < r["success_hi"]
    assert r["win_rate"] == pytest.approx(0.4) and r["lose_rate"] == pytest.approx(0.2)
    with pytest.raises(ValueError, match="baseline"):
        compare_success(chosen, baseline[:2])


def test_best_of_n_eval_with_an_oracle_critic_reaches_pass_at_n(tokenizer) -> None:
    policy = make_policy(tokenizer, max_new_tokens=3)
    r = best_of_n_eval(policy, Cheat(), "turnkit-test/Letters-v0", list(range(8)), 4, max_turns=1)
    assert r["tasks"] == 8.0 and r["win"] + r["tie"] + r["lose"] == 8.0
    assert r["success"] == pytest.approx(r["pass_at_n"])  # the oracle picks a success whenever there is one
    assert r["pass_at_n"] > 0.0  # ... and there is one: the check above is not 0 == 0


def test_plurality_choice_takes_the_first_of_the_most_frequent_reply_and_skips_errors() -> None:
    group = [ep("3"), ep("5"), ep("5"), ep("3"), ep("5")]
    assert plurality_choice(group) == 1
    assert plurality_choice([ep("3"), ep("5")]) == 0  # a tie: the reply seen first
    errored = [ep("9", error=True), ep("9", error=True), ep("9", error=True), ep("4")]
    assert plurality_choice(errored) == 3  # errored replies do not vote and are not chosen
    assert plurality_choice([ep("9", error=True)]) == 0


def test_distinct_reply_success_weighs_each_distinct_reply_once() -> None:
    # three copies of the right reply, one of each of two wrong ones: one sample is right 3/5, a random
    # distinct reply 1/3
    group = [ep("7", success=True)] * 3 + [ep("6"), ep("8")]
    assert distinct_reply_success(group) == pytest.approx(1 / 3)
    assert distinct_reply_success([ep("7", success=True), ep("6", error=True)]) == 1.0
    assert distinct_reply_success([ep("6", error=True)]) == 0.0


def test_within_task_spearman_ignores_tasks_that_cannot_rank_and_errored_candidates() -> None:
    right, wrong = ep("7", success=True), ep("6")
    groups = [
        [right, wrong, wrong],  # the critic puts the right one first: ρ = +0.866
        [wrong, right],  # and here last: ρ = −1
        [right, right],  # all succeed: no ranking to judge
        [right, wrong],  # equal scores: no ranking to judge
        [right, ep("6", error=True), wrong],  # the errored candidate is left out: ρ = +1
    ]
    scores = [[3.0, 1.0, 2.0], [5.0, 4.0], [1.0, 2.0], [0.5, 0.5], [2.0, None, 1.0]]
    r = within_task_spearman(groups, scores)
    assert r["tasks"] == 3.0
    assert r["spearman"] == pytest.approx((math.sqrt(3) / 2 - 1 + 1) / 3)
    assert math.isnan(within_task_spearman([[right, right]], [[1.0, 2.0]])["spearman"])


def test_run_afd_end_to_end_on_a_micro_recipe(tmp_path: Path) -> None:
    cfg = AfDStudyConfig(
        out_dir=str(tmp_path / "run"),
        data=("init_sft", "sft_demo"),
        ns=(1, 2),
        recipe=dataclasses.replace(MICRO_RECIPE, sft=dataclasses.replace(MICRO_RECIPE.sft, steps=6)),
        init_sft_steps=2,
        cache=str(tmp_path / "cache"),
        train_episodes=4,
        eval_episodes=3,
        rm_steps=2,
        rm_batch_size=4,
    )
    summary = run_afd(cfg, progress=False)
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["best_of_n"].keys() == {"afd_init_sft", "afd_sft_demo", "afd_closed_form"}
    for per_n in on_disk["best_of_n"].values():
        assert per_n.keys() == {"1", "2"}
        assert all(r["tasks"] == 3.0 and r["win"] + r["tie"] + r["lose"] == 3.0 for r in per_n.values())
    assert on_disk["rm"]["init_sft"]["positives"] >= 4 and on_disk["train_data"]["demonstrations"] == 4.0
    assert on_disk["pass_at_n"]["1"] <= on_disk["pass_at_n"]["2"]
    assert (
        on_disk["reference"]["plurality_vote"].keys()
        == on_disk["reference"]["distinct_reply_floor"].keys()
        == {
            "1",
            "2",
        }
    )
    # with one candidate every selector takes it: the vote and the floor equal each critic's best of 1
    one = on_disk["best_of_n"]["afd_init_sft"]["1"]["success"]
    assert (
        on_disk["reference"]["plurality_vote"]["1"]["success"]
        == one
        == on_disk["reference"]["distinct_reply_floor"]["1"]
    )
    assert on_disk["ranking"].keys() == on_disk["best_of_n"].keys()
    assert all(0.0 <= r["tasks"] <= 3.0 for r in on_disk["ranking"].values())
    assert summary["config"]["recipe"]["sft"]["steps"] == 6
    critic = AfDCritic.load(tmp_path / "run" / "rm" / "init_sft")
    assert critic.name == "afd"


def test_study_config_validation() -> None:
    with pytest.raises(ConfigError, match="ns"):
        AfDStudyConfig(ns=(0, 4))
    with pytest.raises(ConfigError, match="eval_episodes"):
        AfDStudyConfig(eval_episodes=0)
    with pytest.raises(ConfigError, match="unknown AfD data choice"):  # the package's checks still run
        AfDStudyConfig(data=("nope",))


def test_summary_table_lists_critics_and_reference_selectors() -> None:
    row = {"success": 0.5, "success_lo": 0.3, "success_hi": 0.7, "win": 3.0, "tie": 5.0, "lose": 2.0}
    summary = {
        "baseline": {"success": 0.4},
        "best_of_n": {"afd_init_sft": {"4": row}},
        "reference": {"plurality_vote": {"4": row}, "distinct_reply_floor": {"4": 0.25}},
    }
    lines = summary_table(summary).splitlines()
    assert [line.split()[0] for line in lines[1:4]] == ["afd_init_sft", "plurality_vote", "distinct_floor"]
    assert "0.250" in lines[3] and "0.400" in lines[-1]
