"""The Learner: configs, schedule, clipped step, accumulation, reference and state round trip (hand-checked)."""

from __future__ import annotations

import math

import pytest
import torch

from turnkit.errors import ConfigError
from turnkit.learners.learner import Learner, LoraConfig, OptimConfig


def _nll(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logp = model(input_ids=ids).logits.float().log_softmax(-1)[:, :-1]
    return -logp.gather(-1, ids[:, 1:, None]).mean()


IDS = torch.tensor([[1, 40, 41, 42, 43], [1, 50, 51, 52, 53]])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": 0.0}, "OptimConfig.lr must be a finite number > 0, got 0.0"),
        ({"max_grad_norm": -1.0}, "OptimConfig.max_grad_norm must be a finite number >= 0"),
        ({"warmup_steps": -1}, "OptimConfig.warmup_steps must be an int >= 0, got -1"),
        ({"schedule": "step"}, "OptimConfig.schedule must be one of ['constant', 'cosine']"),
        ({"betas": (0.9, 1.0)}, "OptimConfig.betas must be two numbers in [0, 1)"),
    ],
)
def test_optim_config_names_the_bad_field(kwargs, message):
    with pytest.raises(ConfigError) as info:
        OptimConfig(**kwargs)
    assert message in str(info.value)


def test_lora_config_checks_and_normalises_targets():
    assert LoraConfig(targets=["q_proj", "v_proj"]).targets == ("q_proj", "v_proj")
    with pytest.raises(ConfigError, match=r"LoraConfig\.targets must be a non-empty list"):
        LoraConfig(targets=())
    with pytest.raises(ConfigError, match=r"LoraConfig\.dropout"):
        LoraConfig(dropout=1.0)


def test_schedule_values_by_hand():
    warm = OptimConfig(lr=1.0, warmup_steps=4)
    assert [warm.factor(s) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    cos = OptimConfig(lr=2.0, warmup_steps=2, schedule="cosine", min_lr_ratio=0.0)
    # after warmup, progress (s - 2) / (10 - 2): s=6 is half way (cos(pi/2) = 0: factor 0.5)
    assert cos.factor(1, 10) == 1.0
    assert cos.factor(6, 10) == pytest.approx(0.5)
    assert cos.factor(2, 10) == 1.0
    assert cos.factor(10, 10) == pytest.approx(0.0)
    floor = OptimConfig(schedule="cosine", min_lr_ratio=0.1)
    assert floor.factor(5, 5) == pytest.approx(0.1)


def test_set_lr_writes_every_param_group(policy_factory):
    learner = Learner(policy_factory(), OptimConfig(lr=0.4, warmup_steps=2), lora=LoraConfig(r=2))
    assert learner.set_lr(0) == pytest.approx(0.2)
    assert {g["lr"] for g in learner.optimizer.param_groups} == {learner.lr_at(0)}


def test_lora_trains_only_the_adapter_and_reference_is_the_base(policy_factory):
    base = policy_factory()
    policy = policy_factory()
    learner = Learner(policy, OptimConfig(lr=0.05), lora=LoraConfig(r=4), reference=True)
    assert learner.has_adapter and learner.ref_model is None  # no second weight copy
    assert all("lora_" in n for n, p in learner.model.named_parameters() if p.requires_grad)
    for _ in range(3):
        learner.minimize(_nll(learner.model, IDS))
    with torch.no_grad():
        trained = learner.model(input_ids=IDS).logits
        with learner.reference() as ref:
            reference = ref(input_ids=IDS).logits
        start = base.model(input_ids=IDS).logits
    assert torch.equal(reference, start)
    assert not torch.allclose(trained, start)


def test_full_finetune_reference_is_a_frozen_copy(policy_factory):
    learner = Learner(policy_factory(), OptimConfig(lr=0.05), reference=True)
    assert learner.ref_model is not None and not any(p.requires_grad for p in learner.ref_model.parameters())
    before = [p.detach().clone() for p in learner.ref_model.parameters()]
    learner.minimize(_nll(learner.model, IDS))
    with learner.reference() as ref:
        assert all(torch.equal(a, b) for a, b in zip(before, ref.parameters(), strict=True))
    with pytest.raises(ConfigError, match="no reference"), Learner(policy_factory()).reference():
        pass


def test_step_returns_the_norm_before_clipping_and_clips():
    w = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        w.weight.copy_(torch.tensor([[3.0, 4.0]]))
    learner = Learner(w, OptimConfig(lr=1.0, max_grad_norm=1.0), optimizer=torch.optim.SGD(w.parameters(), lr=1.0))
    # loss = (w . (1, 1))^2 / 2 at x = (1, 1): gradient (7, 7), norm 7 sqrt 2, clipped to unit norm
    norm = learner.minimize((w(torch.ones(2)) ** 2 / 2).sum())
    assert norm == pytest.approx(7 * math.sqrt(2))
    step = 1 / math.sqrt(2)
    assert w.weight.detach().tolist()[0] == pytest.approx([3 - step, 4 - step])
    assert learner.steps == 1


def test_accumulated_micro_batches_give_the_one_pass_gradient(policy_factory):
    one, two = Learner(policy_factory(), lora=LoraConfig(r=4)), Learner(policy_factory(), lora=LoraConfig(r=4))
    for learner in (one, two):
        with torch.no_grad():  # a non-zero B, so the A gradients are not all zero
            for n, p in learner.model.named_parameters():
                if "lora_B" in n:
                    p.fill_(0.01)
    one.zero_grad()
    _nll(one.model, IDS).backward()
    two.zero_grad()
    for row in IDS:
        (_nll(two.model, row[None]) / len(IDS)).backward()
    for a, b in zip(one.params, two.params, strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-7)
    assert one.step() == pytest.approx(two.step(), rel=1e-5)


def test_save_load_resumes_bit_identically(policy_factory, tmp_path):
    def run(learner: Learner, steps: range) -> list[float]:
        losses = []
        for s in steps:
            learner.set_lr(s)
            loss = _nll(learner.model, IDS)
            learner.minimize(loss)
            losses.append(float(loss.detach()))
        return losses

    cfg = OptimConfig(lr=0.05, warmup_steps=2, schedule="cosine", weight_decay=0.01)
    straight = Learner(policy_factory(), cfg, lora=LoraConfig(r=4), total_steps=6)
    expected = run(straight, range(6))
    first = Learner(policy_factory(), cfg, lora=LoraConfig(r=4), total_steps=6)
    run(first, range(3))
    first.save(tmp_path / "ckpt")
    resumed = Learner(policy_factory(), cfg, lora=LoraConfig(r=4), total_steps=6)
    resumed.load(tmp_path / "ckpt")
    assert resumed.steps == 3
    assert run(resumed, range(3, 6)) == expected[3:]
    for a, b in zip(straight.params, resumed.params, strict=True):
        assert torch.equal(a, b)


def test_rank_zero_is_full_finetuning_and_an_unresolved_rank_is_refused(policy_factory):
    learner = Learner(policy_factory(), lora=LoraConfig(r=0))
    assert not learner.has_adapter and len(learner.params) == len(list(learner.model.parameters()))
    with pytest.raises(ConfigError, match="resolve the model's default rank"):
        Learner(policy_factory(), lora=LoraConfig(r=None))


def test_bad_input_is_named(policy_factory, tmp_path):
    with pytest.raises(ConfigError, match="needs an HFPolicy"):
        Learner(torch.nn.Linear(2, 2), lora=LoraConfig())
    frozen = torch.nn.Linear(2, 2).requires_grad_(False)
    with pytest.raises(ConfigError, match="no trainable parameters"):
        Learner(frozen)
    with pytest.raises(ConfigError, match="no learner state"):
        Learner(policy_factory()).load(tmp_path)
    lora = Learner(policy_factory(), lora=LoraConfig(r=2))
    with pytest.raises(ConfigError, match="does not match the model"):
        lora.load_state_dict(Learner(policy_factory()).state_dict())
