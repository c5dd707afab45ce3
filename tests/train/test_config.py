from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnkit.configs import apply_overrides
from turnkit.configs import load_config as load_any
from turnkit.errors import ConfigError
from turnkit.train.config import TrainConfig


def load_config(path: Path) -> TrainConfig:
    return load_any(path, TrainConfig)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"lr": 0.0}, "TrainConfig.lr"),
        ({"steps": 0}, "TrainConfig.steps"),
        ({"grpo": {"group_size": 1}}, "TrainConfig.grpo: GRPOConfig.group_size"),
        ({"temperature": 0.0}, "TrainConfig.temperature"),
        ({"top_p": 1.5}, "TrainConfig.top_p"),
        ({"grpo": {"estimator": "ppo"}}, "TrainConfig.grpo: GRPOConfig.estimator"),
        ({"grpo": {"clip_eps": 1.0}}, "TrainConfig.grpo: GRPOConfig.clip_eps"),
        ({"env_kwargs": [1]}, "TrainConfig.env_kwargs"),
        ({"lora_targets": ()}, "TrainConfig.lora_targets"),
        ({"grpo": {"per_turn": "yes"}}, "TrainConfig.grpo: GRPOConfig.per_turn"),
        ({"critic": {"mrt": {"samples": 0}}}, "TrainConfig.critic.mrt: MRTConfig.samples"),
        ({"critic": {"prm": 1.0}}, "TrainConfig.critic: unknown critic 'prm'"),
        ({"max_turns": 0}, "TrainConfig.max_turns"),
        ({"minibatches": True}, "TrainConfig.minibatches"),
    ],
)
def test_invalid_values_name_the_field(changes: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        TrainConfig.from_dict(changes)


def test_unknown_key_in_a_file_names_the_file_and_suggests(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"grpo": {"group_sise": 4}}))
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
    overrides = ["steps=3", "env_kwargs.max_attempts=1", "out_dir=123", "grpo.clip_eps_high=0.28"]
    cfg = apply_overrides(TrainConfig(), overrides)
    assert (cfg.steps, cfg.env_kwargs, cfg.out_dir, cfg.grpo.clip_eps_high) == (
        3,
        {"difficulty": 1, "max_attempts": 1},
        "123",
        0.28,
    )


@pytest.mark.parametrize(
    ("item", "message"), [("steps", "KEY=VALUE"), ("nope=1", "unknown TrainConfig key"), ("lr.x=1", "not a table")]
)
def test_bad_overrides_are_config_errors(item: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        apply_overrides(TrainConfig(), [item])


def test_config_round_trips_through_its_dict() -> None:
    cfg = TrainConfig(lora_r=4, grpo={"kl_coef": 0.1}, env_kwargs={"difficulty": 3})
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg


def test_the_tables_take_dotted_overrides() -> None:
    cfg = apply_overrides(TrainConfig(), ["grpo.kl_coef=0.05", "critic.mrt.samples=2", "critic.prime.weight=0.5"])
    assert cfg.grpo.kl_coef == 0.05
    assert cfg.critic == {"mrt": {"weight": 1.0, "samples": 2}, "prime": {"weight": 0.5}}
    assert cfg.loss_config().per_turn and not TrainConfig().loss_config().per_turn


def test_flat_keys_of_old_configs_move_into_their_tables(tmp_path: Path) -> None:
    """A config.json written before the tables: GRPO keys into grpo, critic keys into the named critics' tables."""
    old = {"group_size": 4, "kl_coef": 0.1, "critic": "sweet", "critic_weight": 0.5, "critic_fit_steps": 2,
           "critic_reference_key": "", "critic_samples": 8, "judge_url": None}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(old))
    with pytest.warns(FutureWarning, match=r"critic_fit_steps -> critic\.sweet\.steps"):
        cfg = load_config(tmp_path / "config.json")
    assert (cfg.grpo.group_size, cfg.grpo.kl_coef) == (4, 0.1)
    assert cfg.critic == {"sweet": {"weight": 0.5, "steps": 2, "reference_key": None}}
