"""AfD in the package: data choices, sampling, best-of-N selection, training the reward models, the CLI.

The study's evaluation (intervals, plurality vote, summary table) is tested in tests/studies/test_afd_study.py.

Run: python -m pytest -q tests/train/test_afd.py
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import gymnasium
import pytest
import torch

from turnkit.cli import afd as cli_afd
from turnkit.critics.afd import AfDCritic
from turnkit.critics.base import CriticResult
from turnkit.errors import ConfigError, DataError
from turnkit.models.embedded import DEFAULT_RECIPE
from turnkit.train.afd import (
    DATA_CHOICES,
    INIT_SFT_STEPS,
    AfDRunConfig,
    best_of_n,
    group_episodes,
    init_recipe,
    rm_training_data,
    sample_episodes,
    train_afd,
)
from turnkit.types import AgentTurn, ErrorCause, Step, Trajectory, TrajectoryError

from .conftest import MICRO_RECIPE, make_policy

MATH = "turnkit/MathEpisodes-v0"


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def ep(text: str, *, success: bool = False, error: bool = False, env_id: str = "d") -> Trajectory:
    step = Step("q", AgentTurn(text), float(success), terminated=True, info={"success": success})
    err = TrajectoryError(ErrorCause.ENV, "boom", 0) if error else None
    return Trajectory(env_id, 0, (step,), error=err)


class ScoreByText:
    """A critic that reads its score off the turn text ("7" -> 7.0); counts the trajectories it is asked about."""

    name = "by_text"

    def __init__(self) -> None:
        self.seen = 0

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
        self.seen += len(trajectories)
        for t in trajectories:
            assert t.error is None, "errored episodes must not reach the critic"
        return [CriticResult(tuple(float(s.action.text) for s in t.steps)) for t in trajectories]

    def score(self, trajectory: Trajectory) -> CriticResult:
        return self.score_batch([trajectory])[0]


# ---------------------------------------------------------------------------------------------- data choices


def test_data_choices_map_to_the_right_sides() -> None:
    init, sft, demo = [ep("1", env_id="init")], [ep("1", env_id="sft")], [ep("1", env_id="demo")]
    expected = {"init_sft": ("init", "sft"), "init_demo": ("init", "demo"), "sft_demo": ("sft", "demo")}
    assert set(expected) == set(DATA_CHOICES)
    for choice, (neg, pos) in expected.items():
        data = rm_training_data(choice, init, sft, demo)
        negatives, positives = data  # unpacks as (negatives, positives)
        assert [t.env_id for t in negatives] == [neg] and [t.env_id for t in positives] == [pos], choice
        assert data.positives is positives


def test_bad_data_choices() -> None:
    with pytest.raises(ConfigError, match="unknown AfD data choice 'demo_sft'"):
        rm_training_data("demo_sft", [ep("1")], [ep("1")], [ep("1")])
    with pytest.raises(DataError, match="needs demonstration trajectories"):
        rm_training_data("init_demo", [ep("1")], [ep("1")], [])
    with pytest.raises(DataError, match="needs init trajectories"):
        rm_training_data("init_sft", [], [ep("1")], [])


def test_init_recipe_is_the_default_stopped_early() -> None:
    r = init_recipe()
    assert r.sft.steps == INIT_SFT_STEPS < DEFAULT_RECIPE.sft.steps
    assert dataclasses.replace(r, sft=DEFAULT_RECIPE.sft) == DEFAULT_RECIPE
    assert init_recipe(7, MICRO_RECIPE).sft.steps == 7


# ---------------------------------------------------------------------------------------------- best-of-N


def test_best_of_n_picks_the_highest_total_and_breaks_ties_by_index() -> None:
    groups = [
        [ep("1"), ep("5"), ep("3")],
        [ep("2"), ep("2"), ep("2")],  # a three-way tie: the first
        [ep("-1"), ep("4"), ep("4")],  # a tie at the top: the lower index
        [ep("0")],
    ]
    chosen = best_of_n(groups, ScoreByText())
    assert [g.index(c) for g, c in zip(groups, chosen, strict=True)] == [1, 0, 1, 0]
    assert all(c is g[g.index(c)] for g, c in zip(groups, chosen, strict=True))


def test_best_of_n_skips_errored_episodes_and_scores_in_one_batch() -> None:
    critic = ScoreByText()
    groups = [[ep("9", error=True), ep("1")], [ep("9", error=True), ep("8", error=True)]]
    chosen = best_of_n(groups, critic)
    assert chosen[0] is groups[0][1]  # the errored one is never chosen over a clean one
    assert chosen[1] is groups[1][0]  # all errored: the first
    assert critic.seen == 1
    with pytest.raises(DataError, match="empty group"):
        best_of_n([[]], critic)


# ---------------------------------------------------------------------------------------------- sampling


def test_sample_episodes_groups_distinct_samples_per_seed(tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[gymnasium.Env] = []
    real_make = gymnasium.make

    def make(*args, **kwargs):
        env = real_make(*args, **kwargs)
        made.append(env)
        return env

    monkeypatch.setattr(gymnasium, "make", make)
    policy = make_policy(tokenizer)
    trajs = sample_episodes(policy, MATH, [3, 4, 5], n=3, max_turns=1, batch_size=6, env_kwargs={"max_attempts": 1})
    assert [t.seed for t in trajs] == [3, 3, 3, 4, 4, 4, 5, 5, 5]
    assert [t.group for t in trajs] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert len(made) == 6  # batch_size // n = 2 seeds per chunk, one env per parallel episode
    for group in group_episodes(trajs, 3):
        texts = [t.steps[0].action.token_ids for t in group]
        assert len(set(texts)) == 3, "the n samples of one task must be distinct draws"
    again = sample_episodes(policy, MATH, [3, 4, 5], n=3, max_turns=1, batch_size=9, env_kwargs={"max_attempts": 1})
    assert [t.steps[0].action.token_ids for t in again] == [t.steps[0].action.token_ids for t in trajs]
    other = sample_episodes(policy, MATH, [3], n=1, max_turns=1, seed=1, env_kwargs={"max_attempts": 1})
    assert other[0].steps[0].action.token_ids != trajs[0].steps[0].action.token_ids


def test_sample_episodes_closes_every_env(tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = []
    real_make = gymnasium.make

    def make(*args, **kwargs):
        env = real_make(*args, **kwargs)
        real_close = env.close

        def close():
            closed.append(id(env))
            real_close()

        env.close = close  # type: ignore[method-assign]
        return env

    monkeypatch.setattr(gymnasium, "make", make)
    sample_episodes(make_policy(tokenizer), MATH, [1, 2], n=2, max_turns=1)
    assert len(closed) == 4


# ---------------------------------------------------------------------------------------------- the run


def test_train_afd_saves_one_reward_model_per_choice_on_a_micro_recipe(tmp_path: Path) -> None:
    cfg = AfDRunConfig(
        out_dir=str(tmp_path / "run"),
        data=("init_sft", "sft_demo"),
        recipe=dataclasses.replace(MICRO_RECIPE, sft=dataclasses.replace(MICRO_RECIPE.sft, steps=6)),
        init_sft_steps=2,
        cache=str(tmp_path / "cache"),
        train_episodes=4,
        rm_steps=2,
        rm_batch_size=4,
    )
    trained = train_afd(cfg, progress=False)
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(trained.summary))
    assert on_disk.keys() == {"config", "train_data", "rm", "seconds"}
    assert on_disk["rm"]["init_sft"]["positives"] >= 4 and on_disk["train_data"]["demonstrations"] == 4.0
    assert on_disk["config"]["recipe"]["sft"]["steps"] == 6
    assert trained.critics.keys() == {"afd_init_sft", "afd_sft_demo"}
    for choice in cfg.data:
        assert AfDCritic.load(tmp_path / "run" / "rm" / choice).name == "afd"


def test_run_config_validation() -> None:
    with pytest.raises(ConfigError, match="unknown AfD data choice"):
        AfDRunConfig(data=("init_sft", "nope"))
    with pytest.raises(ConfigError, match="init_sft_steps"):
        AfDRunConfig(recipe=MICRO_RECIPE, init_sft_steps=MICRO_RECIPE.sft.steps)
    with pytest.raises(ConfigError, match="lr"):
        AfDRunConfig(rm_lr=0.0)


# ---------------------------------------------------------------------------------------------- the CLI


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="turnkit")
    cli_afd.add_commands(p.add_subparsers(dest="command"))
    return p


def test_cli_defaults_are_the_run_config_defaults() -> None:
    from_cli = cli_afd.afd_config(parser().parse_args(["afd"]))
    assert from_cli == AfDRunConfig()
    assert cli_afd.DATA_CHOICES == DATA_CHOICES


def test_cli_maps_every_flag() -> None:
    args = parser().parse_args(
        ["afd", "--data", "init_demo", "--train-episodes", "20",
         "--out", "x", "--init-sft-steps", "60", "--difficulty", "2", "--max-attempts", "3",
         "--temperature", "0.5", "--rm-steps", "5", "--rm-batch-size", "8", "--rm-lr", "0.01", "--rm-lora-r", "4",
         "--seed", "9"]
    )  # fmt: skip
    cfg = cli_afd.afd_config(args)
    assert (cfg.data, cfg.train_episodes, cfg.out_dir) == (("init_demo",), 20, "x")
    assert (cfg.init_sft_steps, cfg.env_kwargs) == (60, {"difficulty": 2, "max_attempts": 3})
    assert (cfg.temperature, cfg.rm_steps, cfg.rm_batch_size, cfg.rm_lr, cfg.rm_lora_r, cfg.seed) == (
        0.5, 5, 8, 0.01, 4, 9
    )  # fmt: skip


def test_cli_rejects_unknown_choices_and_bad_sizes(capsys: pytest.CaptureFixture) -> None:
    for argv in (["afd", "--data", "sft_init"], ["afd", "--train-episodes", "0"], ["afd", "--n", "4"]):
        with pytest.raises(SystemExit):
            parser().parse_args(argv)
    assert "invalid" in capsys.readouterr().err


def test_a_saved_reward_model_drives_the_grpo_loop_as_critic_afd(tmp_path):
    from turnkit.agents.hf import HFPolicy
    from turnkit.critics.afd import AfDCritic, RewardModel
    from turnkit.errors import ConfigError
    from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    from turnkit.train.config import TrainConfig
    from turnkit.train.loop import train

    tok = build_tiny_tokenizer()
    small = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    folder = AfDCritic(RewardModel.from_causal_lm(build_tiny_model(tok, small), seed=1), tok).save(tmp_path / "rm")
    cfg = TrainConfig(
        grpo={"group_size": 2},
        critic={"afd": {"model": str(folder)}},
        steps=1,
        groups_per_step=2,
        max_turns=1,
        out_dir=str(tmp_path / "grpo"),
        sampling={"max_new_tokens": 4},
    )
    policy = HFPolicy(build_tiny_model(tok, small, seed=2), tok, max_new_tokens=4)
    result = train(cfg, policy=policy, progress=False)
    assert "afd/total" in result.history[0]
    with pytest.raises(ConfigError, match="not a reward-model folder"):
        train(TrainConfig(critic={"afd": {"model": str(tmp_path)}}, out_dir=str(tmp_path / "g2")), policy=policy)
