r"""SWEET-RL: a step critic that sees training-time information, and the turn-level DPO data it ranks.

The critic is a language model (an :class:`~turnkit.agents.hf.HFPolicy` with a LoRA adapter) whose prompt
holds the hidden training-time information ``c`` (``Task.privileged[reference_key]``, glued in front of the
conversation as ``"In light that the final answer is: {reference}."``). The policy never sees ``c``.

**Advantage of one turn** (mean token log-ratio over the agent's generated ids ``a^1..a^L``):

``A(o_t, a_t, c) = (1/L) Σ_l [log π_θ(a^l | o_t, a^{<l}, c) − log π_ref(a^l | o_t, a^{<l}, c)]``

with ``π_θ`` the critic (adapter on) and ``π_ref`` its LoRA-disabled base, i.e. the model the critic started
from. ``length_normalize=False`` gives the sum instead (the paper's failing ablation).

**Critic training** (Bradley–Terry over same-task trajectory pairs, chosen = higher outcome reward):

``L = −log σ(β Σ_t A(o_t^+, a_t^+, c) − β Σ_t A(o_t^-, a_t^-, c))``,  ``β = 0.1``.

Following the released code, pairs come only from tasks where some rollout succeeded
(``require_success=True``), at most ``max_pairs_per_task`` per task.

**Policy step** (:func:`sweet_pairs`): at each recorded turn state sample ``K`` candidate turns from the
policy (on the recorded conversation, without ``c``), rank them by the critic's advantage and pair random
members of the top half with random members of the bottom half; the pairs are
:class:`~turnkit.search.pairs.PreferencePair` rows (``source="sweet"``, the policy's exact ids) that train
with :func:`turnkit.train.dpo.train_dpo` (or export with :func:`turnkit.search.pairs.write_pairs` for TRL).

Token-in/token-out: the critic scores the exact ids the agent generated (``AgentTurn.token_ids``), so it
must share the policy's tokenizer; turns without ids (scripted, oracle agents) are tokenised as text + EOS.

Example:
    >>> import torch
    >>> critic = torch.tensor([[-1.0, -2.0, 0.0]])
    >>> ref = torch.tensor([[-2.0, -2.0, 0.0]])
    >>> mask = torch.tensor([[True, True, False]])
    >>> turn_advantage(critic, ref, mask)  # ((-1 + 2) + (-2 + 2)) / 2
    tensor([0.5000])
    >>> loss, metrics = bradley_terry_loss(torch.tensor([1.0]), torch.tensor([1.0]), beta=0.1)
    >>> round(loss.item(), 4), metrics["accuracy"]  # log 2 at a tie; a tie is not a correct ranking
    (0.6931, 0.0)
"""

from __future__ import annotations

import copy
import math
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.critics.base import CriticResult
from turnkit.critics.sweet import SweetConfig
from turnkit.errors import ConfigError, CriticError, DataError
from turnkit.learners.learner import Learner
from turnkit.rollout.demos import completion_ids, turn_messages
from turnkit.search.pairs import PreferencePair
from turnkit.types import AgentTurn, Message, Task, Trajectory

Segment = tuple[tuple[int, ...], tuple[int, ...]]
"""One scored span: ``(prompt_ids, completion_ids)``."""


# ---------------------------------------------------------------------------------------------- kernels


def turn_advantage(
    critic_logprobs: Tensor, ref_logprobs: Tensor, mask: Tensor, *, length_normalize: bool = True
) -> Tensor:
    """Per-row advantage: the (mean, or summed) token log-ratio ``log π_θ − log π_ref`` over ``mask``.

    Args:
        critic_logprobs: ``[B, L]`` log-probs of the turn's tokens under the critic.
        ref_logprobs: ``[B, L]`` the same under the reference.
        mask: ``[B, L]`` bool mask of real tokens; every row needs at least one.
        length_normalize: Divide by the number of tokens (SWEET-RL); ``False`` sums.

    Returns:
        ``[B]`` advantages (differentiable through ``critic_logprobs``).

    Example:
        >>> import torch
        >>> turn_advantage(torch.tensor([[0.0, -1.0]]), torch.tensor([[-1.0, -1.0]]),
        ...                torch.tensor([[True, True]]), length_normalize=False)
        tensor([1.])
    """
    if critic_logprobs.shape != ref_logprobs.shape or critic_logprobs.shape != mask.shape:
        raise ValueError(
            f"critic, reference and mask must have one shape, got {tuple(critic_logprobs.shape)}, "
            f"{tuple(ref_logprobs.shape)}, {tuple(mask.shape)}"
        )
    m = mask.bool()
    counts = m.sum(dim=-1)
    if bool((counts == 0).any()):
        raise ValueError("every turn needs at least one token in mask")
    total = torch.where(m, critic_logprobs - ref_logprobs, torch.zeros_like(critic_logprobs)).sum(dim=-1)
    return total / counts.to(total.dtype) if length_normalize else total


def bradley_terry_loss(
    chosen_scores: Tensor, rejected_scores: Tensor, *, beta: float = 0.1
) -> tuple[Tensor, dict[str, float]]:
    """Mean Bradley–Terry loss ``−log σ(β (s⁺ − s⁻))`` over pairs of trajectory scores.

    A trajectory's score is the sum of its turns' advantages, ``s = Σ_t A(o_t, a_t, c)``.

    Args:
        chosen_scores: ``[P]`` scores of the higher-reward trajectories.
        rejected_scores: ``[P]`` scores of the lower-reward trajectories.
        beta: ``β`` (the paper's code uses 0.1).

    Returns:
        ``(loss, metrics)`` with ``loss``, ``accuracy`` (share of pairs with ``s⁺ > s⁻``) and ``margin`` (mean
        ``β (s⁺ − s⁻)``).

    Example:
        >>> import math, torch
        >>> loss, m = bradley_terry_loss(torch.tensor([3.0]), torch.tensor([1.0]), beta=0.5)  # β Δ = 1
        >>> round(loss.item(), 6) == round(math.log1p(math.exp(-1.0)), 6), m["accuracy"]
        (True, 1.0)
    """
    if chosen_scores.shape != rejected_scores.shape or chosen_scores.dim() != 1:
        raise ValueError(
            f"need two [P] score tensors, got {tuple(chosen_scores.shape)} and {tuple(rejected_scores.shape)}"
        )
    if not (math.isfinite(beta) and beta > 0):
        raise ConfigError(f"beta must be a finite number > 0, got {beta!r}")
    logits = beta * (chosen_scores - rejected_scores)
    loss = -F.logsigmoid(logits).mean()
    with torch.no_grad():
        metrics = {
            "loss": float(loss),
            "accuracy": float((logits > 0).float().mean()),
            "margin": float(logits.mean()),
        }
    return loss, metrics


def outcome_pairs(
    rewards: Sequence[float],
    group_ids: Sequence[Any],
    *,
    max_pairs_per_group: int | None = 4,
    require_success: float | None = None,
    rng: np.random.Generator | None = None,
) -> list[tuple[int, int]]:
    """Same-group ``(higher, lower)`` index pairs by outcome reward; ties never pair.

    Args:
        rewards: Outcome reward per trajectory.
        group_ids: Task (group) of each trajectory; only members of one group are compared.
        max_pairs_per_group: Keep at most this many pairs per group, drawn without replacement (``None``: all).
        require_success: If set, only groups whose best reward reaches it give pairs (the released code
            keeps tasks whose best rollout scores 1.0).
        rng: Generator for the subsampling (required when a group has more pairs than the cap).

    Returns:
        ``(chosen, rejected)`` index pairs, grouped in first-appearance order of the groups.

    Example:
        >>> outcome_pairs([1.0, 0.0, 0.0, 0.5, 0.2], ["a", "a", "a", "b", "b"], max_pairs_per_group=None)
        [(0, 1), (0, 2), (3, 4)]
        >>> outcome_pairs([1.0, 0.0, 0.5, 0.2], ["a", "a", "b", "b"], require_success=1.0)
        [(0, 1)]
    """
    if len(rewards) != len(group_ids):
        raise ValueError(f"got {len(rewards)} rewards for {len(group_ids)} group ids")
    groups: dict[Any, list[int]] = defaultdict(list)
    for i, g in enumerate(group_ids):
        groups[g].append(i)
    out: list[tuple[int, int]] = []
    for members in groups.values():
        if require_success is not None and max(rewards[i] for i in members) < require_success:
            continue
        pairs = [(i, j) for i in members for j in members if rewards[i] > rewards[j]]
        if max_pairs_per_group is not None and len(pairs) > max_pairs_per_group:
            if rng is None:
                raise ConfigError("outcome_pairs needs rng to subsample pairs")
            keep = sorted(rng.choice(len(pairs), size=max_pairs_per_group, replace=False).tolist())
            pairs = [pairs[k] for k in keep]
        out.extend(pairs)
    return out


def top_bottom_pairs(scores: Sequence[float], num_pairs: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Random ``(upper-half, lower-half)`` candidate pairs by critic score (ties between the two never pair).

    The ``K`` candidates are sorted by score; the top ``⌊K/2⌋`` form the upper half and the bottom ``⌊K/2⌋``
    the lower half (the middle one of an odd ``K`` sits out). Up to ``num_pairs`` distinct cross pairs with a
    strictly higher upper score are drawn without replacement.

    Example:
        >>> import numpy as np
        >>> top_bottom_pairs([0.1, 0.9, 0.5, 0.3], num_pairs=4, rng=np.random.default_rng(0))
        [(1, 3), (1, 0), (2, 3), (2, 0)]
        >>> top_bottom_pairs([0.2, 0.2], num_pairs=1, rng=np.random.default_rng(0))
        []
    """
    if num_pairs < 1:
        raise ConfigError(f"num_pairs must be >= 1, got {num_pairs}")
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    half = len(scores) // 2
    upper, lower = order[:half], order[len(scores) - half :]
    cross = [(u, v) for u in upper for v in lower if scores[u] > scores[v]]
    if len(cross) > num_pairs:
        keep = rng.choice(len(cross), size=num_pairs, replace=False)
        cross = [cross[k] for k in sorted(keep.tolist())]
    return cross


def ranking_accuracy(chosen_scores: Sequence[float], rejected_scores: Sequence[float]) -> float:
    """Share of pairs scored in the right order, ties counting one half (``0.5`` is chance).

    Example:
        >>> ranking_accuracy([2.0, 1.0, 0.0], [1.0, 1.0, 3.0])
        0.5
    """
    if len(chosen_scores) != len(rejected_scores) or not chosen_scores:
        raise ValueError("ranking_accuracy needs equally many (>= 1) chosen and rejected scores")
    wins = sum(1.0 if c > r else 0.5 if c == r else 0.0 for c, r in zip(chosen_scores, rejected_scores, strict=True))
    return wins / len(chosen_scores)


def render_reference(value: Any) -> str:
    """Privileged data as one line of text for the critic's prompt.

    Strings pass through; a ``{"slot": s, "value": v}`` fact (CollabCode's ``Task.privileged["facts"]``) reads
    ``s = v``; other mappings ``k = v, ...``; lists and tuples join their rendered items with ``"; "``.

    Example:
        >>> render_reference([{"slot": "late_fee.grace", "value": 5}, {"slot": "late_fee.cap", "value": None}])
        'late_fee.grace = 5; late_fee.cap = None'
        >>> render_reference({"a": 1, "b": "x"}), render_reference("def f(): ..."), render_reference(7)
        ('a = 1, b = x', 'def f(): ...', '7')
    """
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        if set(value) == {"slot", "value"}:
            return f"{value['slot']} = {value['value']}"
        return ", ".join(f"{k} = {render_reference(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "; ".join(render_reference(v) for v in value)
    return str(value)


# ---------------------------------------------------------------------------------------------- critic


class SweetCritic:
    """The SWEET-RL critic: per-turn advantages from a LoRA critic LM that reads the privileged reference.

    Args:
        critic: The critic model; a LoRA adapter is attached if it has none. Its base (adapter disabled) is the
            reference ``π_ref``. Use :meth:`from_policy` to start from a copy of the agent's policy.
        config: Settings.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> from turnkit.types import AgentTurn, Step, Task, Trajectory
        >>> tok = build_tiny_tokenizer()
        >>> model = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2))
        >>> critic = SweetCritic(HFPolicy(model, tok))
        >>> task = Task("t", "2+2?", privileged={"answer": "4"})
        >>> traj = Trajectory("d", 0, (Step("2+2?", AgentTurn("ANSWER: 4"), 1.0, True),), task=task)
        >>> critic.score(traj).step_rewards  # a fresh adapter is the identity: advantage 0
        (0.0,)
    """

    name = "sweet"
    source = "turn_advantage"
    """Its rewards are each turn's advantage (:mod:`turnkit.learners.estimators`)."""
    estimator = "sweet"
    """The paper's estimator: the critic's turn advantages, centred on the task's other episodes."""

    def __init__(self, critic: HFPolicy, config: SweetConfig | None = None) -> None:
        self.config = config or SweetConfig()
        self.critic = critic
        self._updates = 0
        cfg = self.config
        self.learner = Learner(critic, cfg.optim, lora=cfg.lora, seed=cfg.seed)
        """The critic's adapter, AdamW (shared by every :meth:`fit`) and clipped step."""

    @classmethod
    def from_policy(cls, policy: HFPolicy, config: SweetConfig | None = None) -> SweetCritic:
        """A critic initialised from a copy of ``policy``'s model (the policy is left untouched).

        Raises:
            ConfigError: The policy has a LoRA adapter (merge it first, so the critic's reference is clear).
        """
        if policy.has_adapter:
            raise ConfigError("SweetCritic.from_policy needs a policy without a LoRA adapter; merge it first")
        model = copy.deepcopy(policy.model)
        return cls(HFPolicy(model, policy.tokenizer, max_batch_size=policy.max_batch_size), config)

    # ------------------------------------------------------------------ inputs

    def critic_messages(self, task: Task | None, messages: Sequence[Message]) -> list[Message]:
        """The conversation the critic reads: with the reference line first (or last, see ``placement``) if privileged.

        Raises:
            CriticError: Privileged mode without a task, or the task lacks ``reference_key``.

        Example:
            >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
            >>> tok = build_tiny_tokenizer()
            >>> critic = SweetCritic(HFPolicy(build_tiny_model(tok, TinyModelConfig(32, 1, 2)), tok))
            >>> critic.critic_messages(Task("t", "q", privileged={"answer": "7"}), [Message("user", "q")])
            [Message(role='user', content='In light that the final answer is: 7.\\nq')]
        """
        key = self.config.reference_key
        out = list(messages)
        if key is None:
            return out
        if task is None:
            raise CriticError("SweetCritic with reference_key set needs Trajectory.task; it is None")
        if key not in task.privileged:
            raise CriticError(
                f"sweet: task {task.task_id!r} has no privileged {key!r} (keys: {sorted(task.privileged)})"
            )
        line = self.config.template.format(reference=render_reference(task.privileged[key]))
        if not out:
            return [Message("user", line)]
        if self.config.placement == "suffix":
            return [*out[:-1], Message(out[-1].role, f"{out[-1].content}\n{line}")]
        return [Message(out[0].role, f"{line}\n{out[0].content}"), *out[1:]]

    def _completion(self, turn: AgentTurn) -> tuple[int, ...]:
        if turn.token_ids:
            return tuple(turn.token_ids)
        return tuple(completion_ids(self.critic.tokenizer, turn.text))

    def turn_segments(self, trajectory: Trajectory) -> list[Segment]:
        """``(critic prompt ids, agent turn ids)`` for every turn of a trajectory."""
        tok = self.critic.tokenizer
        return [
            (
                tuple(chat_prompt_ids(tok, self.critic_messages(trajectory.task, turn_messages(trajectory, k)))),
                self._completion(step.action),
            )
            for k, step in enumerate(trajectory.steps)
        ]

    # ------------------------------------------------------------------ scoring

    def _mean_logprobs(self, policy: HFPolicy, segments: Sequence[Segment], *, grad: bool) -> Tensor:
        """``[N]`` per-segment mean (or sum) log-probs, in chunks of ``score_batch_size``."""
        out = []
        size = self.config.score_batch_size
        for start in range(0, len(segments), size):
            chunk = segments[start : start + size]
            logp = policy.sequence_logprobs([s[0] for s in chunk], [s[1] for s in chunk], temperature=1.0, grad=grad)
            mask = torch.zeros_like(logp, dtype=torch.bool)
            for i, (_, c) in enumerate(chunk):
                mask[i, : len(c)] = True
            out.append(
                turn_advantage(logp, torch.zeros_like(logp), mask, length_normalize=self.config.length_normalize)
            )
        return torch.cat(out) if out else torch.zeros(0)

    def reference_scores(self, segments: Sequence[Segment]) -> Tensor:
        """``[N]`` per-segment mean log-probs under the reference (adapter disabled, no gradients)."""
        with self.critic.reference() as ref:
            return self._mean_logprobs(ref, segments, grad=False)

    def segment_advantages(self, segments: Sequence[Segment]) -> list[float]:
        """The advantage of each ``(critic prompt, turn ids)`` segment."""
        if not segments:
            return []
        for _, completion in segments:
            if not completion:
                raise CriticError("sweet: a turn with no tokens has no advantage")
        with torch.no_grad():
            adv = self._mean_logprobs(self.critic, segments, grad=False) - self.reference_scores(segments)
        return [float(a) for a in adv]

    def turn_advantages(self, trajectories: Sequence[Trajectory]) -> list[list[float]]:
        """Per trajectory, the advantage of each turn (one batched pass over all turns)."""
        segments = [self.turn_segments(t) for t in trajectories]
        flat = self.segment_advantages([s for segs in segments for s in segs])
        out, start = [], 0
        for segs in segments:
            out.append(flat[start : start + len(segs)])
            start += len(segs)
        return out

    def score(self, trajectory: Trajectory) -> CriticResult:
        """Per-turn advantages as step rewards."""
        return self.score_batch([trajectory])[0]

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
        """Per-turn advantages of many trajectories, batched."""
        return [CriticResult(tuple(a), {"advantage_sum": float(sum(a))}) for a in self.turn_advantages(trajectories)]

    def candidate_advantages(
        self, task: Task | None, messages: Sequence[Message], candidates: Sequence[AgentTurn]
    ) -> list[float]:
        """The advantage of each candidate turn at one state (the conversation ``messages``)."""
        prompt = tuple(chat_prompt_ids(self.critic.tokenizer, self.critic_messages(task, messages)))
        return self.segment_advantages([(prompt, self._completion(c)) for c in candidates])

    # ------------------------------------------------------------------ training

    def pairs(self, trajectories: Sequence[Trajectory], rng: np.random.Generator) -> list[tuple[int, int]]:
        """Bradley–Terry pairs (indices into ``trajectories``): same task, higher vs lower total reward."""
        keep = [i for i, t in enumerate(trajectories) if t.error is None and t.steps]
        groups = [_task_key(trajectories[i]) for i in keep]
        rewards = [trajectories[i].total_reward for i in keep]
        local = outcome_pairs(
            rewards,
            groups,
            max_pairs_per_group=self.config.max_pairs_per_task,
            require_success=self.config.require_success,
            rng=rng,
        )
        return [(keep[a], keep[b]) for a, b in local]

    def fit(
        self,
        trajectories: Sequence[Trajectory],
        *,
        steps: int | None = None,
        progress: bool = False,
        seed: int | None = None,
    ) -> dict[str, float]:
        """Train the critic's adapter with the Bradley–Terry loss on same-task pairs of ``trajectories``.

        Calls share one AdamW optimizer (:meth:`optimizer_state`), so fitting batch after batch, as the
        training loop does, continues one optimisation.

        Args:
            trajectories: Rollouts with several episodes per task (``Trajectory.task`` set).
            steps: Optimizer steps (default ``config.steps``).
            progress: Show a progress bar.
            seed: Seeds the pair subsampling and batch order (default ``config.seed``).

        Returns:
            ``pairs``, final ``loss`` and ``accuracy`` (mean over the last 10% of steps) and ``seconds``.

        Raises:
            DataError: No pair could be formed.
        """
        from tqdm.auto import tqdm

        cfg = self.config
        rng = np.random.default_rng(cfg.seed if seed is None else seed)
        pairs = self.pairs(trajectories, rng)
        if not pairs:
            raise DataError("sweet: no same-task pair with different rewards to train the critic on")
        used = sorted({i for p in pairs for i in p})
        segments = {i: self.turn_segments(trajectories[i]) for i in used}
        flat = [s for i in used for s in segments[i]]
        ref_flat = self.reference_scores(flat).tolist()
        ref, start = {}, 0
        for i in used:
            ref[i] = ref_flat[start : start + len(segments[i])]
            start += len(segments[i])
        total = steps if steps is not None else cfg.steps
        history: list[dict[str, float]] = []
        t0 = time.perf_counter()
        order: list[int] = []
        self.critic.model.train()
        for _ in tqdm(range(total), desc="sweet critic", disable=not progress, leave=False):
            if len(order) < cfg.batch_size:
                order.extend(rng.permutation(len(pairs)).tolist())
            batch, order = [pairs[k] for k in order[: cfg.batch_size]], order[cfg.batch_size :]
            loss, metrics = self._pair_loss(batch, segments, ref)
            self.learner.minimize(loss)
            history.append(metrics)
        self.critic.model.eval()
        tail = history[-max(1, total // 10) :]
        return {
            "pairs": float(len(pairs)),
            "loss": sum(h["loss"] for h in tail) / len(tail),
            "accuracy": sum(h["accuracy"] for h in tail) / len(tail),
            "seconds": time.perf_counter() - t0,
        }

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """Training-loop update: ``config.steps`` Bradley–Terry steps on the batch's same-task pairs.

        Each update draws a fresh pair order (seeded by ``config.seed`` and the update count). A batch without a
        same-task pair of different rewards leaves the critic as it is (``pairs`` 0).
        """
        self._updates += 1
        seed = self.config.seed * 1_000_003 + self._updates
        if not self.pairs(trajectories, np.random.default_rng(seed)):
            return {"pairs": 0.0}
        fit = self.fit(trajectories, seed=seed)
        return {k: v for k, v in fit.items() if k != "seconds"}

    def save(self, folder: Path) -> None:
        """Write the critic's adapter, optimizer state and update count into ``folder``."""
        self.critic.save_adapter(folder / "adapter")
        torch.save({"optimizer": self.optimizer_state(), "updates": self._updates}, folder / "optimizer.pt")

    def load(self, folder: Path) -> None:
        """Restore what :meth:`save` wrote."""
        self.critic.load_adapter(folder / "adapter")
        state = torch.load(folder / "optimizer.pt", map_location=self.critic.device)
        self.load_optimizer_state(state["optimizer"])
        self._updates = int(state["updates"])

    def optimizer_state(self) -> dict[str, Any]:
        """The state of the optimizer :meth:`fit` uses (for checkpoints)."""
        return self.learner.optimizer.state_dict()

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`optimizer_state` (the adapter must be this critic's, loaded in place)."""
        self.learner.optimizer.load_state_dict(state)

    def _pair_loss(
        self, batch: Sequence[tuple[int, int]], segments: dict[int, list[Segment]], ref: dict[int, list[float]]
    ) -> tuple[Tensor, dict[str, float]]:
        members = [i for pair in batch for i in pair]
        flat = [s for i in members for s in segments[i]]
        ref_flat = torch.tensor([r for i in members for r in ref[i]])
        adv = self._mean_logprobs(self.critic, flat, grad=True) - ref_flat.to(self.critic.device)
        sizes = torch.tensor([len(segments[i]) for i in members], device=adv.device)
        owner = torch.repeat_interleave(torch.arange(len(members), device=adv.device), sizes)
        scores = torch.zeros(len(members), device=adv.device).index_add(0, owner, adv)
        if self.config.trajectory_score == "mean":
            scores = scores / sizes.to(scores.dtype)
        return bradley_terry_loss(scores[0::2], scores[1::2], beta=self.config.beta)

    def trajectory_scores(self, trajectories: Sequence[Trajectory]) -> list[float]:
        """Each trajectory's Bradley–Terry score: the sum (or mean, see ``trajectory_score``) of its turn advantages."""
        mean = self.config.trajectory_score == "mean"
        return [sum(a) / len(a) if mean and a else float(sum(a)) for a in self.turn_advantages(trajectories)]

    def pair_accuracy(self, trajectories: Sequence[Trajectory], pairs: Sequence[tuple[int, int]]) -> float:
        """:func:`ranking_accuracy` of :meth:`trajectory_scores` over ``(chosen, rejected)`` index pairs."""
        needed = sorted({i for p in pairs for i in p})
        scores = dict(zip(needed, self.trajectory_scores([trajectories[i] for i in needed]), strict=True))
        return ranking_accuracy([scores[a] for a, _ in pairs], [scores[b] for _, b in pairs])


def _task_key(trajectory: Trajectory) -> Any:
    if trajectory.task is not None:
        return trajectory.task.task_id
    if trajectory.group is not None:
        return ("group", trajectory.group)
    raise DataError(f"trajectory (seed {trajectory.seed}) has neither a task nor a group id to pair it by")


# ---------------------------------------------------------------------------------------------- policy data


def sweet_pairs(
    critic: SweetCritic,
    policy: HFPolicy,
    trajectories: Sequence[Trajectory],
    *,
    num_candidates: int = 16,
    pairs_per_state: int = 4,
    seed: int = 0,
) -> list[PreferencePair]:
    """SWEET-RL's policy data: critic-ranked candidate turns at every recorded turn state.

    For every turn ``k`` of every clean trajectory, the policy samples ``num_candidates`` turns on the
    recorded conversation (without privileged data), the critic scores each with the task's reference, and
    :func:`top_bottom_pairs` picks up to ``pairs_per_state`` (upper half, lower half) pairs; pairs whose turns
    have identical ids are dropped.

    Args:
        critic: A trained :class:`SweetCritic`.
        policy: The policy to improve (sampling settings as configured; ``T = 1`` in the paper).
        trajectories: The offline rollouts whose turn states are used.
        num_candidates: ``K`` (16 in the paper).
        pairs_per_state: Pairs kept per state (4 in the released code).
        seed: Pair subsampling seed (candidate sampling follows the policy's own seeds).

    Returns:
        :class:`~turnkit.search.pairs.PreferencePair` rows with the policy's exact ids, ``source="sweet"``,
        ``q_chosen``/``q_rejected`` the critic advantages.
    """
    if num_candidates < 2:
        raise ConfigError(f"num_candidates must be >= 2, got {num_candidates}")
    states = [(t, k) for t in trajectories if t.error is None for k in range(len(t.steps))]
    contexts = [
        Context(messages=tuple(turn_messages(t, k)), env_id=t.env_id, turn=k, episode_seed=t.seed)
        for t, k in states
        for _ in range(num_candidates)
    ]
    candidates = policy.act(contexts)
    rng = np.random.default_rng(seed)
    out: list[PreferencePair] = []
    for s, (traj, k) in enumerate(states):
        cands = [c for c in candidates[s * num_candidates : (s + 1) * num_candidates] if c.token_ids]
        if len(cands) < 2:
            continue
        messages = turn_messages(traj, k)
        scores = critic.candidate_advantages(traj.task, messages, cands)
        for a, b in top_bottom_pairs(scores, pairs_per_state, rng):
            if cands[a].token_ids == cands[b].token_ids:
                continue
            out.append(
                PreferencePair(
                    prompt=tuple(messages),
                    chosen=cands[a].text,
                    rejected=cands[b].text,
                    prompt_token_ids=tuple(cands[a].prompt_token_ids),
                    chosen_token_ids=tuple(cands[a].token_ids),
                    rejected_token_ids=tuple(cands[b].token_ids),
                    q_chosen=scores[a],
                    q_rejected=scores[b],
                    step=k,
                    env_id=traj.env_id,
                    seed=traj.seed,
                    task_id=traj.task.task_id if traj.task is not None else None,
                    source="sweet",
                )
            )
    return out


__all__ = [
    "Segment",
    "SweetCritic",
    "bradley_terry_loss",
    "outcome_pairs",
    "ranking_accuracy",
    "render_reference",
    "sweet_pairs",
    "top_bottom_pairs",
    "turn_advantage",
]
