"""Every trainer takes its optimizer steps through the one Learner (counted on the real class, not a mock)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.critics.test_afd import toy_sets
from tests.critics.test_prime import _traj
from tests.critics.test_sweet import _traj as sweet_traj
from tests.train.conftest import LETTER_ENV, make_policy
from turnkit.agents.hf import HFPolicy
from turnkit.learners.learner import Learner, OptimConfig
from turnkit.models.tiny import build_tiny_tokenizer


@pytest.fixture(scope="module")
def tok():
    return build_tiny_tokenizer()


@pytest.fixture
def steps(monkeypatch) -> Iterator[list[Learner]]:
    """The learners that stepped, one entry per step (``Learner.step`` still runs)."""
    taken: list[Learner] = []
    real = Learner.step

    def counted(self: Learner) -> float:
        taken.append(self)
        return real(self)

    monkeypatch.setattr(Learner, "step", counted)
    yield taken


def test_grpo(tok, tmp_path, steps):
    from turnkit.train.config import TrainConfig
    from turnkit.train.loop import train

    cfg = TrainConfig(
        env_id=LETTER_ENV,
        env_kwargs={},
        steps=2,
        grpo={"group_size": 4},
        groups_per_step=2,
        optim={"lr": 3e-3},
        out_dir=str(tmp_path),
        seed=7,
        sampling={"max_new_tokens": 6},
        log={"checkpoint_every": 0},
    )
    result = train(cfg, policy=make_policy(tok), progress=False)
    assert len(steps) == sum(r["optimizer_steps"] for r in result.history if "optimizer_steps" in r) > 0
    assert all(s.policy is result.policy for s in steps)


def test_sft(tok, steps):
    from turnkit.models.sft import SFTConfig, train_sft
    from turnkit.rollout.demos import collect_demos, demo_rows

    rows = demo_rows(collect_demos("turnkit/MathEpisodes-v0", episodes=4, seed=0).trajectories, tok)
    train_sft(make_policy(tok).model, rows, SFTConfig(steps=3, batch_size=2), pad_id=0, progress=False)
    assert len(steps) == 3


def test_iqlearn(tok, tmp_path, steps):
    from turnkit.rollout.demos import collect_demos, demo_rows
    from turnkit.train.iqlearn import IQLearnConfig, train_iqlearn

    rows = demo_rows(collect_demos("turnkit/MathEpisodes-v0", episodes=4, seed=0).trajectories, tok)
    cfg = IQLearnConfig(steps=2, batch_size=2, eval_episodes=0, lora={"r": 2}, out_dir=str(tmp_path))
    result = train_iqlearn(cfg, policy=make_policy(tok), rows=rows, progress=False)
    assert len(steps) == 2 and steps[0].has_adapter and steps[0].policy is result.policy


def test_dpo(tok, steps):
    from turnkit.search.pairs import PreferencePair
    from turnkit.train.dpo import DPOConfig, train_dpo
    from turnkit.types import Message

    pair = PreferencePair((Message("user", "2+2?"),), "ANSWER: 4", "ANSWER: 5")
    train_dpo(make_policy(tok), [pair] * 4, DPOConfig(steps=2, batch_size=2, lora={"r": 2}), progress=False)
    assert len(steps) == 2 and steps[0].has_adapter


def test_warm_start(tok, tmp_path, steps):
    from turnkit.train.warmstart import WarmStartConfig, warm_start

    cfg = WarmStartConfig(demos=4, retry_demos=0, steps=2, batch_size=2, lora={"r": 2, "alpha": 4})
    policy = make_policy(tok)
    warm_start(policy, model_id="micro", env_id="turnkit/MathEpisodes-v0", env_kwargs={}, cfg=cfg, cache=tmp_path,
               progress=False)  # fmt: skip
    assert len(steps) == 2 and steps[0].policy is policy and policy.has_adapter


def test_prime_prm_and_policy(tok, steps):
    from turnkit.critics.prime import ImplicitPRM, PrimeConfig, prime_update

    policy = make_policy(tok)
    prm = ImplicitPRM.from_policy(policy, PrimeConfig(lora={"r": 2}))
    learner = Learner(policy, OptimConfig(lr=1e-2))
    prime_update(learner, prm, [_traj([(60, 2)], True, 0), _traj([(70, 2)], False, 0)])
    assert [s is prm.learner for s in steps] == [True, False] and steps[1] is learner


def test_sweet_critic(tok, steps):
    from turnkit.critics.sweet import SweetConfig, SweetCritic

    trajs = [sweet_traj("0", "1", ["ANSWER: 1"], 1.0), sweet_traj("0", "1", ["ANSWER: 2"], 0.0)]
    critic = SweetCritic(make_policy(tok), SweetConfig(steps=2, batch_size=1, lora={"r": 2}))
    critic.fit(trajs)
    assert len(steps) == 2 and all(s is critic.learner for s in steps)


def test_afd_critic(tok, steps):
    from turnkit.critics.afd import AfDConfig, AfDCritic

    pos, neg = toy_sets(tok)
    critic = AfDCritic.from_policy(HFPolicy(make_policy(tok).model, tok), AfDConfig(lora={"r": 2}))
    critic.fit(pos[:2], negatives=neg[:2], steps=2, batch_size=2)
    assert len(steps) == 2 and steps[0].model is critic.reward_model
