"""Train any turnkit env with TRL's ``GRPOTrainer``: multi-turn episodes, token-exact, env rewards.

:class:`EnvRollout` is a ``rollout_func`` for ``trl.GRPOTrainer`` (TRL >= 1.16). For every prompt TRL hands it,
it plays one episode of a registered env with the model being trained, and returns the episode to TRL as one
sequence in the form TRL's ``rollout_func`` contract asks for:

* ``prompt_ids``: the first turn's prompt, the env's first observation rendered by the chat template;
* ``completion_ids``: everything after it, in order: the ids the policy sampled in turn 0, the tokens that
  close that turn and carry the env's reply (the chat template around the next observation), the ids sampled
  in turn 1, ... up to the last sampled id;
* ``env_mask``: 1 on sampled ids, 0 on env and template ids, so the loss covers only what the policy
  generated (TRL multiplies its loss mask by it);
* ``logprobs``: the sampling log-prob of every sampled id (0 elsewhere);
* ``env_return``: the episode's return, the sum of the env's step rewards, which :func:`env_reward` hands to
  TRL as the reward (``None`` for an episode that ended on an infrastructure error: TRL then gives it no
  advantage, and its ``env_mask`` is all 0).

**Token-exact contexts.** Turn ``k`` is sampled from exactly ``prompt_ids + completion_ids[:end of turn k-1's
reply]``: the context of each turn is the previous context, plus the ids the policy generated, plus the
template tokens of the env's reply, never the conversation re-rendered and re-tokenised from text (BPE
round-trips change ids; peers' most reported multi-turn bug). So the sequence TRL scores is token for token
the one the policy sampled from, and TRL's log-probs of the sampled ids equal the sampling log-probs (up to
float rounding). This needs a chat template that renders a conversation as an extension of its shorter
prefixes; templates that rewrite earlier turns (e.g. strip ``<think>`` blocks) are refused with a
:class:`~turnkit.errors.ConfigError`.

**Budget.** TRL's ``max_completion_length`` bounds the whole episode sequence (sampled and env tokens);
``max_new_tokens`` optionally bounds each turn. An episode whose next context would not fit ends there,
marked truncated, and its reward is the return so far (as with a time limit).

**Tasks.** Turnkit tasks come from reset seeds (one first observation can hide many tasks: CollabCode's hidden
details, PAVDidactic's planted sequence). :attr:`EnvRollout.dataset` has one row per seed: ``prompt``, the
first observation as a one-message conversation whose message also carries the seed (``env_seed``: TRL hands
the rollout only the prompts, and the policy never sees this key, since the rollout renders its own prompts
from the env), and ``seed``. TRL's sampler repeats each row ``num_generations`` times, so every group plays
one task.

Example:
    >>> from turnkit.agents.hf import HFPolicy
    >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    >>> rollout = EnvRollout("turnkit/MathEpisodes-v0", seeds=range(4), env_kwargs={"kinds": ["arithmetic"]})
    >>> row = rollout.dataset[0]
    >>> row["prompt"], row["seed"]
    ([{'role': 'user', 'content': 'What is 6 plus 5?\\nReply with ANSWER: <value>.', 'env_seed': 0}], 0)
    >>> tok = build_tiny_tokenizer()
    >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
    >>> [episode] = rollout.play([0], policy, max_completion_length=64, max_turns=2)
    >>> sampled = [i for t in episode.trajectory.steps for i in t.action.token_ids]
    >>> [i for i, m in zip(episode.completion_ids, episode.env_mask) if m] == sampled
    True
    >>> episode.reward == episode.trajectory.total_reward
    True
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np

import turnkit  # noqa: F401  (registers the built-in envs)
from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.errors import AgentError, BrowserError, ConfigError, DataError, EnvError, SandboxError, TurnkitError
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import env_fault_cause
from turnkit.types import AgentTurn, ErrorCause, Message, Step, Trajectory, TrajectoryError

if TYPE_CHECKING:
    import datasets
    from transformers import PreTrainedTokenizerBase

ENV_FIELDS = ("env_mask", "env_return", "env_success", "env_seed", "env_turns")
"""The fields :class:`EnvRollout` returns besides TRL's required ones (TRL passes them to the reward functions)."""

_FAULTS: dict[ErrorCause, type[TurnkitError]] = {
    ErrorCause.AGENT: AgentError,
    ErrorCause.SANDBOX: SandboxError,
    ErrorCause.BROWSER: BrowserError,
}


@dataclass(frozen=True)
class Episode:
    """One episode as handed to TRL, with the turnkit trajectory it came from.

    Attributes:
        trajectory: The episode (each turn's ``AgentTurn.prompt_token_ids`` is its exact context).
        prompt_ids: The first turn's prompt ids.
        completion_ids: Everything after the prompt: sampled ids interleaved with env/template ids.
        env_mask: 1 where ``completion_ids`` holds a sampled id, 0 elsewhere.
        logprobs: Sampling log-prob of each sampled id, 0 elsewhere.
        reward: The episode return (``Trajectory.total_reward``), ``None`` if the episode errored.
    """

    trajectory: Trajectory
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    env_mask: tuple[int, ...]
    logprobs: tuple[float, ...]
    reward: float | None


@dataclass
class _Live:
    """Mutable state of one episode being played."""

    env: gymnasium.Env
    seed: int
    context: list[int] = dataclasses.field(default_factory=list)
    messages: list[Message] = dataclasses.field(default_factory=list)
    steps: list[Step] = dataclasses.field(default_factory=list)
    observation: str = ""
    reset_info: dict[str, Any] = dataclasses.field(default_factory=dict)
    used: int = 0
    error: TrajectoryError | None = None
    done: bool = False


class EnvRollout:
    """A TRL ``GRPOTrainer`` ``rollout_func`` that plays turnkit env episodes (see the module docstring).

    Args:
        env_id: A registered env id, e.g. ``"turnkit/MathEpisodes-v0"``.
        seeds: Reset seeds of the training tasks (one dataset row each).
        env_kwargs: Keyword arguments for ``gymnasium.make``.
        max_turns: End episodes after this many turns (marked truncated); default: the env's own limit.
        max_new_tokens: Most ids sampled per turn; default: only the episode budget (TRL's
            ``max_completion_length``) bounds a turn.

    Attributes:
        env_id: The env id.
        dataset: ``task_dataset(seeds)``, the ``datasets.Dataset`` to pass as ``train_dataset``.
        last_episodes: The episodes of the latest call, in TRL's order (for logging and inspection).

    Raises:
        EnvError: ``env_id`` is not registered (the message suggests close ids).
        ConfigError: A bad argument, or an env whose observations are not text.

    Example:
        >>> rollout = EnvRollout("turnkit/MathEpisodes-v0", seeds=range(3))
        >>> list(rollout.dataset["seed"]), len(rollout.task_dataset(range(10**9, 10**9 + 5)))  # held-out tasks
        ([0, 1, 2], 5)
        >>> EnvRollout("turnkit/MathEpisode-v0")
        Traceback (most recent call last):
        ...
        turnkit.errors.EnvError: unknown env id 'turnkit/MathEpisode-v0'; did you mean 'turnkit/MathEpisodes-v0'?
    """

    def __init__(
        self,
        env_id: str,
        *,
        seeds: Iterable[int] = range(1024),
        env_kwargs: Mapping[str, Any] | None = None,
        max_turns: int | None = None,
        max_new_tokens: int | None = None,
    ) -> None:
        if env_id not in gymnasium.registry:
            close = difflib.get_close_matches(env_id, list(gymnasium.registry), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else "; `turnkit list` shows the registered envs"
            raise EnvError(f"unknown env id {env_id!r}{hint}")
        for name, value in (("max_turns", max_turns), ("max_new_tokens", max_new_tokens)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"EnvRollout.{name} must be an int >= 1 or None, got {value!r}")
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.max_turns = max_turns
        self.max_new_tokens = max_new_tokens
        self._envs: list[gymnasium.Env] = []
        self._calls = 0
        self._deltas: dict[int, ChatDelta] = {}
        self.last_episodes: list[Episode] = []
        self.dataset = self.task_dataset(seeds)

    def task_dataset(self, seeds: Iterable[int]) -> datasets.Dataset:
        """One row per distinct seed: ``prompt`` (the first observation, carrying ``env_seed``) and ``seed``.

        Use it for TRL's ``eval_dataset`` too, e.g. with held-out seeds.

        Raises:
            ConfigError: No seeds, or an env whose observations are not text.
        """
        import datasets

        env = self._env(0)
        prompts, kept = [], []
        for seed in dict.fromkeys(int(s) for s in seeds):
            obs, _ = env.reset(seed=seed)
            if not isinstance(obs, str):
                raise ConfigError(
                    f"{self.env_id} observations are {type(obs).__name__}, not text; EnvRollout needs text"
                )
            prompts.append([{"role": "user", "content": obs, "env_seed": seed}])
            kept.append(seed)
        if not kept:
            raise ConfigError("EnvRollout needs at least one seed")
        return datasets.Dataset.from_dict({"prompt": prompts, "seed": kept})

    # ------------------------------------------------------------------ TRL's rollout_func

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play one episode per prompt with ``trainer``'s model (TRL calls this once per generation batch).

        Args:
            prompts: TRL's per-process prompts: rows of :meth:`task_dataset` (e.g. :attr:`dataset`), each
                repeated ``num_generations`` times.
            trainer: The ``trl.GRPOTrainer``.

        Returns:
            ``prompt_ids``, ``completion_ids``, ``logprobs`` (TRL's required keys) and :data:`ENV_FIELDS`,
            one entry per prompt.

        Raises:
            ConfigError: A trainer setting this rollout cannot honour, or a model/tokenizer it cannot use.
            DataError: A prompt that is not a row of :meth:`task_dataset`.
            EnvError: An episode began with another observation than its prompt (a dataset made with other
                ``env_kwargs``, or an env that is not deterministic).
            TurnkitError: Every episode of the batch failed (the subclass of the first failure's cause:
                ``AgentError``, ``SandboxError``, ``BrowserError`` or ``EnvError``); single failures are data.
        """
        policy = self.policy_for(trainer)
        tasks = [_prompt_task(p) for p in prompts]
        episodes = self.play([s for s, _ in tasks], policy, max_completion_length=trainer.max_completion_length)
        for e, (seed, first) in zip(episodes, tasks, strict=True):
            if e.trajectory.initial_observation and e.trajectory.initial_observation != first:
                raise EnvError(
                    f"{self.env_id} reset(seed={seed}) began with another observation than the prompt: a dataset "
                    f"made with other env_kwargs (this rollout's: {self.env_kwargs}), or an env that is not "
                    "deterministic (turnkit.check_env tests this)"
                )
        self.last_episodes = episodes
        failed = [e.trajectory.error for e in episodes if e.trajectory.error is not None]
        if len(failed) == len(episodes):  # nothing to learn from: an outage, not data
            raise _FAULTS.get(failed[0].cause, EnvError)(
                f"every episode of the batch failed ({len(failed)}); the first: {failed[0].message}"
            )
        return {
            "prompt_ids": [list(e.prompt_ids) for e in episodes],
            "completion_ids": [list(e.completion_ids) for e in episodes],
            "logprobs": [list(e.logprobs) for e in episodes],
            "env_mask": [list(e.env_mask) for e in episodes],
            "env_return": [e.reward for e in episodes],
            "env_success": [e.trajectory.success for e in episodes],
            "env_seed": [e.trajectory.seed for e in episodes],
            "env_turns": [len(e.trajectory.steps) for e in episodes],
        }

    def policy_for(self, trainer: Any) -> HFPolicy:
        """An :class:`~turnkit.agents.hf.HFPolicy` over the trainer's current model, sampling as TRL would.

        Temperature and ``top_p`` come from the trainer; the sampling seed mixes ``args.seed``, the global step
        and a call counter, so every generation batch draws fresh samples and a rerun draws the same ones.

        Raises:
            ConfigError: vLLM generation, ``top_k``/``min_p``/``repetition_penalty`` (not implemented by
                ``HFPolicy``), an encoder-decoder model, or a tokenizer without a chat template.
        """
        if getattr(trainer, "use_vllm", False):
            raise ConfigError("EnvRollout generates with the trained model in-process; set GRPOConfig(use_vllm=False)")
        unsupported = {
            "top_k": (getattr(trainer, "top_k", 0), (0, None, -1)),
            "min_p": (getattr(trainer, "min_p", None), (None, 0.0)),
            "repetition_penalty": (getattr(trainer, "repetition_penalty", 1.0), (1.0, None)),
        }
        for name, (value, neutral) in unsupported.items():
            if value not in neutral:
                raise ConfigError(
                    f"EnvRollout samples with temperature and top_p only; unset GRPOConfig.{name}={value!r}"
                )
        model = trainer.accelerator.unwrap_model(trainer.model)
        if getattr(getattr(model, "config", None), "is_encoder_decoder", False):
            raise ConfigError(
                f"EnvRollout needs a decoder-only causal LM, got the encoder-decoder {type(model).__name__}"
            )
        tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
        self._delta(tokenizer)  # checks the chat template before any episode starts
        step = int(getattr(trainer.state, "global_step", 0))
        seed = int(np.random.SeedSequence([int(trainer.args.seed), step, self._calls]).generate_state(1)[0])
        self._calls += 1
        was_training = model.training
        policy = HFPolicy(
            model,
            tokenizer,
            temperature=float(trainer.temperature),
            top_p=float(trainer.top_p),
            max_new_tokens=self.max_new_tokens or int(trainer.max_completion_length or 256),
            seed=seed,
        )
        model.train(was_training)  # HFPolicy puts the model in eval mode; the trainer's step expects its own mode
        return policy

    # ------------------------------------------------------------------ episodes

    def play(
        self,
        seeds: Sequence[int],
        policy: HFPolicy,
        *,
        max_completion_length: int | None = None,
        max_turns: int | None = None,
    ) -> list[Episode]:
        """Play one episode per seed with token-exact contexts, batching the policy across live episodes.

        Args:
            seeds: Reset seeds, one episode each (repeat a seed for a group).
            policy: The policy; its ``max_new_tokens`` caps each turn.
            max_completion_length: Budget of sampled plus env ids after the first prompt (``None``: none).
            max_turns: Overrides the rollout's ``max_turns``.

        Returns:
            One :class:`Episode` per seed, in order.
        """
        delta = self._delta(policy.tokenizer)
        max_turns = max_turns if max_turns is not None else self.max_turns
        budget = math.inf if max_completion_length is None else int(max_completion_length)
        while len(self._envs) < len(seeds):
            self._env(len(self._envs))
        episodes = [_Live(env=env, seed=int(s)) for env, s in zip(self._envs, seeds, strict=False)]
        for ep in episodes:
            try:
                ep.observation, ep.reset_info = ep.env.reset(seed=ep.seed)
                ep.messages = [Message("user", ep.observation)]
                ep.context = chat_prompt_ids(policy.tokenizer, ep.messages)
            except Exception as exc:  # an env fault is data, as in turnkit.rollout.collect
                ep.error = TrajectoryError(env_fault_cause(exc), f"reset: {type(exc).__name__}: {exc}")
                ep.done = True
        while live := [ep for ep in episodes if not ep.done]:
            most = max(budget - ep.used for ep in live)  # each turn is then cut to its own episode's room
            per_turn = policy.sampling.max_new_tokens
            view = policy if most >= per_turn else policy.with_sampling(max_new_tokens=max(1, int(most)))
            contexts = [
                Context(
                    messages=tuple(ep.messages),
                    env_id=self.env_id,
                    turn=len(ep.steps),
                    episode_seed=ep.seed,
                    prompt_token_ids=tuple(ep.context),
                )
                for ep in live
            ]
            try:
                turns = view.act(contexts)
            except Exception as exc:  # a policy fault ends these episodes as data
                for ep in live:
                    ep.error = TrajectoryError(ErrorCause.AGENT, f"{type(exc).__name__}: {exc}", len(ep.steps))
                    ep.done = True
                continue
            for ep, turn in zip(live, turns, strict=True):
                self._advance(ep, _cut(turn, budget - ep.used, policy), delta, budget, max_turns)
        return [_episode(ep, self.env_id, policy) for ep in episodes]

    def _advance(self, ep: _Live, turn: AgentTurn, delta: ChatDelta, budget: float, max_turns: int | None) -> None:
        if not turn.token_ids:  # no room left in the model's context window
            if ep.steps:
                ep.steps[-1] = dataclasses.replace(ep.steps[-1], truncated=True)
            else:
                ep.error = TrajectoryError(ErrorCause.AGENT, f"no tokens generated ({turn.finish_reason})", 0)
            ep.done = True
            return
        try:
            obs, reward, terminated, truncated, info = ep.env.step(turn.text)
        except Exception as exc:
            ep.error = TrajectoryError(env_fault_cause(exc), f"step: {type(exc).__name__}: {exc}", len(ep.steps))
            ep.done = True
            return
        ep.used += len(turn.token_ids)
        stop = bool(terminated or truncated)
        if not stop and max_turns is not None and len(ep.steps) + 1 >= max_turns:
            truncated, stop = True, True
        between: list[int] = []
        if not stop:
            between = delta.between_turns(turn.token_ids, obs)
            if ep.used + len(between) >= budget:  # no room for another sampled id
                truncated, stop = True, True
        ep.steps.append(Step(ep.observation, turn, float(reward), bool(terminated), bool(truncated), dict(info)))
        ep.messages += [Message("assistant", turn.text), Message("user", obs)]
        ep.observation = obs
        ep.done = stop
        if not stop:
            ep.context = [*ep.context, *turn.token_ids, *between]
            ep.used += len(between)

    def _env(self, index: int) -> gymnasium.Env:
        while len(self._envs) <= index:
            self._envs.append(gymnasium.make(self.env_id, **self.env_kwargs))
        return self._envs[index]

    def _delta(self, tokenizer: PreTrainedTokenizerBase) -> ChatDelta:
        key = id(tokenizer)
        if key not in self._deltas:
            self._deltas[key] = ChatDelta(tokenizer)
        return self._deltas[key]

    def close(self) -> None:
        """Close the rollout's envs (idempotent)."""
        for env in self._envs:
            env.close()
        self._envs.clear()


def _prompt_task(prompt: Any) -> tuple[int, str]:
    """The (seed, first observation) a :meth:`EnvRollout.task_dataset` prompt carries."""
    first = prompt[0] if isinstance(prompt, list) and prompt and isinstance(prompt[0], dict) else {}
    seed = first.get("env_seed")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise DataError(
            f"prompt {str(prompt)[:80]!r} has no env seed; pass train_dataset=rollout.dataset (or "
            "rollout.task_dataset(seeds)), whose prompts carry the seed of their task"
        )
    return int(seed), str(first.get("content", ""))


def _cut(turn: AgentTurn, room: float, policy: HFPolicy) -> AgentTurn:
    """The turn shortened to ``room`` sampled ids (a prefix of a sample is a sample with a smaller budget)."""
    if len(turn.token_ids) <= room:
        return turn
    n = max(0, int(room))
    ids = turn.token_ids[:n]
    text = policy.tokenizer.decode([i for i in ids if i not in policy.stop_token_ids], skip_special_tokens=True)
    return AgentTurn(str(text), ids, turn.logprobs[:n], turn.prompt_token_ids, "length")


def _episode(ep: _Live, env_id: str, policy: HFPolicy) -> Episode:
    traj = Trajectory(
        env_id=env_id,
        seed=ep.seed,
        steps=tuple(ep.steps),
        initial_observation=ep.messages[0].content if ep.messages else "",
        final_observation=ep.observation if ep.steps else "",
        reset_info=ep.reset_info,
        task=getattr(ep.env.unwrapped, "task", None),
        error=ep.error,
    )
    if ep.error is not None or not ep.steps:
        # TRL needs one completion id per row; this one is masked out and the reward is None (no advantage)
        prompt = tuple(ep.context) or (policy.pad_token_id,)
        return Episode(traj, prompt, (policy.pad_token_id,), (0,), (0.0,), None)
    first, last = ep.steps[0].action, ep.steps[-1].action
    sequence = (*last.prompt_token_ids, *last.token_ids)
    start = len(first.prompt_token_ids)
    mask = [0] * (len(sequence) - start)
    logprobs = [0.0] * len(mask)
    for step in ep.steps:
        offset = len(step.action.prompt_token_ids) - start
        for j, lp in enumerate(step.action.logprobs or (0.0,) * len(step.action.token_ids)):
            mask[offset + j] = 1
            logprobs[offset + j] = float(lp)
    return Episode(
        traj, tuple(first.prompt_token_ids), sequence[start:], tuple(mask), tuple(logprobs), traj.total_reward
    )


def env_reward(
    completions: Sequence[Any], env_return: Sequence[float | None] | None = None, **kwargs: Any
) -> list[float | None]:
    """TRL reward function: the episode return that :class:`EnvRollout` measured (``reward_funcs=env_reward``).

    With TRL's ``log_metric`` it also logs ``env/success`` and ``env/turns`` (means over the batch). When the
    dataset's ``seed`` column reaches it, each row's seed must be the seed its episode was played with.

    Args:
        completions: TRL's decoded completions (only their number is used).
        env_return: Per completion, the episode return (``None``: errored, no reward).
        **kwargs: The other fields TRL passes (``seed``, ``env_seed``, ``env_success``, ``log_metric``, ...).

    Returns:
        ``env_return`` as a list.

    Raises:
        ConfigError: ``env_return`` is missing (the trainer's ``rollout_func`` is not an :class:`EnvRollout`).
        DataError: A row's episode was played with another seed than the row's.

    Example:
        >>> env_reward(["a", "b"], env_return=[1.0, 0.0], seed=[3, 3], env_seed=[3, 3])
        [1.0, 0.0]
    """
    if env_return is None:
        raise ConfigError("env_reward reads the env_return field of EnvRollout; pass rollout_func=EnvRollout(...)")
    if len(env_return) != len(completions):
        raise DataError(f"{len(env_return)} env returns for {len(completions)} completions")
    seeds, played = kwargs.get("seed"), kwargs.get("env_seed")
    if seeds is not None and played is not None:
        for i, (want, got) in enumerate(zip(seeds, played, strict=True)):
            if want != got:
                raise DataError(f"row {i}: the dataset seed is {want} but the episode was played with seed {got}")
    log_metric = kwargs.get("log_metric")
    if callable(log_metric) and kwargs.get("env_success") is not None:
        log_metric("env/success", float(np.mean(kwargs["env_success"])))
        log_metric("env/turns", float(np.mean(kwargs["env_turns"])))
    return [None if r is None else float(r) for r in env_return]
