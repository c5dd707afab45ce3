"""Oracle demonstrations from the envs, as token rows a policy can be fine-tuned on.

The envs' oracle agents (:class:`~turnkit.agents.oracle.OracleAgent`) play seeded episodes with the
privileged task data; each of their turns becomes one SFT row in the *policy's* token space:

* the prompt is the conversation up to that turn rendered by the same chat-template function the policy
  samples with (:func:`turnkit.agents.hf.chat_prompt_ids`), so SFT and generation see identical ids;
* the completion is the oracle's text tokenised without special tokens, followed by the end-of-turn
  (EOS) token, so the policy also learns to stop.

Only clean, successful demonstrations are kept (an oracle that failed or errored is a bug to surface, not
data to learn from); :func:`collect_demos` counts what it dropped.

Example:
    >>> from turnkit.models.tiny import build_tiny_tokenizer
    >>> tok = build_tiny_tokenizer()
    >>> demos = collect_demos("turnkit/MathEpisodes-v0", episodes=3, seed=0, env_kwargs={"difficulty": 1})
    >>> rows = demo_rows(demos.trajectories, tok)
    >>> len(rows), tok.decode([i for i, m in zip(rows[0].input_ids, rows[0].loss_mask) if m])
    (3, 'ANSWER: 8<|end|>')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium
from transformers import PreTrainedTokenizerBase

from turnkit.agents.hf import chat_prompt_ids
from turnkit.agents.oracle import OracleAgent
from turnkit.envs import registration as _registration  # noqa: F401  (registers the built-in env ids)
from turnkit.errors import ConfigError, DataError
from turnkit.rollout.batch import TokenRow
from turnkit.rollout.collect import collect_batch
from turnkit.types import Message, Trajectory


@dataclass(frozen=True)
class Demos:
    """Oracle episodes kept for SFT, with counts of what was left out.

    Attributes:
        trajectories: Successful, error-free oracle episodes.
        dropped_errors: Episodes that ended with an infrastructure error.
        dropped_failures: Episodes the oracle did not solve.
    """

    trajectories: tuple[Trajectory, ...]
    dropped_errors: int = 0
    dropped_failures: int = 0


def collect_demos(
    env_id: str,
    *,
    episodes: int,
    seed: int = 0,
    split: str = "id",
    env_kwargs: Mapping[str, Any] | None = None,
    batch_size: int = 64,
) -> Demos:
    """Play ``episodes`` seeded episodes (seeds ``seed, seed + 1, ...``) with the env's oracle.

    Args:
        env_id: A registered env id whose family has an oracle.
        episodes: Number of episodes.
        seed: First reset seed.
        split: Task split.
        env_kwargs: Extra ``gymnasium.make`` arguments (e.g. ``{"difficulty": 1}``).
        batch_size: Episodes played side by side.

    Returns:
        The kept demonstrations and the drop counts.

    Raises:
        ConfigError: ``episodes`` or ``batch_size`` below 1.

    Example:
        >>> d = collect_demos("turnkit/MathEpisodes-v0", episodes=2, seed=5)
        >>> len(d.trajectories), d.dropped_errors, d.dropped_failures
        (2, 0, 0)
    """
    if episodes < 1 or batch_size < 1:
        raise ConfigError(f"collect_demos needs episodes >= 1 and batch_size >= 1, got {episodes}, {batch_size}")
    kwargs = dict(env_kwargs or {})
    envs = [gymnasium.make(env_id, split=split, **kwargs) for _ in range(min(batch_size, episodes))]
    agent = OracleAgent()
    kept: list[Trajectory] = []
    errors = failures = 0
    for first in range(seed, seed + episodes, len(envs)):
        seeds = list(range(first, min(first + len(envs), seed + episodes)))
        for traj in collect_batch(envs[: len(seeds)], agent, seeds):
            if traj.error is not None:
                errors += 1
            elif not traj.success:
                failures += 1
            else:
                kept.append(traj)
    for env in envs:
        env.close()
    return Demos(tuple(kept), dropped_errors=errors, dropped_failures=failures)


def turn_messages(trajectory: Trajectory, turn: int) -> list[Message]:
    """The conversation the agent saw before taking turn ``turn`` (ending with the env's message).

    Example:
        >>> from turnkit.types import AgentTurn, Step
        >>> t = Trajectory("d", 0, (Step("q", AgentTurn("a1"), 0.0), Step("try again", AgentTurn("a2"), 1.0)))
        >>> [(m.role, m.content) for m in turn_messages(t, 1)]
        [('user', 'q'), ('assistant', 'a1'), ('user', 'try again')]
    """
    if not 0 <= turn < len(trajectory.steps):
        raise ValueError(f"turn {turn} out of range for a trajectory with {len(trajectory.steps)} steps")
    messages = trajectory.messages()[: 2 * turn + 1]
    return messages


def completion_ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """Ids of an assistant turn's ``text`` followed by the tokenizer's EOS (end-of-turn) id.

    Raises:
        ConfigError: The tokenizer has no EOS token.

    Example:
        >>> from turnkit.models.tiny import build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> tok.convert_ids_to_tokens(completion_ids(tok, "ok"))
        ['o', 'k', '<|end|>']
    """
    if tokenizer.eos_token_id is None:
        raise ConfigError(f"tokenizer {type(tokenizer).__name__} has no eos_token; a policy could not learn to stop")
    return [*tokenizer(text, add_special_tokens=False)["input_ids"], int(tokenizer.eos_token_id)]


def demo_rows(trajectories: Sequence[Trajectory], tokenizer: PreTrainedTokenizerBase) -> list[TokenRow]:
    """One SFT row per demonstrated turn: chat-template prompt ids, loss on the turn's ids + EOS.

    Args:
        trajectories: Demonstration episodes (any agent's; typically :func:`collect_demos`).
        tokenizer: The policy's tokenizer (with a chat template).

    Returns:
        Rows ordered by trajectory then turn (``traj_index``/``turn_index`` set).

    Raises:
        DataError: An errored trajectory (demonstrations must be clean).

    Example:
        >>> from turnkit.models.tiny import build_tiny_tokenizer
        >>> from turnkit.types import AgentTurn, Step
        >>> tok = build_tiny_tokenizer()
        >>> row = demo_rows([Trajectory("d", 0, (Step("2+2?", AgentTurn("4"), 1.0, True),))], tok)[0]
        >>> tok.convert_ids_to_tokens([i for i, m in zip(row.input_ids, row.loss_mask) if m])
        ['4', '<|end|>']
    """
    rows: list[TokenRow] = []
    for i, traj in enumerate(trajectories):
        if traj.error is not None:
            raise DataError(f"demonstration {i} (seed {traj.seed}) has an error: {traj.error.message}")
        for k, step in enumerate(traj.steps):
            prompt = chat_prompt_ids(tokenizer, turn_messages(traj, k))
            rows.append(
                TokenRow.from_prompt_completion(
                    prompt, completion_ids(tokenizer, step.action.text), reward=step.reward, traj_index=i, turn_index=k
                )
            )
    return rows


def turn_token_ids(
    trajectory: Trajectory, tokenizer: PreTrainedTokenizerBase | None = None
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """``(prompt ids, completion ids)`` of each agent turn, for scoring a turn with a model.

    A turn that recorded its ids (a policy's sample) is used token-exact: ``prompt_token_ids`` and ``token_ids``.
    A turn without ids (an oracle's or a human's text) is rendered like :func:`demo_rows`: the chat-template
    prompt of the conversation so far and the text's ids followed by EOS; this needs ``tokenizer``.

    Raises:
        DataError: A turn without ids and no tokenizer to render it with.

    Example:
        >>> from turnkit.models.tiny import build_tiny_tokenizer
        >>> from turnkit.types import AgentTurn, Step
        >>> tok = build_tiny_tokenizer()
        >>> sampled = AgentTurn("4", token_ids=(60, 2), prompt_token_ids=(1, 4))
        >>> t = Trajectory("d", 0, (Step("2+2?", sampled, 0.0), Step("sure?", AgentTurn("4"), 1.0, True)))
        >>> first, second = turn_token_ids(t, tok)
        >>> first, tok.convert_ids_to_tokens(list(second[1]))
        (((1, 4), (60, 2)), ['4', '<|end|>'])
    """
    out: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    for k, step in enumerate(trajectory.steps):
        turn = step.action
        if turn.token_ids and turn.prompt_token_ids:
            out.append((tuple(turn.prompt_token_ids), tuple(turn.token_ids)))
            continue
        if tokenizer is None:
            raise DataError(
                f"turn {k} of trajectory seed {trajectory.seed} has no token ids and no tokenizer was given"
            )
        prompt = chat_prompt_ids(tokenizer, turn_messages(trajectory, k))
        out.append((tuple(prompt), tuple(completion_ids(tokenizer, turn.text))))
    return out
