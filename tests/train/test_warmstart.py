"""The LoRA warm start: its demonstrations, its SFT on the adapter only, and its cache."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from tests.train.conftest import make_policy
from turnkit.configs import from_dict
from turnkit.envs.math.oracle import RetryOracle
from turnkit.errors import AgentError, ConfigError
from turnkit.train.warmstart import (
    INFO_FILE,
    WarmStartConfig,
    demonstrations,
    warm_start,
    warm_start_key,
    warm_start_rows,
)

ENV = "turnkit/MathEpisodes-v0"
KWARGS = {"difficulty": 2, "kinds": ["arithmetic"], "max_attempts": 3}
MICRO = WarmStartConfig(demos=4, retry_demos=4, steps=3, batch_size=4, optim={"lr": 1e-2}, lora={"r": 2, "alpha": 4})


def adapter_state(policy) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in policy.model.named_parameters() if "lora_" in n}


def test_retry_demos_err_first_then_give_the_reference_and_only_the_correction_is_trained(tokenizer) -> None:
    plain, retry = demonstrations(ENV, KWARGS, MICRO)
    assert [len(t.steps) for t in plain] == [1] * 4
    assert [len(t.steps) for t in retry] == [2] * 4
    for traj in retry:
        first, second = (s.action.text for s in traj.steps)
        reference = str(traj.task.privileged["answer"])
        assert second == f"ANSWER: {reference}"
        assert first != second and 1 <= abs(int(first.split()[-1]) - int(reference)) <= MICRO.retry_spread
        assert traj.steps[1].observation.startswith("Incorrect.")  # the feedback the correction answers
    rows = warm_start_rows(plain, retry, tokenizer)
    assert len(rows) == 8
    corrections = rows[4:]
    assert all(r.turn_index == 1 for r in corrections)
    for row, traj in zip(corrections, retry, strict=True):
        prompt = tokenizer.decode(row.input_ids[: len(row.input_ids) - sum(row.loss_mask)])
        assert traj.steps[0].action.text in prompt and "Incorrect." in prompt


def test_retry_oracle_rejects_a_spread_below_one() -> None:
    with pytest.raises(AgentError, match="spread >= 1"):
        RetryOracle(spread=0)


def test_warm_start_trains_only_the_adapter_then_reloads_the_same_bits_from_the_cache(tokenizer, tmp_path) -> None:
    policy = make_policy(tokenizer)
    base = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    info = warm_start(policy, model_id="micro", env_id=ENV, env_kwargs=KWARGS, cfg=MICRO, cache=tmp_path)
    assert not info["from_cache"] and info["rows"] == 8 and len(info["loss"]) == 3
    assert info["loss"][-1] < info["loss"][0]
    trained = adapter_state(policy)
    assert any(t.abs().sum() > 0 for n, t in trained.items() if "lora_B" in n)  # B starts at 0: it moved
    for name, param in policy.model.named_parameters():  # the base stays frozen and unchanged
        if "lora_" not in name:
            original = name.replace("base_model.model.", "").replace(".base_layer", "")
            assert torch.equal(param, base[original]), name
    saved = json.loads((tmp_path / "warmstart" / warm_start_key("micro", ENV, KWARGS, MICRO) / INFO_FILE).read_text())
    assert saved["rows"] == 8

    again = make_policy(tokenizer)
    info2 = warm_start(again, model_id="micro", env_id=ENV, env_kwargs=KWARGS, cfg=MICRO, cache=tmp_path)
    assert info2["from_cache"] and info2["loss"] == info["loss"]
    reloaded = adapter_state(again)
    assert reloaded.keys() == trained.keys()
    assert all(torch.equal(reloaded[n], trained[n]) for n in trained)


def test_the_cache_key_follows_everything_that_changes_the_bits(monkeypatch) -> None:
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)  # the native path, whatever this process runs on
    key = warm_start_key("smollm2", ENV, KWARGS, MICRO)
    assert key != warm_start_key("smollm2-bf16", ENV, KWARGS, MICRO)
    assert key != warm_start_key("smollm2", ENV, {**KWARGS, "difficulty": 1}, MICRO)
    assert key != warm_start_key("smollm2", ENV, KWARGS, WarmStartConfig())
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # another float path trains other bits
    assert key != warm_start_key("smollm2", ENV, KWARGS, MICRO)


@pytest.mark.parametrize(
    ("field", "value"),
    [("steps", 0), ("retry_demos", -1), ("optim", {"lr": 0.0}), ("lora", {"r": 0}), ("lora", {"alpha": 0.5})],
)
def test_bad_settings_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"WarmStartConfig.{field}"):
        WarmStartConfig(**{field: value})


@pytest.mark.parametrize(
    ("cfg", "key"),
    [
        (WarmStartConfig(), "ede75be96748a45d"),
        (
            WarmStartConfig(steps=3, optim={"lr": 1e-2, "warmup_steps": 2}, lora={"r": 2, "alpha": 4}),
            "52b6b58c5d1c89ef",
        ),
    ],
)
def test_the_cache_key_of_a_config_is_the_one_of_its_flat_fields(monkeypatch, cfg: WarmStartConfig, key: str) -> None:
    # The literals were computed before the optim/lora tables, from WarmStartConfig() and
    # WarmStartConfig(lr=1e-2, warmup_steps=2, lora_r=2, lora_alpha=4, steps=3): cached adapters keep their folder.
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    monkeypatch.setattr(torch, "__version__", "pinned")
    assert warm_start_key("smollm2", ENV, {"difficulty": 2}, cfg) == key
    assert warm_start_key("smollm2", ENV, {"difficulty": 2}, replace(cfg, optim=replace(cfg.optim, eps=1e-6))) != key


def test_old_flat_keys_move_into_the_tables_with_one_warning() -> None:
    with pytest.warns(FutureWarning, match="lr -> optim.lr, lora_r -> lora.r") as seen:
        cfg = from_dict(WarmStartConfig, {"lr": 1e-2, "lora_r": 2, "steps": 3})
    assert len(seen) == 1
    assert cfg == WarmStartConfig(steps=3, optim={"lr": 1e-2}, lora={"r": 2})
    with pytest.raises(
        ConfigError, match=r"WarmStartConfig.lora: unknown LoraConfig key 'lr' \(did you mean WarmStartConfig's 'optim"
    ):
        from_dict(WarmStartConfig, {"lora": {"lr": 1e-2}})
    with pytest.raises(ConfigError, match=r"unknown WarmStartConfig key 'alpha' \(did you mean 'lora.alpha'\?\)"):
        from_dict(WarmStartConfig, {"alpha": 4})
