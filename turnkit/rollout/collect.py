"""Run agents in envs and record :class:`~turnkit.types.Trajectory` objects.

:func:`collect_batch` steps many episodes in lockstep and calls the agent once per round with every live
episode's context, so a model-backed policy sees full batches. :func:`collect` and :func:`collect_group`
are the one-episode and same-seed-group front ends.

Infrastructure failures are data: an exception from the agent or the env ends the affected episodes
with ``Trajectory.error`` set (typed :class:`~turnkit.types.ErrorCause`), and the other episodes go on.

**One episode engine.** :func:`collect_batch` is the only loop that steps envs for agents. Callers with other
needs pass options instead of copying it: ``max_tokens`` (a per-episode token budget, e.g. TRL's
``max_completion_length``), ``stop`` (end an episode when a callback says so) and ``starts`` (begin episodes
mid-way from env snapshots and the conversation so far, e.g. the branches of a progress critic).

**Token-exact contexts** (``chat=ChatDelta(tokenizer)``, the policy's tokenizer): every context still carries
the conversation as ``messages``, and after a turn with token ids it also carries ``prompt_token_ids``: that
turn's prompt ids, the ids it generated, then :meth:`~turnkit.rollout.chat.ChatDelta.between_turns` (the
template ids that close the turn and carry the env's reply). Token-level agents (``HFPolicy``, ``VLLMPolicy``)
condition on exactly those ids, so earlier turns are never re-rendered and re-tokenised from text (with a BPE
tokenizer that changes ids) and :func:`~turnkit.rollout.batch.find_prefix_mismatch` finds nothing. The first
turn has no stored ids (the agent renders the first prompt), and a turn without token ids (a text agent)
leaves the next context without them. Without ``chat`` the contexts carry only ``messages``.

Example:
    >>> import gymnasium, turnkit
    >>> from turnkit.agents.oracle import OracleAgent
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
    >>> group = turnkit.collect_group(env, OracleAgent(), seed=7, group_size=3)
    >>> len({t.initial_observation for t in group}), [t.success for t in group]
    (1, [True, True, True])
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium

from turnkit.agents.base import Agent, Context, uses_privileged
from turnkit.envs.core import EnvSnapshot, restore_env
from turnkit.errors import AgentError, BrowserError, ConfigError, SandboxError
from turnkit.rollout.chat import ChatDelta
from turnkit.types import (
    AgentTurn,
    ErrorCause,
    Message,
    Role,
    Step,
    Task,
    Trajectory,
    TrajectoryError,
    observation_role,
)

Stop = Callable[[Trajectory], bool]
"""Called after every step with the episode so far; ``True`` ends it there (the last step marked truncated)."""


@dataclass(frozen=True)
class Start:
    """An episode that begins mid-way instead of at ``reset``: a restored env and the conversation so far.

    Attributes:
        snapshot: The env state to restore (:func:`~turnkit.envs.core.snapshot_env`); its ``turn`` numbers the
            first turn, and its ``last_observation`` is the trajectory's ``initial_observation``.
        messages: The conversation up to that state, ending with the env's latest message.
        prompt: What the first turn's context shows instead of ``messages`` (e.g. with an "answer now"
            instruction appended); later turns and the recorded conversation keep ``messages``.

    Example:
        >>> import gymnasium
        >>> from turnkit.agents.scripted import ScriptedAgent
        >>> from turnkit.envs.core import snapshot_env
        >>> env = gymnasium.make("turnkit/MathEpisodes-v0", kinds=["arithmetic"], difficulty=1)
        >>> first, _ = env.reset(seed=0)
        >>> wrong, *_ = env.step("ANSWER: 0")
        >>> start = Start(snapshot_env(env), (Message("user", first), Message("assistant", "ANSWER: 0"),
        ...                                   Message("user", wrong)))
        >>> [branch] = collect_batch([gymnasium.make(env.spec)], ScriptedAgent(["ANSWER: 11"]), [0], starts=[start])
        >>> branch.initial_observation == wrong, branch.success
        (True, True)
    """

    snapshot: EnvSnapshot
    messages: tuple[Message, ...]
    prompt: tuple[Message, ...] | None = None


@dataclass
class _Episode:
    """Mutable bookkeeping of one live episode (frozen into a Trajectory at the end)."""

    env: gymnasium.Env
    seed: int | None
    group: int | None
    first_turn: int = 0
    """The number of the episode's first turn here (a :class:`Start`'s snapshot turn; 0 after a reset)."""
    prompt: tuple[Message, ...] | None = None
    """The first turn's context messages when they differ from ``messages`` (:attr:`Start.prompt`)."""
    initial_observation: str = ""
    observation: str = ""
    reset_info: dict[str, Any] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    task: Task | None = None
    error: TrajectoryError | None = None
    done: bool = False
    prompt_ids: tuple[int, ...] = ()
    """The next turn's exact context ids (token-exact contexts only; empty: the agent renders ``messages``)."""


def _env_id(env: gymnasium.Env) -> str:
    return env.spec.id if env.spec is not None else type(env.unwrapped).__name__


def _tool_schemas(env: gymnasium.Env) -> tuple[dict[str, Any], ...]:
    return tuple(getattr(env.unwrapped, "tool_schemas", ()))


def _task_of(env: gymnasium.Env) -> Task | None:
    task = getattr(env.unwrapped, "task", None)
    return task if isinstance(task, Task) else None


def collect_batch(
    envs: Sequence[gymnasium.Env],
    agent: Agent,
    seeds: Sequence[int | None],
    *,
    groups: Sequence[int | None] | None = None,
    max_turns: int | None = None,
    reset_options: Sequence[dict[str, Any] | None] | None = None,
    chat: ChatDelta | None = None,
    max_tokens: int | None = None,
    stop: Stop | None = None,
    starts: Sequence[Start | None] | None = None,
) -> list[Trajectory]:
    """Play one episode in each env, batching agent calls across live episodes.

    Args:
        envs: One env per episode (distinct instances).
        agent: The policy; called once per round with all live contexts.
        seeds: The reset seed of each episode.
        groups: Optional group index per episode (recorded on the trajectory).
        max_turns: Stop episodes after this many turns (marked truncated) when the env has no time limit. An
            episode whose agent answers ``finish_reason="prompt_too_long"`` (its conversation outgrew the model's
            context window) ends before that turn, its last step marked truncated; on its first turn it is an
            agent error.
        reset_options: Optional ``reset(options=...)`` per episode.
        chat: Token-exact contexts over this chat template (see the module docstring); it must wrap the
            agent's tokenizer. ``None``: contexts carry only messages.
        max_tokens: Most ids of an episode after its first prompt: the ids sampled in every turn plus the
            template and env ids between turns (TRL's ``max_completion_length``; needs ``chat``). The turn
            that crosses it is cut to fit (``finish_reason="length"``); an episode whose next context leaves
            no room, or whose agent generated nothing (the model's context window is full), ends there with
            its last step marked truncated.
        stop: Called after each step with the episode so far (:data:`Stop`); ``True`` ends it, truncated.
        starts: Per episode, ``None`` (reset with its seed) or a :class:`Start` (restore the env's snapshot
            and continue the conversation; the seed is only recorded and passed to the agent).

    Returns:
        One trajectory per env, in order. A started episode's trajectory holds only the steps played here.

    Raises:
        ConfigError: ``chat``'s template rewrites earlier turns when the env's reply is added, or
            ``max_tokens`` without ``chat`` or below 1.

    Example:
        >>> import gymnasium, turnkit
        >>> from turnkit.agents.hf import HFPolicy
        >>> from turnkit.models.bpe import build_bpe_tokenizer
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model
        >>> from turnkit.rollout.batch import find_prefix_mismatch
        >>> tok = build_bpe_tokenizer()
        >>> cfg = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
        >>> model = build_tiny_model(tok, cfg)
        >>> envs = [gymnasium.make("turnkit/MathEpisodes-v0", max_attempts=5) for _ in range(2)]
        >>> trajs = collect_batch(envs, HFPolicy(model, tok, max_new_tokens=8), [0, 1], max_turns=3,
        ...                       chat=ChatDelta(tok))
        >>> [find_prefix_mismatch(t) for t in trajs]
        [None, None]
    """
    if len(envs) != len(seeds):
        raise ValueError(f"got {len(envs)} envs but {len(seeds)} seeds")
    if len({id(e) for e in envs}) != len(envs):
        raise ValueError("collect_batch needs distinct env instances (one per episode)")
    if max_tokens is not None and (chat is None or isinstance(max_tokens, bool) or max_tokens < 1):
        raise ConfigError(f"max_tokens needs chat= (it counts template ids) and an int >= 1, got {max_tokens!r}")
    groups = groups if groups is not None else [None] * len(envs)
    reset_options = reset_options if reset_options is not None else [None] * len(envs)
    starts = starts if starts is not None else [None] * len(envs)
    privileged = uses_privileged(agent)
    episodes = [_Episode(env=e, seed=s, group=g) for e, s, g in zip(envs, seeds, groups, strict=True)]
    for ep, options, start in zip(episodes, reset_options, starts, strict=True):
        _begin(ep, options, start)

    while live := [ep for ep in episodes if not ep.done]:
        contexts = [_context(ep, privileged) for ep in live]
        try:
            turns = agent.act(contexts)
            if len(turns) != len(live):
                raise AgentError(f"agent returned {len(turns)} turns for {len(live)} contexts")
        except Exception as exc:  # a policy or server fault ends these episodes as data
            for ep in live:
                ep.error = TrajectoryError(ErrorCause.AGENT, f"{type(exc).__name__}: {exc}", len(ep.steps))
                ep.done = True
            continue
        for ep, turn in zip(live, turns, strict=True):
            if max_tokens is not None and chat is not None:
                turn = cut_turn(turn, max_tokens - _spent(ep, turn), chat.tokenizer)
                if not turn.token_ids:  # nothing generated: no room in the model's context window
                    _end_empty(ep, turn)
                    continue
            if turn.finish_reason == "prompt_too_long":  # the conversation outgrew the model's context window
                _end_empty(ep, turn)
                continue
            _advance(ep, turn, max_turns)
            if stop is not None and not ep.done and stop(_freeze(ep)):
                _truncate(ep)
        going = [(ep, t) for ep, t in zip(live, turns, strict=True) if not ep.done]
        if chat is not None and going:
            replies = [ep.observation for ep, _ in going]
            roles = [ep.messages[-1].role for ep, _ in going]
            ids = next_context_ids([ep.steps[-1].action for ep, _ in going], replies, chat, roles=roles)
            for (ep, _), context in zip(going, ids, strict=True):
                ep.prompt_ids = context
                if max_tokens is not None and context and len(context) - _first_prompt_len(ep) >= max_tokens:
                    _truncate(ep)  # no room for another sampled id
    return [_freeze(ep) for ep in episodes]


def _begin(ep: _Episode, options: dict[str, Any] | None, start: Start | None) -> None:
    """Reset the episode's env (or restore a :class:`Start`); an env fault is recorded, not raised."""
    try:
        if start is None:
            ep.observation, ep.reset_info = ep.env.reset(seed=ep.seed, options=options)
            ep.messages.append(Message("user", ep.observation))
        else:
            restore_env(ep.env, start.snapshot)
            ep.observation = start.snapshot.last_observation
            ep.messages.extend(start.messages)
            ep.first_turn, ep.prompt = start.snapshot.turn, start.prompt
        ep.initial_observation = ep.observation
        ep.task = _task_of(ep.env)
    except Exception as exc:
        what = "reset" if start is None else "restore"
        ep.error = TrajectoryError(env_fault_cause(exc), f"{what}: {type(exc).__name__}: {exc}")
        ep.done = True


def _context(ep: _Episode, privileged: bool) -> Context:
    """The next turn's context of a live episode."""
    forced = ep.prompt if not ep.steps else None
    return Context(
        messages=forced if forced is not None else tuple(ep.messages),
        env_id=_env_id(ep.env),
        turn=ep.first_turn + len(ep.steps),
        episode_seed=ep.seed,
        task=ep.task if privileged else None,
        prompt_token_ids=ep.prompt_ids,
        tools=_tool_schemas(ep.env),
    )


def cut_turn(turn: AgentTurn, room: int, tokenizer: Any) -> AgentTurn:
    """The turn shortened to its first ``room`` sampled ids (a prefix of a sample is a sample with a smaller budget).

    Args:
        turn: A turn with token ids.
        room: Most ids to keep.
        tokenizer: Decodes the kept ids into the turn's new text.

    Returns:
        ``turn`` itself when it fits, else the cut turn with ``finish_reason="length"``.

    Example:
        >>> from turnkit.models.tiny import build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> ids = tuple(tok("ANSWER: 42", add_special_tokens=False)["input_ids"])
        >>> cut = cut_turn(AgentTurn("ANSWER: 42", ids, (-0.5,) * len(ids)), 3, tok)
        >>> cut.text, len(cut.logprobs), cut.finish_reason
        ('ANS', 3, 'length')
    """
    if len(turn.token_ids) <= room:
        return turn
    n = max(0, int(room))
    ids = turn.token_ids[:n]  # never holds the stop id: generation ends at the first one
    text = str(tokenizer.decode(list(ids), skip_special_tokens=True))
    return AgentTurn(text, ids, turn.logprobs[:n], turn.prompt_token_ids, "length")


def _first_prompt_len(ep: _Episode) -> int:
    return len(ep.steps[0].action.prompt_token_ids) if ep.steps else 0


def _spent(ep: _Episode, turn: AgentTurn) -> int:
    """Ids of the episode's budget already used before ``turn``'s sampled ids (its prompt past the first one)."""
    return len(turn.prompt_token_ids) - _first_prompt_len(ep) if ep.steps else 0


def _truncate(ep: _Episode) -> None:
    ep.steps[-1] = replace(ep.steps[-1], truncated=True)
    ep.done = True


def _end_empty(ep: _Episode, turn: AgentTurn) -> None:
    """A turn without ids ends its episode: the previous step truncated, or an agent error on the first turn."""
    if ep.steps:
        _truncate(ep)
        return
    ep.error = TrajectoryError(ErrorCause.AGENT, f"no tokens generated ({turn.finish_reason})", 0)
    ep.done = True


def env_fault_cause(exc: BaseException) -> ErrorCause:
    """The typed cause of an exception raised by an env: its sandbox, its browser, or the env itself.

    Example:
        >>> env_fault_cause(SandboxError("bwrap missing")).value, env_fault_cause(KeyError("x")).value
        ('sandbox', 'env')
    """
    if isinstance(exc, SandboxError):
        return ErrorCause.SANDBOX
    if isinstance(exc, BrowserError):
        return ErrorCause.BROWSER
    return ErrorCause.ENV


def next_context_ids(
    turns: Sequence[AgentTurn],
    observations: Sequence[str],
    chat: ChatDelta,
    *,
    roles: Sequence[Role] | None = None,
) -> list[tuple[int, ...]]:
    """Each next turn's exact context: the turn's prompt and generated ids, then the template around the reply.

    The in-between ids of all turns come from one :meth:`~turnkit.rollout.chat.ChatDelta.between_turns_batch`
    call (one tokenizer call per round of a batched rollout).

    Args:
        turns: The turns just taken.
        observations: The env's reply to each (the next message).
        chat: The chat template's in-between ids.
        roles: Each reply's role (``"user"``, or ``"tool"`` for a tool's output); default all ``"user"``.

    Returns:
        Per turn, ``prompt_token_ids + token_ids + chat.between_turns(token_ids, observation)``, or ``()`` for a
        turn without prompt or generated ids (a text agent: the next prompt is rendered from messages).

    Example:
        >>> from turnkit.models.tiny import build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> turn = AgentTurn("hi", token_ids=(104, 105, tok.eos_token_id), prompt_token_ids=(1, 4, 50, 2, 5))
        >>> ids, text_only = next_context_ids([turn, AgentTurn("hi")], ["ok", "ok"], ChatDelta(tok))
        >>> ids[:8] == (1, 4, 50, 2, 5, 104, 105, tok.eos_token_id), tok.decode(ids[8:]), text_only
        (True, '<|user|>ok<|end|><|assistant|>', ())
    """
    exact = [i for i, t in enumerate(turns) if t.token_ids and t.prompt_token_ids]
    roles = roles if roles is not None else ["user"] * len(turns)
    between = chat.between_turns_batch([(turns[i].token_ids, observations[i], roles[i]) for i in exact])
    out: list[tuple[int, ...]] = [()] * len(turns)
    for i, ids in zip(exact, between, strict=True):
        out[i] = (*turns[i].prompt_token_ids, *turns[i].token_ids, *ids)
    return out


def _advance(ep: _Episode, turn: AgentTurn, max_turns: int | None) -> None:
    try:
        obs, reward, terminated, truncated, info = ep.env.step(turn.text)
    except Exception as exc:
        ep.error = TrajectoryError(env_fault_cause(exc), f"step: {type(exc).__name__}: {exc}", len(ep.steps))
        ep.done = True
        return
    if max_turns is not None and len(ep.steps) + 1 >= max_turns and not terminated:
        truncated = True
    ep.steps.append(Step(ep.observation, turn, float(reward), bool(terminated), bool(truncated), dict(info)))
    ep.messages.append(Message("assistant", turn.text))
    ep.messages.append(Message(observation_role(info), obs))
    ep.observation = obs
    ep.done = bool(terminated or truncated)


def _freeze(ep: _Episode) -> Trajectory:
    return Trajectory(
        env_id=_env_id(ep.env),
        seed=ep.seed,
        steps=tuple(ep.steps),
        initial_observation=ep.initial_observation,
        final_observation=ep.observation if ep.steps else "",
        reset_info=ep.reset_info,
        task=ep.task,
        error=ep.error,
        group=ep.group,
    )


def collect(
    env: gymnasium.Env,
    agent: Agent,
    *,
    seed: int | None = None,
    max_turns: int | None = None,
    chat: ChatDelta | None = None,
) -> Trajectory:
    """Play one episode of ``env`` with ``agent`` (``max_turns`` and ``chat``: see :func:`collect_batch`).

    Example:
        >>> import gymnasium, turnkit
        >>> from turnkit.agents.scripted import ScriptedAgent
        >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
        >>> traj = turnkit.collect(env, ScriptedAgent(["ANSWER: 0.123"]), seed=0)
        >>> traj.success, len(traj.steps) > 1
        (False, True)
    """
    return collect_batch([env], agent, [seed], max_turns=max_turns, chat=chat)[0]


def clone_env(env: gymnasium.Env) -> gymnasium.Env:
    """A fresh instance of the same env (same id and kwargs), for running episodes side by side."""
    if env.spec is not None:
        return gymnasium.make(env.spec)
    return copy.deepcopy(env)


def collect_group(
    env: gymnasium.Env | Callable[[], gymnasium.Env],
    agent: Agent,
    *,
    seed: int,
    group_size: int,
    group: int | None = None,
    max_turns: int | None = None,
    chat: ChatDelta | None = None,
) -> list[Trajectory]:
    """Play ``group_size`` episodes of the *same* task (same seed), batched, e.g. for GRPO/RLOO groups.

    Args:
        env: An env (cloned ``group_size - 1`` times) or a zero-argument env factory.
        agent: The policy.
        seed: The shared reset seed.
        group_size: Number of episodes.
        group: Group index recorded on every trajectory (defaults to ``seed``).
        max_turns: See :func:`collect_batch`.
        chat: See :func:`collect_batch`.
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    made: list[gymnasium.Env]
    if isinstance(env, gymnasium.Env):
        made = [clone_env(env) for _ in range(group_size - 1)]
        envs = [env, *made]
    else:
        made = envs = [env() for _ in range(group_size)]
    g = seed if group is None else group
    try:
        return collect_batch(envs, agent, [seed] * group_size, groups=[g] * group_size, max_turns=max_turns, chat=chat)
    finally:
        for e in made:  # the caller keeps only the env it passed in
            e.close()
