"""Token-in/token-out training batches built from finished trajectories.

Learners train on the exact ids the policy saw and produced, ``AgentTurn.prompt_token_ids + token_ids``, never
on re-tokenised text (BPE round-trips and chat templates change ids: the most reported multi-turn bug in peer
RL-for-agents libraries). Two layouts:

- :func:`build_turn_batch`: one row per turn, ``prompt_token_ids + token_ids``. Always exact, since each row is
  what the policy conditioned on at that turn.
- :func:`build_episode_batch`: one row per episode, valid only when every turn's prompt *extends* the previous
  turn's prompt + completion token for token (:func:`find_prefix_mismatch`). Chat templates that rewrite past
  turns (e.g. strip ``<think>`` blocks) break this; then the builder raises :class:`~turnkit.errors.DataError`
  or, with ``on_mismatch="turns"``, falls back to per-turn rows for that episode (counted in
  ``num_prefix_fallbacks``). Env/user/template tokens between turns are context, never loss.

Errored trajectories (``Trajectory.error is not None``) are excluded and counted in ``num_masked_errors``
(their indices in ``errored``): they are masked, never scored as reward 0.

**Shift convention.** Every per-token tensor (``loss_mask``, ``old_logprobs``, ``advantages``, and the output of
:func:`gather_token_logprobs`) is indexed by the position of the token being scored: entry ``[b, t]`` is
about token ``input_ids[b, t]``. A causal LM's logits at position ``t`` predict token ``t + 1``, so the
log-prob of token ``t`` comes from ``logits[b, t − 1]``; position 0 is never a loss position. Rows are
right-padded with ``pad_id`` (``attention_mask`` 0 there).

**In a training loop** (per-turn rows; episode rows work the same way through the model's logits)::

    adv = trajectory_advantages(trajs, estimator=cfg.estimator, per_turn=cfg.per_turn, gamma=cfg.gamma)
    batch = build_turn_batch(trajs, pad_id=tokenizer.pad_token_id, advantages=adv)
    for mb in batch.minibatches(8):
        logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits
        logp = gather_token_logprobs(logits, mb.input_ids, mb.loss_mask)
        loss, metrics = policy_loss(logp, mb.old_logprobs, mb.advantages, mb.loss_mask, cfg)

Scorers that work in completion coordinates (``HFPolicy.sequence_logprobs(prompts, completions)``, ``[B, C]``)
pair with :meth:`TurnBatch.prompts_and_completions` and :func:`pack_loss_tokens`.

Example:
    >>> from turnkit.types import AgentTurn, Step, Trajectory
    >>> turn = AgentTurn("hi", token_ids=(7, 8), logprobs=(-0.5, -0.25), prompt_token_ids=(1, 2, 3))
    >>> traj = Trajectory("demo", seed=0, steps=(Step("q", turn, reward=1.0, terminated=True),), group=0)
    >>> batch = build_turn_batch([traj], pad_id=0, advantages=[2.0])
    >>> batch.input_ids.tolist(), batch.loss_mask.int().tolist()
    ([[1, 2, 3, 7, 8]], [[0, 0, 0, 1, 1]])
    >>> batch.old_logprobs.tolist(), batch.advantages.tolist()
    ([[0.0, 0.0, 0.0, -0.5, -0.25]], [[0.0, 0.0, 0.0, 2.0, 2.0]])
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

import torch
from torch import Tensor

from turnkit.errors import DataError
from turnkit.learners.logprobs import gather_token_logprobs  # noqa: F401  (re-exported: its old home)
from turnkit.types import AgentTurn, Trajectory

AdvantageSpec = float | Sequence[float] | None
"""Advantage of one trajectory: one value for all turns, one value per turn, or ``None`` (errored only)."""


@dataclass(frozen=True)
class TokenRow:
    """One unpadded training sequence with per-token targets (token coordinates, see the module docstring).

    Attributes:
        input_ids: The token ids.
        loss_mask: ``True`` at the tokens to learn (generated tokens); ``False`` at position 0.
        advantages: Per-token advantage (``0`` outside the loss mask).
        old_logprobs: Per-token sampling log-probs (``0`` outside the loss mask), or ``None`` if unknown.
        reward: The row's reward (turn reward or episode return).
        traj_index: Index of the source trajectory in the builder's input, ``-1`` if none.
        turn_index: Turn index for per-turn rows, ``-1`` for whole-episode rows.

    Example:
        >>> row = TokenRow.from_prompt_completion((1, 2), (5, 6, 7), advantage=0.5)
        >>> row.loss_mask, row.advantages
        ((False, False, True, True, True), (0.0, 0.0, 0.5, 0.5, 0.5))
    """

    input_ids: tuple[int, ...]
    loss_mask: tuple[bool, ...]
    advantages: tuple[float, ...]
    old_logprobs: tuple[float, ...] | None = None
    reward: float = 0.0
    traj_index: int = -1
    turn_index: int = -1

    def __post_init__(self) -> None:
        n = len(self.input_ids)
        lengths = [len(self.loss_mask), len(self.advantages)]
        if self.old_logprobs is not None:
            lengths.append(len(self.old_logprobs))
        if any(length != n for length in lengths):
            raise ValueError(f"TokenRow fields must all have {n} entries, got lengths {lengths}")
        if n and self.loss_mask[0]:
            raise ValueError("TokenRow.loss_mask[0] must be False: no logit predicts the first token")

    @classmethod
    def from_prompt_completion(
        cls,
        prompt_ids: Sequence[int],
        completion_ids: Sequence[int],
        *,
        logprobs: Sequence[float] | None = None,
        advantage: float = 0.0,
        reward: float = 0.0,
        traj_index: int = -1,
        turn_index: int = -1,
    ) -> TokenRow:
        """A row ``prompt + completion`` whose loss covers exactly the completion.

        Args:
            prompt_ids: Context ids (at least one).
            completion_ids: Ids to learn.
            logprobs: Sampling log-probs of ``completion_ids``, if known.
            advantage: Advantage broadcast over the completion.
            reward: The row's reward.
            traj_index: Source trajectory index.
            turn_index: Source turn index.

        Returns:
            The row.

        Example:
            >>> TokenRow.from_prompt_completion([4], [9], logprobs=[-1.0]).old_logprobs
            (0.0, -1.0)
        """
        if not prompt_ids:
            raise ValueError("prompt_ids must hold at least one id (the first token cannot be scored)")
        if logprobs is not None and len(logprobs) != len(completion_ids):
            raise ValueError(f"{len(logprobs)} logprobs for {len(completion_ids)} completion ids")
        p, c = len(prompt_ids), len(completion_ids)
        return cls(
            input_ids=tuple(int(x) for x in (*prompt_ids, *completion_ids)),
            loss_mask=(False,) * p + (True,) * c,
            advantages=(0.0,) * p + (float(advantage),) * c,
            old_logprobs=None if logprobs is None else (0.0,) * p + tuple(float(x) for x in logprobs),
            reward=float(reward),
            traj_index=traj_index,
            turn_index=turn_index,
        )


@dataclass(frozen=True)
class TurnBatch:
    """Right-padded token tensors for a learner step (token coordinates, see the module docstring).

    Attributes:
        input_ids: ``[B, T]`` long, ``pad_id`` after each row's end.
        attention_mask: ``[B, T]`` long, 1 on real tokens.
        loss_mask: ``[B, T]`` bool, ``True`` exactly on policy-generated tokens.
        advantages: ``[B, T]`` float, the advantage of each loss token (``0`` elsewhere).
        old_logprobs: ``[B, T]`` float sampling log-probs on loss tokens (``0`` elsewhere), or ``None`` when the
            agent recorded none (compute them with the policy before the update).
        rewards: ``[B]`` float, the turn reward (turn rows) or the episode return (episode rows).
        traj_index: ``[B]`` long, index of each row's trajectory in the builder's input.
        turn_index: ``[B]`` long, turn of each row; ``-1`` for whole-episode rows.
        pad_id: The padding id used.
        num_masked_errors: Errored trajectories excluded from the batch.
        errored: Their indices in the builder's input.
        num_prefix_fallbacks: Episodes that fell back to per-turn rows (prefix property broken).

    Example:
        >>> batch = collate([TokenRow.from_prompt_completion([1], [2, 3]), TokenRow.from_prompt_completion([1], [2])],
        ...                 pad_id=0)
        >>> batch.input_ids.tolist(), batch.attention_mask.tolist(), batch.num_loss_tokens
        ([[1, 2, 3], [1, 2, 0]], [[1, 1, 1], [1, 1, 0]], 3)
    """

    input_ids: Tensor
    attention_mask: Tensor
    loss_mask: Tensor
    advantages: Tensor
    old_logprobs: Tensor | None
    rewards: Tensor
    traj_index: Tensor
    turn_index: Tensor
    pad_id: int
    num_masked_errors: int = 0
    errored: tuple[int, ...] = ()
    num_prefix_fallbacks: int = 0

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_loss_tokens(self) -> int:
        """Number of tokens the loss covers."""
        return int(self.loss_mask.sum())

    def to(self, device: torch.device | str) -> TurnBatch:
        """The same batch with every tensor moved to ``device``.

        Example:
            >>> collate([TokenRow.from_prompt_completion([1], [2])], pad_id=0).to("cpu").input_ids.device.type
            'cpu'
        """
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        moved: dict[str, Any] = {k: v.to(device) for k, v in values.items() if isinstance(v, Tensor)}
        return replace(self, **moved)

    def prompts_and_completions(self) -> tuple[list[list[int]], list[list[int]]]:
        """Split per-turn rows back into ``(prompt_ids, completion_ids)`` lists.

        For scorers in completion coordinates such as ``HFPolicy.sequence_logprobs(prompts, completions)``;
        pair its ``[B, C]`` output with :func:`pack_loss_tokens` of this batch's per-token tensors.

        Returns:
            One prompt (the ids before the first loss token) and one completion (the loss tokens) per row.

        Raises:
            ValueError: If a row's loss tokens are not one span ending the row (episode rows interleave
                env tokens: score those with the model's logits and :func:`gather_token_logprobs`).

        Example:
            >>> batch = collate([TokenRow.from_prompt_completion([1, 2], [3, 4])], pad_id=0)
            >>> batch.prompts_and_completions()
            ([[1, 2]], [[3, 4]])
        """
        prompts, completions = [], []
        for b in range(len(self)):
            length = int(self.attention_mask[b].sum())
            positions = self.loss_mask[b].nonzero().flatten().tolist()
            ids = self.input_ids[b].tolist()
            start = positions[0] if positions else length
            if positions != list(range(start, length)):
                raise ValueError(
                    f"row {b} (trajectory {int(self.traj_index[b])}, turn {int(self.turn_index[b])}) is not "
                    "prompt + one completion span; use the model's logits and gather_token_logprobs for it"
                )
            prompts.append(ids[:start])
            completions.append(ids[start:length])
        return prompts, completions

    def minibatches(self, size: int) -> Iterator[TurnBatch]:
        """Consecutive slices of at most ``size`` rows, each trimmed to its longest row.

        Args:
            size: Rows per slice (positive).

        Yields:
            Sub-batches (bookkeeping counters stay on the parent batch and are 0 here).

        Example:
            >>> rows = [TokenRow.from_prompt_completion([1], [2] * n) for n in (3, 1, 1)]
            >>> [tuple(mb.input_ids.shape) for mb in collate(rows, pad_id=0).minibatches(2)]
            [(2, 4), (1, 2)]
        """
        if size < 1:
            raise ValueError(f"minibatch size must be positive, got {size}")
        for start in range(0, len(self), size):
            yield self._rows(slice(start, start + size))

    def token_slices(self, max_tokens: int, max_rows: int = 0) -> Iterator[TurnBatch]:
        """Consecutive slices of at most ``max_tokens`` padded tokens (rows × the slice's longest row) each.

        A slice holds at least one row, however long; activation memory grows with a slice's padded tokens,
        so this bounds it for any row length.

        Args:
            max_tokens: Padded tokens per slice (``0``: no token cap).
            max_rows: Rows per slice (``0``: no row cap).

        Yields:
            Sub-batches trimmed to their longest row (bookkeeping counters are 0 here).

        Example:
            >>> rows = [TokenRow.from_prompt_completion([1], [2] * n) for n in (3, 1, 1, 5)]
            >>> [tuple(mb.input_ids.shape) for mb in collate(rows, pad_id=0).token_slices(8)]
            [(2, 4), (1, 2), (1, 6)]
            >>> [len(mb) for mb in collate(rows, pad_id=0).token_slices(0, max_rows=3)]
            [3, 1]
        """
        if max_tokens < 0 or max_rows < 0:
            raise ValueError(f"max_tokens and max_rows must be >= 0, got {max_tokens} and {max_rows}")
        lengths = self.attention_mask.sum(dim=1).tolist()
        start = 0
        while start < len(self):
            end, width = start + 1, lengths[start]
            while end < len(self) and (not max_rows or end - start < max_rows):
                wider = max(width, lengths[end])
                if max_tokens and wider * (end + 1 - start) > max_tokens:
                    break
                end, width = end + 1, wider
            yield self._rows(slice(start, end))
            start = end

    def _rows(self, rows: slice) -> TurnBatch:
        """The rows ``rows``, trimmed to their longest row."""
        width = int(self.attention_mask[rows].sum(dim=1).max())
        cols = slice(0, width)
        return TurnBatch(
            input_ids=self.input_ids[rows, cols],
            attention_mask=self.attention_mask[rows, cols],
            loss_mask=self.loss_mask[rows, cols],
            advantages=self.advantages[rows, cols],
            old_logprobs=None if self.old_logprobs is None else self.old_logprobs[rows, cols],
            rewards=self.rewards[rows],
            traj_index=self.traj_index[rows],
            turn_index=self.turn_index[rows],
            pad_id=self.pad_id,
        )


def collate(
    rows: Sequence[TokenRow],
    *,
    pad_id: int,
    num_masked_errors: int = 0,
    errored: Sequence[int] = (),
    num_prefix_fallbacks: int = 0,
) -> TurnBatch:
    """Right-pad rows into a :class:`TurnBatch`.

    Args:
        rows: The rows (may be empty: a ``[0, 0]`` batch).
        pad_id: Id written after each row's end.
        num_masked_errors: Bookkeeping copied onto the batch.
        errored: Bookkeeping copied onto the batch.
        num_prefix_fallbacks: Bookkeeping copied onto the batch.

    Returns:
        The batch; ``old_logprobs`` is ``None`` unless every row has them.

    Raises:
        DataError: If some rows have old log-probs and others do not.

    Example:
        >>> batch = collate([TokenRow.from_prompt_completion([5, 6], [7])], pad_id=0)
        >>> batch.loss_mask.tolist(), batch.old_logprobs is None
        ([[False, False, True]], True)
    """
    with_logprobs = sum(r.old_logprobs is not None for r in rows)
    if 0 < with_logprobs < len(rows):
        missing = next(r for r in rows if r.old_logprobs is None)
        raise DataError(
            f"{len(rows) - with_logprobs} of {len(rows)} rows have no sampling logprobs (first: trajectory "
            f"{missing.traj_index}, turn {missing.turn_index}); record logprobs for every turn or for none"
        )
    width = max((len(r.input_ids) for r in rows), default=0)
    shape = (len(rows), width)
    input_ids = torch.full(shape, pad_id, dtype=torch.long)
    attention_mask = torch.zeros(shape, dtype=torch.long)
    loss_mask = torch.zeros(shape, dtype=torch.bool)
    advantages = torch.zeros(shape, dtype=torch.float32)
    old_logprobs = torch.zeros(shape, dtype=torch.float32) if rows and with_logprobs == len(rows) else None
    for b, row in enumerate(rows):
        n = len(row.input_ids)
        input_ids[b, :n] = torch.tensor(row.input_ids, dtype=torch.long)
        attention_mask[b, :n] = 1
        loss_mask[b, :n] = torch.tensor(row.loss_mask, dtype=torch.bool)
        advantages[b, :n] = torch.tensor(row.advantages, dtype=torch.float32)
        if old_logprobs is not None and row.old_logprobs is not None:
            old_logprobs[b, :n] = torch.tensor(row.old_logprobs, dtype=torch.float32)
    return TurnBatch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        loss_mask=loss_mask,
        advantages=advantages,
        old_logprobs=old_logprobs,
        rewards=torch.tensor([r.reward for r in rows], dtype=torch.float32),
        traj_index=torch.tensor([r.traj_index for r in rows], dtype=torch.long),
        turn_index=torch.tensor([r.turn_index for r in rows], dtype=torch.long),
        pad_id=pad_id,
        num_masked_errors=num_masked_errors,
        errored=tuple(errored),
        num_prefix_fallbacks=num_prefix_fallbacks,
    )


def _checked_turn(turn: AgentTurn, i: int, k: int) -> AgentTurn:
    if not turn.token_ids or not turn.prompt_token_ids:
        raise DataError(
            f"trajectory {i} turn {k} has {len(turn.prompt_token_ids)} prompt ids and {len(turn.token_ids)} "
            "generated ids; token-in/token-out training needs an agent that records both (never re-tokenise text)"
        )
    return turn


def _per_turn_advantages(spec: AdvantageSpec, num_turns: int, i: int) -> list[float]:
    if spec is None:
        raise DataError(f"trajectory {i} has no advantage (None is only for errored trajectories)")
    if isinstance(spec, (int, float)):
        return [float(spec)] * num_turns
    values = [float(x) for x in spec]
    if len(values) != num_turns:
        raise DataError(f"trajectory {i}: {len(values)} advantages for {num_turns} turns")
    return values


def _turn_rows(traj: Trajectory, i: int, advantages: list[float]) -> list[TokenRow]:
    rows = []
    for k, (step, adv) in enumerate(zip(traj.steps, advantages, strict=True)):
        turn = _checked_turn(step.action, i, k)
        rows.append(
            TokenRow.from_prompt_completion(
                turn.prompt_token_ids,
                turn.token_ids,
                logprobs=turn.logprobs or None,
                advantage=adv,
                reward=step.reward,
                traj_index=i,
                turn_index=k,
            )
        )
    return rows


def _split_errors(
    trajectories: Sequence[Trajectory], advantages: Sequence[AdvantageSpec] | None
) -> tuple[list[tuple[int, Trajectory, list[float]]], list[int]]:
    if advantages is not None and len(advantages) != len(trajectories):
        raise DataError(f"{len(advantages)} advantages for {len(trajectories)} trajectories")
    clean, errored = [], []
    for i, traj in enumerate(trajectories):
        if traj.error is not None:
            errored.append(i)
            continue
        spec = 0.0 if advantages is None else advantages[i]
        clean.append((i, traj, _per_turn_advantages(spec, len(traj.steps), i)))
    return clean, errored


def build_turn_batch(
    trajectories: Sequence[Trajectory], *, pad_id: int, advantages: Sequence[AdvantageSpec] | None = None
) -> TurnBatch:
    """One row per turn: ``prompt_token_ids + token_ids``, loss on exactly the generated ids.

    Args:
        trajectories: Finished episodes whose turns carry ``prompt_token_ids`` and ``token_ids``.
        pad_id: Padding id (e.g. the tokenizer's ``pad_token_id``).
        advantages: Per trajectory, one advantage for all its turns or one per turn (``None`` only for errored
            trajectories), e.g. :func:`turnkit.learners.advantages.trajectory_advantages`. Default: zeros.

    Returns:
        The batch, rows ordered by trajectory then turn; errored trajectories excluded and counted.

    Raises:
        DataError: A turn without token ids, advantages that do not match, or logprobs on only some turns.

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory, TrajectoryError, ErrorCause
        >>> ok = Trajectory("demo", 0, (Step("q", AgentTurn("a", (5,), prompt_token_ids=(1,)), 1.0),))
        >>> bad = Trajectory("demo", 0, error=TrajectoryError(ErrorCause.ENV, "boom"))
        >>> batch = build_turn_batch([bad, ok], pad_id=0)
        >>> batch.traj_index.tolist(), batch.num_masked_errors, batch.errored
        ([1], 1, (0,))
    """
    clean, errored = _split_errors(trajectories, advantages)
    rows = [row for i, traj, adv in clean for row in _turn_rows(traj, i, adv)]
    return collate(rows, pad_id=pad_id, num_masked_errors=len(errored), errored=errored)


@dataclass(frozen=True)
class PrefixMismatch:
    """Where a turn's prompt stops extending the previous turn's prompt + completion.

    Attributes:
        turn: The turn whose prompt breaks the property (``>= 1``).
        position: The first differing position in that prompt.
        expected: The id the previous turn's prompt + completion has there.
        found: The id the prompt has there, or ``None`` if the prompt is shorter.

    Example:
        >>> str(PrefixMismatch(turn=2, position=5, expected=11, found=None))
        'turn 2 prompt is not an extension of turn 1 prompt+completion: position 5 expected id 11, found end of prompt'
    """

    turn: int
    position: int
    expected: int
    found: int | None

    def __str__(self) -> str:
        found = "end of prompt" if self.found is None else f"id {self.found}"
        return (
            f"turn {self.turn} prompt is not an extension of turn {self.turn - 1} prompt+completion: "
            f"position {self.position} expected id {self.expected}, found {found}"
        )


def find_prefix_mismatch(trajectory: Trajectory) -> PrefixMismatch | None:
    """Check that each turn's prompt ids start with the previous turn's prompt + generated ids.

    Args:
        trajectory: An episode whose turns carry token ids.

    Returns:
        ``None`` if the property holds for every turn, else the first mismatch.

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> t0 = AgentTurn("a", token_ids=(5,), prompt_token_ids=(1, 2))
        >>> good = AgentTurn("b", token_ids=(6,), prompt_token_ids=(1, 2, 5, 3))
        >>> stripped = AgentTurn("b", token_ids=(6,), prompt_token_ids=(1, 2, 3))  # template dropped id 5
        >>> find_prefix_mismatch(Trajectory("d", 0, (Step("", t0, 0.0), Step("", good, 1.0)))) is None
        True
        >>> find_prefix_mismatch(Trajectory("d", 0, (Step("", t0, 0.0), Step("", stripped, 1.0)))).position
        2
    """
    for k in range(1, len(trajectory.steps)):
        prev = trajectory.steps[k - 1].action
        expected = (*prev.prompt_token_ids, *prev.token_ids)
        prompt = trajectory.steps[k].action.prompt_token_ids
        for pos, want in enumerate(expected):
            got = prompt[pos] if pos < len(prompt) else None
            if got != want:
                return PrefixMismatch(turn=k, position=pos, expected=want, found=got)
    return None


def _episode_row(traj: Trajectory, i: int, advantages: list[float]) -> TokenRow:
    turns = [_checked_turn(step.action, i, k) for k, step in enumerate(traj.steps)]
    last = turns[-1]
    ids = (*last.prompt_token_ids, *last.token_ids)
    loss_mask = [False] * len(ids)
    adv = [0.0] * len(ids)
    has_logprobs = [bool(t.logprobs) for t in turns]
    if any(has_logprobs) and not all(has_logprobs):
        raise DataError(f"trajectory {i}: some turns have sampling logprobs and others do not")
    old = [0.0] * len(ids) if all(has_logprobs) else None
    for turn, a in zip(turns, advantages, strict=True):
        start = len(turn.prompt_token_ids)
        for j in range(len(turn.token_ids)):
            loss_mask[start + j] = True
            adv[start + j] = a
            if old is not None:
                old[start + j] = turn.logprobs[j]
    return TokenRow(
        input_ids=ids,
        loss_mask=tuple(loss_mask),
        advantages=tuple(adv),
        old_logprobs=None if old is None else tuple(old),
        reward=traj.total_reward,
        traj_index=i,
        turn_index=-1,
    )


def build_episode_batch(
    trajectories: Sequence[Trajectory],
    *,
    pad_id: int,
    advantages: Sequence[AdvantageSpec] | None = None,
    on_mismatch: Literal["raise", "turns"] = "raise",
) -> TurnBatch:
    """One row per episode (the last turn's prompt + completion), loss on every turn's generated span.

    Valid only when :func:`find_prefix_mismatch` finds nothing: then turn ``k``'s generated ids sit at
    positions ``[len(prompt_k), len(prompt_k) + len(token_ids_k))`` of the last turn's sequence, and the ids
    between spans (env observations, chat-template tokens) are masked out.

    Args:
        trajectories: Finished episodes whose turns carry ``prompt_token_ids`` and ``token_ids``.
        pad_id: Padding id.
        advantages: As in :func:`build_turn_batch`; per-turn values land on each turn's span.
        on_mismatch: ``"raise"`` a :class:`~turnkit.errors.DataError` naming the trajectory, turn and position,
            or ``"turns"``: give that episode per-turn rows instead (counted in ``num_prefix_fallbacks``).

    Returns:
        The batch; episode rows have ``turn_index == -1`` and ``rewards`` = the episode return.

    Raises:
        DataError: On a prefix mismatch with ``on_mismatch="raise"``, or malformed turns (see
            :func:`build_turn_batch`).

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> t0 = AgentTurn("a", token_ids=(5,), prompt_token_ids=(1, 2))
        >>> t1 = AgentTurn("b", token_ids=(6, 7), prompt_token_ids=(1, 2, 5, 3))  # 3 = env observation
        >>> traj = Trajectory("d", 0, (Step("", t0, 0.0), Step("", t1, 1.0)))
        >>> batch = build_episode_batch([traj], pad_id=0, advantages=[[0.5, 1.0]])
        >>> batch.input_ids.tolist(), batch.loss_mask.int().tolist(), batch.advantages.tolist()
        ([[1, 2, 5, 3, 6, 7]], [[0, 0, 1, 0, 1, 1]], [[0.0, 0.0, 0.5, 0.0, 1.0, 1.0]])
    """
    if on_mismatch not in ("raise", "turns"):
        raise ValueError(f"on_mismatch must be 'raise' or 'turns', got {on_mismatch!r}")
    clean, errored = _split_errors(trajectories, advantages)
    rows: list[TokenRow] = []
    fallbacks = 0
    for i, traj, adv in clean:
        if not traj.steps:
            continue
        mismatch = find_prefix_mismatch(traj)
        if mismatch is None:
            rows.append(_episode_row(traj, i, adv))
        elif on_mismatch == "turns":
            fallbacks += 1
            rows.extend(_turn_rows(traj, i, adv))
        else:
            raise DataError(
                f"trajectory {i}: {mismatch}; the chat template rewrites earlier turns, so train per-turn rows "
                "(build_turn_batch) or pass on_mismatch='turns'"
            )
    return collate(rows, pad_id=pad_id, num_masked_errors=len(errored), errored=errored, num_prefix_fallbacks=fallbacks)


def pack_loss_tokens(values: Tensor, loss_mask: Tensor) -> tuple[Tensor, Tensor]:
    """Move each row's loss-position values to the front: token coordinates ``[B, T]`` to ``[B, C]``.

    ``C`` is the most loss tokens in any row. For per-turn rows, packed column ``j`` is completion token
    ``j``, the layout of ``HFPolicy.sequence_logprobs``. Gradients flow through the packed values.

    Args:
        values: ``[B, T]`` per-token values (old log-probs, advantages, log-probs).
        loss_mask: ``[B, T]`` bool mask.

    Returns:
        ``(packed [B, C], packed_mask [B, C])``; packed entries past a row's count are ``0``.

    Example:
        >>> import torch
        >>> values = torch.tensor([[0.0, 0.0, -1.0, -2.0], [0.0, -3.0, 0.0, 0.0]])
        >>> mask = torch.tensor([[False, False, True, True], [False, True, False, False]])
        >>> packed, packed_mask = pack_loss_tokens(values, mask)
        >>> packed.tolist(), packed_mask.tolist()
        ([[-1.0, -2.0], [-3.0, 0.0]], [[True, True], [True, False]])
    """
    if values.shape != loss_mask.shape or values.dim() != 2:
        raise ValueError(
            f"values and loss_mask must both be [B, T]; got {tuple(values.shape)}, {tuple(loss_mask.shape)}"
        )
    mask = loss_mask.bool()
    counts = mask.sum(dim=1)
    width = int(counts.max()) if counts.numel() else 0
    packed_mask = torch.arange(width, device=mask.device)[None, :] < counts[:, None]
    packed = torch.zeros(packed_mask.shape, dtype=values.dtype, device=values.device)
    return packed.masked_scatter(packed_mask, values[mask]), packed_mask
