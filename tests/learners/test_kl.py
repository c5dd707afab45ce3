"""Hand-computed checks of the KL estimators (python -m pytest tests/learners/test_kl.py)."""

from __future__ import annotations

import math

import pytest
import torch

from turnkit.errors import ConfigError
from turnkit.learners.kl import kl_estimate

# logp = [-1, -0.5, -2], ref = [-2, -0.5, -1]  ->  log r = ref - logp = [-1, 0, 1]
LOGP = torch.tensor([-1.0, -0.5, -2.0])
REF = torch.tensor([-2.0, -0.5, -1.0])


def test_k1_is_minus_log_ratio() -> None:
    assert kl_estimate(LOGP, REF, "k1").tolist() == [1.0, 0.0, -1.0]  # -log r


def test_k2_is_half_squared_log_ratio() -> None:
    assert kl_estimate(LOGP, REF, "k2").tolist() == [0.5, 0.0, 0.5]  # (log r)^2 / 2


def test_k3_hand_computed() -> None:
    # (r - 1) - log r: log r = -1 -> e^-1 - 1 + 1 = 0.367879; 0 -> 0; 1 -> e - 1 - 1 = 0.718282
    assert kl_estimate(LOGP, REF, "k3").tolist() == pytest.approx([math.exp(-1), 0.0, math.e - 2])


def test_k3_gradient_hand_computed() -> None:
    # d/dlogp [exp(ref - logp) - 1 - (ref - logp)] = 1 - exp(ref - logp): log r = -1 -> 1 - e^-1
    logp = torch.tensor([-1.0], requires_grad=True)
    kl_estimate(logp, torch.tensor([-2.0]), "k3").sum().backward()
    assert logp.grad is not None
    assert logp.grad.item() == pytest.approx(1 - math.exp(-1))


def test_reference_gets_no_gradient() -> None:
    ref = torch.tensor([-2.0], requires_grad=True)
    out = kl_estimate(torch.tensor([-1.0], requires_grad=True), ref, "k3")
    out.sum().backward()
    assert ref.grad is None


def test_unknown_estimator() -> None:
    with pytest.raises(ConfigError, match="k4"):
        kl_estimate(LOGP, REF, "k4")  # type: ignore[arg-type]


def test_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="differ"):
        kl_estimate(LOGP, REF[:2])
