"""The length critic, as a run builds it from its table: one module, found by name."""

from __future__ import annotations

import pytest

from turnkit.critics.base import CriticContext
from turnkit.critics.registry import build_critics, built_in_critics
from turnkit.errors import ConfigError
from turnkit.train.config import TrainConfig
from turnkit.types import AgentTurn, Step, Trajectory

CONTEXT = CriticContext(policy=None, start_policy=lambda: None, make_env=lambda: None)  # type: ignore[arg-type]


def test_it_is_found_by_its_module_name() -> None:
    assert "length" in built_in_critics()
    assert TrainConfig(critic={"length": {"free": 4}}).critic == {"length": {"weight": 1.0, "free": 4}}


def test_each_turn_pays_for_the_tokens_over_its_allowance() -> None:
    """Turn 1 has 5 ids (2 over 3 free), turn 2 has 1: rewards env + 2 x (-0.25 x [2, 0])."""
    steps = (
        Step("q", AgentTurn("long", token_ids=(1, 2, 3, 4, 5)), 0.0),
        Step("q", AgentTurn("ok", token_ids=(6,)), 1.0, terminated=True),
    )
    critics = build_critics({"length": {"weight": 2.0, "per_unit": 0.25, "free": 3}}, CONTEXT)
    assert critics is not None
    rewards, metrics = critics.rewards([Trajectory("d", 0, steps)])
    assert rewards == [(-1.0, 1.0)]
    assert metrics["length/total"] == -1.0 and metrics["env/total"] == 1.0
    assert critics.stateful() == []


@pytest.mark.parametrize(
    ("options", "message"),
    [({"per_unit": -1}, r"LengthConfig\.per_unit must be a finite number >= 0"), ({"fre": 1}, r"did you mean 'free'")],
)
def test_bad_keys_are_config_errors(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainConfig(critic={"length": options})
