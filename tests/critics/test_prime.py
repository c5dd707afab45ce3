"""PRIME implicit PRM: hand-computed rewards, BCE, filter, ranking accuracy and advantages; online fitting and one
update on a tiny model (tests/critics/test_prime.py)."""

from __future__ import annotations

import math

import pytest
import torch

from turnkit.agents.hf import HFPolicy
from turnkit.critics.base import Critic, StatefulCritic
from turnkit.critics.prime import (
    ImplicitPRM,
    PrimeConfig,
    accuracy_filter,
    group_ranking_accuracy,
    implicit_token_rewards,
    policy_rows,
    prime_update,
    prm_bce_loss,
    process_scale,
    token_advantages,
)
from turnkit.errors import ConfigError, DataError
from turnkit.learners.advantages import rloo_advantages, whiten
from turnkit.learners.learner import Learner, OptimConfig
from turnkit.models.tiny import TinyModelConfig, build_tiny_model
from turnkit.types import AgentTurn, Step, Trajectory

TINY = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_position_embeddings=128)


def _policy(tok, seed: int = 0) -> HFPolicy:
    return HFPolicy(build_tiny_model(tok, TINY, seed=seed), tok, max_new_tokens=4, seed=seed)


def _traj(ids_per_turn, success: bool, group: int = 0, prompt=(1, 4)) -> Trajectory:
    steps = []
    for h, ids in enumerate(ids_per_turn):
        last = h == len(ids_per_turn) - 1
        turn = AgentTurn("x", token_ids=tuple(ids), logprobs=(-1.0,) * len(ids), prompt_token_ids=tuple(prompt))
        info = {"success": success} if last else {}
        steps.append(Step("q", turn, float(success and last), terminated=last, info=info))
    return Trajectory("demo", 0, tuple(steps), group=group)


# ----------------------------------------------------------------------------- kernels


def test_implicit_rewards_are_beta_times_the_log_ratio() -> None:
    prm = torch.tensor([[-1.0, -3.0, 7.0]])
    ref = torch.tensor([[-2.0, -1.0, 0.0]])
    mask = torch.tensor([[True, True, False]])
    out = implicit_token_rewards(prm, ref, mask, beta=0.05)
    assert out[0].tolist() == pytest.approx([0.05, -0.1, 0.0])


def test_bce_hand_computed() -> None:
    prm = torch.tensor([[-1.0, -2.0], [-1.0, -1.0]])
    ref = torch.tensor([[-2.0, -2.0], [0.0, -1.0]])
    mask = torch.ones(2, 2, dtype=torch.bool)
    # β = 0.5: Σ r = 0.5 for the correct response, −0.5 for the wrong one; each costs log(1 + e^{−0.5})
    loss, m = prm_bce_loss(prm, ref, mask, torch.tensor([1.0, 0.0]), beta=0.5)
    assert loss.item() == pytest.approx(math.log1p(math.exp(-0.5)), abs=1e-6)
    assert m["accuracy"] == 1.0 and m["implicit_return"] == pytest.approx(0.0)


def test_bce_gradient_pushes_correct_responses_up() -> None:
    prm = torch.zeros(1, 2, requires_grad=True)
    prm_bce_loss(prm, torch.zeros(1, 2), torch.ones(1, 2, dtype=torch.bool), torch.tensor([1.0]), beta=0.05)[
        0
    ].backward()
    # d/dlogp of −log σ(β Σ logp) at 0 is −β/2 per token
    assert prm.grad[0].tolist() == pytest.approx([-0.025, -0.025])


def test_bce_rejects_mismatched_labels() -> None:
    with pytest.raises(ValueError, match="labels"):
        prm_bce_loss(torch.zeros(2, 1), torch.zeros(2, 1), torch.ones(2, 1, dtype=torch.bool), torch.ones(3))


def test_filter_keeps_mixed_groups_inclusive_bounds() -> None:
    acc = [1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1]
    groups = [0] * 5 + [1] * 5 + [2] * 5  # means 0.2, 0.8, 1.0
    assert accuracy_filter(acc, groups) == [True] * 10 + [False] * 5


def test_filter_rejects_bad_bounds() -> None:
    with pytest.raises(ConfigError):
        accuracy_filter([1.0], [0], low=0.9, high=0.1)


def test_group_ranking_accuracy_only_compares_within_groups() -> None:
    # group a: correct 0.0 vs wrong 1.0 (loss); group b: correct 0.5 vs wrong 0.2 (win); cross-group never compared
    acc, n = group_ranking_accuracy([0.0, 1.0, 0.5, 0.2], [1, 0, 1, 0], ["a", "a", "b", "b"])
    assert (acc, n) == (0.5, 2)


def test_group_ranking_accuracy_without_pairs_is_nan() -> None:
    acc, n = group_ranking_accuracy([1.0, 2.0], [1, 1], [0, 0])
    assert math.isnan(acc) and n == 0


def test_token_advantages_hand_computed() -> None:
    # outcome RLOO: [+1, −1] on the last token; process RLOO: response means 0.1 and 0.0, so
    # response 0 gets [0.2 − 0.0, 0.0 − 0.0] and response 1 gets [0.0 − 0.1];
    # returns-to-go: [1 + 0.2, 1 + 0.0] and [−1 − 0.1]; then whitened over the three tokens.
    adv = token_advantages([[torch.tensor([0.2, 0.0])], [torch.tensor([0.0])]], [1.0, 0.0], ["g", "g"])
    raw = [1.2, 1.0, -1.1]
    mean = sum(raw) / 3
    std = math.sqrt(sum((x - mean) ** 2 for x in raw) / 3 + 1e-8)
    expected = [(x - mean) / std for x in raw]
    assert adv[0][0] == pytest.approx(expected[:2], abs=1e-5)
    assert adv[1][0] == pytest.approx(expected[2:], abs=1e-5)


def test_token_advantages_split_back_into_turns() -> None:
    # two turns of 1 and 2 tokens; returns-to-go run across turns: the first turn sees the later rewards
    adv = token_advantages([[torch.tensor([0.0]), torch.tensor([0.0, 0.0])], [torch.tensor([0.0])]], [1.0, 0.0], [0, 0])
    assert [len(t) for t in adv[0]] == [1, 2] and adv[0][0][0] == pytest.approx(adv[0][1][1])


def test_token_advantages_without_process_is_whitened_rloo() -> None:
    rewards = [[torch.tensor([0.3])], [torch.tensor([-0.7])], [torch.tensor([0.1])], [torch.tensor([0.2])]]
    adv = token_advantages(rewards, [1.0, 0.0, 0.0, 1.0], [0, 0, 1, 1], process_coef=0.0)
    expected = whiten(rloo_advantages([1.0, 0.0, 0.0, 1.0], [0, 0, 1, 1])).tolist()
    assert [a[0][0] for a in adv] == pytest.approx(expected, abs=1e-5)


def test_process_scale_is_the_largest_return_to_go_across_turns() -> None:
    # response 0: tokens 0.2, -0.5 | 0.1 -> returns-to-go -0.2, -0.4, 0.1; response 1: -0.3, 0.9 -> 0.6, 0.9
    rewards = [
        [torch.tensor([0.2, -0.5]), torch.tensor([0.1])],
        [torch.tensor([-0.3, 0.9])],
    ]
    assert process_scale(rewards, "batch") == pytest.approx(0.9 + 1e-6)
    assert process_scale([[torch.tensor([-0.5, -1.0])]], "batch") == pytest.approx(1.5 + 1e-6)  # |.| counts
    assert process_scale(rewards, "none") == 1.0
    assert process_scale([[torch.zeros(3)]], "batch") == pytest.approx(1e-6)  # a fresh PRM stays at 0
    with pytest.raises(ConfigError, match="norm"):
        process_scale(rewards, "max")


def test_policy_rows_layout() -> None:
    traj = _traj([(7, 8), (9,)], success=True, prompt=(1, 2))
    rows = policy_rows([traj], [[[0.5, -0.5], [1.0]]])
    assert [r.input_ids for r in rows] == [(1, 2, 7, 8), (1, 2, 9)]
    assert rows[0].loss_mask == (False, False, True, True)
    assert rows[1].advantages == (0.0, 0.0, 1.0) and rows[1].old_logprobs == (0.0, 0.0, -1.0)


def test_policy_rows_need_token_ids() -> None:
    bare = Trajectory("d", 0, (Step("q", AgentTurn("x"), 1.0, True),))
    with pytest.raises(DataError, match="no token ids"):
        policy_rows([bare], [[[0.0]]])


# ----------------------------------------------------------------------------- the PRM


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="beta"):
        PrimeConfig(beta=0.0)
    with pytest.raises(ConfigError, match=r"PrimeConfig\.lora\.r must be an int >= 1"):
        PrimeConfig(lora={"r": 0})


def test_flat_learner_keys_move_into_the_tables_with_one_warning() -> None:
    from turnkit.critics.registry import critic_config

    with pytest.warns(FutureWarning, match=r"prm_lr -> optim\.lr, max_grad_norm -> optim\.max_grad_norm") as seen:
        cfg = critic_config("prime", {"prm_lr": 3e-2, "max_grad_norm": 0.5, "lora_r": 4})
    assert len(seen) == 1
    assert cfg == PrimeConfig(optim={"lr": 3e-2, "max_grad_norm": 0.5}, lora={"r": 4})
    assert cfg.lora.alpha == 32 and PrimeConfig().optim == OptimConfig(lr=1e-3)


def test_fresh_prm_gives_zero_rewards_and_is_a_learned_critic(tok) -> None:
    prm = ImplicitPRM(_policy(tok))
    assert isinstance(prm, Critic) and isinstance(prm, StatefulCritic)
    assert prm.score(_traj([(60, 2), (61, 2)], True)).step_rewards == (0.0, 0.0)


def test_online_fit_separates_correct_from_wrong(tok) -> None:
    # correct responses say token 60, wrong ones token 70; the PRM only ever sees outcome labels
    batch = [_traj([(60, 2)], True, g) for g in range(4)] + [_traj([(70, 2)], False, g) for g in range(4)]
    prm = ImplicitPRM(_policy(tok), PrimeConfig(optim={"lr": 3e-2}, lora={"r": 4}))
    for _ in range(15):
        prm.fit(batch)
    totals = [r.total for r in prm.score_batch(batch)]
    acc, n = group_ranking_accuracy(totals, [float(t.success) for t in batch], [t.group for t in batch])
    assert n == 4 and acc == 1.0


@pytest.mark.parametrize("labels", ["episode", "turn"])
def test_turn_labels_train_a_won_episodes_wrong_attempt_down(tok, labels: str) -> None:
    # won episodes: a wrong attempt (token 70, reward 0), then the right one (token 60, reward 1)
    batch = [_traj([(70, 2), (60, 2)], True, g) for g in range(4)]
    prm = ImplicitPRM(_policy(tok), PrimeConfig(optim={"lr": 3e-2}, lora={"r": 4}, labels=labels))
    for _ in range(10):
        prm.fit(batch)
    wrong, right = prm.score(batch[0]).step_rewards
    assert right > 0
    # the episode's outcome labels its wrong attempt right too; the turn's own reward labels it wrong
    assert (wrong < 0) == (labels == "turn")


def test_batch_norm_divides_every_turns_reward_by_the_batch_scale(tok) -> None:
    batch = [_traj([(60, 2)], True, g) for g in range(2)] + [_traj([(70, 2), (71, 2)], False, g) for g in range(2)]
    prm = ImplicitPRM(_policy(tok), PrimeConfig(optim={"lr": 3e-2}, lora={"r": 4}))
    for _ in range(5):
        prm.fit(batch)
    raw = [r.step_rewards for r in prm.score_batch(batch)]
    scale = process_scale(prm.token_rewards(batch), "batch")
    assert scale > 1e-3  # the fit moved the PRM off its reference
    prm.config = PrimeConfig(norm="batch")
    normed = prm.score_batch(batch)
    for before, after in zip(raw, normed, strict=True):
        assert after.step_rewards == pytest.approx([r / scale for r in before])
    assert normed[0].metrics["implicit_return"] == pytest.approx(sum(raw[0]))  # logged before the scale
    assert max(abs(sum(r.step_rewards[h:])) for r in normed for h in range(len(r.step_rewards))) <= 1.0
    with pytest.raises(ConfigError, match="norm"):
        PrimeConfig(norm="max")


def test_turn_labels_are_the_turns_rewards_one_bce_row_each(tok, monkeypatch: pytest.MonkeyPatch) -> None:
    import turnkit.critics.prime.model as prime_model

    seen: list[tuple[int, list[float]]] = []
    real = prime_model.prm_bce_loss

    def spy(prm_lp, ref_lp, mask, labels, **kwargs):
        seen.append((int(prm_lp.shape[0]), labels.tolist()))
        return real(prm_lp, ref_lp, mask, labels, **kwargs)

    monkeypatch.setattr(prime_model, "prm_bce_loss", spy)
    batch = [_traj([(70, 2), (60, 2)], True), _traj([(70, 2), (71, 2), (72, 2)], False)]
    ImplicitPRM(_policy(tok), PrimeConfig(labels="turn")).fit(batch)
    ImplicitPRM(_policy(tok)).fit(batch)
    assert seen == [(5, [0.0, 1.0, 0.0, 0.0, 0.0]), (2, [1.0, 0.0])]
    with pytest.raises(ConfigError, match="labels per trajectory"):
        ImplicitPRM(_policy(tok), PrimeConfig(labels="turn")).fit(batch, labels=[1.0, 0.0])
    with pytest.raises(ConfigError, match="labels"):
        PrimeConfig(labels="step")


def test_prime_update_filters_rewards_then_fits(tok) -> None:
    policy = _policy(tok)
    prm = ImplicitPRM.from_policy(policy, PrimeConfig(lora={"r": 4}))
    before = [p.detach().clone() for p in policy.model.parameters()]
    learner = Learner(policy, OptimConfig(lr=1e-2))
    mixed = [_traj([(60, 2)], True, 0), _traj([(70, 2)], False, 0)]
    solved = [_traj([(60, 2)], True, 1), _traj([(60, 2)], True, 1)]
    m = prime_update(learner, prm, mixed + solved)
    assert m["kept"] == 2.0 and m["kept_groups"] == 1.0 and m["success_rate"] == 0.75
    assert m["prm_rank_acc"] == 0.5  # pre-update PRM is the reference: a tie
    assert "prm_loss" in m and "policy_loss" in m
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.model.parameters(), strict=True))


def test_prime_update_weighs_the_process_by_the_batch_scale(tok, monkeypatch: pytest.MonkeyPatch) -> None:
    import turnkit.critics.prime.model as prime_model

    coefs: list[float] = []
    real = prime_model.token_advantages

    def spy(rewards, outcomes, groups, *, process_coef, gamma):
        coefs.append((process_coef, process_scale(rewards, "batch")))
        return real(rewards, outcomes, groups, process_coef=process_coef, gamma=gamma)

    monkeypatch.setattr(prime_model, "token_advantages", spy)
    mixed = [_traj([(60, 2)], True, 0), _traj([(70, 2), (71, 2)], False, 0)]
    for norm in ("none", "batch"):
        policy = _policy(tok)
        cfg = PrimeConfig(optim={"lr": 3e-2}, lora={"r": 4}, norm=norm, process_coef=2.0)
        prm = ImplicitPRM(_policy(tok, seed=1), cfg)
        for _ in range(3):  # a PRM away from its reference: nonzero rewards
            prm.fit(mixed)
        prime_update(Learner(policy, OptimConfig(lr=1e-2)), prm, mixed, config=prm.config)
    (coef_none, scale), (coef_batch, scale_batch) = coefs
    assert scale == pytest.approx(scale_batch) and scale > 1e-3
    assert coef_none == 2.0 and coef_batch == pytest.approx(2.0 / scale)


def test_outcome_only_update_has_no_prm_metrics(tok) -> None:
    policy = _policy(tok)
    m = prime_update(
        Learner(policy, OptimConfig(lr=1e-2)), None, [_traj([(60, 2)], True, 0), _traj([(70, 2)], False, 0)]
    )
    assert m["kept"] == 2.0 and not any(k.startswith("prm_rank") for k in m)


def test_prime_update_needs_groups(tok) -> None:
    policy = _policy(tok)
    traj = Trajectory("d", 0, _traj([(60, 2)], True).steps)  # no group
    with pytest.raises(DataError, match="group"):
        prime_update(Learner(policy, OptimConfig(lr=0.1)), None, [traj])


# ----------------------------------------------------------------------------- one pass per episode


LONG = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_position_embeddings=512)


def _multi_turn_batch(tok, n: int = 3) -> list[Trajectory]:
    """Real MathEpisodes with retries: every turn's prompt is the token-exact context of the turn before."""
    import gymnasium

    from turnkit.rollout.chat import ChatDelta
    from turnkit.rollout.collect import collect_batch

    policy = HFPolicy(build_tiny_model(tok, LONG, seed=0), tok, max_new_tokens=4, seed=0)

    envs = [gymnasium.make("turnkit/MathEpisodes-v0", max_attempts=3, max_episode_steps=3) for _ in range(n)]
    try:
        return collect_batch(envs, policy, list(range(n)), chat=ChatDelta(tok))
    finally:
        for env in envs:
            env.close()


def _trained_prm(tok) -> ImplicitPRM:
    prm = ImplicitPRM(HFPolicy(build_tiny_model(tok, LONG, seed=1), tok), PrimeConfig(beta=0.5))
    with torch.no_grad():  # a PRM that has learned something: its adapter is no longer the identity
        for name, param in prm.prm.model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.linspace(-0.3, 0.3, param.numel()).reshape(param.shape))
    return prm


def test_episode_layout_scores_each_turn_as_the_turn_by_turn_pass_does(tok) -> None:
    from turnkit.critics.prime.model import _turn_ids, episode_layout

    batch = _multi_turn_batch(tok)
    assert any(len(t.steps) > 1 for t in batch)
    assert all(episode_layout(_turn_ids(t, i)) is not None for i, t in enumerate(batch))
    prm = _trained_prm(tok)
    rewards = prm.token_rewards(batch)
    for traj, per_turn in zip(batch, rewards, strict=True):
        for step, got in zip(traj.steps, per_turn, strict=True):
            prompt, reply = [list(step.action.prompt_token_ids)], [list(step.action.token_ids)]
            with torch.no_grad():
                lp = prm.prm.sequence_logprobs(prompt, reply, temperature=1.0)
                with prm.prm.reference() as ref:
                    base = ref.sequence_logprobs(prompt, reply, temperature=1.0)
            torch.testing.assert_close(got, 0.5 * (lp - base)[0], atol=1e-5, rtol=0)
            assert got.abs().sum() > 0


def test_fit_after_scoring_reuses_the_reference_and_fits_the_same(tok) -> None:
    import copy

    batch = _multi_turn_batch(tok, n=4)
    labels = [1.0, 0.0, 1.0, 0.0]
    scored, fresh = _trained_prm(tok), _trained_prm(tok)
    fresh.prm.model = copy.deepcopy(scored.prm.model)
    fresh.learner = Learner(fresh.prm, OptimConfig(lr=1e-3))
    scored.token_rewards(batch)
    cached = dict(scored._reference_cache)
    a, b = scored.fit(batch, labels=labels), fresh.fit(batch, labels=labels)
    assert scored._reference_cache.keys() == cached.keys()  # nothing recomputed for the scored episodes
    assert a == pytest.approx(b, abs=1e-5)


def test_fit_in_chunks_takes_the_same_step_as_one_pass(tok) -> None:
    """Gradient accumulation over chunks of 1 episode gives the one-pass step (and its metrics)."""
    batch = _multi_turn_batch(tok, n=4)
    labels = [1.0, 0.0, 0.0, 1.0]
    whole, chunked = _trained_prm(tok), _trained_prm(tok)
    chunked.config = PrimeConfig(beta=0.5, prm_chunk=1)
    a, b = whole.fit(batch, labels=labels), chunked.fit(batch, labels=labels)
    assert a == pytest.approx(b, abs=1e-6)
    for (name, p), q in zip(whole.prm.model.named_parameters(), chunked.prm.model.parameters(), strict=True):
        if p.requires_grad:
            torch.testing.assert_close(p, q, atol=1e-6, rtol=0, msg=name)
    moved = [p for n, p in whole.prm.model.named_parameters() if "lora_A" in n]
    assert any(
        not torch.equal(p, q)
        for p, q in zip(
            moved, [p for n, p in _trained_prm(tok).prm.model.named_parameters() if "lora_A" in n], strict=True
        )
    )
