"""``grpo.estimator`` in the loop: the env's and each critic's rewards kept apart and combined per method."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerFast

from turnkit.cli import main
from turnkit.errors import ConfigError
from turnkit.models.tiny import build_tiny_model, save_tiny
from turnkit.train.config import TrainConfig
from turnkit.train.loop import step_advantages, train
from turnkit.train.metrics import read_metrics
from turnkit.types import AgentTurn, Step, Trajectory

from .conftest import SMALL, make_policy
from .test_critic_rewards import loop_config

# SecondTurnEnv: every episode has env rewards [0, 1] (a tied outcome) and MRT's J = [0, 1] exactly, so the MRT
# critic at weight 0.5 gives the progress source [0.5, 0] on every episode (its shaped rewards are the same here).
#   mrt:    outcome RLOO 0 + progress returns-to-go [0.5, 0]      -> [0.5, 0.0]
#   pav:    outcome RLOO 0 + progress of the step [0.5, 0]        -> [0.5, 0.0]
#   prime:  the group's accuracy is 1, outside PRIME's prompt filter [0.2, 0.8]: dropped -> [0.0, 0.0]
#           (unfiltered: progress centred by the other's mean 0.25, returns-to-go [0.0, -0.25])
#   sweet:  progress centred by the other episode's mean 0.25     -> [0.25, -0.25]
#   dr_grpo (summed rewards [0.5, 1.0]): returns [1.5, 1.0] - mean 1.5 -> [0.0, -0.5]
EXPECTED = {
    "mrt": [0.5, 0.0],
    "pav": [0.5, 0.0],
    "paper": [0.5, 0.0],  # the MRT critic's paper estimator
    "prime": [0.0, 0.0],
    "sweet": [0.25, -0.25],
    "dr_grpo": [0.0, -0.5],
}


@pytest.mark.parametrize("estimator", sorted(EXPECTED))
def test_each_estimator_combines_the_sources_in_the_loop(
    tokenizer: PreTrainedTokenizerFast, tmp_path: Path, estimator: str
) -> None:
    critic = {"mrt": {"weight": 0.5, "samples": 2, "force": ""}}
    cfg = loop_config(
        tmp_path,
        steps=1,
        critic=critic,
        log={"checkpoint_every": 1, "rollouts_every": 1},
        grpo={"group_size": 2, "estimator": estimator},
    )
    train(cfg, policy=make_policy(tokenizer), progress=False)
    lines = (tmp_path / "rollouts" / "step-000001" / "trajectories.jsonl").read_text().splitlines()
    for ep in map(json.loads, lines):
        assert [s["critic_rewards"]["mrt"] for s in ep["steps"]] == [0.5, 0.0]  # as logged for the viewer
        assert [s["advantage"] for s in ep["steps"]] == pytest.approx(EXPECTED[estimator], abs=1e-12)


def two_episodes(outcomes: tuple[float, float]) -> list[Trajectory]:
    return [Trajectory("d", 0, (Step("q", AgentTurn("a"), 0.0), Step("q", AgentTurn("b"), r, True)), group=0)
            for r in outcomes]  # fmt: skip


def test_without_critics_the_method_estimators_are_outcome_rloo() -> None:
    trajs = two_episodes((1.0, 0.0))
    rloo = step_advantages(trajs, TrainConfig(grpo={"estimator": "rloo"}))
    for estimator in ("prime", "mrt", "pav"):
        assert step_advantages(trajs, TrainConfig(grpo={"estimator": estimator})) == rloo == [(1.0, 1.0), (-1.0, -1.0)]


def test_estimators_that_need_a_critic_say_so() -> None:
    trajs = two_episodes((1.0, 0.0))
    with pytest.raises(ConfigError, match="'paper' needs critics"):
        step_advantages(trajs, TrainConfig(grpo={"estimator": "paper"}))
    with pytest.raises(ConfigError, match="estimator 'sweet' credits turns with a critic's turn advantages"):
        step_advantages(trajs, TrainConfig(grpo={"estimator": "sweet"}))
    with pytest.raises(ConfigError, match="combines the rewards by source"):  # summed rewards cannot be split again
        step_advantages(trajs, TrainConfig(grpo={"estimator": "prime"}), [(0.0, 1.0), (0.5, 0.0)])
    with pytest.raises(ConfigError, match=r"GRPOConfig\.estimator must be one of"):
        TrainConfig(grpo={"estimator": "ppo"})


def test_paper_with_critics_of_two_papers_is_refused_before_any_rollout(
    tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    critic = {"mrt": {"samples": 2}, "pav": {"samples": 2}}
    cfg = loop_config(tmp_path, critic=critic, grpo={"group_size": 2, "estimator": "paper"})
    with pytest.raises(ConfigError, match=r"'paper' is ambiguous: the critics' papers use \['mrt', 'pav'\]"):
        train(cfg, policy=make_policy(tokenizer), progress=False)


# ---------------------------------------------------------------------------------------------- smoke

SMOKE_CRITICS = {
    "prime": {},
    "mrt": {"samples": 2},
    "pav": {"samples": 2, "best_of": 2},
    "sweet": {"steps": 2},
    "oracle": {},
}
"""Each critic at smoke size (few prover samples, few critic steps)."""


@pytest.fixture(scope="module")
def model_dir(tokenizer: PreTrainedTokenizerFast, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny(build_tiny_model(tokenizer, SMALL), tokenizer, tmp_path_factory.mktemp("estimators") / "model")


@pytest.mark.parametrize(
    ("estimator", "critic"),
    [("prime", "prime"), ("mrt", "mrt"), ("pav", "pav"), ("sweet", "sweet"), ("paper", "prime")]
    + [(e, "oracle") for e in ("prime", "mrt", "pav", "sweet", "dr_grpo")],
)
def test_smoke_turnkit_train_with_each_estimator_and_critic(
    model_dir: Path, tmp_path: Path, estimator: str, critic: str
) -> None:
    """Two steps of ``turnkit train`` on MathEpisodes with the tiny model, checkpointed: each pair runs end to end."""
    sets = [f"model={model_dir}", "env_id=turnkit/MathEpisodes-v0", "steps=2", "grpo.group_size=2",
            "groups_per_step=2", "sampling.max_new_tokens=6", "max_turns=2", "log.checkpoint_every=2", "eval.every=0",
            f"grpo.estimator={estimator}", f"critic={json.dumps({critic: SMOKE_CRITICS[critic]})}"]  # fmt: skip
    argv = ["train", "--out", str(tmp_path / "run"), "--quiet", "--threads", "1"]
    assert main([*argv, *(x for s in sets for x in ("--set", s))]) == 0
    records = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "reward_mean" in r]
    assert [r["step"] for r in records] == [1, 2] and all(f"{critic}/total" in r for r in records)
    assert (tmp_path / "run" / "checkpoints" / "step-000002").is_dir()
