"""`TextEnv`: the Gymnasium text-environment contract every turnkit env follows.

Observations and actions are plain ``str``. An observation is the *new* message from the env (the task
prompt on ``reset``, feedback or a simulated human's reply on ``step``); the rollout layer keeps the
conversation (observation -> ``user`` message, action -> ``assistant`` message).

The contract, enforced by :func:`turnkit.check_env`:

* All randomness goes through ``self.np_random``, seeded by ``reset(seed=...)``: the same seed gives the
  same episode in any process, also concurrently.
* Invalid actions (empty, too long, NUL bytes, invalid UTF-8, not text) are observations, not exceptions:
  the env explains the problem in the next observation and ``info["invalid_action"]``, and ends the
  episode once ``max_invalid_actions`` is exceeded.
* Privileged task data (reference answers, hidden tests) never appears in observations or ``info``; critics
  and oracle agents read it through :meth:`TextEnv.privileged`.
* Truncation comes only from the ``TimeLimit`` wrapper that ``gymnasium.make`` adds.
* :meth:`TextEnv.snapshot` / :meth:`TextEnv.restore` branch from any point; restoring and replaying the same
  actions gives an identical continuation. Families override :meth:`TextEnv.get_state` /
  :meth:`TextEnv.set_state` for O(state) snapshots; the default replays the action history.

A new env subclasses :class:`TextEnv` once and implements three hooks::

    generate_task(rng) -> Task        # a procedural task, from the episode RNG only
    begin(task) -> str                # set up episode state, return the first observation
    respond(action) -> Transition     # react to one valid action

Example:
    >>> import numpy as np
    >>> from turnkit.envs.core import TextEnv, Transition
    >>> from turnkit.types import Task
    >>> class Echo(TextEnv):
    ...     '''Say the hidden word back.'''
    ...     def generate_task(self, rng):
    ...         word = str(rng.choice(["cat", "dog"]))
    ...         return Task(task_id=f"echo-{word}", prompt="Guess the word.", privileged={"word": word})
    ...     def begin(self, task):
    ...         return task.prompt
    ...     def respond(self, action):
    ...         ok = action.strip() == self.privileged()["word"]
    ...         return Transition("Correct." if ok else "No.", reward=float(ok), terminated=ok,
    ...                           info={"success": ok})
    >>> env = Echo()
    >>> obs, info = env.reset(seed=3)
    >>> obs
    'Guess the word.'
    >>> env.step("")[4]["invalid_action"]
    'empty'
    >>> env.step(env.privileged()["word"])[1:3]
    (1.0, True)
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium import logger
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit

from turnkit.envs.spaces import TextSpace
from turnkit.errors import ConfigError, EnvError
from turnkit.tools.toolbox import ToolboxState, ToolsArg, ToolTurn, make_toolbox
from turnkit.types import Task


class InvalidAction(str, enum.Enum):
    """Why an action was not accepted; the value goes into ``info["invalid_action"]``."""

    NOT_TEXT = "not_text"
    EMPTY = "empty"
    TOO_LONG = "too_long"
    NUL_BYTES = "nul_bytes"
    INVALID_UTF8 = "invalid_utf8"
    BAD_TOOL_CALL = "bad_tool_call"
    EPISODE_OVER = "episode_over"


_EXPLANATIONS = {
    InvalidAction.NOT_TEXT: "it was not text",
    InvalidAction.EMPTY: "it was empty",
    InvalidAction.TOO_LONG: "it was longer than {limit} characters",
    InvalidAction.NUL_BYTES: "it contained NUL bytes",
    InvalidAction.INVALID_UTF8: "it was not valid UTF-8 text",
}


def validate_action(action: Any, max_chars: int) -> tuple[str, InvalidAction | None]:
    r"""Check that an action is acceptable text.

    Args:
        action: What the agent sent: normally ``str``; ``bytes`` are decoded as strict UTF-8.
        max_chars: Largest accepted length in characters.

    Returns:
        ``(text, None)`` for a valid action, ``("", reason)`` otherwise.

    Example:
        >>> validate_action("x = 1", 100)
        ('x = 1', None)
        >>> validate_action("a\x00b", 100)[1].value, validate_action("\ud800", 100)[1].value
        ('nul_bytes', 'invalid_utf8')
    """
    if isinstance(action, (bytes, bytearray)):
        try:
            action = bytes(action).decode("utf-8")
        except UnicodeDecodeError:
            return "", InvalidAction.INVALID_UTF8
    if not isinstance(action, str):
        return "", InvalidAction.NOT_TEXT
    if len(action) > max_chars:
        return "", InvalidAction.TOO_LONG
    try:
        action.encode("utf-8")
    except UnicodeEncodeError:
        return "", InvalidAction.INVALID_UTF8
    if "\x00" in action:
        return "", InvalidAction.NUL_BYTES
    if not action.strip():
        return "", InvalidAction.EMPTY
    return action, None


@dataclass(frozen=True)
class Transition:
    """What :meth:`TextEnv.respond` returns for one valid action.

    Attributes:
        observation: The env's next message to the agent.
        reward: The step reward.
        terminated: The episode reached a terminal state.
        info: Policy-visible extra info (must not contain privileged data). Terminal steps should set
            ``"success"``.
    """

    observation: str
    reward: float = 0.0
    terminated: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)


_REPLAY = object()  # get_state() default: snapshots fall back to replaying the action history


@dataclass(frozen=True)
class EnvSnapshot:
    """An opaque, restorable copy of a :class:`TextEnv` at one point of an episode.

    Attributes:
        task: The episode's task.
        turn: Number of steps taken.
        invalid_actions: Number of invalid actions so far.
        done: Whether the episode has ended.
        last_observation: The last observation returned.
        rng_state: The bit-generator state of ``np_random``.
        state: The family state from :meth:`TextEnv.get_state`, or the replay record.
        last_action: The last action text (for :meth:`TextEnv.render`).
        tools: The toolbox's calls so far (``None`` without tools).
    """

    task: Task
    turn: int
    invalid_actions: int
    done: bool
    last_observation: str
    rng_state: Mapping[str, Any]
    state: Any
    last_action: str = ""
    tools: ToolboxState | None = None


class TextEnv(gymnasium.Env[str, str]):
    """Base class of turnkit text envs (see the module docstring for the contract).

    Args:
        split: Which task distribution :meth:`generate_task` draws from; one of ``self.splits``.
        tasks: A fixed task list (e.g. loaded from a JSONL file) to draw from instead of the generator.
        max_invalid_actions: Invalid actions allowed before the episode ends.
        max_action_chars: Longest accepted action, in characters.
        render_mode: ``"ansi"`` (``render()`` returns the last exchange) or ``"human"`` (prints it).
        tools: Tools the agent may call (see :mod:`turnkit.tools`): names such as ``["python", "submit"]``, a
            dict of :class:`~turnkit.tools.Toolbox` arguments, or a toolbox. A message that calls a tool is
            answered with the tool's output (``info["tool"]``) and never reaches :meth:`respond`, except
            ``submit``, whose answer is formatted with :attr:`submit_template` and judged as a message.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "human"]}  # noqa: RUF012 (gymnasium API)
    splits: ClassVar[tuple[str, ...]] = ("id", "ood", "combo")
    """Split names accepted by this family's generator."""
    submit_template: ClassVar[str] = "{answer}"
    """How the ``submit`` tool's answer becomes a message for :meth:`respond` (e.g. ``"ANSWER: {answer}"``)."""

    def __init__(
        self,
        *,
        split: str = "id",
        tasks: Sequence[Task] | None = None,
        max_invalid_actions: int = 3,
        max_action_chars: int = 16_384,
        render_mode: str | None = None,
        tools: ToolsArg = None,
    ) -> None:
        if tasks is None and split not in self.splits:
            name = type(self).__name__
            raise EnvError(f"{name}: unknown split {split!r}; choose one of {list(self.splits)}")
        if tasks is not None and len(tasks) == 0:
            raise EnvError(f"{type(self).__name__}: the task list is empty")
        if max_invalid_actions < 0:
            raise EnvError(f"max_invalid_actions must be >= 0, got {max_invalid_actions}")
        if max_action_chars < 1:
            raise EnvError(f"max_action_chars must be >= 1, got {max_action_chars}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            modes = self.metadata["render_modes"]
            raise EnvError(f"unknown render_mode {render_mode!r}; choose one of {modes}")
        self.split = split
        self.max_invalid_actions = max_invalid_actions
        self.max_action_chars = max_action_chars
        self.render_mode = render_mode
        self.observation_space = TextSpace()
        self.action_space = TextSpace(max_length=max_action_chars)
        self._fixed_tasks = tuple(tasks) if tasks is not None else None
        self._task: Task | None = None
        self._turn = 0
        self._invalid = 0
        self._done = False
        self._last_obs = ""
        self._last_action = ""
        self._history: list[Any] = []
        self._reset_rng_state: Mapping[str, Any] | None = None
        self._replaying = False
        self.toolbox = make_toolbox(tools)
        """The tools on offer (``None`` without tools)."""
        if self.toolbox is not None:
            if getattr(self.toolbox, "_owner", None) is not None:
                raise ConfigError(
                    "a Toolbox belongs to one env; pass tool names or a dict of Toolbox arguments to give several "
                    "envs the same tools"
                )
            self.toolbox._owner = id(self)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ hooks for subclasses
    def generate_task(self, rng: np.random.Generator) -> Task:
        """Draw a task of ``self.split`` using only ``rng``. Override in procedural families."""
        raise NotImplementedError(f"{type(self).__name__} has no task generator; pass tasks=[...]")

    def begin(self, task: Task) -> str:
        """Set up the episode state for ``task`` and return the first observation."""
        raise NotImplementedError

    def respond(self, action: str) -> Transition:
        """React to one valid action (already checked by :func:`validate_action`)."""
        raise NotImplementedError

    def reject(self, message: str, reason: str, info: Mapping[str, Any] | None = None) -> Transition:
        """For :meth:`respond`: count an unusable action as invalid, like empty or oversized text.

        Use it for text that passed :func:`validate_action` but cannot be acted on (an unknown element, a
        malformed command). Returns the feedback transition: ``message`` plus how many invalid messages are left,
        ``info["invalid_action"] = reason``, and the end of the episode (``success`` false) once the allowance
        ``max_invalid_actions`` is exceeded.

        Example:
            >>> from turnkit.envs.core import TextEnv
            >>> class Strict(TextEnv):
            ...     def generate_task(self, rng):
            ...         return Task("t", "Say go.")
            ...     def begin(self, task):
            ...         return task.prompt
            ...     def respond(self, action):
            ...         if action != "go":
            ...             return self.reject(f"Unknown command {action!r}.", "unknown_command")
            ...         return Transition("Done.", 1.0, True, {"success": True})
            >>> env = Strict(max_invalid_actions=1)
            >>> _ = env.reset(seed=0)
            >>> obs, reward, terminated, _, info = env.step("stop")
            >>> obs, info["invalid_action"], terminated
            ("Unknown command 'stop'. 0 more invalid message(s) end the episode.", 'unknown_command', False)
            >>> env.step("halt")[2]
            True
        """
        self._invalid += 1
        left = self.max_invalid_actions - self._invalid
        ended = left < 0
        tail = "The episode is over." if ended else f"{left} more invalid message(s) end the episode."
        out: dict[str, Any] = {**(info or {}), "invalid_action": reason}
        if ended:
            out["success"] = False
        return Transition(f"{message} {tail}", 0.0, ended, out)

    def extra_info(self) -> dict[str, Any]:
        """Family-specific public keys merged into every ``info`` (reset, valid and invalid steps).

        Must not contain privileged data. Keys a :class:`Transition` sets take precedence.
        """
        return {}

    def get_state(self) -> Any:
        """Return the family's episode state for :meth:`snapshot` (deep-copied by the caller).

        The default returns a marker that makes snapshots replay the action history (O(history)).
        """
        return _REPLAY

    def set_state(self, state: Any) -> None:
        """Install a state returned by :meth:`get_state` (already a private copy)."""
        raise NotImplementedError  # only called when get_state is overridden

    # ------------------------------------------------------------------ public API
    @property
    def task(self) -> Task:
        """The current task, privileged part included. Not for policies; for critics and tools."""
        if self._task is None:
            raise EnvError(f"{type(self).__name__}: call reset() before reading the task")
        return self._task

    def privileged(self) -> Mapping[str, Any]:
        """The privileged (training-time) information of the current task."""
        return self.task.privileged

    @property
    def tool_schemas(self) -> tuple[dict[str, Any], ...]:
        """The tools on offer in OpenAI ``tools=[...]`` form (empty without tools); agents send or render them.

        Example:
            >>> import gymnasium, turnkit
            >>> env = gymnasium.make("turnkit/MathEpisodes-v0", tools=["python"])
            >>> [t["function"]["name"] for t in env.unwrapped.tool_schemas]
            ['python']
        """
        return self.toolbox.schemas() if self.toolbox is not None else ()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        """Start an episode.

        Args:
            seed: Seeds ``np_random``; the same seed gives the same episode.
            options: ``{"task": Task}`` plays that task; ``{"task_index": i}`` picks from a fixed task list.

        Returns:
            The first observation and the info dict.
        """
        super().reset(seed=seed)
        options = options or {}
        task = options.get("task")
        if task is not None and not isinstance(task, Task):
            raise EnvError(f"options['task'] must be a turnkit.Task, got {type(task).__name__}")
        if task is None:
            task = self._draw_task(options.get("task_index"))
        self._task = task
        self._turn = 0
        self._invalid = 0
        self._done = False
        self._last_action = ""
        self._history = []
        self._reset_rng_state = self.np_random.bit_generator.state  # the getter builds a fresh dict: no copy
        self._last_obs = self.begin(task)
        if self.toolbox is not None:
            self.toolbox.reset()
            if self.toolbox.announce:
                self._last_obs = f"{self._last_obs}\n\n{self.toolbox.instructions()}"
        return self._last_obs, self._info({})

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Apply one agent message. Never raises on bad action text (see the module docstring)."""
        if self._task is None:
            raise EnvError(f"{type(self).__name__}: call reset() before step()")
        if self._done:
            logger.warn("step() called after the episode ended; call reset() first.")
            info = self._info({"invalid_action": InvalidAction.EPISODE_OVER.value})
            return "The episode has ended.", 0.0, True, False, info
        self._history.append(action)
        return self._apply(action)

    def snapshot(self) -> EnvSnapshot:
        """A restorable copy of the current episode state."""
        state = self.get_state()
        if state is _REPLAY:
            state = ("replay", copy.deepcopy(self._reset_rng_state), list(self._history))
        else:
            state = ("state", copy.deepcopy(state))
        return EnvSnapshot(
            task=self.task,
            turn=self._turn,
            invalid_actions=self._invalid,
            done=self._done,
            last_observation=self._last_obs,
            rng_state=copy.deepcopy(self.np_random.bit_generator.state),
            state=state,
            last_action=self._last_action,
            tools=self.toolbox.snapshot() if self.toolbox is not None else None,
        )

    def restore(self, snap: EnvSnapshot) -> None:
        """Return to the point where ``snap`` was taken. A snapshot can be restored any number of times."""
        kind, *payload = snap.state
        self._task = snap.task
        if kind == "replay":
            reset_rng, actions = payload
            self._set_rng(reset_rng)
            self._turn = self._invalid = 0
            self._done = False
            self._reset_rng_state = copy.deepcopy(reset_rng)
            self._last_obs = self.begin(snap.task)
            self._history = []
            if self.toolbox is not None:
                self.toolbox.restore(ToolboxState())
            self._replaying = True  # tool calls are recorded, not run: the sessions catch up lazily
            try:
                for a in actions:
                    self._history.append(a)
                    self._apply(a)
            finally:
                self._replaying = False
        else:
            self.set_state(copy.deepcopy(payload[0]))
            self._history = []
        self._turn = snap.turn
        self._invalid = snap.invalid_actions
        self._done = snap.done
        self._last_obs = snap.last_observation
        self._last_action = snap.last_action
        self._set_rng(snap.rng_state)
        if self.toolbox is not None and snap.tools is not None:
            self.toolbox.restore(snap.tools)

    def close(self) -> None:
        """Release the tools' sandbox and sessions. Families with their own resources extend this."""
        if self.toolbox is not None:
            self.toolbox.close()
        super().close()

    def render(self) -> str | None:
        """Render the last exchange as text (``"ansi"``) or print it (``"human"``)."""
        text = f"[agent] {self._last_action}\n[env] {self._last_obs}" if self._last_action else self._last_obs
        if self.render_mode == "human":
            print(text)
            return None
        return text

    # ------------------------------------------------------------------ internals
    def _draw_task(self, task_index: int | None) -> Task:
        if self._fixed_tasks is None:
            if task_index is not None:
                raise EnvError(f"{type(self).__name__}: options['task_index'] needs a fixed task list (tasks=[...])")
            return self.generate_task(self.np_random)
        n = len(self._fixed_tasks)
        if task_index is None:
            task_index = int(self.np_random.integers(n))
        if not 0 <= task_index < n:
            raise EnvError(f"task_index {task_index} out of range for {n} tasks")
        return self._fixed_tasks[task_index]

    def _apply(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        self._turn += 1
        text, problem = validate_action(action, self.max_action_chars)
        if problem is not None:
            self._last_action = f"<invalid: {problem.value}>"
            why = _EXPLANATIONS[problem].format(limit=self.max_action_chars)
            return self._invalid_step(f"Your last message was not accepted: {why}.", problem, {})
        self._last_action = text
        if self.toolbox is not None:
            turn = self.toolbox.take_turn(text, execute=not self._replaying)
            if turn is not None:
                return self._tool_step(turn)
        tr = self.respond(text)
        self._last_obs = tr.observation
        self._done = bool(tr.terminated)
        return tr.observation, float(tr.reward), bool(tr.terminated), False, self._info(tr.info)

    def _invalid_step(
        self, message: str, problem: InvalidAction, extra: Mapping[str, Any]
    ) -> tuple[str, float, bool, bool, dict]:
        tr = self.reject(message, problem.value, extra)
        self._last_obs = tr.observation
        self._done = tr.terminated
        return tr.observation, 0.0, tr.terminated, False, self._info(tr.info)

    def _tool_step(self, turn: ToolTurn) -> tuple[str, float, bool, bool, dict]:
        """A message that called a tool: the tool's output, or ``submit``'s answer judged by :meth:`respond`."""
        extra = {"tool": turn.info} if turn.info is not None else {}
        if turn.invalid:
            return self._invalid_step(turn.observation, InvalidAction.BAD_TOOL_CALL, extra)
        if turn.submission is None:
            self._last_obs = turn.observation
            return self._last_obs, 0.0, False, False, self._info(extra)
        tr = self.respond(self.submit_template.format(answer=turn.submission))
        self._last_obs = tr.observation
        self._done = bool(tr.terminated)
        info = {**tr.info, **extra}
        return tr.observation, float(tr.reward), bool(tr.terminated), False, self._info(info)

    def _info(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        task = self.task
        info: dict[str, Any] = {
            "task_id": task.task_id,
            "family": task.family,
            "split": task.split,
            "difficulty": task.difficulty,
            "turn": self._turn,
            "invalid_actions": self._invalid,
        }
        info.update(self.extra_info())
        info.update(extra)
        return info

    def _set_rng(self, state: Mapping[str, Any]) -> None:
        bit_gen = getattr(np.random, state["bit_generator"])()
        bit_gen.state = copy.deepcopy(dict(state))
        self._np_random = np.random.Generator(bit_gen)


def snapshot_env(env: gymnasium.Env) -> EnvSnapshot:
    """Snapshot a (possibly wrapped) :class:`TextEnv`.

    Example:
        >>> import gymnasium, turnkit
        >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
        >>> _ = env.reset(seed=0)
        >>> snap = snapshot_env(env)
        >>> a = env.step("ANSWER: 0")
        >>> restore_env(env, snap)
        >>> env.step("ANSWER: 0")[0] == a[0]
        True
    """
    base = env.unwrapped
    if not isinstance(base, TextEnv):
        raise EnvError(f"snapshot needs a turnkit.TextEnv, got {type(base).__name__}")
    return base.snapshot()


def restore_env(env: gymnasium.Env, snap: EnvSnapshot) -> None:
    """Restore a (possibly wrapped) :class:`TextEnv`, including the ``TimeLimit`` step counter."""
    base = env.unwrapped
    if not isinstance(base, TextEnv):
        raise EnvError(f"restore needs a turnkit.TextEnv, got {type(base).__name__}")
    base.restore(snap)
    layer: Any = env
    while isinstance(layer, gymnasium.Wrapper):
        if isinstance(layer, TimeLimit):
            layer._elapsed_steps = snap.turn  # type: ignore[assignment]
        elif isinstance(layer, OrderEnforcing):
            layer._has_reset = True
        elif isinstance(layer, PassiveEnvChecker):  # its first-step checks assume a reset through it
            layer.checked_reset = layer.checked_step = layer.checked_data_reuse = True
        layer = layer.env
