r"""The reward an IQLearn policy implies, as a critic: ``r_t = Q(s_t, a_t) − γ·V(s_{t+1})`` per agent token.

An IQLearn-trained policy (:mod:`turnkit.train.iqlearn`) is a soft Q-function: its logits are ``Q`` and their
logsumexp is ``V`` (:mod:`turnkit.learners.irl`). :class:`IQLearnReward` scores each agent turn of a trajectory
with the sum of its tokens' extracted rewards, so the GRPO loop (``TrainConfig.critic="iqlearn"``), best-of-N,
beam search and MCTS can use the learned reward like any other critic. Turns that recorded their ids (policy
samples) are scored token-exact; text-only turns (demonstrations) are rendered with the chat template.

Example:
    >>> from turnkit.agents.hf import HFPolicy
    >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    >>> from turnkit.types import AgentTurn, Step, Trajectory
    >>> tok = build_tiny_tokenizer()
    >>> critic = IQLearnReward(HFPolicy(build_tiny_model(tok, TinyModelConfig(32, 1, 2)), tok), gamma=1.0)
    >>> traj = Trajectory("d", 0, (Step("2+2?", AgentTurn("4"), 0.0), Step("sure?", AgentTurn("4"), 1.0, True)))
    >>> result = critic.score(traj)
    >>> len(result.step_rewards), round(result.metrics["iqlearn_return"] - result.total, 6)
    (2, 0.0)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from turnkit.agents.hf import HFPolicy
from turnkit.checkpoint import check_manifest, checkpoint_candidates
from turnkit.critics.base import CriticResult
from turnkit.errors import ConfigError, DataError
from turnkit.learners.irl import extracted_rewards, token_q_values
from turnkit.rollout.batch import TokenRow, collate
from turnkit.rollout.demos import turn_token_ids
from turnkit.types import Trajectory


class IQLearnReward:
    """Per-turn sums of IQLearn's extracted token rewards under ``policy`` (no gradients, eval mode).

    Args:
        policy: The IQLearn-trained policy (its logits are the soft Q-values).
        gamma: The discount the policy was trained with (``IQLearnConfig.gamma``).
        batch_size: Turns scored per forward pass.

    Raises:
        ConfigError: ``gamma`` outside ``[0, 1]`` or ``batch_size < 1``.
    """

    name = "iqlearn"

    def __init__(self, policy: HFPolicy, *, gamma: float = 0.99, batch_size: int = 32) -> None:
        if not 0.0 <= gamma <= 1.0 or batch_size < 1:
            raise ConfigError(f"IQLearnReward needs gamma in [0, 1] and batch_size >= 1, got {gamma}, {batch_size}")
        self.policy, self.gamma, self.batch_size = policy, gamma, batch_size

    @classmethod
    def from_pretrained(cls, path: str, *, gamma: float = 0.99, batch_size: int = 32) -> IQLearnReward:
        """The reward of a saved policy folder (e.g. an IQLearn checkpoint's ``model/``)."""
        return cls(HFPolicy.from_pretrained(path), gamma=gamma, batch_size=batch_size)

    def turn_rewards(self, trajectories: Sequence[Trajectory]) -> list[list[float]]:
        """Per trajectory, per agent turn: the summed extracted reward of the turn's tokens.

        Raises:
            DataError: An errored trajectory (score clean episodes only), naming its index.
        """
        for i, traj in enumerate(trajectories):
            if traj.error is not None:
                raise DataError(f"trajectory {i} (seed {traj.seed}) has an error ({traj.error.cause}); not scored")
        segments = [turn_token_ids(t, self.policy.tokenizer) for t in trajectories]
        flat = [TokenRow.from_prompt_completion(p, c) for turns in segments for p, c in turns]
        sums: list[float] = []
        model = self.policy.model
        was_training = model.training
        model.eval()
        eos = self.policy.tokenizer.eos_token_id
        try:
            with torch.no_grad():
                for lo in range(0, len(flat), self.batch_size):
                    batch = collate(flat[lo : lo + self.batch_size], pad_id=self.policy.pad_token_id)
                    batch = batch.to(self.policy.device)
                    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
                    q, v = token_q_values(logits, batch.input_ids, batch.loss_mask)
                    terminal = batch.input_ids == eos if eos is not None else None
                    r = extracted_rewards(q, v, batch.loss_mask, gamma=self.gamma, terminal=terminal)
                    sums.extend(float(x) for x in r.sum(dim=1))
        finally:
            model.train(was_training)
        out, start = [], 0
        for turns in segments:
            out.append(sums[start : start + len(turns)])
            start += len(turns)
        return out

    def score(self, trajectory: Trajectory) -> CriticResult:
        """Each turn's summed extracted reward as its step reward."""
        return self.score_batch([trajectory])[0]

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
        """Score a batch of trajectories in batched forward passes."""
        return [
            CriticResult(tuple(turns), {"iqlearn_return": float(sum(turns))})
            for turns in self.turn_rewards(trajectories)
        ]


def load_reward(path: str | Path, *, batch_size: int = 32) -> IQLearnReward:
    """The learned reward of an IQLearn run folder, or of a plain HF model folder.

    A run folder (``config.json`` + ``checkpoints/``) gives the reward of its newest intact checkpoint with the
    run's ``gamma``; a model folder gets ``gamma = 0.99``.

    Raises:
        ConfigError: ``path`` is neither (the message says what was expected).
    """
    path = Path(path)
    if (path / "checkpoints").is_dir() and (path / "config.json").is_file():
        gamma = json.loads((path / "config.json").read_text(encoding="utf-8")).get("gamma", 0.99)
        intact = [c for c in checkpoint_candidates(path) if check_manifest(c, required=False) is None]
        if not intact or not (intact[0] / "model").is_dir():
            raise ConfigError(f"IQLearn run {path} has no intact checkpoint with full model weights (model/)")
        return IQLearnReward(HFPolicy.from_pretrained(intact[0] / "model"), gamma=gamma, batch_size=batch_size)
    if (path / "config.json").is_file():
        return IQLearnReward(HFPolicy.from_pretrained(path), batch_size=batch_size)
    raise ConfigError(f"{path} is neither an IQLearn run folder (config.json + checkpoints/) nor an HF model folder")


__all__ = [
    "IQLearnReward",
    "load_reward",
]
