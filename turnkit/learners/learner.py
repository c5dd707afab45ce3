"""One owner of what every trainer needs around its loss: model, adapter, reference, optimizer, schedule.

GRPO, DPO, SFT, IQLearn, the warm start and the learned critics all train through a :class:`Learner`:

- :class:`LoraConfig` (``r``, ``alpha``, ``dropout``, ``targets``): a fresh adapter is attached to an
  :class:`~turnkit.agents.hf.HFPolicy` that has none (the base weights freeze);
- :class:`OptimConfig` (``lr``, ``weight_decay``, ``max_grad_norm``, ``warmup_steps``, ``schedule``,
  ``min_lr_ratio``): AdamW over the trainable parameters, a linear warmup then a constant or cosine rate;
- an optional frozen reference: the adapter-disabled base (no copy) or, for full fine-tuning, a frozen copy;
- the clipped step (:meth:`Learner.step` after any number of ``backward`` calls: gradient accumulation), which
  returns the gradient norm before clipping;
- :meth:`Learner.state_dict` / :meth:`Learner.load_state_dict` (adapter or weights, optimizer, step count).

:class:`~turnkit.agents.hf.HFPolicy` keeps generation; the loss kernels stay in ``turnkit.learners``.

Example:
    >>> from turnkit.agents.hf import HFPolicy
    >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    >>> tok = build_tiny_tokenizer()
    >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
    >>> learner = Learner(policy, OptimConfig(lr=1e-2, warmup_steps=2), lora=LoraConfig(r=4), total_steps=10)
    >>> learner.set_lr(0)  # 0-based step 0 of a 2-step warmup: half the rate
    0.005
    >>> ids = torch.tensor([[1, 4, 5]])
    >>> loss = -learner.model(input_ids=ids).logits.log_softmax(-1)[0, :-1].gather(-1, ids[0, 1:, None]).mean()
    >>> learner.minimize(loss) > 0, learner.steps
    (True, 1)
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from turnkit.errors import ConfigError
from turnkit.learners.config import DEFAULT_TARGETS as DEFAULT_TARGETS
from turnkit.learners.config import LoraConfig, OptimConfig, lr_factor
from turnkit.learners.optim import step_accumulated

__all__ = ["Learner", "LoraConfig", "OptimConfig", "lr_factor"]


class Learner:
    """The model (with its adapter), an optional frozen reference, AdamW, the schedule and the clipped step.

    Args:
        policy: An :class:`~turnkit.agents.hf.HFPolicy` (trained in place; a LoRA adapter is attached when
            ``lora`` is given and it has none) or a bare ``torch.nn.Module``.
        optim: The optimizer and schedule.
        lora: Attach a fresh adapter of this shape (``None`` or rank ``0``: train what is trainable, all weights
            unless an adapter is already attached).
        reference: Keep a frozen reference for :meth:`reference` (the adapter-disabled base, or a frozen copy
            of the start weights when fully fine-tuning).
        total_steps: The run's optimizer steps (the cosine schedule's length).
        seed: Seed of the adapter's initial ``A`` matrices.
        optimizer: Use this optimizer over :attr:`params` instead of AdamW (e.g. plain SGD in a test).

    Raises:
        ConfigError: A LoRA adapter for a bare module, or nothing left to train.
    """

    def __init__(
        self,
        policy: Any,
        optim: OptimConfig | None = None,
        *,
        lora: LoraConfig | None = None,
        reference: bool = False,
        total_steps: int = 0,
        seed: int = 0,
        optimizer: torch.optim.Optimizer | None = None,
    ) -> None:
        self.optim = optim if optim is not None else OptimConfig()
        self.policy = None if isinstance(policy, torch.nn.Module) else policy
        self._module = policy if isinstance(policy, torch.nn.Module) else None
        if lora is not None and lora.r is None:
            raise ConfigError("Learner got LoraConfig(r=None): resolve the model's default rank first")
        if lora is not None and lora.r:
            if self.policy is None:
                raise ConfigError("Learner(lora=...) needs an HFPolicy (attach_lora), got a bare torch module")
            if not self.policy.has_adapter:
                self.policy.attach_lora(
                    r=lora.r, alpha=lora.alpha, target_modules=lora.targets, dropout=lora.dropout, seed=seed
                )
        elif self.policy is not None and not self.policy.has_adapter:
            for p in self.model.parameters():
                p.requires_grad_(True)
        self.params: list[torch.nn.Parameter] = [p for p in self.model.parameters() if p.requires_grad]
        if not self.params:
            raise ConfigError("the learner's model has no trainable parameters")
        self.ref_model: torch.nn.Module | None = None
        if reference and not self.has_adapter:
            self.ref_model = copy.deepcopy(self.model).eval()
            for p in self.ref_model.parameters():
                p.requires_grad_(False)
        self.total_steps = total_steps
        self.steps = 0
        """Optimizer steps taken (restored by :meth:`load_state_dict`)."""
        if optimizer is None:
            o = self.optim
            optimizer = torch.optim.AdamW(self.params, lr=o.lr, weight_decay=o.weight_decay, betas=o.betas, eps=o.eps)
        self.optimizer = optimizer

    @property
    def model(self) -> torch.nn.Module:
        """The trained module (the policy's current model: a ``peft`` model once an adapter is attached)."""
        return self.policy.model if self.policy is not None else self._module  # type: ignore[return-value]

    @property
    def has_adapter(self) -> bool:
        """Whether the model carries a LoRA adapter (only it trains)."""
        return hasattr(self.model, "peft_config")

    def lr_at(self, step: int) -> float:
        """The learning rate at 0-based schedule step ``step``."""
        return self.optim.lr * self.optim.factor(step, self.total_steps)

    def set_lr(self, step: int) -> float:
        """Set every parameter group's rate to :meth:`lr_at` ``(step)`` and return it."""
        lr = self.lr_at(step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def zero_grad(self) -> None:
        """Drop the accumulated gradients (start of a step)."""
        self.optimizer.zero_grad(set_to_none=True)

    def step(self) -> float:
        """Clip the gradients accumulated since :meth:`zero_grad` and take one step; the norm before clipping.

        Example:
            >>> w = torch.nn.Linear(2, 1, bias=False)
            >>> learner = Learner(w, OptimConfig(lr=0.1, max_grad_norm=1.0), optimizer=torch.optim.SGD(w.parameters()))
            >>> with torch.no_grad():
            ...     _ = w.weight.copy_(torch.tensor([[3.0, 4.0]]))
            >>> learner.zero_grad()
            >>> for x in ([1.0, 0.0], [0.0, 1.0]):  # two micro-batches of sum(w) ** 2 / 2, accumulated
            ...     (w(torch.tensor(x)) ** 2 / 2).sum().backward()
            >>> learner.step()
            5.0
        """
        norm = step_accumulated(self.optimizer, self.params, max_grad_norm=self.optim.max_grad_norm)
        self.steps += 1
        return norm

    def minimize(self, loss: torch.Tensor) -> float:
        """One whole step on ``loss``: zero the gradients, back-propagate, clip, step; the norm before clipping."""
        self.zero_grad()
        loss.backward()
        return self.step()

    @contextlib.contextmanager
    def reference(self) -> Iterator[torch.nn.Module]:
        """Inside the block, the frozen reference model: the adapter-disabled base, or the frozen copy.

        Raises:
            ConfigError: No reference: neither an adapter nor ``reference=True``.
        """
        if self.ref_model is not None:
            yield self.ref_model
            return
        if not self.has_adapter:
            raise ConfigError("this learner has no reference: attach a LoRA adapter or pass reference=True")
        with self.model.disable_adapter():  # type: ignore[operator]
            yield self.model

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        """The trained state: adapter (or all trainable) weights, optimizer state and the step count."""
        weights = {n: p.detach().clone() for n, p in self.model.named_parameters() if p.requires_grad}
        return {"weights": weights, "optimizer": self.optimizer.state_dict(), "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output in place (same parameter objects, so the optimizer keeps them).

        Raises:
            ConfigError: The state's trained weights do not match this learner's.
        """
        named = {n: p for n, p in self.model.named_parameters() if p.requires_grad}
        weights = state["weights"]
        if set(weights) != set(named):
            missing, extra = sorted(set(named) - set(weights)), sorted(set(weights) - set(named))
            raise ConfigError(f"learner state does not match the model: missing {missing[:3]}, unexpected {extra[:3]}")
        with torch.no_grad():
            for name, p in named.items():
                p.copy_(weights[name])
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])

    def save(self, folder: str | Path) -> Path:
        """Write :meth:`state_dict` to ``folder/learner.pt``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(self.state_dict(), folder / "learner.pt")
        return folder

    def load(self, folder: str | Path) -> None:
        """Restore what :meth:`save` wrote to ``folder``."""
        path = Path(folder) / "learner.pt"
        if not path.is_file():
            raise ConfigError(f"no learner state at {path}")
        self.load_state_dict(torch.load(path, map_location=self.params[0].device))
