from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnkit.errors import ConfigError
from turnkit.train.config import TrainConfig, apply_overrides, load_config


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"lr": 0.0}, "TrainConfig.lr"),
        ({"steps": 0}, "TrainConfig.steps"),
        ({"group_size": 1}, "TrainConfig.group_size"),
        ({"temperature": 0.0}, "TrainConfig.temperature"),
        ({"top_p": 1.5}, "TrainConfig.top_p"),
        ({"estimator": "ppo"}, "TrainConfig.estimator"),
        ({"clip_eps": 1.0}, "TrainConfig.clip_eps"),
        ({"env_kwargs": [1]}, "TrainConfig.env_kwargs"),
        ({"lora_targets": ()}, "TrainConfig.lora_targets"),
        ({"per_turn": "yes"}, "TrainConfig.per_turn"),
        ({"max_turns": 0}, "TrainConfig.max_turns"),
        ({"minibatches": True}, "TrainConfig.minibatches"),
    ],
)
def test_invalid_values_name_the_field(changes: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        TrainConfig(**changes)


def test_unknown_key_in_a_file_names_the_file_and_suggests(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"group_sise": 4}))
    with pytest.raises(ConfigError, match=r"run\.json.*'group_sise'.*did you mean 'group_size'"):
        load_config(path)


def test_invalid_value_in_a_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text("lr = -1\n")
    with pytest.raises(ConfigError, match=r"run\.toml: TrainConfig\.lr"):
        load_config(path)


def test_malformed_toml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text("lr = = 1\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_config(path)


def test_toml_and_json_give_the_same_config(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('steps = 7\nlora_targets = ["q_proj"]\n[env_kwargs]\ndifficulty = 2\n')
    (tmp_path / "b.json").write_text(
        json.dumps({"steps": 7, "lora_targets": ["q_proj"], "env_kwargs": {"difficulty": 2}})
    )
    assert load_config(tmp_path / "a.toml") == load_config(tmp_path / "b.json")


def test_overrides_parse_json_set_dict_keys_and_keep_strings() -> None:
    cfg = apply_overrides(TrainConfig(), ["steps=3", "env_kwargs.max_attempts=1", "out_dir=123", "clip_eps_high=0.28"])
    assert (cfg.steps, cfg.env_kwargs, cfg.out_dir, cfg.clip_eps_high) == (
        3,
        {"difficulty": 1, "max_attempts": 1},
        "123",
        0.28,
    )


@pytest.mark.parametrize(
    ("item", "message"), [("steps", "KEY=VALUE"), ("nope=1", "unknown TrainConfig key"), ("lr.x=1", "not a dict")]
)
def test_bad_overrides_are_config_errors(item: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        apply_overrides(TrainConfig(), [item])


def test_config_round_trips_through_its_dict() -> None:
    cfg = TrainConfig(lora_r=4, kl_coef=0.1, env_kwargs={"difficulty": 3})
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
