"""Versioned snapshots of a policy's trainable weights, to bring a generator copy up to the learner.

A GRPO learner trains a LoRA adapter (or every weight); a generator (a copy of the policy in another thread
or on a Ray worker) needs only those tensors to follow it. :func:`snapshot_weights` copies them out with a
version number (the learner step that produced them); :func:`load_weights` writes them into a copy, by name.

Example:
    >>> import torch
    >>> learner, generator = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    >>> snap = snapshot_weights(learner, version=3)
    >>> load_weights(generator, snap)
    >>> snap.version, torch.equal(generator.weight, learner.weight), snap.num_bytes
    (3, True, 24)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from turnkit.errors import ConfigError

if TYPE_CHECKING:  # torch loads with a model, not with turnkit.distributed (RayConfig validates a run's config)
    import torch


@dataclass(frozen=True)
class WeightsSnapshot:
    """The trainable tensors of a model at one learner step.

    Attributes:
        version: The learner step after which they were taken (0: the start policy).
        tensors: Parameter name -> a detached CPU copy.
    """

    version: int
    tensors: dict[str, torch.Tensor]

    @property
    def num_bytes(self) -> int:
        """Total size of the tensors."""
        return sum(t.numel() * t.element_size() for t in self.tensors.values())


def snapshot_weights(model: torch.nn.Module, *, version: int) -> WeightsSnapshot:
    """Copy ``model``'s trainable parameters (``requires_grad``; all of them if none is trainable)."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad] or list(model.named_parameters())
    return WeightsSnapshot(version, {n: p.detach().to("cpu", copy=True) for n, p in named})


def load_weights(model: torch.nn.Module, snapshot: WeightsSnapshot) -> None:
    """Write ``snapshot`` into ``model``'s parameters of the same names, in place.

    Raises:
        ConfigError: A name is not a parameter of ``model`` or a shape differs (a different architecture).
    """
    import torch

    params = dict(model.named_parameters())
    for name, tensor in snapshot.tensors.items():
        param = params.get(name)
        if param is None or param.shape != tensor.shape:
            raise ConfigError(f"weights snapshot v{snapshot.version}: {name!r} does not fit this model")
        with torch.no_grad():
            param.copy_(tensor.to(param.device))
