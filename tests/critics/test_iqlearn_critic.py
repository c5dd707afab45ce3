"""IQLearnReward: per-turn sums of Q(s, a) − γ V(s') checked against an independent computation."""

from __future__ import annotations

import pytest
import torch

from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.critics.base import score_all
from turnkit.critics.iqlearn import IQLearnReward
from turnkit.errors import DataError
from turnkit.models.tiny import TinyModelConfig, build_tiny_model
from turnkit.types import AgentTurn, Step, Trajectory, TrajectoryError


@pytest.fixture(scope="module")
def policy(tok):
    return HFPolicy(build_tiny_model(tok, TinyModelConfig(32, 1, 2, 64), seed=4), tok)


def _by_hand(policy, prompt, completion, gamma):
    """Σ_t logits_t[a_t] − γ·logsumexp(logits_{t+1}) over the completion, with V = 0 after its last token."""
    ids = torch.tensor([list(prompt) + list(completion)])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0].double()
    total = 0.0
    for j, token in enumerate(completion):
        pos = len(prompt) + j - 1  # the logits that predict completion token j
        q = float(logits[pos, token])
        v_next = float(torch.logsumexp(logits[pos + 1], dim=-1)) if j + 1 < len(completion) else 0.0
        total += q - gamma * v_next
    return total


def test_turn_rewards_match_an_independent_computation(policy, tok):
    sampled = AgentTurn("x", token_ids=(60, 61, 62, 2), prompt_token_ids=(1, 40, 41))
    traj = Trajectory("d", 0, (Step("q", sampled, 0.0), Step("again", AgentTurn("ANSWER: 4"), 1.0, True)))
    critic = IQLearnReward(policy, gamma=0.9)
    rewards = critic.score(traj).step_rewards
    assert rewards[0] == pytest.approx(_by_hand(policy, (1, 40, 41), (60, 61, 62, 2), 0.9), abs=1e-4)
    prompt = chat_prompt_ids(tok, traj.messages()[:3])
    completion = [*tok("ANSWER: 4", add_special_tokens=False)["input_ids"], tok.eos_token_id]
    assert rewards[1] == pytest.approx(_by_hand(policy, prompt, completion, 0.9), abs=1e-4)


def test_gamma_one_is_loglik_plus_the_first_state_value(policy):
    turn = AgentTurn("x", token_ids=(70, 71, 72), prompt_token_ids=(1, 5, 6))
    reward = IQLearnReward(policy, gamma=1.0).score(Trajectory("d", 0, (Step("q", turn, 0.0, True),))).total
    loglik = float(policy.sequence_logprobs([[1, 5, 6]], [[70, 71, 72]], temperature=1.0).sum())
    with torch.no_grad():
        v0 = float(torch.logsumexp(policy.model(input_ids=torch.tensor([[1, 5, 6]])).logits[0, -1], dim=-1))
    assert reward == pytest.approx(loglik + v0, abs=1e-4)


def test_batched_scores_equal_one_at_a_time(policy):
    trajs = [
        Trajectory(
            "d", i, (Step("q", AgentTurn("x", token_ids=tuple(range(50, 50 + n)), prompt_token_ids=(1, 7)), 0.0, True),)
        )
        for i, n in enumerate((1, 4, 9))
    ]
    critic = IQLearnReward(policy, batch_size=2)
    batched = [r.total for r in score_all(critic, trajs)]
    alone = [critic.score(t).total for t in trajs]
    assert batched == pytest.approx(alone, abs=1e-4)


def test_errored_trajectories_are_refused(policy):
    bad = Trajectory("d", 3, (), error=TrajectoryError("sandbox", "boom"))
    with pytest.raises(DataError, match=r"trajectory 0 .*sandbox"):
        IQLearnReward(policy).score(bad)
