"""Any registered turnkit env as a `verifiers <https://github.com/PrimeIntellect-ai/verifiers>`_ environment.

verifiers (tested with 0.4.0, its ``verifiers.v1`` API) is what prime-rl trains with and what the Environments
Hub serves. :func:`load_environment` returns a ``verifiers.v1.Env`` that plays a turnkit env, multi-turn:

* **Tasks are reset seeds.** The taskset (:class:`TurnkitTaskset`) has one task per seed (default
  ``range(1024)``); a task's ``prompt`` is the env's first observation for that seed, and its data carries the
  env id, ``env_kwargs`` (``split=``, ``difficulty=``, ...) and the seed, never privileged data.
* **The env plays the user.** Per rollout, :class:`TurnkitEnv` makes its own env instance
  (``gymnasium.make(env_id, **env_kwargs)``, time limit included), resets it with the task's seed, and opens the
  ``player`` agent's interaction: each assistant reply is ``env.step``'s action, the next observation comes
  back as the next user message, and a terminated or truncated step ends the exchange. The env is closed at
  the end of the rollout, whatever happened.
* **The env's reward is the rubric.** The episode return (the sum of the step rewards) is the trace's one
  reward, ``env_return`` (weight 1); ``turns``, ``success`` and ``truncated`` are metrics, and
  ``trace.info["turnkit"]`` keeps the seed and every step's reward and flags.

The player's harness defaults to verifiers' tool-less ``null`` chat loop (a PEP 723 script run by ``uv``), so
the model sees exactly the conversation: no system prompt, the observations as user messages, its own replies.

* **Offline after set-up.** Before any episode (``env.serving()``) the env locks and installs that script
  (:mod:`turnkit.integrations.verifiers_chat`; PyPI is needed the first time only, ``python -m
  turnkit.integrations.verifiers`` does it at set-up), and the seat runs it with ``UV_FROZEN=1``, so episodes
  need no network afterwards; a script that cannot be made ready raises :class:`turnkit.errors.AgentError` there.
* **A failed episode says why.** A player whose run stops on errors (model server down, unknown model name...)
  before the env ends the episode fails the episode: ``episode.ok`` is False and ``episode.errors`` names the
  seed and the reason, instead of a return of 0.

verifiers loads plugins by installed module name, so the taskset is also importable as the top-level module
``turnkit_verifiers`` (taskset id ``turnkit-verifiers``): ``vf eval turnkit-verifiers --env.taskset.env-id
turnkit/MathEpisodes-v0 ...`` or prime-rl's ``[env.taskset] id = "turnkit-verifiers"`` play the same env. The
verifiers classes are built on first use (importing verifiers takes seconds), so this module imports without
verifiers installed.

Example:
    >>> env = load_environment("turnkit/MathEpisodes-v0", seeds=range(3), kinds=["arithmetic"])
    >>> type(env).__name__, env.config.player.harness.id, env.config.player.runtime.type
    ('TurnkitEnv', 'null', 'subprocess')
    >>> task = next(iter(env.taskset))
    >>> task.data.seed, task.data.prompt
    (0, 'What is 6 plus 5?\\nReply with ANSWER: <value>.')
"""

from __future__ import annotations

import asyncio
import copy
import difflib
import functools
import importlib
import importlib.util
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import ModuleType, SimpleNamespace
from typing import Any

import gymnasium

from turnkit.envs import TextEnv
from turnkit.errors import AgentError, ConfigError, EnvError
from turnkit.integrations.verifiers_chat import CHAT_HARNESSES, FROZEN_ENV, prepare_chat_program

TASKSET_ID = "turnkit-verifiers"
"""The verifiers taskset id of the adapter (the top-level module ``turnkit_verifiers``)."""

DEFAULT_NUM_SEEDS = 1024
REWARD_NAME = "env_return"
PUBLIC_NAMES = frozenset(
    {"TurnkitTaskData", "TurnkitTask", "TurnkitTasksetConfig", "TurnkitTaskset", "TurnkitEnvConfig", "TurnkitEnv"}
)


def task_seeds(seeds: Iterable[int] | None, num_seeds: int | None, seed_start: int = 0) -> list[int]:
    """The seeds a taskset plays: ``seeds`` if given, else ``seed_start ..  seed_start + num_seeds - 1``.

    Args:
        seeds: Explicit reset seeds (any order, no repeats), or ``None``.
        num_seeds: How many consecutive seeds from ``seed_start`` when ``seeds`` is ``None``
            (``None``: :data:`DEFAULT_NUM_SEEDS`).
        seed_start: The first consecutive seed.

    Returns:
        The seeds, as a list of ints.

    Raises:
        ConfigError: a seed that is not an int >= 0, a repeated seed, or an empty set of seeds.

    Example:
        >>> task_seeds(None, 3, seed_start=10), task_seeds([5, 1], None)
        ([10, 11, 12], [5, 1])
    """
    if seeds is None:
        count = DEFAULT_NUM_SEEDS if num_seeds is None else num_seeds
        seeds = range(seed_start, seed_start + count)
    out = list(seeds)
    bad = [s for s in out if isinstance(s, bool) or not isinstance(s, int) or s < 0]
    if bad or not out or len(set(out)) != len(out):
        why = f"seeds must be ints >= 0 ({bad[:3]!r})" if bad else "seeds must be distinct and not empty"
        raise ConfigError(f"turnkit verifiers taskset: {why}")
    return out


def make_env(env_id: str, env_kwargs: Mapping[str, Any]) -> gymnasium.Env:
    """``gymnasium.make(env_id, **env_kwargs)`` for a turnkit text env, with turnkit errors.

    Args:
        env_id: A registered env id.
        env_kwargs: Passed to ``gymnasium.make`` (copied, so the env cannot change the caller's values).

    Returns:
        The env, time limit included.

    Raises:
        EnvError: an unknown env id (naming the closest registered id), kwargs the env does not take, or an env
            that is not a :class:`turnkit.TextEnv`.

    Example:
        >>> make_env("turnkit/MathEpisods-v0", {})
        Traceback (most recent call last):
        ...
        turnkit.errors.EnvError: unknown env id 'turnkit/MathEpisods-v0'; did you mean 'turnkit/MathEpisodes-v0'?
    """
    if env_id not in gymnasium.registry:
        close = difflib.get_close_matches(env_id, list(gymnasium.registry), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else "; `turnkit list` shows the registered envs"
        raise EnvError(f"unknown env id {env_id!r}{hint}")
    try:
        env = gymnasium.make(env_id, **copy.deepcopy(dict(env_kwargs)))
    except TypeError as exc:
        raise EnvError(f"cannot make {env_id!r} with {dict(env_kwargs)}: {exc}") from exc
    if not isinstance(env.unwrapped, TextEnv):
        env.close()
        raise EnvError(f"{env_id!r} is a {type(env.unwrapped).__name__}, not a turnkit TextEnv")
    return env


def load_environment(
    env_id: str,
    *,
    seeds: Iterable[int] | None = None,
    **env_kwargs: Any,
) -> Any:
    """A verifiers environment (``verifiers.v1.Env``) playing the registered turnkit env ``env_id``.

    Args:
        env_id: A registered env id, e.g. ``"turnkit/MathEpisodes-v0"``.
        seeds: The reset seeds that make the taskset, one task each (default ``range(1024)``); e.g.
            ``range(10**6, 10**6 + 64)`` for held-out tasks.
        **env_kwargs: Passed to ``gymnasium.make`` (``split="ood"``, ``difficulty=2``...); ``max_episode_steps=N``
            ends episodes after ``N`` turns (truncated), as everywhere in turnkit.

    Returns:
        A :class:`TurnkitEnv` (a ``verifiers.v1.Env``) over a :class:`TurnkitTaskset`; run it as any verifiers
        env (``env.serving()`` and ``env.run_episode(task, ctx)``, verifiers' eval, prime-rl).

    Raises:
        EnvError: an unknown env id (with the closest registered id) or bad ``env_kwargs``.
        ConfigError: bad ``seeds``.

    Example:
        >>> env = load_environment("turnkit/MathEpisodes-v0", seeds=[7, 3], split="ood")
        >>> [(t.data.name, t.data.env_kwargs) for t in env.taskset]
        [('turnkit/MathEpisodes-v0#7', {'split': 'ood'}), ('turnkit/MathEpisodes-v0#3', {'split': 'ood'})]
    """
    import verifiers.v1 as vf

    make_env(env_id, env_kwargs).close()  # fail here, not in the first rollout
    plugin_module()
    taskset = {"id": TASKSET_ID, "env_id": env_id, "env_kwargs": dict(env_kwargs), "seeds": task_seeds(seeds, None)}
    return vf.load_environment(vf.resolve_env_config({"taskset": taskset}))


def plugin_module() -> ModuleType:
    """The module verifiers imports for the taskset id :data:`TASKSET_ID`: ``turnkit_verifiers``, shipped with turnkit.

    Raises:
        ConfigError: It cannot be imported (an install of turnkit made before it existed): reinstall turnkit.

    Example:
        >>> module = plugin_module()
        >>> module.__name__, module.TurnkitEnv is verifiers_classes().TurnkitEnv
        ('turnkit_verifiers', True)
    """
    try:
        return importlib.import_module("turnkit_verifiers")
    except ModuleNotFoundError as exc:
        if exc.name != "turnkit_verifiers":
            raise
        raise ConfigError(
            f"the verifiers taskset {TASKSET_ID!r} needs the module turnkit_verifiers, which this install of turnkit "
            "lacks (it predates it): reinstall turnkit (pip install -e . in its checkout)"
        ) from exc


def reply_text(messages: Sequence[Any]) -> str:
    """The text of the last assistant message of a verifiers segment, exactly as the model wrote it.

    Whitespace is kept (verifiers' ``Segment.last_reply`` strips it, which would change the env's action); a
    message without content is the empty reply ``""``.

    Example:
        >>> from types import SimpleNamespace as Msg
        >>> reply_text([Msg(role="assistant", content=" ANSWER: 4\\n"), Msg(role="tool", content="ok")])
        ' ANSWER: 4\\n'
        >>> reply_text([Msg(role="assistant", content=None)])
        ''
    """
    for message in reversed(messages):
        if getattr(message, "role", None) == "assistant":
            content = message.content
            return content if isinstance(content, str) else "".join(getattr(p, "text", "") for p in content or ())
    return ""


def episode_success(steps: Sequence[Mapping[str, Any]]) -> bool:
    """:attr:`turnkit.Trajectory.success` of recorded steps (``reward``, ``truncated``, ``success`` or ``None``).

    Example:
        >>> episode_success([{"reward": 0.0, "truncated": False, "success": None},
        ...                  {"reward": 1.0, "truncated": False, "success": None}])
        True
    """
    if not steps:
        return False
    last = steps[-1]
    if last.get("success") is not None:
        return bool(last["success"])
    return not last["truncated"] and sum(s["reward"] for s in steps) > 0


def runs_locked_chat_program(agent: Any) -> bool:
    """Whether a verifiers seat (an ``AgentConfig``) runs verifiers' chat program locally, where turnkit locks it.

    That is the ``null`` or ``bash`` harness on the ``subprocess`` runtime (the adapter's default); other
    runtimes build the program inside their own box, with their own network.

    Example:
        >>> from types import SimpleNamespace as Seat
        >>> runs_locked_chat_program(Seat(harness=Seat(id="null"), runtime=Seat(type="subprocess")))
        True
        >>> runs_locked_chat_program(Seat(harness=Seat(id="null"), runtime=Seat(type="docker")))
        False
    """
    harness = agent.harness
    return harness is not None and harness.id in CHAT_HARNESSES and agent.runtime.type == "subprocess"


def player_failure(env_id: str, seed: int, turns: int, trace: Any) -> str:
    """Why an episode did not run to its end: the player's run stopped on errors before the env ended it.

    Example:
        >>> from types import SimpleNamespace as Trace
        >>> failed = Trace(stop_condition="provider_error", errors=[Trace(message="refused")])
        >>> player_failure("demo", 3, 0, failed)
        "demo seed 3: the player's run stopped (provider_error) after 0 env turns, so it has no return: refused"
    """
    errors = "; ".join(error.message.strip()[-500:] for error in trace.errors)
    stopped = f"the player's run stopped ({trace.stop_condition}) after {turns} env turns"
    return f"{env_id} seed {seed}: {stopped}, so it has no return: {errors}"


@functools.cache
def verifiers_classes() -> SimpleNamespace:
    """The verifiers taskset, task and env classes of the adapter, built on first use (imports verifiers).

    Returns:
        A namespace with ``TurnkitTaskData``, ``TurnkitTask``, ``TurnkitTasksetConfig``, ``TurnkitTaskset``,
        ``TurnkitEnvConfig`` and ``TurnkitEnv`` (also importable by those names from this module).

    Example:
        >>> classes = verifiers_classes()
        >>> [c.__mro__[1].__name__ for c in (classes.TurnkitTaskset, classes.TurnkitEnv)]
        ['Taskset', 'Env']
    """
    import verifiers.v1 as vf
    from pydantic import Field, model_validator

    class TurnkitTaskData(vf.TaskData):
        """One turnkit task: the env, its kwargs and the reset seed (``prompt`` is the first observation)."""

        env_id: str
        env_kwargs: dict[str, Any] = Field(default_factory=dict)
        seed: int

    class TurnkitTask(vf.Task[TurnkitTaskData, vf.State, vf.TaskConfig]):
        """A turnkit task; scored by the env's return (recorded by :class:`TurnkitEnv`), not by task hooks."""

    class TurnkitTasksetConfig(vf.TasksetConfig):
        """``--env.taskset.*``: which env (``env-id``, ``env-kwargs``) and which seeds."""

        env_id: str = "turnkit/MathEpisodes-v0"
        env_kwargs: dict[str, Any] = Field(default_factory=dict)
        seeds: list[int] | None = None
        """Explicit reset seeds; ``None``: ``seed_start .. seed_start + num_seeds - 1``."""
        seed_start: int = 0
        num_seeds: int = DEFAULT_NUM_SEEDS

    class TurnkitTaskset(vf.Taskset[TurnkitTask, TurnkitTasksetConfig]):
        """One task per seed; the prompt is the env's first observation for that seed."""

        def load(self) -> Iterator[TurnkitTask]:
            config = self.config
            seeds = task_seeds(config.seeds, config.num_seeds, config.seed_start)
            env = make_env(config.env_id, config.env_kwargs)
            try:
                for seed in seeds:
                    observation, _ = env.reset(seed=seed)
                    data = TurnkitTaskData(
                        id=f"{config.env_id}@{seed}",
                        name=f"{config.env_id}#{seed}",
                        prompt=observation,
                        env_id=config.env_id,
                        env_kwargs=config.env_kwargs,
                        seed=seed,
                    )
                    yield TurnkitTask(data, config.task)
            finally:
                env.close()

    class TurnkitEnvConfig(vf.EnvConfig):
        """The env's one seat, ``player``: verifiers' tool-less ``null`` chat loop, run locally (``subprocess``).

        ``uv`` runs the chat loop; ``UV_NATIVE_TLS`` makes it trust the system's certificates as pip does (behind
        a TLS-inspecting proxy its own bundle fails). A chat harness on the subprocess runtime also gets
        ``UV_FROZEN=1`` (unless its ``env`` sets it): :class:`TurnkitEnv` locks the program before any episode, so
        uv installs that lock and never needs PyPI (:mod:`turnkit.integrations.verifiers_chat`).
        """

        player: vf.AgentConfig = vf.AgentConfig(
            harness={"id": "null", "env": {"UV_NATIVE_TLS": "true"}}, runtime={"type": "subprocess"}
        )

        @model_validator(mode="after")
        def run_the_locked_chat_program(self) -> TurnkitEnvConfig:
            harness = self.player.harness
            if runs_locked_chat_program(self.player) and harness is not None:
                harness = harness.model_copy(update={"env": {**FROZEN_ENV, **harness.env}})
                self.player = self.player.model_copy(update={"harness": harness})
            return self

    class TurnkitEnv(vf.Env[TurnkitEnvConfig]):
        """One turnkit env instance per rollout, reset with the task's seed, stepped with the player's replies."""

        async def start(self) -> None:
            """Before any episode (``env.serving()``): verifiers' chat program locked and installed, or an error.

            Raises:
                AgentError: the chat program cannot be made ready (no lock yet and PyPI unreachable, ...),
                    with uv's reason; the episodes would all fail without running.
            """
            player = self.config.player
            if runs_locked_chat_program(player) and player.harness is not None:
                await asyncio.to_thread(prepare_chat_program, player.harness.resolved_env)

        async def run(self, task: TurnkitTask, agents: vf.Agents) -> None:
            data = task.data
            env = await asyncio.to_thread(make_env, data.env_id, data.env_kwargs)
            steps: list[dict[str, Any]] = []
            try:
                observation, _ = await asyncio.to_thread(env.reset, seed=data.seed)
                if observation != data.prompt:
                    raise EnvError(
                        f"{data.env_id} reset with seed {data.seed} does not give the task's prompt: the taskset was "
                        "built with other env_kwargs, or the env is not deterministic"
                    )
                async with agents.player.interaction(task) as interaction:
                    segment = await interaction.turn()
                    while not segment.terminated:
                        action = reply_text(segment.messages)
                        observation, reward, terminated, truncated, info = await asyncio.to_thread(env.step, action)
                        steps.append(
                            {
                                "reward": float(reward),
                                "terminated": bool(terminated),
                                "truncated": bool(truncated),
                                "success": bool(info["success"]) if "success" in info else None,
                            }
                        )
                        if terminated or truncated:
                            break
                        segment = await interaction.turn(observation)
            finally:
                await asyncio.to_thread(env.close)
            trace = interaction.trace
            total = float(sum(s["reward"] for s in steps))
            trace.info["turnkit"] = {"env_id": data.env_id, "seed": data.seed, "steps": steps, "return": total}
            if segment.terminated and trace.errors:  # the player's run failed before the env ended the episode
                raise AgentError(player_failure(data.env_id, data.seed, len(steps), trace))
            trace.record_reward(REWARD_NAME, total, 1.0)
            trace.record_metric("turns", len(steps))
            trace.record_metric("truncated", float(not steps or not steps[-1]["terminated"]))
            trace.record_metric("success", float(episode_success(steps)))

    return SimpleNamespace(
        TurnkitTaskData=TurnkitTaskData,
        TurnkitTask=TurnkitTask,
        TurnkitTasksetConfig=TurnkitTasksetConfig,
        TurnkitTaskset=TurnkitTaskset,
        TurnkitEnvConfig=TurnkitEnvConfig,
        TurnkitEnv=TurnkitEnv,
    )


def __getattr__(name: str) -> Any:
    """The verifiers classes by name (:func:`verifiers_classes`), built on first access."""
    if name in PUBLIC_NAMES:
        return getattr(verifiers_classes(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m turnkit.integrations.verifiers``: lock and install verifiers' chat program (set-up, PyPI once).

    Afterwards the adapter's episodes run with no network (:mod:`turnkit.integrations.verifiers_chat`).
    Idempotent: run again, it checks the lock and the environment and needs no network.
    """
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m turnkit.integrations.verifiers",
        description="Lock and install verifiers' chat program once (needs PyPI), so that turnkit's verifiers "
        "episodes run offline afterwards.",
    )
    parser.parse_args(argv)
    try:
        program = prepare_chat_program(verifiers_classes().TurnkitEnvConfig().player.harness.resolved_env)
    except AgentError as exc:
        print(f"turnkit verifiers: {exc}", file=sys.stderr)
        return 1
    print(f"verifiers' chat program is ready to run offline: {program.script}")
    print(f"  lock: {program.lock}")
    print(f"  python: {program.python}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
