"""MRT and PAV: hand-computed math, exact identities on an enumerable MDP, branching values, critics.

python -m pytest tests/critics/test_progress.py
"""

from __future__ import annotations

import itertools
import math

import gymnasium
import numpy as np
import pytest
import torch

import turnkit
from turnkit.agents.scripted import ScriptedAgent
from turnkit.critics.base import WeightedSum
from turnkit.critics.mrt import mrt_critic
from turnkit.critics.progress import (
    ProgressCritic,
    ProgressVerifier,
    RolloutValue,
    balanced_soft_bce,
    best_of_k,
    conversation_before,
    effective_rewards,
    force_answer,
    mean_normalized_regret,
    mrt_objective,
    normalized_regret,
    plot_regret,
    progress_bonus,
    progress_step_rewards,
    prover_advantages,
    regret_curve,
    replay_snapshots,
)
from turnkit.critics.rules import OutcomeReward
from turnkit.envs.core import TextEnv, Transition
from turnkit.envs.pav_didactic.agents import ProverAgent
from turnkit.envs.pav_didactic.env import PAVDidacticEnv
from turnkit.envs.pav_didactic.prover import (
    match_states,
    prover_values,
    q_after_steps,
    step_mask,
    transition_table,
)
from turnkit.errors import ConfigError, CriticError
from turnkit.learners.advantages import returns_to_go
from turnkit.rollout.collect import collect_batch
from turnkit.types import AgentTurn, ErrorCause, Message, Step, Task, Trajectory, TrajectoryError

# ---------------------------------------------------------------------------------------------- pure math


def test_progress_bonus_is_the_change_in_j() -> None:
    assert progress_bonus([0.25, 0.75, 0.5]).tolist() == [0.5, -0.25]


def test_mrt_objective_adds_alpha_times_total_progress() -> None:
    # outcome 0 + 2 * ((0.5 - 0) + (0.25 - 0.5)) = 0.5
    assert mrt_objective(0.0, [0.0, 0.5, 0.25], alpha=2.0) == 0.5


def test_prover_advantages_by_hand() -> None:
    adv = prover_advantages([[0.5, 0.75, 1.0], [0.0, 0.0, 0.0]], v0=[0.25, 0.5])
    assert adv.tolist() == [[0.25, 0.25, 0.25], [-0.5, 0.0, 0.0]]


def test_effective_reward_is_q_plus_alpha_a() -> None:
    assert effective_rewards(np.array([0.5, 1.0]), np.array([0.25, -0.5]), alpha=3.0).tolist() == [1.25, -0.5]


def test_best_of_k_by_hand_and_identity_at_one() -> None:
    q = np.array([0.0, 0.5, 0.9, 1.0])
    assert best_of_k(q, 1).tolist() == q.tolist()
    assert best_of_k(q, 3) == pytest.approx([0.0, 0.875, 0.999, 1.0])
    with pytest.raises(ConfigError, match="K >= 1"):
        best_of_k(q, 0)


def test_advantage_credit_returns_to_go_recover_progress() -> None:
    progress = np.array([[0.5, -0.25, 0.125, 0.0]])
    rewards = progress_step_rewards(progress, alpha=2.0, credit="advantage")
    assert rewards.tolist() == [[1.5, -0.75, 0.25, 0.0]]  # 2 * (p_h - p_{h+1})
    rtg = returns_to_go(torch.tensor(rewards), gamma=1.0)
    assert rtg[0].tolist() == pytest.approx((2.0 * progress[0]).tolist())


def test_sum_credit_is_plain_scaling() -> None:
    assert progress_step_rewards([0.5, -0.25], alpha=2.0, credit="sum").tolist() == [1.0, -0.5]
    with pytest.raises(ConfigError, match="credit"):
        progress_step_rewards([0.5], credit="tokens")  # type: ignore[arg-type]


def test_normalized_regret_by_hand() -> None:
    # points (0,0) (4,.5) (8,1) then flat to (10,1): area 1 + 3 + 2 = 6 -> regret 1 - 6/10
    assert normalized_regret([4, 8], [0.5, 1.0], budget=10) == pytest.approx(0.4)


def test_normalized_regret_drops_points_past_the_budget() -> None:
    # (0,0) (4,.5) held flat to 10: area 1 + 3 = 4
    assert normalized_regret([4, 12], [0.5, 1.0], budget=10) == pytest.approx(0.6)


def test_mean_normalized_regret_averages_traces() -> None:
    traces = [([4, 8], [0.5, 1.0]), ([4, 12], [0.5, 1.0])]
    assert mean_normalized_regret(traces, budget=10) == pytest.approx(0.5)


def test_normalized_regret_rejects_bad_input() -> None:
    with pytest.raises(ConfigError, match="non-decreasing"):
        normalized_regret([5, 3], [0.1, 0.2], budget=10)
    with pytest.raises(ConfigError, match="budget"):
        normalized_regret([1], [0.1], budget=0)
    with pytest.raises(ConfigError, match="same length"):
        normalized_regret([1, 2], [0.1], budget=3)


def test_regret_curve_integrates_to_the_regret() -> None:
    tokens, j = [3, 7, 12], [0.2, 0.6, 0.9]
    grid = np.linspace(0, 10, 10_001)
    area = np.trapezoid(regret_curve(tokens, j, 10, grid), grid)
    assert 1 - area / 10 == pytest.approx(normalized_regret(tokens, j, 10), abs=1e-6)


def test_plot_regret_writes_a_png(tmp_path) -> None:
    path = tmp_path / "regret.png"
    regrets = plot_regret({"a": [([4, 8], [0.5, 1.0])], "b": [([4, 12], [0.5, 1.0])]}, 10, str(path))
    assert regrets == pytest.approx({"a": 0.4, "b": 0.6})
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_balanced_soft_bce_by_hand() -> None:
    # N = 2, Σq = 0.5, Σ(1-q) = 1.5 -> w+ = 2, w- = 2/3; σ(ln 3) = 0.75, σ(0) = 0.5
    # i=0: 2 * 0.5 * -ln .75 + 2/3 * 0.5 * -ln .25 ; i=1: 2/3 * -ln .5 ; mean of the two
    expected = (2 * 0.5 * -math.log(0.75) + 2 / 3 * 0.5 * -math.log(0.25) + 2 / 3 * -math.log(0.5)) / 2
    loss = balanced_soft_bce(torch.tensor([math.log(3.0), 0.0]), torch.tensor([0.5, 0.0]))
    assert float(loss) == pytest.approx(expected, abs=1e-6)


def test_balanced_soft_bce_with_one_class_is_finite() -> None:
    loss = balanced_soft_bce(torch.tensor([2.0, -1.0]), torch.ones(2))
    assert math.isfinite(float(loss))


# ---------------------------------------------------------------------------------------------- identities
# The didactic task with V = 3 (tokens 0, 1, EOS = 2), L = 3, y* = (1, 0): small enough to enumerate.
V, L, Y = 3, 3, (1, 0)


def _sequences() -> list[tuple[int, ...]]:
    """Every complete sequence: ends at EOS, at the completion of y*, or after L tokens."""
    table = transition_table(Y, V)
    out = []
    for n in range(1, L + 1):
        for seq in itertools.product(range(V), repeat=n):
            arr = np.array([seq])
            real = step_mask(table, arr)[0]
            done = seq[-1] == V - 1 or match_states(table, arr)[0, -1] == len(Y) or n == L
            if real.all() and done:
                out.append(seq)
    return out


SEQS = _sequences()


def _tabular_logits(seed: int) -> dict[tuple[int, ...], torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    prefixes = {seq[:h] for seq in SEQS for h in range(len(seq))}
    return {p: torch.randn(V, generator=gen, dtype=torch.float64).requires_grad_() for p in sorted(prefixes)}


def _outcome(seq: tuple[int, ...]) -> float:
    return float(match_states(transition_table(Y, V), np.array([seq]))[0, -1] == len(Y))


def _exact_q_pi(logits) -> dict[tuple[int, ...], float]:
    """Q^π(prefix, a) as V^π(prefix + a), by enumeration over every completion."""
    values: dict[tuple[int, ...], float] = {}
    with torch.no_grad():
        for prefix in sorted({s[:h] for s in SEQS for h in range(len(s) + 1)}, key=len, reverse=True):
            if prefix in logits:
                probs = logits[prefix].softmax(-1)
                values[prefix] = float(sum(probs[a] * values[(*prefix, a)] for a in range(V)))
            else:
                values[prefix] = _outcome(prefix)
    return values


def _expected_gradient(logits, coef) -> torch.Tensor:
    """∇_θ Σ_τ p(τ) Σ_h log π(a_h|s_h) · c_h(τ), with c held fixed: the exact expected policy gradient."""
    params = list(logits.values())
    surrogate = torch.zeros((), dtype=torch.float64)
    for seq in SEQS:
        logps = [logits[seq[:h]].log_softmax(-1)[seq[h]] for h in range(len(seq))]
        p = torch.exp(sum(lp.detach() for lp in logps))
        c = coef(seq)
        surrogate = surrogate + p * sum(lp * c[h] for h, lp in enumerate(logps))
    return torch.cat([g.flatten() for g in torch.autograd.grad(surrogate, params)])


def _grad_j(logits) -> torch.Tensor:
    params = list(logits.values())
    j = sum(torch.exp(sum(logits[s[:h]].log_softmax(-1)[s[h]] for h in range(len(s)))) * _outcome(s) for s in SEQS)
    return torch.cat([g.flatten() for g in torch.autograd.grad(j, params)])


def test_enumeration_covers_all_probability_mass() -> None:
    logits = _tabular_logits(0)
    with torch.no_grad():
        total = sum(math.exp(sum(float(logits[s[:h]].log_softmax(-1)[s[h]]) for h in range(len(s)))) for s in SEQS)
    assert total == pytest.approx(1.0, abs=1e-12)


def test_outcome_policy_gradient_is_grad_j() -> None:
    logits = _tabular_logits(1)
    g = _expected_gradient(logits, lambda s: [_outcome(s)] * len(s))
    assert torch.allclose(g, _grad_j(logits), atol=1e-12)


@pytest.mark.parametrize("alpha", [0.5, 1.0, 3.0])
def test_pav_with_mu_equal_pi_is_outcome_rl(alpha: float) -> None:
    """PAV's identity: with μ = π, Q^π + α A^π has expected gradient (1 + α) ∇J, outcome RL's direction."""
    logits = _tabular_logits(2)
    q = _exact_q_pi(logits)

    def coef(seq):
        qs = [q[seq[: h + 1]] for h in range(len(seq))]
        adv = prover_advantages(qs, v0=q[()])
        return effective_rewards(np.array(qs), adv, alpha).tolist()

    g = _expected_gradient(logits, coef)
    assert torch.allclose(g, (1 + alpha) * _grad_j(logits), atol=1e-9)


def test_pav_with_outcome_as_q_hat_is_outcome_rl_too() -> None:
    """The sampled form R + α A^π (outcome in place of Q^π) has the same expectation."""
    logits = _tabular_logits(3)
    q = _exact_q_pi(logits)
    alpha = 2.0

    def coef(seq):
        adv = prover_advantages([q[seq[: h + 1]] for h in range(len(seq))], v0=q[()])
        return (_outcome(seq) + alpha * adv).tolist()

    assert torch.allclose(_expected_gradient(logits, coef), (1 + alpha) * _grad_j(logits), atol=1e-9)


def _prover_q(gamma: float):
    table = transition_table(Y, V)
    values = prover_values(Y, gamma, length=L, vocab_size=V)

    def q_of(seq):
        padded = np.array([list(seq) + [0] * (L - len(seq))])
        q, v0 = q_after_steps(table, values, padded)
        return q[0, : len(seq)], float(v0[0])

    return q_of


def test_pav_with_another_prover_changes_the_direction() -> None:
    """With μ ≠ π the per-step term is not a baseline: the expected gradient leaves ∇J's direction."""
    logits = _tabular_logits(4)
    q_of = _prover_q(gamma=6.0)

    def coef(seq):
        q, v0 = q_of(seq)
        return (_outcome(seq) + prover_advantages(q, v0)).tolist()

    g, gj = _expected_gradient(logits, coef), _grad_j(logits)
    cosine = float(g @ gj / (g.norm() * gj.norm()))
    assert cosine < 0.999


def test_sum_credit_telescopes_to_a_baseline_for_any_prover() -> None:
    """Raw progress rewards summed as returns-to-go: R + α (R − V^μ(s_h)), so again (1 + α) ∇J."""
    logits = _tabular_logits(5)
    q_of = _prover_q(gamma=6.0)
    alpha = 1.5

    def coef(seq):
        q, v0 = q_of(seq)
        rewards = progress_step_rewards(prover_advantages(q, v0), alpha, credit="sum")
        rewards[-1] += _outcome(seq)
        return returns_to_go(torch.tensor(rewards[None]), 1.0)[0].tolist()

    assert torch.allclose(_expected_gradient(logits, coef), (1 + alpha) * _grad_j(logits), atol=1e-9)


def test_prover_advantages_telescope_to_outcome_minus_value() -> None:
    """Σ_{h' ≥ h} A^μ = R − V^μ(s_h) on every sampled sequence of the full-size task."""
    target = (3, 7, 1)
    table, values = transition_table(target), prover_values(target, 10.0)
    rng = np.random.default_rng(0)
    tokens = rng.choice([3, 7, 1, 14, 5], size=(500, 10))
    q, v0 = q_after_steps(table, values, tokens)
    mask = step_mask(table, tokens)
    adv = prover_advantages(q, v0) * mask
    tail = np.flip(np.cumsum(np.flip(adv, 1), 1), 1)
    outcome = ((match_states(table, tokens)[:, 1:] == len(target)) & mask).any(1).astype(float)
    v_before = np.concatenate([v0[:, None], q[:, :-1]], axis=1)
    assert np.allclose(tail[mask], (outcome[:, None] - v_before)[mask], atol=1e-12)
    assert (outcome == 1).any() and (outcome == 0).any()


# ---------------------------------------------------------------------------------------------- branching
def _didactic_traj(actions: list[str], target: str = "1 2 3", seq_len: int = 6):
    env = PAVDidacticEnv(target=target, seq_len=seq_len, vocab_size=6)
    return env, turnkit.collect(env, ScriptedAgent(actions), seed=0)


def test_conversation_before_rebuilds_what_the_policy_saw() -> None:
    _, traj = _didactic_traj(["1", "2", "0"])
    msgs = conversation_before(traj, 2)
    assert [m.role for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    assert msgs[-1].content == traj.steps[2].observation


def test_rollout_values_of_a_deterministic_prover_are_exact() -> None:
    """γ → ∞: the prover writes y* whenever there is room, so V is 0/1 and off-by-one errors would show."""
    actions = ["0", "1", "2", "0", "0", "0"]
    env, traj = _didactic_traj(actions)
    got = RolloutValue(env, ProverAgent(gamma=1e12, vocab_size=6), samples=2).values(traj)
    table = transition_table((1, 2, 3), 6)
    exact_v = prover_values((1, 2, 3), 1e12, length=6, vocab_size=6)
    q, v0 = q_after_steps(table, exact_v, np.array([[int(a) for a in actions]]))
    assert got.tolist() == pytest.approx([v0[0], *q[0]], abs=1e-9)
    assert got.tolist() == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]


def test_rollout_values_match_the_exact_table_statistically() -> None:
    actions = ["1", "2", "0", "1", "2", "3"]
    env, traj = _didactic_traj(actions)
    got = RolloutValue(env, ProverAgent(gamma=3.0, vocab_size=6, seed=1), samples=150).values(traj)
    table = transition_table((1, 2, 3), 6)
    q, v0 = q_after_steps(table, prover_values((1, 2, 3), 3.0, length=6, vocab_size=6), np.array([[1, 2, 0, 1, 2, 3]]))
    exact = np.array([v0[0], *q[0]])
    assert got[-1] == 1.0  # the last step completed y*: the outcome, not an estimate
    assert np.abs(got - exact).max() < 0.15  # 150 samples: standard error <= 0.041
    assert np.abs(got - exact).mean() < 0.06


def test_replay_detects_a_foreign_trajectory() -> None:
    env, traj = _didactic_traj(["1", "2"])
    steps = list(traj.steps)
    steps[1] = Step("something else", steps[1].action, steps[1].reward)
    with pytest.raises(CriticError, match="diverged before step 1"):
        replay_snapshots(env, Trajectory(traj.env_id, 0, tuple(steps), traj.initial_observation, task=traj.task))


def test_replay_refuses_errored_trajectories() -> None:
    env, traj = _didactic_traj(["1"])
    broken = Trajectory(
        traj.env_id, 0, traj.steps, traj.initial_observation, error=TrajectoryError(ErrorCause.ENV, "x")
    )
    with pytest.raises(CriticError, match="errored"):
        replay_snapshots(env, broken)


class Fragile(TextEnv):
    """One answer ends the episode ("win" succeeds); "boom" breaks the env (an infrastructure fault)."""

    def generate_task(self, rng):
        return Task("fragile", "Go.", {}, family="fragile")

    def begin(self, task):
        return task.prompt

    def respond(self, action):
        if action == "boom":
            raise RuntimeError("the env broke")
        if action == "think":
            return Transition("Go on.", 0.0, False)
        return Transition("Done.", float(action == "win"), True, {"success": action == "win"})


class ByRank:
    """Replies ``texts[rank % len(texts)]`` to the context at ``rank`` of each batch."""

    uses_privileged = False

    def __init__(self, *texts: str) -> None:
        self.texts = texts

    def act(self, contexts):
        return [AgentTurn(self.texts[r % len(self.texts)]) for r in range(len(contexts))]


def test_failed_branches_are_left_out_of_the_values_and_counted() -> None:
    env = Fragile()
    traj = turnkit.collect(env, ScriptedAgent(["think", "lose"]), seed=0)
    values = RolloutValue(env, ByRank("win", "boom", "lose"), samples=3)
    got = values.values(traj)
    assert got.tolist() == [0.5, 0.5, 0.0]  # per point: one win, one loss, one failure left out; then the outcome
    assert values.failed_branches == 2
    assert {e.cause for e in values.branch_errors} == {ErrorCause.ENV}
    assert all("the env broke" in e.message for e in values.branch_errors)
    clean = RolloutValue(env, ByRank("win", "lose"), samples=2)
    assert clean.values(traj).tolist() == [0.5, 0.5, 0.0] and clean.failed_branches == 0
    values.close()


def test_a_point_without_a_clean_branch_raises() -> None:
    env = Fragile()
    traj = turnkit.collect(env, ScriptedAgent(["lose"]), seed=0)
    with pytest.raises(CriticError, match=r"every branch from step 0 .* env: step: RuntimeError: the env broke"):
        RolloutValue(env, ByRank("boom"), samples=2).values(traj)

    class Down:
        def act(self, contexts):
            raise TimeoutError("prover server down")

    with pytest.raises(CriticError, match="agent: TimeoutError: prover server down"):
        RolloutValue(env, Down(), samples=2).values(traj)


class _Thinker:
    """Thinks twice then answers; when forced to answer it is right only after two thinking turns."""

    uses_privileged = True

    def act(self, contexts):
        out = []
        for ctx in contexts:
            thought = sum(m.role == "assistant" for m in ctx.messages)
            answer = str(ctx.task.privileged["answer"])
            if ctx.messages[-1].content.endswith("Answer now."):
                out.append(AgentTurn(f"ANSWER: {answer}" if thought >= 2 else "ANSWER: -999999"))
            else:
                out.append(
                    AgentTurn(
                        ["thinking step one", "thinking step two"][thought] if thought < 2 else f"ANSWER: {answer}"
                    )
                )
        return out


def _math_traj():
    env = gymnasium.make("turnkit/MathEpisodes-v0")
    return env, turnkit.collect(env, _Thinker(), seed=3)


def test_mrt_critic_measures_j_after_each_episode() -> None:
    env, traj = _math_traj()
    assert [s.action.text.split()[0] for s in traj.steps] == ["thinking", "thinking", "ANSWER:"] and traj.success
    critic = mrt_critic(env, _Thinker(), samples=2, force=force_answer("Answer now."), budget=10)
    assert critic.value_fn.values(traj).tolist() == [0.0, 0.0, 1.0, 1.0]  # J0, after think 1, 2, outcome
    result = critic.score(traj)
    assert result.step_rewards == (-1.0, 1.0, 0.0)  # advantage credit: returns-to-go are ΔJ = 0, 1, 0
    # tokens (words) 3, 6, 8 with J 0, 1, 1: (0,0) (3,0) (6,1) (8,1) (10,1): area 0 + 1.5 + 2 + 2 = 5.5
    assert result.metrics["regret"] == pytest.approx(0.45)


def test_mrt_with_outcome_gives_outcome_plus_progress_returns() -> None:
    env, traj = _math_traj()
    critic = WeightedSum(
        [(1.0, OutcomeReward()), (1.0, mrt_critic(env, _Thinker(), samples=1, force=force_answer("Answer now.")))]
    )
    rewards = torch.tensor([critic.score(traj).step_rewards])
    assert returns_to_go(rewards).tolist() == [[1.0, 2.0, 1.0]]  # R + α ΔJ_h with ΔJ = 0, 1, 0


def test_force_answer_only_changes_the_prover_prompt() -> None:
    msgs = (Message("user", "q"), Message("assistant", "a"), Message("user", "Incorrect."))
    forced = force_answer("Now!")(msgs)
    assert forced[:2] == msgs[:2] and forced[-1].content == "Incorrect.\nNow!"


# ---------------------------------------------------------------------------------------------- critics
class _Table:
    def __init__(self, values):
        self._values = np.asarray(values, dtype=float)

    def values(self, trajectory):
        return self._values


def _plain_traj(n: int, success: bool = True) -> Trajectory:
    steps = [Step("q", AgentTurn("a b"), 0.0) for _ in range(n - 1)]
    steps.append(Step("q", AgentTurn("c"), float(success), True, info={"success": success}))
    return Trajectory("d", 0, tuple(steps))


def test_progress_critic_applies_best_of_k_before_differencing() -> None:
    critic = ProgressCritic(_Table([0.5, 0.75, 1.0]), best_of=2, credit="sum")
    # BoK(2): 0.75, 0.9375, 1 -> progress 0.1875, 0.0625
    assert critic.score(_plain_traj(2)).step_rewards == pytest.approx((0.1875, 0.0625))


def test_progress_critic_checks_value_count() -> None:
    with pytest.raises(CriticError, match="need 3"):
        ProgressCritic(_Table([0.5, 1.0])).score(_plain_traj(2))


def test_pav_effective_reward_through_returns_to_go() -> None:
    """Outcome + PAV rewards (advantage credit): the return-to-go of step h is R + α A^μ_h."""
    v = [0.2, 0.5, 0.4, 1.0]
    critic = WeightedSum([(1.0, OutcomeReward()), (1.0, ProgressCritic(_Table(v), alpha=2.0))])
    rtg = returns_to_go(torch.tensor([critic.score(_plain_traj(3)).step_rewards]))[0]
    expected = effective_rewards(1.0, prover_advantages(v[1:], v[0]), 2.0)
    assert rtg.tolist() == pytest.approx(expected.tolist())


def test_fit_needs_a_learned_value_function() -> None:
    with pytest.raises(CriticError, match="not learned"):
        ProgressCritic(_Table([0.0, 1.0])).fit([])


def test_progress_verifier_learns_prover_values() -> None:
    """Fit on exact prover values of prover rollouts; predictions beat the best constant on held-out ones."""
    target, gamma, vocab, length = (1, 2), 3.0, 4, 5
    table = transition_table(target, vocab)
    exact = prover_values(target, gamma, length=length, vocab_size=vocab)

    def labels(traj):
        tokens = [int(s.action.text) for s in traj.steps]
        q, v0 = q_after_steps(table, exact, np.array([tokens + [0] * (length - len(tokens))]))
        return [v0[0], *q[0, : len(tokens)]]

    envs = [PAVDidacticEnv(target="1 2", seq_len=length, vocab_size=vocab) for _ in range(80)]
    trajs = collect_batch(envs, ProverAgent(gamma=gamma, vocab_size=vocab, seed=2), list(range(80)))
    train, test = trajs[:60], trajs[60:]
    verifier = ProgressVerifier(buckets=64, dim=32, max_words=16, seed=0)
    metrics = verifier.fit(train, labels=[labels(t) for t in train], epochs=20, lr=1e-2)
    assert metrics["examples"] > 60
    pred = np.concatenate([verifier.values(t)[:-1] for t in test])
    truth = np.concatenate([np.array(labels(t))[:-1] for t in test])
    best_constant = np.abs(truth - np.median(truth)).mean()
    assert np.abs(pred - truth).mean() < 0.5 * best_constant


def test_verifier_fit_rejects_bad_labels() -> None:
    with pytest.raises(ConfigError, match="exactly one"):
        ProgressVerifier().fit([_plain_traj(1)])
    with pytest.raises(CriticError, match="values in"):
        ProgressVerifier().fit([_plain_traj(1)], labels=[[0.5, 2.0]])
