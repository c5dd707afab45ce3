"""Core data types shared by envs, agents, critics, search and learners.

Every type here is a frozen dataclass: values that cross module boundaries are never mutated in place.
Builders (the rollout layer, sandboxes) collect into lists and freeze at the end.

Example:
    >>> from turnkit.types import AgentTurn, Message, Step, Trajectory
    >>> turn = AgentTurn(text="ANSWER: 4", token_ids=(7, 9), logprobs=(-0.1, -0.3))
    >>> step = Step(observation="What is 2+2?", action=turn, reward=1.0, terminated=True)
    >>> traj = Trajectory(env_id="turnkit/MathEpisodes-v0", seed=0, steps=(step,))
    >>> traj.total_reward, traj.success, traj.num_generated_tokens
    (1.0, True, 2)
    >>> [m.role for m in traj.messages()]
    ['user', 'assistant']
    >>> cut = Step(observation="...", action=AgentTurn("?"), reward=0.5, truncated=True)
    >>> Trajectory(env_id="x", seed=0, steps=(cut,)).success  # a time-limit cut is no success
    False
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
Split = str
"""A task split name: ``"id"``, ``"ood"``, ``"combo"`` or a family-specific one."""


@dataclass(frozen=True)
class Message:
    """One chat message.

    Attributes:
        role: ``"system"``, ``"user"``, ``"assistant"`` or ``"tool"``.
        content: The message text.
    """

    role: Role
    content: str


@dataclass(frozen=True)
class Task:
    """One episode's task: what the policy sees, what only critics and oracles see, and labels.

    Attributes:
        task_id: Stable identifier (same task -> same id, in any process).
        prompt: The public problem statement shown to the policy.
        privileged: Hidden training-time information (reference answer, hidden tests, target design...).
            Never placed in observations or policy-visible ``info``; read it through
            ``env.unwrapped.privileged()`` or ``Trajectory.task``.
        family: The env family, e.g. ``"math"``.
        split: ``"id"``, ``"ood"``, ``"combo"`` or a family-specific split name.
        difficulty: A family-specific difficulty level (higher is harder).
        metadata: Public labels (generator kind, attributes) that may be shown in ``info``.

    Example:
        >>> t = Task(task_id="m-1", prompt="Compute 1+1.", privileged={"answer": "2"}, family="math")
        >>> t.privileged["answer"], t.split
        ('2', 'id')
    """

    task_id: str
    prompt: str
    privileged: Mapping[str, Any] = field(default_factory=dict)
    family: str = ""
    split: Split = "id"
    difficulty: float = 0.0
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentTurn:
    """What an agent produced for one turn: the text and the exact tokens behind it.

    Learners train on ``prompt_token_ids + token_ids`` as stored here, never on re-tokenised text
    (token-in/token-out).

    Attributes:
        text: The decoded action text sent to the env.
        token_ids: The ids the policy generated this turn (empty for non-token agents).
        logprobs: Log-probability of each generated id under the sampling policy.
        prompt_token_ids: The exact prompt ids the policy conditioned on for this turn.
        finish_reason: ``"stop"``, ``"length"`` or an agent-specific reason, if known.
    """

    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    prompt_token_ids: tuple[int, ...] = ()
    finish_reason: str | None = None

    def __post_init__(self) -> None:
        if self.logprobs and len(self.logprobs) != len(self.token_ids):
            raise ValueError(f"AgentTurn has {len(self.token_ids)} token ids but {len(self.logprobs)} logprobs")


@dataclass(frozen=True)
class Step:
    """One env transition caused by one agent turn.

    Attributes:
        observation: The observation the agent acted on (the env's message before this action).
        action: The agent's turn.
        reward: Env reward for this step.
        terminated: The episode reached a terminal state.
        truncated: The time limit cut the episode.
        info: The policy-visible info dict returned by ``env.step``.
    """

    observation: str
    action: AgentTurn
    reward: float
    terminated: bool = False
    truncated: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)


class ErrorCause(str, enum.Enum):
    """Typed cause of an infrastructure failure recorded on a trajectory."""

    AGENT = "agent"
    """The policy or its server failed (timeout, 5xx, malformed reply)."""
    ENV = "env"
    """The env raised while stepping or resetting."""
    SANDBOX = "sandbox"
    """The code executor failed (not the agent's code: the executor itself)."""
    BROWSER = "browser"
    """The rendering browser crashed or hung."""
    TIMEOUT = "timeout"
    """The episode exceeded its wall-clock budget."""
    WORKER = "worker"
    """The process (or node) playing the episode died, and its retries ran out (:mod:`turnkit.distributed`)."""


@dataclass(frozen=True)
class TrajectoryError:
    """An infrastructure failure, kept as data so that learners can mask the trajectory.

    Attributes:
        cause: What failed.
        message: Human-readable description (exception type and text).
        step: Index of the step at which it happened, if any.
    """

    cause: ErrorCause
    message: str
    step: int | None = None


@dataclass(frozen=True)
class Trajectory:
    """A finished episode.

    Attributes:
        env_id: The registered env id (or class name for unregistered envs).
        seed: The reset seed.
        steps: The transitions in order.
        initial_observation: The observation returned by ``reset``.
        final_observation: The env's reply to the last action (e.g. ``"Correct."``).
        reset_info: The info dict returned by ``reset``.
        task: The episode's task, including privileged data (for critics; never shown to a policy).
        error: An infrastructure failure, if the episode did not finish cleanly.
        group: Index of the same-seed group this episode belongs to (``collect_group``), if any.
    """

    env_id: str
    seed: int | None
    steps: tuple[Step, ...] = ()
    initial_observation: str = ""
    final_observation: str = ""
    reset_info: Mapping[str, Any] = field(default_factory=dict)
    task: Task | None = None
    error: TrajectoryError | None = None
    group: int | None = None

    @property
    def total_reward(self) -> float:
        """Sum of step rewards."""
        return float(sum(s.reward for s in self.steps))

    @property
    def success(self) -> bool:
        """Whether the last step reported ``info["success"]``.

        Without that key: ``False`` for a truncated episode, otherwise ``total_reward > 0``.
        """
        if self.error is not None or not self.steps:
            return False
        last = self.steps[-1]
        if "success" in last.info:
            return bool(last.info["success"])
        if last.truncated:
            return False
        return self.total_reward > 0

    @property
    def num_generated_tokens(self) -> int:
        """Number of policy-generated tokens over all turns."""
        return sum(len(s.action.token_ids) for s in self.steps)

    def messages(self) -> list[Message]:
        """The conversation as chat messages: actions as ``assistant``, observations as ``user`` or ``tool``.

        The reply to a tool call is a ``tool`` message (see :func:`observation_role`).

        Example:
            >>> tool_turn = Step("2+2?", AgentTurn("<python>2+2</python>"), 0.0, info={"tool": {"name": "python"}})
            >>> answer = Step("4", AgentTurn("ANSWER: 4"), 1.0, terminated=True)
            >>> [m.role for m in Trajectory(env_id="x", seed=0, steps=(tool_turn, answer)).messages()]
            ['user', 'assistant', 'tool', 'assistant']
        """
        out: list[Message] = []
        role: Role = "user"
        for s in self.steps:
            out.append(Message(role, s.observation))
            out.append(Message("assistant", s.action.text))
            role = observation_role(s.info)
        return out


def observation_role(info: Mapping[str, Any]) -> Role:
    """The chat role of an env's reply: ``"tool"`` when it answers a tool call (``info["tool"]``), else ``"user"``.

    Example:
        >>> observation_role({"tool": {"name": "python", "status": "ok"}}), observation_role({"turn": 1})
        ('tool', 'user')
    """
    return "tool" if info.get("tool") else "user"


@dataclass(frozen=True)
class ExecResult:
    """The outcome of running a command or code in a sandbox. A crash is a result, not an exception.

    Attributes:
        exit_code: Process exit status; negative for death by signal (``-9`` for SIGKILL).
        stdout: Captured standard output, decoded as UTF-8 with replacement characters.
        stderr: Captured standard error, decoded likewise.
        timed_out: The wall or CPU time limit killed the process.
        truncated: Output exceeded the cap and was cut.
        duration_s: Wall-clock seconds from start to exit.
        oom_killed: The memory limit killed the process, where the backend can tell.
        resources: Resource usage where known (e.g. ``max_rss_kb``, ``cpu_s``).
        fault: Empty, or why the sandbox itself failed this call (its supervisor died, hung or answered out of
            turn): the result says nothing about the code, so graders record it as an infrastructure failure.
    """

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0
    oom_killed: bool = False
    resources: Mapping[str, float] = field(default_factory=dict)
    fault: str = ""

    @property
    def ok(self) -> bool:
        """True when the process exited 0 without timing out."""
        return self.exit_code == 0 and not self.timed_out and not self.fault
