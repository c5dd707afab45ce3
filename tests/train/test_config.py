from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from turnkit.configs import apply_overrides
from turnkit.configs import load_config as load_any
from turnkit.errors import ConfigError
from turnkit.train.config import LEGACY_TABLE_KEYS, TrainConfig


def load_config(path: Path) -> TrainConfig:
    return load_any(path, TrainConfig)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"optim": {"lr": 0.0}}, "TrainConfig.optim: OptimConfig.lr"),
        ({"optim": {"schedule": "step"}}, "TrainConfig.optim: OptimConfig.schedule"),
        ({"lora": {"r": -1}}, "TrainConfig.lora: LoraConfig.r"),
        ({"steps": 0}, "TrainConfig.steps"),
        ({"grpo": {"group_size": 1}}, "TrainConfig.grpo: GRPOConfig.group_size"),
        ({"sampling": {"temperature": 0.0}}, "TrainConfig.sampling: TrainSampling.temperature"),
        ({"sampling": {"top_p": 1.5}}, "TrainConfig.sampling: TrainSampling.top_p"),
        ({"grpo": {"estimator": "ppo"}}, "TrainConfig.grpo: GRPOConfig.estimator"),
        ({"grpo": {"clip_eps": 1.0}}, "TrainConfig.grpo: GRPOConfig.clip_eps"),
        ({"env_kwargs": [1]}, "TrainConfig.env_kwargs"),
        ({"lora": {"targets": []}}, "TrainConfig.lora: LoraConfig.targets"),
        ({"grpo": {"per_turn": "yes"}}, "TrainConfig.grpo: GRPOConfig.per_turn"),
        ({"critic": {"mrt": {"samples": 0}}}, "TrainConfig.critic.mrt: MRTConfig.samples"),
        ({"critic": {"prm": 1.0}}, "TrainConfig.critic: unknown critic 'prm'"),
        ({"max_turns": 0}, "TrainConfig.max_turns"),
        ({"update": {"minibatches": True}}, "TrainConfig.update: UpdateConfig.minibatches"),
        ({"eval": {"episodes": 0}}, "TrainConfig.eval: EvalConfig.episodes"),
        ({"log": {"tensorboard": 1}}, "TrainConfig.log: LogConfig.tensorboard"),
        ({"rollout": {"backend": "tgi"}}, "TrainConfig.rollout: RolloutConfig.backend"),
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
    path.write_text("[optim]\nlr = -1\n")
    with pytest.raises(ConfigError, match=r"run\.toml: TrainConfig\.optim: OptimConfig\.lr"):
        load_config(path)


def test_malformed_toml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text("lr = = 1\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_config(path)


def test_toml_and_json_give_the_same_config(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('steps = 7\n[lora]\ntargets = ["q_proj"]\n[env_kwargs]\ndifficulty = 2\n')
    (tmp_path / "b.json").write_text(
        json.dumps({"steps": 7, "lora": {"targets": ["q_proj"]}, "env_kwargs": {"difficulty": 2}})
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
    ("item", "message"),
    [("steps", "KEY=VALUE"), ("nope=1", "unknown TrainConfig key"), ("optim.lr.x=1", "not a table")],
)
def test_bad_overrides_are_config_errors(item: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        apply_overrides(TrainConfig(), [item])


def test_config_round_trips_through_its_dict() -> None:
    cfg = TrainConfig(grpo={"kl_coef": 0.1}, env_kwargs={"difficulty": 3}, lora={"r": 4})
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


def test_flat_learner_keys_move_into_optim_and_lora_with_one_warning(tmp_path: Path) -> None:
    """A config.json written before the optim/lora tables loads, and one warning names every new key."""
    old = {"lr": 1e-3, "warmup_steps": 2, "weight_decay": 0.01, "max_grad_norm": 0.5, "lora_r": 4, "lora_alpha": 8,
           "lora_targets": ["q_proj"], "steps": 3}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(old))
    with pytest.warns(FutureWarning) as seen:
        cfg = load_config(tmp_path / "config.json")
    assert len(seen) == 1
    for moved in (
        "lr -> optim.lr",
        "warmup_steps -> optim.warmup_steps",
        "lora_r -> lora.r",
        "lora_alpha -> lora.alpha",
    ):
        assert moved in str(seen[0].message)
    optim = {"lr": 1e-3, "warmup_steps": 2, "weight_decay": 0.01, "max_grad_norm": 0.5}
    assert cfg == TrainConfig(steps=3, optim=optim, lora={"r": 4, "alpha": 8, "targets": ["q_proj"]})


def test_flat_learner_keys_of_critic_tables_move_into_their_tables_with_one_warning(tmp_path: Path) -> None:
    """``critic = {prime = {prm_lr = ...}}`` (before the critics' optim/lora tables) loads, warned once."""
    from turnkit.train.config import upgrade_config

    old = {"critic": {"prime": {"prm_lr": 0.01, "lora_r": 4}, "sweet": {"weight": 0.5, "lr": 0.02}}}
    (tmp_path / "config.json").write_text(json.dumps(old))
    with pytest.warns(FutureWarning) as seen:
        cfg = load_config(tmp_path / "config.json")
    assert len(seen) == 1 and "critic.prime.prm_lr -> critic.prime.optim.lr" in str(seen[0].message)
    assert cfg.critic == {
        "prime": {"weight": 1.0, "optim": {"lr": 0.01}, "lora": {"r": 4}},
        "sweet": {"weight": 0.5, "optim": {"lr": 0.02}},
    }
    with pytest.warns(FutureWarning) as seen:  # old top-level and critic keys: still one warning, naming both
        both = TrainConfig.from_dict({"critic_lr": 0.03, "critic": {"prime": {"lora_r": 4}}, "lr": 0.1})
    assert len(seen) == 1
    for moved in ("critic_lr -> critic.prime.optim.lr", "critic.prime.lora_r -> critic.prime.lora.r", "lr -> optim.lr"):
        assert moved in str(seen[0].message)
    assert both.critic == {"prime": {"weight": 1.0, "lora": {"r": 4}, "optim": {"lr": 0.03}}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a saved config upgrades quietly
        assert upgrade_config(old)["critic"] == cfg.critic


def test_set_of_an_old_flat_learner_key_still_works() -> None:
    with pytest.warns(FutureWarning, match=r"lr -> optim\.lr"):
        cfg = apply_overrides(TrainConfig(optim={"warmup_steps": 3}), ["lr=0.01"])
    assert (cfg.optim.lr, cfg.optim.warmup_steps) == (0.01, 3)
    cfg = apply_overrides(TrainConfig(), ["optim.lr=0.01", "lora.r=4", 'lora.targets=["q_proj"]'])
    assert (cfg.optim.lr, cfg.lora.r, cfg.lora.targets, cfg.lora.alpha) == (0.01, 4, ("q_proj",), 16)


def test_a_saved_flat_config_upgrades_to_the_live_shape() -> None:
    """What Run compares on resume: an old checkpoint's flat config equals the same run's config today."""
    from turnkit.train.config import upgrade_config

    live = TrainConfig(optim={"lr": 1e-3}, lora={"r": 2})
    saved = {k: v for k, v in live.to_dict().items() if k not in ("optim", "lora")}
    saved.update(lr=1e-3, warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0, lora_r=2, lora_alpha=16,
                 lora_targets=["q_proj", "k_proj", "v_proj", "o_proj"])  # fmt: skip
    assert upgrade_config(saved) == live.to_dict()


def test_a_checkpoint_saved_with_flat_learner_keys_resumes(tokenizer, tmp_path: Path) -> None:
    """A run checkpointed before the tables (flat keys in state.json and config.json) resumes to the same end."""
    from turnkit.checkpoint import MANIFEST
    from turnkit.train.loop import train
    from turnkit.train.metrics import read_metrics

    from .conftest import LETTER_ENV, make_policy

    def run(out: Path, steps: int) -> TrainConfig:
        return TrainConfig(
            env_id=LETTER_ENV,
            env_kwargs={},
            steps=steps,
            grpo={"group_size": 4},
            groups_per_step=2,
            optim={"lr": 3e-3, "warmup_steps": 1},
            lora={"r": 2},
            out_dir=str(out),
            seed=3,
            sampling={"max_new_tokens": 6},
            log={"checkpoint_every": 1},
        )

    train(run(tmp_path / "full", 2), policy=make_policy(tokenizer), progress=False)
    train(run(tmp_path / "part", 1), policy=make_policy(tokenizer), progress=False)
    ckpt = tmp_path / "part" / "checkpoints" / "step-000001"
    for path in (ckpt / "state.json", tmp_path / "part" / "config.json"):  # as a41f245 wrote them
        data = json.loads(path.read_text())
        config = data.get("config", data)
        for key, (table, option) in LEGACY_TABLE_KEYS.items():  # flat sampling, rollout, update, eval, log keys
            if key != "async":
                config[key] = config[table][option]
        for table in ("sampling", "rollout", "update", "eval", "log"):
            del config[table]
        optim, lora = config.pop("optim"), config.pop("lora")
        config.update({k: optim[k] for k in ("lr", "warmup_steps", "weight_decay", "max_grad_norm")})
        config.update(lora_r=lora["r"], lora_alpha=lora["alpha"], lora_targets=lora["targets"])
        path.write_text(json.dumps(data))
    (ckpt / MANIFEST).unlink()  # a checkpoint from before manifests: read unverified
    train(run(tmp_path / "part", 2), policy=make_policy(tokenizer), resume=True, progress=False)

    def records(name: str) -> list[dict]:
        kept = read_metrics(tmp_path / name / "metrics.jsonl")
        return [{k: v for k, v in r.items() if not k.endswith(("_s", "_per_s"))} for r in kept]

    assert records("full") == records("part") and len(records("full")) == 2
