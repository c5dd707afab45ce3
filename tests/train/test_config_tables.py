"""TrainConfig's tables (issue #52): at most 20 top-level keys, and every old flat key still loads and resumes."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from turnkit.configs import apply_overrides
from turnkit.errors import ConfigError
from turnkit.train.config import LEGACY_TABLE_KEYS, TrainConfig, upgrade_config
from turnkit.train.loop import RESUMABLE_CHANGES
from turnkit.train.run import read_state, save_checkpoint

OLD_VALUES: dict[str, Any] = {
    "temperature": 0.7, "top_p": 0.9, "max_new_tokens": 12, "backend": "openai",
    "backend_url": "http://127.0.0.1:9/v1", "ray": {"address": "local", "workers": 2}, "async_rollout": True,
    "async": True, "max_staleness": 2, "ppo_epochs": 2, "minibatches": 3, "micro_batch_rows": 4,
    "micro_batch_tokens": 64, "batch_layout": "episodes", "skip_zero_advantage": False, "eval_every": 5,
    "eval_episodes": 20, "eval_seed": 7, "eval_temperature": 0.5, "checkpoint_every": 3, "rollouts_every": 0,
    "tensorboard": True,
}  # fmt: skip
"""A non-default value for every flat key that moved into a table."""
NEEDS = {"backend_url": {"rollout": {"backend": "openai"}}}
"""Keys that are only valid beside another (written in the new shape)."""


def flat(config: dict[str, Any]) -> dict[str, Any]:
    """A config in the shape written before the sampling/rollout/update/eval/log tables (as a checkpoint holds it)."""
    old = {k: v for k, v in config.items() if k not in ("sampling", "rollout", "update", "eval", "log")}
    for key, (table, option) in LEGACY_TABLE_KEYS.items():
        if key != "async":  # the file spelling of async_rollout, never written by to_dict
            old[key] = config[table][option]
    return old


def test_train_config_has_at_most_20_top_level_keys() -> None:
    names = [f.name for f in dataclasses.fields(TrainConfig)]
    assert len(names) <= 20, names
    assert not set(names) & set(LEGACY_TABLE_KEYS)


def test_every_moved_key_is_covered_here() -> None:
    assert set(OLD_VALUES) == set(LEGACY_TABLE_KEYS)


@pytest.mark.parametrize("key", sorted(LEGACY_TABLE_KEYS))
def test_an_old_flat_key_moves_into_its_table_with_one_warning(key: str) -> None:
    table, option = LEGACY_TABLE_KEYS[key]
    with pytest.warns(FutureWarning) as seen:
        cfg = TrainConfig.from_dict({key: OLD_VALUES[key], **NEEDS.get(key, {})})
    assert len(seen) == 1 and f"{key} -> {table}.{option}" in str(seen[0].message)
    assert getattr(getattr(cfg, table), option) == OLD_VALUES[key]
    nested = {**NEEDS.get(key, {})}
    nested[table] = {**nested.get(table, {}), option: OLD_VALUES[key]}
    assert cfg == TrainConfig(**nested)


@pytest.mark.parametrize("key", sorted(LEGACY_TABLE_KEYS))
def test_set_of_an_old_flat_key_still_works(key: str) -> None:
    table, option = LEGACY_TABLE_KEYS[key]
    base = TrainConfig(**NEEDS.get(key, {}))
    text = value if isinstance(value := OLD_VALUES[key], str) else json.dumps(value)  # as typed on a command line
    with pytest.warns(FutureWarning, match=rf"{key} -> {table}\.{option}"):
        cfg = apply_overrides(base, [f"{key}={text}"])
    assert getattr(getattr(cfg, table), option) == OLD_VALUES[key]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new spelling is quiet
        spelled = "async" if key == "async" else option
        assert apply_overrides(base, [f"{table}.{spelled}={text}"]) == cfg


def test_a_flat_key_wins_over_its_table_and_keeps_the_table_other_keys() -> None:
    with pytest.warns(FutureWarning):
        cfg = TrainConfig.from_dict({"eval_episodes": 9, "eval": {"episodes": 3, "every": 2}})
    assert (cfg.eval.episodes, cfg.eval.every) == (9, 2)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"grpo": {"lr": 0.1}}, r"TrainConfig\.grpo: unknown GRPOConfig key 'lr' \(did you mean TrainConfig's 'optim"),
        ({"eval": {"eval_every": 2}}, r"EvalConfig key 'eval_every' \(did you mean TrainConfig's 'eval\.every'\?\)"),
        ({"sampling": {"ppo_epochs": 2}}, r"TrainSampling key 'ppo_epochs' \(did you mean TrainConfig's 'update\.ppo_"),
        ({"log": {"steps": 2}}, r"unknown LogConfig key 'steps' \(did you mean TrainConfig's 'steps'\?\)"),
        (
            {"rollout": {"max_new_tokens": 8}},
            r"TrainConfig\.rollout: unknown RolloutConfig key 'max_new_tokens' "
            r"\(did you mean TrainConfig's 'sampling\.max_new_tokens'\?\)",
        ),
        ({"every": 2}, r"unknown TrainConfig key 'every' \(did you mean 'eval\.every'\?\)"),
        ({"eval": {"evry": 2}}, r"unknown EvalConfig key 'evry' \(did you mean 'every'\?\)"),
        ({"rollout": {"backend": "tgi"}}, r"RolloutConfig\.backend must be one of \['hf', 'openai', 'vllm'\]"),
    ],
)
def test_a_key_in_the_wrong_place_names_where_it_belongs(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainConfig.from_dict(data)


def test_async_is_spelled_async_in_the_rollout_table(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text("[rollout]\nasync = true\nmax_staleness = 2\n")
    from turnkit.configs import load_config

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = load_config(path, TrainConfig)
    assert (cfg.rollout.async_rollout, cfg.rollout.max_staleness) == (True, 2)
    assert TrainConfig(rollout={"async": True}) == TrainConfig(rollout={"async_rollout": True})


def live_config() -> TrainConfig:
    """A config with a non-default value in every moved key (that can go together)."""
    values = {k: v for k, v in OLD_VALUES.items() if k not in ("async", "backend", "backend_url", "async_rollout")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return TrainConfig.from_dict({**values, "async": True})


def test_a_saved_flat_config_upgrades_to_the_live_shape() -> None:
    live = live_config().to_dict()
    assert upgrade_config(flat(live)) == live


def test_an_old_checkpoint_resumes_and_changes_only_what_a_resumed_run_may(tmp_path: Path) -> None:
    """A state.json written before the tables: the same run resumes; eval.every may change, eval.episodes not."""
    live = live_config()
    ckpt = save_checkpoint(tmp_path, 2, flat(live.to_dict()), lambda tmp: None)
    defaults = TrainConfig().to_dict()

    def resume(cfg: TrainConfig) -> int:
        return read_state(ckpt, cfg.to_dict(), RESUMABLE_CHANGES, defaults, upgrade_config)["step"]

    assert resume(live) == 2
    more = dataclasses.replace(live, eval=dataclasses.replace(live.eval, every=1), steps=99)
    assert resume(dataclasses.replace(more, log=dataclasses.replace(live.log, checkpoint_every=1))) == 2
    with pytest.raises(ConfigError, match=r"the config differs \(eval\.episodes: 20 -> 21\)"):
        resume(dataclasses.replace(live, eval=dataclasses.replace(live.eval, episodes=21)))
    with pytest.raises(
        ConfigError, match=r"the config differs \(update: \{'ppo_epochs': 2, .*\} -> \{'ppo_epochs': 1,"
    ):
        resume(dataclasses.replace(live, update=dataclasses.replace(live.update, ppo_epochs=1)))


def test_a_checkpoint_older_than_a_table_key_takes_its_default(tmp_path: Path) -> None:
    """A checkpoint from before ``micro_batch_tokens`` and ``rollouts_every`` existed resumes on their defaults."""
    old = flat(TrainConfig().to_dict())
    del old["micro_batch_tokens"], old["rollouts_every"]
    ckpt = save_checkpoint(tmp_path, 1, old, lambda tmp: None)
    state = read_state(ckpt, TrainConfig().to_dict(), RESUMABLE_CHANGES, TrainConfig().to_dict(), upgrade_config)
    assert state["step"] == 1
