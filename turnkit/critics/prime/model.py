r"""PRIME: an implicit process reward model trained online from outcome labels only.

The PRM ``π_φ`` is a language model (an :class:`~turnkit.agents.hf.HFPolicy` with a LoRA adapter) started
from the SFT policy; its reference ``π_ref`` is its own LoRA-disabled base, i.e. the frozen SFT model. For every
token ``y_t`` the agent generated:

``r_t = β · (log π_φ(y_t | y_<t) − log π_ref(y_t | y_<t))``,  ``β = 0.05``

The PRM learns from the verifier's outcome ``acc ∈ {0, 1}`` alone, with a cross-entropy on the summed
implicit reward: ``L = BCE(σ(Σ_t r_t), acc)`` (i.e. ``σ(β Σ_t q_t)`` with ``q_t`` the token log-ratio).

One PRIME update on a fresh rollout batch (:func:`prime_update`; the env interaction stays in
:mod:`turnkit.rollout`):

1. **Filter** groups (same task) whose mean accuracy lies outside ``[0.2, 0.8]``
   (:func:`accuracy_filter`): they carry no outcome contrast.
2. **Reward** every generated token with the PRM *before* updating it ("single forward"); the online PRM
   ranking accuracy on this unseen batch is logged here (:func:`group_ranking_accuracy`).
3. **Update the PRM** with the BCE on the same batch.
4. **Advantages**: RLOO separately on the outcome (on the last token) and on the process rewards (per token,
   baseline = the other responses' mean token reward), discounted returns-to-go (``γ = 1``), summed and
   whitened (:func:`turnkit.learners.advantages.prime_advantages`). ``process_coef = 0`` is outcome-only RLOO.
   With ``norm = "batch"`` (PRIME's code: ``prime_norm = batch_norm``) the process rewards are first divided by
   the batch's largest process return-to-go (:func:`process_scale`), so the two sources share one scale.
5. **Policy**: PPO-clip (:func:`turnkit.learners.grpo.policy_loss`) on the per-token advantages.

Multi-turn episodes are one response: the agent's turns are concatenated in order (env messages are
context, never rewarded), so returns-to-go run across turns.

Example:
    >>> import torch
    >>> prm, ref = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-3.0, -2.0]])
    >>> mask = torch.tensor([[True, True]])
    >>> implicit_token_rewards(prm, ref, mask, beta=0.05)  # 0.05 * (2, 0)
    tensor([[0.1000, 0.0000]])
    >>> loss, m = prm_bce_loss(prm, ref, mask, torch.tensor([1.0]), beta=0.05)  # -log σ(0.1)
    >>> round(loss.item(), 4), m["accuracy"]
    (0.6444, 1.0)
"""

from __future__ import annotations

import copy
import math
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from turnkit.agents.hf import HFPolicy
from turnkit.critics.base import CriticResult
from turnkit.critics.prime import PrimeConfig
from turnkit.errors import ConfigError, DataError
from turnkit.learners.advantages import prime_advantages
from turnkit.learners.grpo import GRPOConfig, policy_loss
from turnkit.learners.learner import Learner
from turnkit.learners.logprobs import gather_token_logprobs
from turnkit.rollout.batch import TokenRow, collate
from turnkit.types import Step, Trajectory

# ---------------------------------------------------------------------------------------------- kernels


def implicit_token_rewards(prm_logprobs: Tensor, ref_logprobs: Tensor, mask: Tensor, *, beta: float = 0.05) -> Tensor:
    """Per-token implicit process rewards ``β (log π_φ − log π_ref)``, ``0`` outside ``mask``.

    Example:
        >>> import torch
        >>> implicit_token_rewards(torch.tensor([[0.0, -1.0]]), torch.tensor([[-1.0, -1.0]]),
        ...                        torch.tensor([[True, False]]), beta=0.5)
        tensor([[0.5000, 0.0000]])
    """
    if prm_logprobs.shape != ref_logprobs.shape or prm_logprobs.shape != mask.shape:
        raise ValueError(
            f"PRM, reference and mask must have one shape, got {tuple(prm_logprobs.shape)}, "
            f"{tuple(ref_logprobs.shape)}, {tuple(mask.shape)}"
        )
    return torch.where(mask.bool(), beta * (prm_logprobs - ref_logprobs), torch.zeros_like(prm_logprobs))


def prm_bce_loss(
    prm_logprobs: Tensor, ref_logprobs: Tensor, mask: Tensor, labels: Tensor, *, beta: float = 0.05
) -> tuple[Tensor, dict[str, float]]:
    """PRIME's PRM loss: ``BCE(σ(Σ_t r_t), acc)`` averaged over responses.

    Args:
        prm_logprobs: ``[N, T]`` log-probs of each response's tokens under the PRM (with gradients).
        ref_logprobs: ``[N, T]`` the same under the reference.
        mask: ``[N, T]`` bool mask of the response tokens.
        labels: ``[N]`` outcome labels in ``[0, 1]``.
        beta: ``β``.

    Returns:
        ``(loss, metrics)`` with ``loss``, ``accuracy`` (share with ``(Σ r > 0) == (acc > 0.5)``) and
        ``implicit_return`` (mean ``Σ_t r_t``).

    Example:
        >>> import math, torch
        >>> z = torch.zeros(2, 1)
        >>> loss, m = prm_bce_loss(z, z, torch.ones(2, 1, dtype=torch.bool), torch.tensor([1.0, 0.0]))
        >>> round(loss.item(), 6) == round(math.log(2), 6)  # σ(0) = 1/2 for both
        True
    """
    if labels.dim() != 1 or labels.shape[0] != prm_logprobs.shape[0]:
        raise ValueError(f"labels must be [N] with N = {prm_logprobs.shape[0]}, got {tuple(labels.shape)}")
    logits = implicit_token_rewards(prm_logprobs, ref_logprobs, mask, beta=beta).sum(dim=-1)
    target = labels.to(logits.dtype)
    loss = F.binary_cross_entropy_with_logits(logits, target)
    with torch.no_grad():
        metrics = {
            "loss": float(loss),
            "accuracy": float(((logits > 0) == (target > 0.5)).float().mean()),
            "implicit_return": float(logits.mean()),
        }
    return loss, metrics


def accuracy_filter(
    accuracies: Sequence[float], group_ids: Sequence[Any], *, low: float = 0.2, high: float = 0.8
) -> list[bool]:
    """Keep responses whose group's mean accuracy lies in ``[low, high]`` (PRIME's prompt filter).

    Example:
        >>> accuracy_filter([1, 1, 1, 0, 1, 0, 0, 0], [0, 0, 0, 0, 1, 1, 2, 2])  # means .75, .5, 0
        [True, True, True, True, True, True, False, False]
    """
    if len(accuracies) != len(group_ids):
        raise ValueError(f"got {len(accuracies)} accuracies for {len(group_ids)} group ids")
    if not 0 <= low <= high <= 1:
        raise ConfigError(f"need 0 <= low <= high <= 1, got low={low}, high={high}")
    members: dict[Any, list[float]] = defaultdict(list)
    for a, g in zip(accuracies, group_ids, strict=True):
        members[g].append(float(a))
    mean = {g: sum(v) / len(v) for g, v in members.items()}
    return [low <= mean[g] <= high for g in group_ids]


def group_ranking_accuracy(
    scores: Sequence[float], labels: Sequence[float], group_ids: Sequence[Any]
) -> tuple[float, int]:
    """Within-group pairwise ranking accuracy of a scorer against outcome labels.

    Over the (correct, incorrect) pairs inside each group, the share where the correct response scores
    higher; ties count one half, so ``0.5`` is chance.

    Returns:
        ``(accuracy, num_pairs)``; ``(nan, 0)`` when no group has both outcomes.

    Example:
        >>> acc, n = group_ranking_accuracy([0.9, 0.1, 0.5, 0.2, 0.2], [1, 0, 0, 1, 0], ["a", "a", "a", "b", "b"])
        >>> round(acc, 4), n  # (1 + 1 + 0.5) / 3: a tie in group b
        (0.8333, 3)
    """
    if not len(scores) == len(labels) == len(group_ids):
        raise ValueError("scores, labels and group_ids must have one length")
    members: dict[Any, list[int]] = defaultdict(list)
    for i, g in enumerate(group_ids):
        members[g].append(i)
    wins, n = 0.0, 0
    for idx in members.values():
        for i in idx:
            for j in idx:
                if labels[i] > 0.5 >= labels[j]:
                    n += 1
                    wins += 1.0 if scores[i] > scores[j] else 0.5 if scores[i] == scores[j] else 0.0
    return (wins / n if n else math.nan), n


# ---------------------------------------------------------------------------------------------- the PRM


_Segment = tuple[tuple[int, ...], tuple[int, ...]]


def process_scale(token_rewards: Sequence[Sequence[Tensor]], norm: str = "batch") -> float:
    """The divisor of a batch's implicit rewards under PRIME's ``prime_norm`` (:attr:`PrimeConfig.norm`).

    ``"batch"``: the largest ``|Σ_{t'≥t} r_t'|`` over every generated token ``t`` of every response (an
    episode's turns concatenated), plus ``1e-6``; divided by it, no process return-to-go leaves ``[-1, 1]``,
    the scale of a ``{0, 1}`` outcome. ``"none"``: ``1``.

    Args:
        token_rewards: Per response, per turn, the ``[L]`` implicit rewards (:meth:`ImplicitPRM.token_rewards`).
        norm: ``"batch"`` or ``"none"``.

    Example:
        >>> import torch
        >>> rewards = [[torch.tensor([0.5, -1.0])], [torch.tensor([1.0]), torch.tensor([2.0])]]
        >>> round(process_scale(rewards), 4)  # returns-to-go -0.5, -1.0 | 3.0, 2.0
        3.0
        >>> process_scale(rewards, "none")
        1.0
    """
    if norm == "none":
        return 1.0
    if norm != "batch":
        raise ConfigError(f"norm must be 'none' or 'batch', got {norm!r}")
    largest = 0.0
    for turns in token_rewards:
        if turns:
            rewards = torch.cat([t.detach().double().reshape(-1) for t in turns])
            to_go = rewards.flip(0).cumsum(0).flip(0)
            largest = max(largest, float(to_go.abs().max()) if len(to_go) else 0.0)
    return largest + 1e-6


def _turn_ids(trajectory: Trajectory, i: int) -> list[_Segment]:
    out = []
    for k, step in enumerate(trajectory.steps):
        turn = step.action
        if not (turn.token_ids and turn.prompt_token_ids):
            raise DataError(f"trajectory {i} turn {k} has no token ids; PRIME scores the exact generated ids")
        out.append((tuple(turn.prompt_token_ids), tuple(turn.token_ids)))
    return out


def episode_layout(turns: Sequence[_Segment]) -> tuple[_Segment, list[tuple[int, int]]] | None:
    """One sequence for a whole episode, when its contexts are token-exact: ``((prompt, rest), spans)``.

    ``prompt`` is the first turn's prompt, ``rest`` everything after it (replies and the env's messages), and
    ``spans[k]`` the ``[start, end)`` of turn ``k``'s reply in ``rest``. A causal model then scores every reply
    in one pass instead of once per turn with all earlier turns again as its prompt. ``None`` when a turn's
    prompt does not extend the previous prompt and reply (a re-rendered context): score it turn by turn.

    Example:
        >>> episode_layout([((1, 2), (3,)), ((1, 2, 3, 9), (4, 5))])  # the env said 9 in between
        (((1, 2), (3, 9, 4, 5)), [(0, 1), (2, 4)])
        >>> episode_layout([((1, 2), (3,)), ((1, 7, 3, 9), (4,))]) is None
        True
    """
    prompt = turns[0][0]
    rest: list[int] = []
    spans = []
    for turn_prompt, reply in turns:
        seen = len(prompt) + len(rest)
        if turn_prompt[: len(prompt)] != prompt or list(turn_prompt[len(prompt) : seen]) != rest:
            return None
        rest.extend(turn_prompt[seen:])
        spans.append((len(rest), len(rest) + len(reply)))
        rest.extend(reply)
    return (prompt, tuple(rest)), spans


class ImplicitPRM:
    """PRIME's implicit PRM: token rewards ``β (log π_φ − log π_ref)``, trained by BCE on outcomes.

    Args:
        prm: The PRM model; a LoRA adapter is attached if missing, its base is ``π_ref``. Use
            :meth:`from_policy` to start from a copy of the SFT policy.
        config: Settings.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> tok = build_tiny_tokenizer()
        >>> prm = ImplicitPRM(HFPolicy(build_tiny_model(tok, TinyModelConfig(32, 1, 2)), tok))
        >>> turn = AgentTurn("x", token_ids=(60, 2), prompt_token_ids=(1, 4))
        >>> prm.score(Trajectory("d", 0, (Step("q", turn, 1.0, True),))).step_rewards  # identity adapter
        (0.0,)
    """

    name = "prime"
    source = "process"
    """Its rewards are a process-reward source (:mod:`turnkit.learners.estimators`)."""
    estimator = "prime"
    """The paper's estimator: RLOO per source, process returns-to-go, no ``σ``."""

    def __init__(self, prm: HFPolicy, config: PrimeConfig | None = None) -> None:
        self.config = config or PrimeConfig()
        self.prm = prm
        c = self.config
        self.learner = Learner(prm, c.optim, lora=c.lora, seed=c.seed)
        """The PRM's adapter, AdamW and clipped step."""
        self._reference_cache: dict[tuple[_Segment, ...], list[Tensor]] = {}

    @classmethod
    def from_policy(cls, policy: HFPolicy, config: PrimeConfig | None = None) -> ImplicitPRM:
        """A PRM started from a copy of ``policy``'s model (which must have no adapter)."""
        if policy.has_adapter:
            raise ConfigError("ImplicitPRM.from_policy needs a policy without a LoRA adapter; merge it first")
        model = copy.deepcopy(policy.model)
        return cls(HFPolicy(model, policy.tokenizer, max_batch_size=policy.max_batch_size), config)

    def _logprobs(
        self, policy: HFPolicy, segments: Sequence[tuple[tuple[int, ...], tuple[int, ...]]], *, grad: bool
    ) -> list[Tensor]:
        out: list[Tensor] = []
        size = self.config.score_batch_size
        for start in range(0, len(segments), size):
            chunk = segments[start : start + size]
            logp = policy.sequence_logprobs([s[0] for s in chunk], [s[1] for s in chunk], temperature=1.0, grad=grad)
            out.extend(logp[i, : len(c)] for i, (_, c) in enumerate(chunk))
        return out

    def _turn_logprobs(
        self, policy: HFPolicy, turns: Sequence[Sequence[_Segment]], *, grad: bool
    ) -> list[list[Tensor]]:
        """Per episode, per turn: the log-probs of the reply's tokens, each episode in one pass where it can be."""
        segments: list[_Segment] = []
        where: list[list[tuple[int, int, int]]] = []  # per turn: (segment, start, end)
        for episode in turns:
            layout = episode_layout(episode)
            if layout is None:
                where.append([(len(segments) + k, 0, len(reply)) for k, (_, reply) in enumerate(episode)])
                segments.extend(episode)
            else:
                where.append([(len(segments), a, b) for a, b in layout[1]])
                segments.append(layout[0])
        logp = self._logprobs(policy, segments, grad=grad)
        return [[logp[j][a:b] for j, a, b in episode] for episode in where]

    def _reference_logprobs(self, turns: Sequence[Sequence[_Segment]]) -> list[list[Tensor]]:
        """:meth:`_turn_logprobs` under ``π_ref``, reusing the last scored batch's (the reference is frozen)."""
        missing = [ep for ep in turns if tuple(ep) not in self._reference_cache]
        if missing:
            with torch.no_grad(), self.prm.reference() as ref:
                computed = self._turn_logprobs(ref, missing, grad=False)
            self._reference_cache.update(zip((tuple(ep) for ep in missing), computed, strict=True))
        return [self._reference_cache[tuple(ep)] for ep in turns]

    def token_rewards(self, trajectories: Sequence[Trajectory]) -> list[list[Tensor]]:
        """Per trajectory, per turn: the ``[L]`` implicit rewards of the turn's generated tokens (no gradients).

        The reference log-probs are kept until the next call, so that :meth:`fit` on the same batch (the
        loop's order: score, then update) does not compute them again.
        """
        turns = [_turn_ids(t, i) for i, t in enumerate(trajectories)]
        self._reference_cache = {}
        with torch.no_grad():
            prm = self._turn_logprobs(self.prm, turns, grad=False)
        base = self._reference_logprobs(turns)
        return [
            [self.config.beta * (p - b) for p, b in zip(ep_p, ep_b, strict=True)]
            for ep_p, ep_b in zip(prm, base, strict=True)
        ]

    def score(self, trajectory: Trajectory) -> CriticResult:
        """Each turn's summed implicit reward as its step reward."""
        return self.score_batch([trajectory])[0]

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
        """Summed implicit rewards per turn, batched over trajectories, divided by :func:`process_scale`.

        Metrics: ``implicit_return`` (per episode, before the scale) and ``rank_acc``, the PRM's within-group
        ranking of correct over incorrect episodes of this batch (``nan`` without such pairs).
        """
        rewards = self.token_rewards(trajectories)
        scale = process_scale(rewards, self.config.norm)
        out = []
        for turns in rewards:
            raw = [float(r.sum()) for r in turns]
            out.append(CriticResult(tuple(r / scale for r in raw), {"implicit_return": sum(raw)}))
        acc, _ = group_ranking_accuracy(
            [r.total for r in out], [float(t.success) for t in trajectories], [_group(t) for t in trajectories]
        )
        return [CriticResult(r.step_rewards, {**r.metrics, "rank_acc": acc}) for r in out]

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """One BCE pass over the episodes of the batch's informative groups (PRIME's accuracy filter).

        Returns:
            ``prm_kept`` (share of episodes in groups with accuracy in ``[acc_low, acc_high]``) and, when any
            were kept, the :meth:`fit` metrics.
        """
        keep = accuracy_filter(
            [float(t.success) for t in trajectories], [_group(t) for t in trajectories], low=self.config.acc_low,
            high=self.config.acc_high,
        )  # fmt: skip
        kept = [t for t, k in zip(trajectories, keep, strict=True) if k]
        out = {"prm_kept": len(kept) / max(len(trajectories), 1)}
        if kept:
            out.update(self.fit(kept))
        return out

    def save(self, folder: Path) -> None:
        """Write the PRM's adapter and optimizer state into ``folder``."""
        self.prm.save_adapter(folder / "adapter")
        torch.save(self.learner.optimizer.state_dict(), folder / "optimizer.pt")

    def load(self, folder: Path) -> None:
        """Restore what :meth:`save` wrote."""
        self.prm.load_adapter(folder / "adapter")
        self.learner.optimizer.load_state_dict(torch.load(folder / "optimizer.pt", map_location=self.prm.device))

    def fit(self, trajectories: Sequence[Trajectory], *, labels: Sequence[float] | None = None) -> dict[str, float]:
        """One pass of the BCE loss over ``trajectories`` in ``prm_minibatches`` steps.

        Args:
            trajectories: A rollout batch (errored ones must be removed first).
            labels: Outcome per trajectory; default ``float(Trajectory.success)``.

        Returns:
            Token-weighted means of the :func:`prm_bce_loss` metrics.
        """
        if not trajectories:
            raise DataError("ImplicitPRM.fit got no trajectories")
        per_turn = self.config.labels == "turn"
        if per_turn and labels is not None:
            raise ConfigError("ImplicitPRM.fit takes labels per trajectory only with PrimeConfig.labels='episode'")
        labels = [float(t.success) for t in trajectories] if labels is None else [float(x) for x in labels]
        turns = [_turn_ids(t, i) for i, t in enumerate(trajectories)]
        base = self._reference_logprobs(turns)
        rows_of = [len(ep) if per_turn else 1 for ep in turns]  # BCE rows per trajectory: its turns, or itself
        n = len(trajectories)
        size = math.ceil(n / self.config.prm_minibatches)
        sums: dict[str, float] = defaultdict(float)
        self.prm.model.train()
        for lo in range(0, n, size):
            idx = list(range(lo, min(n, lo + size)))
            self.learner.zero_grad()
            for start in range(0, len(idx), self.config.prm_chunk):  # accumulate: one chunk's graph at a time
                chunk = idx[start : start + self.config.prm_chunk]
                logp = self._turn_logprobs(self.prm, [turns[i] for i in chunk], grad=True)
                if per_turn:
                    prm_rows, ref_rows = [t for ep in logp for t in ep], [t for i in chunk for t in base[i]]
                    targets = [turn_label(step) for i in chunk for step in trajectories[i].steps]
                else:
                    prm_rows, ref_rows = [torch.cat(ep) for ep in logp], [torch.cat(base[i]) for i in chunk]
                    targets = [labels[i] for i in chunk]
                prm_lp, mask = _pad(prm_rows)
                ref_lp, _ = _pad(ref_rows)
                outcome = torch.tensor(targets, device=prm_lp.device)
                loss, metrics = prm_bce_loss(prm_lp, ref_lp.to(prm_lp.device), mask, outcome, beta=self.config.beta)
                share = sum(rows_of[i] for i in chunk)
                (loss * (share / sum(rows_of[i] for i in idx))).backward()
                for key, value in metrics.items():
                    sums[key] += value * share / sum(rows_of)
            self.learner.step()
        self.prm.model.eval()
        return {f"prm_{k}": v for k, v in sums.items()}


def turn_label(step: Step) -> float:
    """A turn's PRM label with ``PrimeConfig.labels="turn"``: its env reward, clipped to ``[0, 1]``.

    Example:
        >>> from turnkit.types import AgentTurn
        >>> [turn_label(Step("q", AgentTurn("a"), r)) for r in (0.0, 1.0, 0.4, -1.0, 2.0)]
        [0.0, 1.0, 0.4, 0.0, 1.0]
    """
    return min(1.0, max(0.0, float(step.reward)))


def _group(trajectory: Trajectory) -> Any:
    return trajectory.group if trajectory.group is not None else (trajectory.env_id, trajectory.seed)


def _pad(rows: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
    """Right-pad 1-D tensors into ``[N, T]`` values and a bool mask (keeps gradients)."""
    width = max(int(r.shape[0]) for r in rows)
    values = torch.stack([F.pad(r, (0, width - r.shape[0])) for r in rows])
    mask = torch.arange(width)[None, :] < torch.tensor([r.shape[0] for r in rows])[:, None]
    return values, mask.to(values.device)


# ---------------------------------------------------------------------------------------------- the update


def token_advantages(
    token_rewards: Sequence[Sequence[Tensor]],
    outcomes: Sequence[float],
    group_ids: Sequence[Any],
    *,
    process_coef: float = 1.0,
    gamma: float = 1.0,
) -> list[list[list[float]]]:
    """PRIME advantages per trajectory, per turn, per token (turns concatenated into one response).

    Wraps :func:`~turnkit.learners.advantages.prime_advantages` (RLOO per source, returns-to-go, sum, whitening)
    on ``process_coef × token_rewards``.

    Example:
        >>> import torch
        >>> adv = token_advantages([[torch.tensor([0.0])], [torch.tensor([0.0])]], [1.0, 0.0], [0, 0])
        >>> [[[round(x, 3) for x in turn] for turn in traj] for traj in adv]  # RLOO ±1, whitened
        [[[1.0]], [[-1.0]]]
    """
    if not len(token_rewards) == len(outcomes) == len(group_ids):
        raise ValueError("token_rewards, outcomes and group_ids must have one length")
    responses = [torch.cat([t.detach().float() for t in turns]) for turns in token_rewards]
    process, mask = _pad(responses)
    gid_index = {g: k for k, g in enumerate(dict.fromkeys(group_ids))}
    adv = prime_advantages(
        torch.tensor([float(o) for o in outcomes]),
        process_coef * process,
        mask,
        [gid_index[g] for g in group_ids],
        gamma=gamma,
    )
    out: list[list[list[float]]] = []
    for i, turns in enumerate(token_rewards):
        row, start = [], 0
        for t in turns:
            row.append(adv[i, start : start + t.shape[0]].tolist())
            start += t.shape[0]
        out.append(row)
    return out


def policy_rows(trajectories: Sequence[Trajectory], advantages: Sequence[Sequence[Sequence[float]]]) -> list[TokenRow]:
    """One token row per turn with per-token advantages and the sampling log-probs (token-in/token-out).

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> turn = AgentTurn("x", token_ids=(7, 8), logprobs=(-0.5, -0.1), prompt_token_ids=(1,))
        >>> row = policy_rows([Trajectory("d", 0, (Step("q", turn, 1.0, True),))], [[[0.5, -0.5]]])[0]
        >>> row.input_ids, row.advantages, row.old_logprobs
        ((1, 7, 8), (0.0, 0.5, -0.5), (0.0, -0.5, -0.1))
    """
    rows = []
    for i, (traj, adv) in enumerate(zip(trajectories, advantages, strict=True)):
        for k, ((prompt, ids), a) in enumerate(zip(_turn_ids(traj, i), adv, strict=True)):
            logprobs = traj.steps[k].action.logprobs
            if len(a) != len(ids) or len(logprobs) != len(ids):
                raise DataError(
                    f"trajectory {i} turn {k}: {len(ids)} ids, {len(a)} advantages, {len(logprobs)} logprobs"
                )
            pad = (0.0,) * len(prompt)
            rows.append(
                TokenRow(
                    input_ids=(*prompt, *ids),
                    loss_mask=(False,) * len(prompt) + (True,) * len(ids),
                    advantages=pad + tuple(float(x) for x in a),
                    old_logprobs=pad + tuple(float(x) for x in logprobs),
                    reward=traj.steps[k].reward,
                    traj_index=i,
                    turn_index=k,
                )
            )
    return rows


def prime_update(
    learner: Learner,
    prm: ImplicitPRM | None,
    trajectories: Sequence[Trajectory],
    config: PrimeConfig | None = None,
    *,
    temperature: float = 1.0,
) -> dict[str, float]:
    """One PRIME step on a finished rollout batch (steps 1-5 of the module docstring).

    Args:
        learner: The :class:`~turnkit.learners.learner.Learner` of the policy that sampled the batch (its turns
            carry ids and log-probs); its optimizer takes the policy steps, clipped by its ``OptimConfig``.
        prm: The implicit PRM, or ``None`` for outcome-only RLOO (no process source).
        trajectories: The batch; ``Trajectory.group`` names each task's group. Errored episodes are dropped.
        config: Settings.
        temperature: The sampling temperature (log-probs are compared at it).

    Returns:
        Metrics: ``kept`` (responses after the filter), ``kept_groups``, ``success_rate`` (before filtering),
        ``prm_rank_acc`` / ``prm_rank_pairs`` (online, pre-update PRM on this batch), the ``prm_*`` fit
        metrics and the policy-loss metrics.
    """
    cfg = config or PrimeConfig()
    clean = [t for t in trajectories if t.error is None and t.steps]
    if any(t.group is None for t in clean):
        raise DataError("prime_update needs Trajectory.group on every trajectory (collect same-task groups)")
    metrics: dict[str, float] = {
        "episodes": float(len(trajectories)),
        "success_rate": sum(t.success for t in clean) / max(len(clean), 1),
    }
    keep = accuracy_filter(
        [float(t.success) for t in clean], [t.group for t in clean], low=cfg.acc_low, high=cfg.acc_high
    )
    batch = [t for t, k in zip(clean, keep, strict=True) if k]
    metrics["kept"] = float(len(batch))
    metrics["kept_groups"] = float(len({t.group for t in batch}))
    if not batch:
        return metrics
    outcomes = [float(t.success) for t in batch]
    groups = [t.group for t in batch]
    t0 = time.perf_counter()
    if prm is not None:
        rewards = prm.token_rewards(batch)  # pre-update PRM: "single forward"
        totals = [float(sum(r.sum() for r in turns)) for turns in rewards]
        acc, pairs = group_ranking_accuracy(totals, outcomes, groups)
        metrics.update(prm_rank_acc=acc, prm_rank_pairs=float(pairs))
        metrics.update(prm.fit(batch, labels=outcomes))
        coef = cfg.process_coef / process_scale(rewards, cfg.norm)
    else:
        rewards = [[torch.zeros(len(s.action.token_ids)) for s in t.steps] for t in batch]
        coef = 0.0
    metrics["prm_s"] = time.perf_counter() - t0
    adv = token_advantages(rewards, outcomes, groups, process_coef=coef, gamma=cfg.gamma)
    metrics.update(_policy_step(learner, policy_rows(batch, adv), cfg, temperature))
    return metrics


def _policy_step(learner: Learner, rows: Sequence[TokenRow], cfg: PrimeConfig, temperature: float) -> dict[str, float]:
    policy = learner.policy
    batch = collate(rows, pad_id=policy.pad_token_id).to(policy.device)
    grpo = GRPOConfig(clip_eps=cfg.clip_eps, estimator="rloo")
    size = math.ceil(len(batch) / cfg.policy_minibatches)
    sums: dict[str, float] = defaultdict(float)
    weight = 0.0
    policy.model.train()
    for mb in batch.minibatches(size):
        logits = policy.model(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits
        logp = gather_token_logprobs(logits, mb.input_ids, mb.loss_mask, temperature=temperature)
        assert mb.old_logprobs is not None  # policy_rows always sets them
        loss, m = policy_loss(logp, mb.old_logprobs, mb.advantages, mb.loss_mask, grpo)
        learner.minimize(loss)
        w = m.pop("num_tokens")
        for key, value in m.items():
            sums[f"policy_{key}"] += w * value
        weight += w
    policy.model.eval()
    return {k: v / max(weight, 1.0) for k, v in sums.items()}


__all__ = [
    "ImplicitPRM",
    "accuracy_filter",
    "episode_layout",
    "group_ranking_accuracy",
    "implicit_token_rewards",
    "policy_rows",
    "prime_update",
    "prm_bce_loss",
    "process_scale",
    "token_advantages",
]
