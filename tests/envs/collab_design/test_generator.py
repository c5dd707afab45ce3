from __future__ import annotations

import re

import numpy as np
import pytest

from turnkit.envs.collab_design.generator import (
    HELD_OUT_PAIRS,
    ID_LAYOUTS,
    OOD_LAYOUTS,
    design_task,
    hidden_description,
    public_prompt,
    reference_html,
    sample_design,
)
from turnkit.envs.collab_design.palettes import ID_PALETTES, ID_TOPICS, OOD_PALETTES, OOD_TOPICS, PALETTES, TOPICS
from turnkit.errors import EnvError


def designs(split: str, n: int = 150) -> list:
    return [sample_design(np.random.default_rng(seed), split) for seed in range(n)]


def test_same_seed_same_design_and_task() -> None:
    a, b = (design_task(sample_design(np.random.default_rng(42), "id")) for _ in range(2))
    assert a == b


def test_held_out_pairs_cover_every_palette_once_and_every_layout() -> None:
    assert len(HELD_OUT_PAIRS) == 6
    assert sorted(p for _, p in HELD_OUT_PAIRS) == sorted(ID_PALETTES)
    assert {lay for lay, _ in HELD_OUT_PAIRS} == set(ID_LAYOUTS)


def test_id_never_draws_a_held_out_pair_but_covers_every_layout_and_palette() -> None:
    ds = designs("id")
    assert not [(d.layout, d.palette) for d in ds if (d.layout, d.palette) in HELD_OUT_PAIRS]
    assert {d.layout for d in ds} == set(ID_LAYOUTS)
    assert {d.palette for d in ds} == set(ID_PALETTES)
    assert {d.topic for d in ds} <= set(ID_TOPICS)


def test_combo_draws_only_held_out_pairs() -> None:
    ds = designs("combo")
    assert {(d.layout, d.palette) for d in ds} == set(HELD_OUT_PAIRS)
    assert {d.topic for d in ds} <= set(ID_TOPICS)


def test_ood_uses_unseen_palettes_topics_sizes_and_the_pricing_layout() -> None:
    ds = designs("ood")
    assert {d.palette for d in ds} <= set(OOD_PALETTES)
    assert {d.topic for d in ds} <= set(OOD_TOPICS)
    assert {d.heading_px for d in ds} <= {24, 46} and {d.body_px for d in ds} <= {13, 18}
    assert "pricing" in {d.layout for d in ds} and {d.layout for d in ds} <= set(OOD_LAYOUTS)
    id_sizes = {d.heading_px for d in designs("id")}
    assert not id_sizes & {d.heading_px for d in ds}


def test_unknown_split_is_an_env_error() -> None:
    with pytest.raises(EnvError, match="unknown split"):
        sample_design(np.random.default_rng(0), "train")


@pytest.mark.parametrize("split", ["id", "ood", "combo"])
def test_reference_html_is_self_contained_and_escaped(split: str) -> None:
    for d in designs(split, 20):
        html = reference_html(d)
        assert not re.search(r"(https?:|//|url\(|@import|<script|<img)", html), html
        assert d.headline.replace("&", "&amp;").replace("'", "&#x27;") in html
        for colour in (PALETTES[d.palette]["bg"], PALETTES[d.palette]["accent"]):
            assert colour in html


def test_public_prompt_is_vague_and_states_the_protocol() -> None:
    for d in designs("id", 30):
        prompt = public_prompt(d, max_turns=7)
        assert "I WANT TO ANSWER:" in prompt and "7 turns" in prompt and "640x480" in prompt
        assert TOPICS[d.topic]["what"] in prompt
        for secret in (d.headline, d.brand, d.tagline, d.button, PALETTES[d.palette]["bg"]):
            assert secret not in prompt


def test_task_keeps_html_and_description_privileged() -> None:
    d = sample_design(np.random.default_rng(3), "combo")
    task = design_task(d)
    assert task.privileged == {"reference_html": reference_html(d), "description": hidden_description(d)}
    assert task.family == "collab_design" and task.split == "combo"
    assert task.metadata["layout"] == d.layout and task.metadata["palette"] == d.palette
    assert task.task_id.startswith("design-combo-")
    assert d.headline in task.privileged["description"]
