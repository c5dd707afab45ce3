from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from tests.train.conftest import MICRO_RECIPE
from turnkit.cli.agents import make_agent
from turnkit.configs import apply_overrides
from turnkit.errors import ConfigError
from turnkit.models.embedded import TinyRecipe, math_corpus, tiny_policy
from turnkit.models.sft import SFTConfig


def test_tiny_policy_is_built_once_then_loaded_from_the_cache(tmp_path: Path) -> None:
    first = tiny_policy(recipe=MICRO_RECIPE, cache=tmp_path, progress=False)
    folder = tmp_path / "tiny" / MICRO_RECIPE.key()
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    second = tiny_policy(recipe=MICRO_RECIPE, cache=tmp_path, progress=False)
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    pairs = zip(first.model.parameters(), second.model.parameters(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
    assert first.model is not second.model  # each caller may train its own copy


def test_rebuild_is_deterministic(tmp_path: Path) -> None:
    a = tiny_policy(recipe=MICRO_RECIPE, cache=tmp_path / "a", progress=False)
    b = tiny_policy(recipe=MICRO_RECIPE, cache=tmp_path / "b", progress=False, rebuild=True)
    assert all(torch.equal(x, y) for x, y in zip(a.model.parameters(), b.model.parameters(), strict=True))


def test_the_build_is_the_same_bits_whatever_the_callers_thread_count(tmp_path: Path) -> None:
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        tiny_policy(recipe=MICRO_RECIPE, cache=tmp_path / "a", progress=False)
        assert torch.get_num_threads() == 2  # the caller's setting is restored
        torch.set_num_threads(1)
        tiny_policy(recipe=MICRO_RECIPE, cache=tmp_path / "b", progress=False)
    finally:
        torch.set_num_threads(before)
    folder = Path("tiny") / MICRO_RECIPE.key() / "model.safetensors"
    assert (tmp_path / "a" / folder).read_bytes() == (tmp_path / "b" / folder).read_bytes()


def test_the_recipe_key_changes_with_any_field() -> None:
    keys = {
        TinyRecipe().key(),
        TinyRecipe(sft=SFTConfig(steps=151)).key(),
        TinyRecipe(env_kwargs={"difficulty": 2}).key(),
        TinyRecipe(sft=SFTConfig(steps=400, optim={"warmup_steps": 0})).key(),
        TinyRecipe.from_dict({"model": {"num_layers": 3}}).key(),
    }
    assert len(keys) == 5


def test_recipe_keys_are_the_ones_of_the_flat_sft_fields() -> None:
    # Computed before SFTConfig had its optim table (TinyRecipe(sft=SFTConfig(steps=10, lr=1e-2, weight_decay=0.1,
    # warmup_steps=3, min_lr_ratio=0.5, max_grad_norm=2.0, seed=1)) for the second): every cached model keeps its key.
    optim = {"lr": 1e-2, "weight_decay": 0.1, "warmup_steps": 3, "min_lr_ratio": 0.5, "max_grad_norm": 2.0}
    assert TinyRecipe().key() == "b7aa35a90420a52b"
    assert TinyRecipe(sft=SFTConfig(steps=10, optim=optim, seed=1)).key() == "09bb0170ecc9ee9d"
    assert TinyRecipe(sft=SFTConfig(optim={"schedule": "constant"})).key() != TinyRecipe().key()


def test_a_partial_nested_table_keeps_the_recipes_other_defaults() -> None:
    recipe = TinyRecipe.from_dict({"model": {"num_layers": 3}, "sft": {"steps": 10}})
    assert recipe.model == dataclasses.replace(TinyRecipe().model, num_layers=3)
    assert recipe.sft == dataclasses.replace(TinyRecipe().sft, steps=10)
    changed = TinyRecipe.from_dict({"sft": {"optim": {"lr": 0.01}}}).sft
    assert apply_overrides(TinyRecipe(), ["sft.optim.lr=0.01"]).sft == changed
    with pytest.raises(ConfigError, match="unknown TinyRecipe key 'sft_steps'"):
        TinyRecipe.from_dict({"sft_steps": 10})


def test_corpus_covers_prompts_answers_and_feedback() -> None:
    corpus = math_corpus(6)
    assert any(t.startswith("ANSWER: ") for t in corpus)
    assert "Correct." in corpus and any("Reply with ANSWER" in t for t in corpus)


def test_make_agent_tiny_uses_the_embedded_policy(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TURNKIT_CACHE", str(tmp_path))
    import turnkit.models.embedded as embedded

    monkeypatch.setattr(embedded, "DEFAULT_RECIPE", MICRO_RECIPE)
    agent = make_agent("tiny", seed=3)
    assert type(agent).__name__ == "HFPolicy" and agent.sampling.seed == 3
    assert (tmp_path / "tiny" / MICRO_RECIPE.key() / "config.json").is_file()


def test_quiet_eval_builds_the_tiny_model_without_a_bar(tmp_path: Path, monkeypatch, capfd) -> None:
    monkeypatch.setenv("TURNKIT_CACHE", str(tmp_path / "cache"))  # not built yet: the eval builds it
    import turnkit.models.embedded as embedded
    from turnkit.cli import main

    monkeypatch.setattr(embedded, "DEFAULT_RECIPE", MICRO_RECIPE)
    argv = ["eval", "turnkit/MathEpisodes-v0", "--agent", "tiny", "--episodes", "1", "--out", str(tmp_path / "out")]
    assert main([*argv, "--quiet"]) == 0
    out, err = capfd.readouterr()
    assert (tmp_path / "cache" / "tiny" / MICRO_RECIPE.key() / "config.json").is_file()
    assert "tiny sft" not in err and "%|" not in err, err
    assert "success" in out


def test_progress_false_draws_no_library_bars_when_building_or_loading(tmp_path: Path, capfd) -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()  # as in a script that never ran a --quiet command
    tiny_policy(recipe=MICRO_RECIPE, cache=tmp_path, progress=False)  # built, saved
    tiny_policy(recipe=MICRO_RECIPE, cache=tmp_path, progress=False)  # loaded from the cache
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "Writing model shards" not in err and "%|" not in err
    assert hf_logging.is_progress_bar_enabled()  # the caller's setting comes back
