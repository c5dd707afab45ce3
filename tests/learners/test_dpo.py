import pytest
import torch

from turnkit.errors import DataError
from turnkit.learners.dpo import (
    common_prefix_length,
    conservative_epsilon,
    dpo_loss,
    split_at_divergence,
)


def t(*xs):
    return torch.tensor(xs, dtype=torch.float32)


def test_standard_dpo_hand_value():
    # h = (-1 - -2) - (-3 - -2) = 2; beta h = 0.2; L = -log sigmoid(0.2) = log(1 + e^-0.2) = 0.598139
    loss, m = dpo_loss(t(-1.0), t(-3.0), t(-2.0), t(-2.0), beta=0.1)
    assert loss.item() == pytest.approx(0.598139, abs=1e-6)
    assert m["margin"] == pytest.approx(0.2) and m["accuracy"] == 1.0
    assert m["chosen_reward"] == pytest.approx(0.1) and m["rejected_reward"] == pytest.approx(-0.1)


def test_conservative_dpo_hand_value():
    # eps = 0.2: 0.8 * log(1 + e^-0.2) + 0.2 * log(1 + e^0.2) = 0.8 * 0.598139 + 0.2 * 0.798139 = 0.638139
    loss, _ = dpo_loss(t(-1.0), t(-3.0), t(-2.0), t(-2.0), beta=0.1, epsilon=0.2)
    assert loss.item() == pytest.approx(0.638139, abs=1e-6)


def test_loss_is_the_batch_mean_with_per_pair_epsilon():
    # pair 1 as above with eps 0 (0.598139); pair 2: h = -2 -> L = log(1 + e^0.2) * 0.5 + log(1 + e^-0.2) * 0.5
    loss, m = dpo_loss(t(-1.0, -3.0), t(-3.0, -1.0), t(-2.0, -2.0), t(-2.0, -2.0), epsilon=t(0.0, 0.5))
    second = 0.5 * 0.798139 + 0.5 * 0.598139
    assert loss.item() == pytest.approx((0.598139 + second) / 2, abs=1e-6)
    assert m["accuracy"] == 0.5 and m["epsilon"] == pytest.approx(0.25)


def test_half_epsilon_pulls_the_margin_back_to_zero():
    # eps = 0.5: dL/d(beta h) = sigmoid(beta h) - 0.5; at beta h = 0.2: 0.549834 - 0.5, times beta for pi_w
    pol_w = torch.tensor([-1.0], requires_grad=True)
    loss, _ = dpo_loss(pol_w, t(-3.0), t(-2.0), t(-2.0), epsilon=0.5)
    loss.backward()
    assert pol_w.grad.item() == pytest.approx(0.1 * (0.549834 - 0.5), abs=1e-6)


def test_gradient_raises_chosen_and_lowers_rejected():
    pol_w = torch.tensor([-2.0], requires_grad=True)
    pol_l = torch.tensor([-2.0], requires_grad=True)
    dpo_loss(pol_w, pol_l, t(-2.0), t(-2.0), beta=0.1)[0].backward()
    # dL/dpi_w = -beta * sigma(-beta h) = -0.1 * 0.5 at h = 0
    assert pol_w.grad.item() == pytest.approx(-0.05) and pol_l.grad.item() == pytest.approx(0.05)


def test_conservative_epsilon_from_confidence():
    assert conservative_epsilon(t(1.0, 0.9, 0.6, 0.1)).tolist() == pytest.approx([0.0, 0.1, 0.4, 0.5])
    assert conservative_epsilon(t(0.1), max_epsilon=0.3).tolist() == pytest.approx([0.3])


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="four"):
        dpo_loss(t(1.0, 2.0), t(1.0), t(1.0), t(1.0))


def test_common_prefix():
    assert common_prefix_length([5, 6, 7], [5, 6, 8]) == 2
    assert common_prefix_length([5], [6]) == 0
    assert common_prefix_length([5, 6], [5, 6, 7]) == 2


def test_split_masks_the_shared_prefix():
    ex = split_at_divergence([1], [10, 11, 12, 2], [10, 11, 13, 14, 2], confidence=0.7)
    assert ex.prompt_ids == (1, 10, 11) and ex.chosen_ids == (12, 2) and ex.rejected_ids == (13, 14, 2)
    assert ex.confidence == 0.7


def test_split_refuses_identical_completions():
    with pytest.raises(DataError, match="identical"):
        split_at_divergence([1], [3, 4], [3, 4])


def test_shared_prefix_tokens_get_no_gradient(policy_factory):
    """Changing the model only at the shared prefix's scores must not change the loss: check h directly."""
    policy = policy_factory()
    policy.attach_lora(r=4)
    long = split_at_divergence([1, 4], [70, 71, 72, 73, 2], [70, 71, 72, 74, 2])
    prompts = [list(long.prompt_ids)] * 2
    full = policy.sequence_logprobs([[1, 4]] * 2, [[70, 71, 72, 73, 2], [70, 71, 72, 74, 2]], temperature=1.0)
    suffix = policy.sequence_logprobs(prompts, [list(long.chosen_ids), list(long.rejected_ids)], temperature=1.0)
    # the difference of full sums equals the difference of suffix sums: the prefix cancels exactly
    assert (full[0].sum() - full[1].sum()).item() == pytest.approx((suffix[0].sum() - suffix[1].sum()).item(), abs=1e-5)
    assert suffix.shape[1] == 2
