"""The policy's part of a training checkpoint, shared by every loop that trains an :class:`HFPolicy`.

A loop's checkpoint folder (staged atomically by :func:`~turnkit.checkpoint.stage_checkpoint`) holds the
policy's weights (``adapter/`` in peft format for a LoRA policy, else ``model/`` with its tokenizer),
``optimizer.pt`` and ``rng.pt`` (torch's global RNG), plus whatever the loop adds (its ``state.json``, critics).
:func:`save_policy_state` writes the shared part; :func:`read_policy_state` reads (and so verifies) all of it
without changing anything, and :meth:`PolicyState.apply` then restores it in place, so a damaged checkpoint
leaves a run untouched. :func:`~turnkit.train.run.check_resumable` (re-exported here) refuses a checkpoint
whose run had another config.

Example:
    >>> import tempfile, torch
    >>> from pathlib import Path
    >>> from turnkit.agents.hf import HFPolicy
    >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    >>> tok = build_tiny_tokenizer()
    >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(32, 1, 2, 64), seed=0), tok)
    >>> optimizer = torch.optim.AdamW(policy.model.parameters())
    >>> folder = Path(tempfile.mkdtemp())
    >>> save_policy_state(folder, policy, optimizer)
    >>> other = HFPolicy(build_tiny_model(tok, TinyModelConfig(32, 1, 2, 64), seed=1), tok)
    >>> read_policy_state(folder, other).apply(other, torch.optim.AdamW(other.model.parameters()))
    >>> all(torch.equal(a, b) for a, b in zip(policy.model.parameters(), other.model.parameters()))
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from turnkit.agents.hf import HFPolicy
from turnkit.checkpoint import reading
from turnkit.train.run import check_resumable

__all__ = ["PolicyState", "check_resumable", "read_policy_state", "save_policy_state"]


def save_policy_state(folder: Path, policy: HFPolicy, optimizer: torch.optim.Optimizer) -> None:
    """Write the policy's weights (or LoRA adapter), the optimizer state and torch's RNG state into ``folder``."""
    if policy.has_adapter:
        policy.save_adapter(folder / "adapter")
    else:
        policy.model.save_pretrained(folder / "model")
        policy.tokenizer.save_pretrained(folder / "model")
    torch.save(optimizer.state_dict(), folder / "optimizer.pt")
    torch.save({"torch": torch.get_rng_state()}, folder / "rng.pt")


@dataclass
class PolicyState:
    """What :func:`read_policy_state` read: everything needed to restore the policy side of a run."""

    weights: Path
    """The ``adapter/`` or ``model/`` folder."""
    model_state: dict[str, torch.Tensor] | None
    """Full weights (``None`` for an adapter, which :meth:`apply` loads from ``weights``)."""
    optimizer_state: dict[str, Any]
    torch_rng: torch.Tensor

    def apply(self, policy: HFPolicy, optimizer: torch.optim.Optimizer) -> None:
        """Restore the weights, the optimizer and torch's RNG in place."""
        if self.model_state is None:
            policy.load_adapter(self.weights)
        else:
            policy.model.load_state_dict(self.model_state)
        optimizer.load_state_dict(self.optimizer_state)
        torch.set_rng_state(self.torch_rng)


def read_policy_state(ckpt: Path, policy: HFPolicy) -> PolicyState:
    """Read every policy file of ``ckpt`` (an adapter for a LoRA policy, else full weights); change nothing.

    Raises:
        CheckpointError: A file is missing or cannot be read (the message names it).
    """
    weights = ckpt / ("adapter" if policy.has_adapter else "model")
    with reading(weights, base=ckpt):
        if policy.has_adapter:
            from peft import PeftConfig, load_peft_weights

            PeftConfig.from_pretrained(str(weights))
            load_peft_weights(str(weights), device="cpu")  # read (and so verify) before load_adapter applies it
            model_state = None
        else:
            from transformers import AutoModelForCausalLM

            model_state = AutoModelForCausalLM.from_pretrained(weights, local_files_only=True).state_dict()
    with reading(ckpt / "optimizer.pt", base=ckpt):
        optimizer_state = torch.load(ckpt / "optimizer.pt", map_location=policy.device)
    with reading(ckpt / "rng.pt", base=ckpt):
        torch_rng = torch.load(ckpt / "rng.pt")["torch"]
    return PolicyState(weights, model_state, optimizer_state, torch_rng)
