"""SWEET-RL critic: hand-computed advantage and Bradley-Terry values, pairing rules, privileged prompts,
training on a learnable toy, and the policy's preference data (tests/critics/test_sweet.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.critics.base import Critic, StatefulCritic, score_all
from turnkit.critics.sweet import (
    SweetConfig,
    SweetCritic,
    bradley_terry_loss,
    outcome_pairs,
    ranking_accuracy,
    render_reference,
    sweet_pairs,
    top_bottom_pairs,
    turn_advantage,
)
from turnkit.errors import ConfigError, CriticError, DataError
from turnkit.models.tiny import TinyModelConfig, build_tiny_model
from turnkit.rollout.demos import turn_messages
from turnkit.types import AgentTurn, Message, Step, Task, Trajectory

TINY = TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_position_embeddings=256)


def _policy(tok, seed: int = 0) -> HFPolicy:
    return HFPolicy(build_tiny_model(tok, TINY, seed=seed), tok, max_new_tokens=4, seed=seed)


def _traj(task_id: str, answer: str, actions: list[str], reward: float) -> Trajectory:
    steps = tuple(
        Step(f"q{task_id}" if h == 0 else "Incorrect.", AgentTurn(a), reward if h == len(actions) - 1 else 0.0)
        for h, a in enumerate(actions)
    )
    task = Task(task_id, f"q{task_id}", privileged={"answer": answer})
    return Trajectory("demo", 0, steps, initial_observation=f"q{task_id}", task=task)


def _randomise_adapter(critic: SweetCritic) -> None:
    with torch.no_grad():
        for name, p in critic.critic.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(0))


# ----------------------------------------------------------------------------- kernels


def test_turn_advantage_is_the_mean_log_ratio() -> None:
    critic = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]])
    ref = torch.tensor([[-2.0, -2.0, 0.0], [-1.5, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    # row 0: ((−1 + 2) + (−2 + 2)) / 2 = 0.5; row 1: (−0.5 + 1.5) / 1 = 1.0
    assert turn_advantage(critic, ref, mask).tolist() == [0.5, 1.0]


def test_turn_advantage_without_length_normalisation_sums() -> None:
    critic = torch.tensor([[-1.0, -1.0]])
    ref = torch.tensor([[-2.0, -1.5]])
    assert turn_advantage(critic, ref, torch.ones(1, 2, dtype=torch.bool), length_normalize=False).tolist() == [1.5]


def test_turn_advantage_ignores_masked_garbage() -> None:
    critic = torch.tensor([[-1.0, 1e9]])
    ref = torch.tensor([[-1.5, -1e9]])
    assert turn_advantage(critic, ref, torch.tensor([[True, False]])).tolist() == [0.5]


def test_turn_advantage_rejects_an_empty_turn() -> None:
    with pytest.raises(ValueError, match="at least one token"):
        turn_advantage(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2, dtype=torch.bool))


def test_turn_advantage_gradient_reaches_only_the_critic() -> None:
    critic = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    ref = torch.tensor([[-2.0, -2.0]], requires_grad=True)
    turn_advantage(critic, ref.detach(), torch.ones(1, 2, dtype=torch.bool)).sum().backward()
    assert critic.grad.tolist() == [[0.5, 0.5]]
    assert ref.grad is None


def test_bradley_terry_loss_hand_computed() -> None:
    # β = 0.5: logits 0.5 * (2 − 0) = 1 and 0.5 * (0 − 1) = −0.5
    loss, m = bradley_terry_loss(torch.tensor([2.0, 0.0]), torch.tensor([0.0, 1.0]), beta=0.5)
    expected = (math.log1p(math.exp(-1.0)) + math.log1p(math.exp(0.5))) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert m["accuracy"] == 0.5
    assert m["margin"] == pytest.approx(0.25)


def test_bradley_terry_gradient_raises_chosen_and_lowers_rejected() -> None:
    chosen = torch.tensor([0.0], requires_grad=True)
    rejected = torch.tensor([0.0], requires_grad=True)
    bradley_terry_loss(chosen, rejected, beta=0.1)[0].backward()
    # d/ds⁺ of −log σ(β(s⁺ − s⁻)) at 0 is −β/2
    assert chosen.grad.item() == pytest.approx(-0.05)
    assert rejected.grad.item() == pytest.approx(0.05)


def test_bradley_terry_rejects_bad_beta() -> None:
    with pytest.raises(ConfigError, match="beta"):
        bradley_terry_loss(torch.zeros(1), torch.zeros(1), beta=0.0)


def test_outcome_pairs_never_pair_ties_or_other_tasks() -> None:
    pairs = outcome_pairs([1.0, 1.0, 0.0, 0.0], ["a", "a", "a", "b"], max_pairs_per_group=None)
    assert pairs == [(0, 2), (1, 2)]


def test_outcome_pairs_require_success_drops_unsolved_tasks() -> None:
    assert outcome_pairs([0.5, 0.0], ["a", "a"], require_success=1.0) == []


def test_outcome_pairs_cap_is_a_seeded_subset() -> None:
    rewards, groups = [3.0, 2.0, 1.0, 0.0], ["a"] * 4
    everything = outcome_pairs(rewards, groups, max_pairs_per_group=None)
    a = outcome_pairs(rewards, groups, max_pairs_per_group=2, rng=np.random.default_rng(5))
    b = outcome_pairs(rewards, groups, max_pairs_per_group=2, rng=np.random.default_rng(5))
    assert len(everything) == 6 and len(a) == 2 and a == b and set(a) <= set(everything)


def test_outcome_pairs_cap_needs_rng() -> None:
    with pytest.raises(ConfigError, match="rng"):
        outcome_pairs([1.0, 0.0, 0.0], ["a"] * 3, max_pairs_per_group=1)


def test_top_bottom_pairs_cross_the_halves() -> None:
    scores = [0.5, 0.1, 0.9, 0.3, 0.7]  # sorted: 2, 4, [0 sits out], 3, 1
    pairs = top_bottom_pairs(scores, num_pairs=10, rng=np.random.default_rng(0))
    assert sorted(pairs) == [(2, 1), (2, 3), (4, 1), (4, 3)]


def test_top_bottom_pairs_subsamples() -> None:
    pairs = top_bottom_pairs(list(range(16)), num_pairs=4, rng=np.random.default_rng(0))
    assert len(pairs) == 4 and all(a >= 8 > b for a, b in pairs)


def test_top_bottom_pairs_skip_ties_across_halves() -> None:
    assert top_bottom_pairs([1.0, 1.0, 1.0, 0.0], num_pairs=4, rng=np.random.default_rng(0)) == [(0, 3), (1, 3)]


def test_ranking_accuracy_counts_ties_half() -> None:
    assert ranking_accuracy([1.0, 2.0, 0.0, 5.0], [0.0, 2.0, 1.0, 1.0]) == pytest.approx((1 + 0.5 + 0 + 1) / 4)


# ----------------------------------------------------------------------------- the critic


def test_config_rejects_template_without_reference() -> None:
    with pytest.raises(ConfigError, match="reference"):
        SweetConfig(template="In light of the answer.")


def test_critic_reads_the_reference_in_front_of_the_conversation(tok) -> None:
    critic = SweetCritic(_policy(tok))
    msgs = critic.critic_messages(Task("t", "q", privileged={"answer": "42"}), [Message("user", "What?")])
    assert msgs == [Message("user", "In light that the final answer is: 42.\nWhat?")]


def test_suffix_placement_closes_the_last_message(tok) -> None:
    critic = SweetCritic(_policy(tok), SweetConfig(placement="suffix"))
    task = Task("t", "q", privileged={"answer": "42"})
    msgs = critic.critic_messages(task, [Message("user", "Q"), Message("assistant", "A"), Message("user", "Wrong.")])
    assert msgs[:2] == [Message("user", "Q"), Message("assistant", "A")]
    assert msgs[2] == Message("user", "Wrong.\nIn light that the final answer is: 42.")


def test_collab_code_facts_are_rendered_as_slot_equals_value(tok) -> None:
    facts = ({"slot": "grade.cutoff", "value": 65}, {"slot": "grade.inclusive", "value": True})
    critic = SweetCritic(_policy(tok), SweetConfig(reference_key="facts", template="Hidden facts: {reference}."))
    msgs = critic.critic_messages(Task("t", "q", privileged={"facts": facts}), [Message("user", "Q")])
    assert msgs == [Message("user", "Hidden facts: grade.cutoff = 65; grade.inclusive = True.\nQ")]


def test_render_reference_nests_mappings_and_sequences() -> None:
    assert render_reference([{"a": [1, 2]}, "x", 3.5]) == "a = 1; 2; x; 3.5"


def test_config_rejects_unknown_placement_and_score() -> None:
    with pytest.raises(ConfigError, match="placement"):
        SweetConfig(placement="middle")
    with pytest.raises(ConfigError, match="trajectory_score"):
        SweetConfig(trajectory_score="max")


def test_flat_learner_keys_move_into_the_tables_with_one_warning() -> None:
    from turnkit.critics.registry import critic_config

    flat = {"lr": 5e-3, "lora_r": 4, "lora_targets": ["q_proj"], "steps": 2}
    with pytest.warns(
        FutureWarning, match=r"lr -> optim\.lr, lora_r -> lora\.r, lora_targets -> lora\.targets"
    ) as seen:
        cfg = critic_config("sweet", flat)
    assert len(seen) == 1
    lora = {"r": 4, "targets": ["q_proj"]}
    assert cfg == SweetConfig(steps=2, optim={"lr": 5e-3}, lora=lora, require_success=None)  # a run's default
    assert (cfg.lora.alpha, cfg.optim.max_grad_norm, SweetConfig().lora.r) == (32, 1.0, 16)
    with pytest.raises(ConfigError, match=r"unknown SweetConfig key 'alpha' \(did you mean 'lora\.alpha'\?\)"):
        critic_config("sweet", {"alpha": 4})


def test_trajectory_score_mean_divides_by_turns(tok) -> None:
    critic = SweetCritic(_policy(tok), SweetConfig(lora={"r": 4}))
    _randomise_adapter(critic)
    traj = _traj("1", "3", ["ANSWER: 1", "ANSWER: 2", "ANSWER: 3"], 1.0)
    summed = critic.trajectory_scores([traj])[0]
    critic.config = SweetConfig(lora={"r": 4}, trajectory_score="mean")
    assert critic.trajectory_scores([traj])[0] == pytest.approx(summed / 3)
    assert summed == pytest.approx(sum(critic.score(traj).step_rewards))


def test_critic_without_privileged_info_reads_the_plain_conversation(tok) -> None:
    critic = SweetCritic(_policy(tok), SweetConfig(reference_key=None))
    msgs = [Message("user", "What?")]
    assert critic.critic_messages(Task("t", "q", privileged={"answer": "42"}), msgs) == msgs


def test_critic_missing_reference_is_a_critic_error(tok) -> None:
    critic = SweetCritic(_policy(tok))
    with pytest.raises(CriticError, match="no privileged 'answer'"):
        critic.critic_messages(Task("t", "q", privileged={"tests": []}), [Message("user", "q")])


def test_fresh_critic_gives_zero_advantage_and_is_a_learned_critic(tok) -> None:
    critic = SweetCritic(_policy(tok))
    assert isinstance(critic, Critic) and isinstance(critic, StatefulCritic)
    result = score_all(critic, [_traj("1", "3", ["ANSWER: 1", "ANSWER: 3"], 1.0)])[0]
    assert result.step_rewards == (0.0, 0.0)


def test_critic_scores_the_agents_exact_ids(tok) -> None:
    critic = SweetCritic(_policy(tok))
    turn = AgentTurn("ANSWER: 3", token_ids=(5, 6, 7), prompt_token_ids=(1,))
    traj = Trajectory("d", 0, (Step("q", turn, 1.0, True),), task=Task("t", "q", privileged={"answer": "3"}))
    assert critic.turn_segments(traj)[0][1] == (5, 6, 7)


def test_from_policy_copies_the_model(tok) -> None:
    policy = _policy(tok)
    critic = SweetCritic.from_policy(policy)
    assert critic.critic.model is not policy.model and not policy.has_adapter


def test_fit_learns_to_rank_with_privileged_info(tok) -> None:
    # same-task pairs: the chosen trajectory states the reference answer, the rejected one a wrong answer
    answers = ["1", "2", "3", "4"]
    trajs = []
    for k, a in enumerate(answers):
        wrong = answers[(k + 1) % 4]
        trajs += [_traj(str(k), a, [f"ANSWER: {a}"], 1.0), _traj(str(k), a, [f"ANSWER: {wrong}"], 0.0)]
    # β = 1 so the loss really moves (at β = 0.1 it stays within 0.01 of log 2 and the ranking flips with float
    # rounding). Measured at 80 steps over 8 model seeds on the native and ATEN_CPU_CAPABILITY=default paths:
    # final loss 0.588..0.643, every pair ranked right (smallest margin 0.036); seed 0: loss 0.593, margin 0.187.
    critic = SweetCritic(_policy(tok), SweetConfig(steps=80, batch_size=4, optim={"lr": 5e-3}, beta=1.0))
    pairs = critic.pairs(trajs, np.random.default_rng(0))
    assert critic.pair_accuracy(trajs, pairs) == 0.5  # identity adapter: all ties
    metrics = critic.fit(trajs)
    assert metrics["pairs"] == 4.0
    assert metrics["loss"] < math.log(2) - 0.05
    scores = critic.trajectory_scores(trajs)
    assert min(scores[chosen] - scores[rejected] for chosen, rejected in pairs) > 0.05


def test_fit_without_pairs_is_a_data_error(tok) -> None:
    critic = SweetCritic(_policy(tok), SweetConfig(steps=1))
    with pytest.raises(DataError, match="no same-task pair"):
        critic.fit([_traj("1", "1", ["ANSWER: 1"], 1.0), _traj("2", "1", ["ANSWER: 2"], 0.0)])


def test_sweet_pairs_rank_candidates_without_leaking_the_reference(tok) -> None:
    policy = _policy(tok, seed=3)
    critic = SweetCritic(_policy(tok, seed=4), SweetConfig(lora={"r": 4}))
    _randomise_adapter(critic)  # non-trivial adapter: candidates get distinct advantages
    traj = _traj("9", "SECRET", ["ANSWER: 1", "ANSWER: 2"], 0.0)
    pairs = sweet_pairs(critic, policy, [traj], num_candidates=6, pairs_per_state=2)
    assert pairs and all(p.source == "sweet" and p.q_chosen > p.q_rejected for p in pairs)
    for p in pairs:
        assert p.prompt_token_ids == tuple(chat_prompt_ids(tok, turn_messages(traj, p.step)))
        assert "SECRET" not in tok.decode(list(p.prompt_token_ids))
