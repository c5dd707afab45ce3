"""The Critic protocol, result checks and WeightedSum (python -m pytest tests/critics/test_base.py)."""

from __future__ import annotations

import math

import pytest

from turnkit.critics.base import (
    Critic,
    CriticResult,
    StatefulCritic,
    WeightedSum,
    checked,
    critic_name,
    score_all,
)
from turnkit.errors import ConfigError, CriticError
from turnkit.types import AgentTurn, Step, Trajectory


def _traj(n: int = 3) -> Trajectory:
    steps = tuple(Step(f"obs{h}", AgentTurn(f"act{h}"), reward=float(h)) for h in range(n))
    return Trajectory("demo", seed=0, steps=steps)


class Const:
    """Returns the same list of rewards for every trajectory."""

    def __init__(self, rewards: tuple[float, ...], name: str = "const", metrics: dict | None = None) -> None:
        self.rewards = rewards
        self.name = name
        self.metrics = metrics or {}

    def score(self, trajectory: Trajectory) -> CriticResult:
        return CriticResult(self.rewards, self.metrics)


class Batched(Const):
    """Counts batched calls, to show that score_all prefers score_batch."""

    calls = 0

    def score_batch(self, trajectories):
        Batched.calls += 1
        return [self.score(t) for t in trajectories]


def test_a_class_with_score_is_a_critic() -> None:
    assert isinstance(Const((0.0,)), Critic)
    assert not isinstance(object(), Critic)


def test_a_stateful_critic_needs_update_save_and_load() -> None:
    class Learns(Const):
        def update(self, trajectories):
            return {"loss": 0.0}

        def save(self, folder):
            pass

        def load(self, folder):
            pass

    class SavesOnly(Const):
        def save(self, folder):
            pass

    assert isinstance(Learns((0.0,)), StatefulCritic)
    assert not isinstance(SavesOnly((0.0,)), StatefulCritic) and not isinstance(Const((0.0,)), StatefulCritic)


def test_result_total_sums_rewards() -> None:
    assert CriticResult((0.5, -0.25, 2.0)).total == pytest.approx(2.25)


def test_checked_rejects_wrong_length() -> None:
    with pytest.raises(CriticError, match="2 step rewards for a trajectory with 3 steps"):
        checked(CriticResult((0.0, 0.0)), _traj(3), "x")


def test_checked_rejects_nan() -> None:
    with pytest.raises(CriticError, match="non-finite"):
        checked(CriticResult((0.0, math.nan, 0.0)), _traj(3))


def test_weighted_sum_adds_step_by_step() -> None:
    critic = WeightedSum([(2.0, Const((1.0, 0.0, -1.0), "a")), (-0.5, Const((4.0, 2.0, 0.0), "b"))])
    # step 0: 2*1 - 0.5*4 = 0; step 1: 0 - 1 = -1; step 2: -2 - 0 = -2
    assert critic.score(_traj(3)).step_rewards == (0.0, -1.0, -2.0)


def test_weighted_sum_keeps_metrics_by_name() -> None:
    critic = WeightedSum([(3.0, Const((1.0, 1.0, 1.0), "a", {"m": 7.0})), (1.0, Const((0.0, 0.0, 0.0), "b"))])
    metrics = critic.score(_traj(3)).metrics
    assert metrics == {"a/m": 7.0, "a/total": 9.0, "b/total": 0.0}


def test_weighted_sum_disambiguates_equal_names() -> None:
    critic = WeightedSum([(1.0, Const((1.0,), "x")), (1.0, Const((2.0,), "x"))])
    assert set(critic.score(_traj(1)).metrics) == {"x#0/total", "x#1/total"}


def test_weighted_sum_names_the_part_with_bad_length() -> None:
    critic = WeightedSum([(1.0, Const((1.0, 1.0, 1.0), "good")), (1.0, Const((1.0,), "short"))])
    with pytest.raises(CriticError, match="short returned 1 step rewards"):
        critic.score(_traj(3))


def test_weighted_sum_rejects_empty_and_nan_weights() -> None:
    with pytest.raises(ConfigError):
        WeightedSum([])
    with pytest.raises(ConfigError, match="finite"):
        WeightedSum([(math.inf, Const((0.0,)))])


def test_weighted_sum_nests() -> None:
    inner = WeightedSum([(2.0, Const((1.0,), "a"))], name="inner")
    outer = WeightedSum([(3.0, inner)])
    result = outer.score(_traj(1))
    assert result.step_rewards == (6.0,)
    assert result.metrics["inner/a/total"] == 2.0


def test_score_all_uses_score_batch_once() -> None:
    Batched.calls = 0
    results = score_all(WeightedSum([(1.0, Batched((1.0, 2.0)))]), [_traj(2), _traj(2), _traj(2)])
    assert Batched.calls == 1
    assert [r.step_rewards for r in results] == [(1.0, 2.0)] * 3


def test_critic_name_prefers_attribute() -> None:
    assert critic_name(Const((0.0,), "judge")) == "judge"
    assert critic_name(3) == "int"


def test_start_copy_of_a_warm_started_policy_merges_its_adapter(tok) -> None:
    """A run that goes on training a warm-start adapter gets a plain start copy: same log-probs, no adapter."""
    import torch

    from turnkit.agents.hf import HFPolicy
    from turnkit.critics.base import CriticContext
    from turnkit.critics.prime import ImplicitPRM
    from turnkit.models.tiny import TinyModelConfig, build_tiny_model

    policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
    policy.attach_lora(r=4)
    with torch.no_grad():  # a warm start: B != 0, so the adapter changes the outputs
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.linspace(-0.5, 0.5, param.numel()).reshape(param.shape))
    prompts, completions = [[1, 4, 5, 6]], [[60, 61, 62]]
    with policy.reference() as ref:
        base_lp = ref.sequence_logprobs(prompts, completions)
    warm_lp = policy.sequence_logprobs(prompts, completions)
    assert not torch.allclose(warm_lp, base_lp, atol=1e-3)  # the adapter matters

    ctx = CriticContext.from_policy(policy, make_env=lambda: None)
    start = ctx.start_policy()
    assert policy.has_adapter and not start.has_adapter
    assert not any(p.requires_grad for p in start.model.parameters())
    torch.testing.assert_close(start.sequence_logprobs(prompts, completions), warm_lp, atol=1e-5, rtol=0)

    prm = ImplicitPRM.from_policy(start)  # PRIME's PRM: a fresh adapter on the merged start, so rewards start at 0
    turn = AgentTurn("x", token_ids=(60, 61, 62), prompt_token_ids=(1, 4, 5, 6))
    assert prm.score(Trajectory("d", 0, (Step("q", turn, 1.0, True),))).step_rewards == (0.0,)
