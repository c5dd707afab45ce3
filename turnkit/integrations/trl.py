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

**One episode engine.** The episodes are played by :func:`~turnkit.rollout.collect.collect_batch` (with
``chat=`` for token-exact contexts and ``max_tokens=`` for the budget), the loop every turnkit tool uses, so
an episode here is the episode turnkit's own trainers would play: same contexts (tools and tool-reply roles
included), same ids. :func:`trl_row` then packs each trajectory into TRL's row (a pure function).

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

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np

from turnkit.agents.hf import HFPolicy
from turnkit.envs import registration as _registration  # noqa: F401  (registers the built-in env ids)
from turnkit.errors import AgentError, BrowserError, ConfigError, DataError, EnvError, SandboxError, TurnkitError
from turnkit.rollout.batch import find_prefix_mismatch
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect_batch
from turnkit.types import ErrorCause, Trajectory

if TYPE_CHECKING:
    import datasets
    from transformers import PreTrainedTokenizerBase

TRL_FIELDS = ("prompt_ids", "completion_ids", "logprobs")
"""The fields TRL's ``rollout_func`` contract requires."""

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

    @classmethod
    def of(cls, trajectory: Trajectory, *, pad_id: int) -> Episode:
        """The episode of a trajectory, packed by :func:`trl_row`."""
        row = trl_row(trajectory, pad_id=pad_id)
        return cls(
            trajectory,
            tuple(row["prompt_ids"]),
            tuple(row["completion_ids"]),
            tuple(row["env_mask"]),
            tuple(row["logprobs"]),
            row["env_return"],
        )

    def row(self) -> dict[str, Any]:
        """This episode's row of TRL's ``rollout_func`` output (:data:`TRL_FIELDS` and :data:`ENV_FIELDS`)."""
        return {
            "prompt_ids": list(self.prompt_ids),
            "completion_ids": list(self.completion_ids),
            "logprobs": list(self.logprobs),
            "env_mask": list(self.env_mask),
            "env_return": self.reward,
            "env_success": self.trajectory.success,
            "env_seed": self.trajectory.seed,
            "env_turns": len(self.trajectory.steps),
        }


def trl_row(trajectory: Trajectory, *, pad_id: int) -> dict[str, Any]:
    """One episode as one row of TRL's ``rollout_func`` output: a pure function of the trajectory's ids.

    The sequence is the last turn's context followed by its sampled ids; ``prompt_ids`` is the first turn's
    context and ``completion_ids`` everything after it. ``env_mask`` is 1 where a turn's sampled ids sit (each
    at the length of its own context) and ``logprobs`` holds their sampling log-probs.

    Args:
        trajectory: An episode played with token-exact contexts (``collect_batch(..., chat=ChatDelta(tok))``
            with a token-level agent): every turn's ``prompt_token_ids`` starts with the previous turn's
            prompt and sampled ids.
        pad_id: The single, masked-out completion id of an episode that errored or took no turn (TRL needs
            one id per row); its ``env_return`` is ``None``, so TRL gives it no advantage.

    Returns:
        :data:`TRL_FIELDS` and :data:`ENV_FIELDS`: ``prompt_ids``, ``completion_ids``, ``logprobs``,
        ``env_mask`` (lists), ``env_return`` (the return, ``None`` if errored), ``env_success``, ``env_seed``,
        ``env_turns``.

    Raises:
        DataError: A turn without sampled ids, or a context that does not extend the previous turn's.

    Example:
        >>> from turnkit.types import AgentTurn, Step
        >>> t0 = AgentTurn("a", token_ids=(7, 2), logprobs=(-0.5, -0.25), prompt_token_ids=(1, 4))
        >>> t1 = AgentTurn("b", token_ids=(8,), logprobs=(-1.0,), prompt_token_ids=(1, 4, 7, 2, 5, 6))
        >>> traj = Trajectory("d", 3, (Step("q", t0, 0.0), Step("r", t1, 1.0, terminated=True)))
        >>> row = trl_row(traj, pad_id=0)
        >>> row["prompt_ids"], row["completion_ids"], row["env_mask"]
        ([1, 4], [7, 2, 5, 6, 8], [1, 1, 0, 0, 1])
        >>> row["logprobs"], row["env_return"], row["env_seed"], row["env_turns"]
        ([-0.5, -0.25, 0.0, 0.0, -1.0], 1.0, 3, 2)
    """
    steps = trajectory.steps
    if trajectory.error is not None or not steps:
        prompt = list(steps[0].action.prompt_token_ids) if steps else []
        return _row(prompt or [pad_id], [pad_id], [0], [0.0], None, trajectory)
    for k, step in enumerate(steps):
        if not step.action.token_ids or not step.action.prompt_token_ids:
            raise DataError(f"turn {k} of seed {trajectory.seed} has no prompt or sampled ids; TRL needs both")
    mismatch = find_prefix_mismatch(trajectory)
    if mismatch is not None:
        raise DataError(f"seed {trajectory.seed}: the contexts are not token-exact ({mismatch}); play with chat=")
    first, last = steps[0].action, steps[-1].action
    start = len(first.prompt_token_ids)
    completion = [*last.prompt_token_ids[start:], *last.token_ids]
    mask, logprobs = [0] * len(completion), [0.0] * len(completion)
    for step in steps:
        offset = len(step.action.prompt_token_ids) - start
        for j, lp in enumerate(step.action.logprobs or (0.0,) * len(step.action.token_ids)):
            mask[offset + j], logprobs[offset + j] = 1, float(lp)
    return _row(list(first.prompt_token_ids), completion, mask, logprobs, trajectory.total_reward, trajectory)


def _row(
    prompt: list[int],
    completion: list[int],
    mask: list[int],
    logprobs: list[float],
    reward: float | None,
    trajectory: Trajectory,
) -> dict[str, Any]:
    return {
        "prompt_ids": prompt,
        "completion_ids": completion,
        "logprobs": logprobs,
        "env_mask": mask,
        "env_return": reward,
        "env_success": trajectory.success,
        "env_seed": trajectory.seed,
        "env_turns": len(trajectory.steps),
    }


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
        rows = [e.row() for e in episodes]
        return {key: [row[key] for row in rows] for key in (*TRL_FIELDS, *ENV_FIELDS)}

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

        The episodes are :func:`~turnkit.rollout.collect.collect_batch` episodes (``chat=`` the policy's
        template, ``max_tokens=max_completion_length``), each packed by :func:`trl_row`.

        Args:
            seeds: Reset seeds, one episode each (repeat a seed for a group).
            policy: The policy; its ``max_new_tokens`` caps each turn.
            max_completion_length: Budget of sampled plus env ids after the first prompt (``None``: none).
            max_turns: Overrides the rollout's ``max_turns``.

        Returns:
            One :class:`Episode` per seed, in order.
        """
        delta = self._delta(policy.tokenizer)
        self._env(len(seeds) - 1)
        trajectories = collect_batch(
            self._envs[: len(seeds)],
            policy,
            [int(s) for s in seeds],
            max_turns=max_turns if max_turns is not None else self.max_turns,
            chat=delta,
            max_tokens=None if max_completion_length is None else int(max_completion_length),
        )
        return [Episode.of(t, pad_id=policy.pad_token_id) for t in trajectories]

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
