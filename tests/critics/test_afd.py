"""AfD critics: the reward model's scores, training, save/load, and the closed-form baseline.

Run: python -m pytest -q tests/critics/test_afd.py
"""

from __future__ import annotations

import pytest
import torch

from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.configs import from_dict
from turnkit.critics.afd import (
    AfDConfig,
    AfDCritic,
    ClosedFormCritic,
    RewardModel,
    collate_samples,
    turn_samples,
)
from turnkit.critics.base import Critic, StatefulCritic, score_all
from turnkit.errors import ConfigError, DataError
from turnkit.learners.irl import discriminator_reward
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from turnkit.rollout.demos import completion_ids
from turnkit.types import AgentTurn, ErrorCause, Message, Step, Trajectory, TrajectoryError

SMALL = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_position_embeddings=256)


@pytest.fixture
def lm(tok):
    return build_tiny_model(tok, SMALL, seed=0)


def ids(tok, text: str) -> tuple[int, ...]:
    return tuple(tok(text, add_special_tokens=False)["input_ids"])


def policy_turn(tok, prompt: str, text: str) -> AgentTurn:
    """A turn as HFPolicy records it: exact prompt ids, generated ids with the closing EOS."""
    return AgentTurn(
        text,
        token_ids=(*ids(tok, text), tok.eos_token_id),
        logprobs=(0.0,) * (len(ids(tok, text)) + 1),
        prompt_token_ids=tuple(chat_prompt_ids(tok, [Message("user", prompt)])),
    )


def episode(*steps: tuple[str, AgentTurn], error: bool = False) -> Trajectory:
    n = len(steps)
    return Trajectory(
        "test",
        0,
        tuple(Step(obs, turn, 0.0, terminated=i == n - 1) for i, (obs, turn) in enumerate(steps)),
        error=TrajectoryError(ErrorCause.AGENT, "boom", 0) if error else None,
    )


# ---------------------------------------------------------------------------------------------- samples


def test_turn_samples_use_exact_ids_or_the_chat_template(tok):
    sampled = AgentTurn("ignored text", token_ids=(70, 71), prompt_token_ids=(1, 4, 60))
    traj = episode(("q", sampled), ("try again", AgentTurn("ANSWER: 3")))
    first, second = turn_samples(traj, tok)
    assert first == ((1, 4, 60), (70, 71))  # token-in/token-out: never re-tokenised
    msgs = [Message("user", "q"), Message("assistant", "ignored text"), Message("user", "try again")]
    assert second == (tuple(chat_prompt_ids(tok, msgs)), tuple(completion_ids(tok, "ANSWER: 3")))
    assert second[1][-1] == tok.eos_token_id


def test_errored_trajectory_is_a_data_error_naming_its_index(tok, lm):
    critic = AfDCritic(RewardModel.from_causal_lm(lm), tok)
    good = episode(("q", AgentTurn("a")))
    with pytest.raises(DataError, match="trajectory 1 "):
        critic.score_batch([good, episode(("q", AgentTurn("b")), error=True)])
    with pytest.raises(DataError, match="negatives: trajectory 0 "):
        critic.fit([good], negatives=[episode(("q", AgentTurn("b")), error=True)], steps=1)


def test_collate_pads_either_side_and_truncates_from_the_left():
    left, mask = collate_samples([((1, 2), (3,)), ((4,), (5,))], pad_id=0)
    assert left.tolist() == [[1, 2, 3], [0, 4, 5]] and mask.tolist() == [[1, 1, 1], [0, 1, 1]]
    cut, _ = collate_samples([((1, 2, 3), (4, 5))], pad_id=0, max_length=3)
    assert cut.tolist() == [[3, 4, 5]]
    with pytest.raises(ConfigError, match="padding_side"):
        collate_samples([((1,), (2,))], pad_id=0, padding_side="middle")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- reward model


def test_reward_model_copies_the_backbone_and_seeds_the_head(lm):
    state = torch.random.get_rng_state()
    a, b = RewardModel.from_causal_lm(lm, seed=1), RewardModel.from_causal_lm(lm, seed=1)
    c = RewardModel.from_causal_lm(lm, seed=2)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's RNG is untouched
    for name, p in lm.model.state_dict().items():
        assert torch.equal(a.classifier.model.state_dict()[name], p), name
    assert torch.equal(a.classifier.score.weight, b.classifier.score.weight)
    assert not torch.equal(a.classifier.score.weight, c.classifier.score.weight)
    assert a.classifier.score.weight.shape == (1, SMALL.hidden_size)


@pytest.mark.parametrize("lora_r", [0, 4])
def test_padding_never_changes_a_score(lm, lora_r):
    rm = RewardModel.from_causal_lm(lm, seed=0, lora_r=lora_r)
    torch.nn.init.normal_(rm.classifier.score.weight, std=1.0)  # logits far from 0, so a wrong pick would show
    samples = [((1, 4, 60, 61, 62, 63, 64), (70, 2)), ((1,), (71,)), ((1, 4), (72, 73, 74, 75, 76, 77, 78, 79))]
    alone = torch.cat([rm.score_samples([s]) for s in samples])
    left = rm.score_samples(samples, padding_side="left")
    right = rm.score_samples(samples, padding_side="right")
    assert torch.allclose(left, alone, atol=1e-5) and torch.allclose(right, alone, atol=1e-5)
    assert (alone.max() - alone.min()).item() > 1e-2  # the scores differ: the test would see a shifted pick


def test_the_score_is_read_at_the_last_completion_token(lm):
    rm = RewardModel.from_causal_lm(lm, seed=0)
    torch.nn.init.normal_(rm.classifier.score.weight, std=1.0)
    ids_, mask = collate_samples([((1, 4), (60, 61))], pad_id=0)
    hidden = lm.model(input_ids=ids_, attention_mask=mask).last_hidden_state  # the copied backbone
    expected = rm.classifier.score(hidden[0, -1]).item()
    assert rm.score_samples([((1, 4), (60, 61))]).item() == pytest.approx(expected, abs=1e-5)
    assert rm.score_samples([((1, 4), (60, 62))]).item() != pytest.approx(expected, abs=1e-4)


def test_out_of_vocabulary_ids_are_a_data_error(lm):
    rm = RewardModel.from_causal_lm(lm)
    with pytest.raises(DataError, match="vocabulary"):
        rm.score_samples([((1,), (10_000,))])


# ---------------------------------------------------------------------------------------------- AfDCritic


def test_afd_critic_is_a_frozen_critic_in_training(tok, lm):
    """Trained offline (``fit``), frozen in a run: no per-batch update, so no state in the run's checkpoints."""
    critic = AfDCritic(RewardModel.from_causal_lm(lm), tok)
    assert isinstance(critic, Critic) and not isinstance(critic, StatefulCritic) and critic.name == "afd"


def test_afd_reward_is_the_reward_model_logit_per_turn(tok, lm):
    critic = AfDCritic(RewardModel.from_causal_lm(lm, seed=0), tok, AfDConfig(score_batch_size=2))
    torch.nn.init.normal_(critic.reward_model.classifier.score.weight, std=1.0)
    trajs = [
        episode(("2+2?", policy_turn(tok, "2+2?", "ANSWER: 4"))),
        episode(("3+3?", AgentTurn("ANSWER: 5")), ("Incorrect.", AgentTurn("ANSWER: 6"))),
    ]
    results = score_all(critic, trajs)
    samples = [s for t in trajs for s in turn_samples(t, tok)]
    logits = torch.cat([critic.reward_model.score_samples([s]) for s in samples])
    got = [r for res in results for r in res.step_rewards]
    assert len(got) == 3
    assert got == pytest.approx(logits.tolist(), abs=1e-5)
    assert got == pytest.approx(discriminator_reward(logits).tolist(), abs=1e-5)
    assert max(got) - min(got) > 1e-2


def toy_sets(tok):
    prompts = [f"What is {a} plus {b}?" for a, b in [(1, 2), (3, 4), (5, 1), (2, 2), (6, 3), (4, 4)]]
    pos = [episode((p, policy_turn(tok, p, "ANSWER: 1"))) for p in prompts]
    neg = [episode((p, AgentTurn("zzzz"))) for p in prompts]  # a text turn: the template path
    return pos, neg


def test_fit_separates_a_trivially_separable_toy(tok, lm):
    pos, neg = toy_sets(tok)
    critic = AfDCritic.from_policy(HFPolicy(lm, tok), AfDConfig(seed=0))
    before = critic.fit(pos[:1], negatives=neg[:1], steps=1, batch_size=2, lr=1e-9)  # ~ untrained
    metrics = critic.fit(pos[:4], negatives=neg[:4], steps=40, batch_size=8, lr=3e-3, seed=0)
    assert metrics["accuracy"] > 0.9
    assert metrics["loss"] < 0.5 * before["loss"]
    assert metrics["positives"] == 4 and metrics["negatives"] == 4
    held_out_pos = critic.score_batch(pos[4:])
    held_out_neg = critic.score_batch(neg[4:])
    assert min(r.total for r in held_out_pos) > max(r.total for r in held_out_neg) + 1.0


def test_fit_does_not_touch_the_policy_and_lora_freezes_the_backbone(tok, lm):
    policy = HFPolicy(lm, tok)
    before = {k: v.clone() for k, v in lm.state_dict().items()}
    critic = AfDCritic.from_policy(policy, AfDConfig(lora={"r": 4}))
    rm_before = {k: v.clone() for k, v in critic.reward_model.state_dict().items()}
    pos, neg = toy_sets(tok)
    critic.fit(pos[:2], negatives=neg[:2], steps=3, batch_size=4, lr=1e-2)
    assert all(torch.equal(v, lm.state_dict()[k]) for k, v in before.items())
    changed = {k for k, v in critic.reward_model.state_dict().items() if not torch.equal(v, rm_before[k])}
    assert changed and all("lora_" in k or "score" in k for k in changed)


def test_fit_needs_both_sides(tok, lm):
    critic = AfDCritic(RewardModel.from_causal_lm(lm), tok)
    pos, neg = toy_sets(tok)
    with pytest.raises(DataError, match="no negative turns"):
        critic.fit(pos, negatives=[])
    with pytest.raises(DataError, match="no positive turns"):
        critic.fit([Trajectory("test", 0)], negatives=neg)  # a trajectory without steps has no turns


def test_fit_is_reproducible_for_a_seed(tok):
    pos, neg = toy_sets(tok)
    runs = []
    for _ in range(2):
        critic = AfDCritic(RewardModel.from_causal_lm(build_tiny_model(tok, SMALL, seed=0), seed=5), tok)
        runs.append(critic.fit(pos, negatives=neg[:3], steps=4, batch_size=4, lr=1e-3, seed=7)["loss"])
    assert runs[0] == pytest.approx(runs[1], abs=1e-6)


@pytest.mark.parametrize("lora_r", [0, 4])
def test_save_and_load_keep_the_scores(tok, lm, tmp_path, lora_r):
    critic = AfDCritic.from_policy(HFPolicy(lm, tok), AfDConfig(lora={"r": lora_r}, seed=3))
    pos, neg = toy_sets(tok)
    critic.fit(pos[:2], negatives=neg[:2], steps=3, batch_size=4, lr=1e-2)
    loaded = AfDCritic.load(critic.save(tmp_path / "rm"))
    assert (tmp_path / "rm" / "config.json").is_file() and not loaded.reward_model.has_adapter
    a = [r.total for r in critic.score_batch(pos + neg)]
    b = [r.total for r in loaded.score_batch(pos + neg)]
    assert b == pytest.approx(a, abs=1e-5)
    assert loaded.config.seed == 3


def test_a_reward_model_saved_with_flat_config_keys_still_loads(tok, lm, tmp_path):
    """A folder written before AfDConfig's optim/lora tables (flat lr, lora_r ...) loads quietly, same settings."""
    import json
    import warnings

    from turnkit.critics.afd.model import CONFIG_FILE

    critic = AfDCritic.from_policy(HFPolicy(lm, tok), AfDConfig(optim={"lr": 1e-2, "weight_decay": 0.1}, seed=3))
    folder = critic.save(tmp_path / "rm")
    record = json.loads((folder / CONFIG_FILE).read_text())
    optim, lora = record["config"].pop("optim"), record["config"].pop("lora")
    record["config"].update({k: optim[k] for k in ("lr", "weight_decay", "max_grad_norm")})
    record["config"].update(lora_r=lora["r"], lora_alpha=lora["alpha"])
    (folder / CONFIG_FILE).write_text(json.dumps(record))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = AfDCritic.load(folder)
    assert loaded.config == critic.config
    with pytest.warns(FutureWarning, match=r"lr -> optim\.lr, lora_r -> lora\.r"):
        assert from_dict(AfDConfig, {"lr": 1e-2, "lora_r": 2}).lora.r == 2


def test_load_of_a_missing_folder_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no reward model"):
        AfDCritic.load(tmp_path / "nothing")


# ---------------------------------------------------------------------------------------------- closed form


def test_closed_form_is_the_difference_of_summed_log_probs(tok):
    sft = HFPolicy(build_tiny_model(tok, SMALL, seed=0), tok, temperature=0.7)  # scoring is always at T = 1
    init = HFPolicy(build_tiny_model(tok, SMALL, seed=1), tok)
    trajs = [
        episode(("2+2?", policy_turn(tok, "2+2?", "ANSWER: 4"))),
        episode(("3+3?", AgentTurn("ANSWER: 5")), ("Incorrect.", AgentTurn("ANSWER: 6"))),
    ]
    critic = ClosedFormCritic(sft, init, score_batch_size=2)
    got = [r for res in score_all(critic, trajs) for r in res.step_rewards]
    hand = []
    for t in trajs:
        for prompt, completion in turn_samples(t, tok):
            lp = [p.sequence_logprobs([prompt], [completion], temperature=1.0)[0].sum().item() for p in (sft, init)]
            hand.append(lp[0] - lp[1])
    assert got == pytest.approx(hand, abs=1e-4)
    assert min(abs(h) for h in hand) > 1e-3  # two different models: the test is not 0 == 0
    assert critic.name == "afd_closed_form"


def test_closed_form_needs_one_tokenizer(tok):
    other = build_tiny_tokenizer(["ANSWER: 12 plus 7"] * 10, vocab_size=280)
    sft = HFPolicy(build_tiny_model(tok, SMALL), tok)
    init = HFPolicy(build_tiny_model(other, SMALL), other)
    with pytest.raises(ConfigError, match="one tokenizer"):
        ClosedFormCritic(sft, init)
