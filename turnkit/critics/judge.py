"""LLM-as-judge critic: any turnkit :class:`~turnkit.agents.base.Agent` reads a transcript and gives a score.

The judge is prompted once per trajectory (``granularity="trajectory"``, the score lands on the last step,
``0`` on the others) or once per step (``granularity="step"``, each step scored in the context the agent
saw). All prompts of a batch go to the judge in one ``act`` call, so a model-backed judge sees full
batches.

Privileged data reaches the judge only through the prompt this module builds, from
``Trajectory.task.privileged[reference_key]`` when ``reference_key`` is set; the judge agent itself never
gets ``Context.task``.

Parsing is strict: the *last* ``SCORE: <number>`` (also ``Score = 7/10``, ``**Score:** 7.5``) in the reply,
or a reply that is only a number (``"7"``, ``"7/10"``), is the score; it must lie in ``[low, high]`` and
is mapped to ``[0, 1]``. Anything else is malformed: :class:`JudgeParseError` (a
:class:`~turnkit.errors.CriticError`) by default, or, with ``on_malformed="record"``, the configured
``malformed_reward`` *and* a count in the metrics (``malformed``), never a silent ``0``. Malformed replies
can be re-asked ``retries`` times first.

Example:
    >>> from turnkit.agents.scripted import ScriptedAgent
    >>> from turnkit.types import AgentTurn, Step, Task, Trajectory
    >>> task = Task("t", "What is 2+2?", privileged={"answer": "4"})
    >>> traj = Trajectory("demo", 0, (Step("What is 2+2?", AgentTurn("ANSWER: 4"), 1.0, True),), task=task)
    >>> judge = JudgeCritic(ScriptedAgent(["Looks right. SCORE: 8"]), JudgeConfig(reference_key="answer"))
    >>> result = judge.score(traj)
    >>> result.step_rewards, result.metrics["malformed"]
    ((0.8,), 0.0)
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from turnkit import configs
from turnkit.agents.base import Agent, Context
from turnkit.critics.base import CriticContext, CriticResult
from turnkit.errors import ConfigError, CriticError
from turnkit.types import Message, Trajectory

Granularity = Literal["step", "trajectory"]

TRAJECTORY_TEMPLATE = (
    "You are grading an assistant's attempt at a task.\n"
    "Task:\n{task}\n\n{reference_block}"
    "Conversation:\n{transcript}\n\n"
    "Rate how well the assistant solved the task, from {low} (useless) to {high} (perfect). "
    "End your reply with a line 'SCORE: <number>'."
)
"""Default prompt for ``granularity="trajectory"``."""

STEP_TEMPLATE = (
    "You are grading one turn of an assistant working on a task.\n"
    "Task:\n{task}\n\n{reference_block}"
    "Conversation so far:\n{transcript}\n\n"
    "Turn {step} of the assistant:\n{action}\n\n"
    "Rate how much this turn helps solve the task, from {low} (harmful) to {high} (decisive). "
    "End your reply with a line 'SCORE: <number>'."
)
"""Default prompt for ``granularity="step"``."""

REFERENCE_BLOCK = "Reference (hidden from the assistant):\n{reference}\n\n"
"""How the privileged reference is shown, when ``reference_key`` is set."""

TEMPLATE_FIELDS = frozenset({"task", "reference_block", "reference", "transcript", "action", "step", "low", "high"})
"""Fields a template may use."""

_NUMBER = r"[-+]?\d+(?:\.\d+)?"
_TAGGED = re.compile(rf"score\W{{0,3}}[:=]\W{{0,3}}?({_NUMBER})(?:\s*/\s*({_NUMBER}))?", re.IGNORECASE)
_BARE = re.compile(rf"^\W*({_NUMBER})(?:\s*/\s*({_NUMBER}))?\W*$")


class JudgeParseError(CriticError):
    """A judge reply has no readable score in range."""


@dataclass(frozen=True)
class JudgeConfig:
    """How the judge is prompted and how its replies are read. Validated on construction.

    Example:
        >>> JudgeConfig(granularity="step").prompt_template == STEP_TEMPLATE
        True
        >>> JudgeConfig(on_malformed="record")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: JudgeConfig.on_malformed='record' needs an explicit finite malformed_reward
    """

    granularity: Granularity = "trajectory"
    """``"trajectory"``: one score per trajectory, on the last step; ``"step"``: one score per step."""
    template: str | None = None
    """Prompt template (``str.format`` fields from :data:`TEMPLATE_FIELDS`); ``None`` picks the default."""
    low: float = 0.0
    """Lowest score the judge may give (maps to reward 0)."""
    high: float = 10.0
    """Highest score the judge may give (maps to reward 1)."""
    reference_key: str | None = None
    """Key of ``Task.privileged`` shown to the judge as the reference; ``None`` shows none."""
    on_malformed: Literal["raise", "record"] = "raise"
    """``"raise"`` a :class:`JudgeParseError`, or ``"record"``: use ``malformed_reward`` and count it."""
    malformed_reward: float | None = None
    """Reward of a malformed reply with ``on_malformed="record"`` (must be set explicitly then)."""
    retries: int = 0
    """Re-ask the judge this many times for malformed replies before giving up."""
    max_transcript_chars: int = 8000
    """Keep only the last this-many characters of the transcript (long episodes)."""

    def __post_init__(self) -> None:
        configs.check_choice(self, "granularity", ("step", "trajectory"))
        configs.check_choice(self, "on_malformed", ("raise", "record"))
        configs.check_float(self, "low", "high")
        if not self.low < self.high:
            raise ConfigError(f"JudgeConfig needs finite low < high, got low={self.low}, high={self.high}")
        if self.on_malformed == "record" and (
            self.malformed_reward is None or not math.isfinite(self.malformed_reward)
        ):
            raise ConfigError("JudgeConfig.on_malformed='record' needs an explicit finite malformed_reward")
        configs.check_int(self, "retries", low=0)
        configs.check_int(self, "max_transcript_chars")
        fields = {name for _, name, _, _ in string.Formatter().parse(self.prompt_template) if name is not None}
        unknown = sorted(fields - TEMPLATE_FIELDS)
        if unknown:
            raise ConfigError(
                f"JudgeConfig.template uses unknown field(s) {unknown}; allowed: {sorted(TEMPLATE_FIELDS)}"
            )
        if self.granularity == "trajectory" and fields & {"action", "step"}:
            raise ConfigError("JudgeConfig.template uses {action}/{step}, which exist only for granularity='step'")
        if self.reference_key is None and "reference" in fields:
            raise ConfigError("JudgeConfig.template uses {reference} but reference_key is None")

    @property
    def prompt_template(self) -> str:
        """The template in use (the configured one or the granularity's default)."""
        if self.template is not None:
            return self.template
        return STEP_TEMPLATE if self.granularity == "step" else TRAJECTORY_TEMPLATE


def parse_score(text: str, low: float = 0.0, high: float = 10.0) -> float:
    """Read a judge's score: the last ``SCORE: x`` (or ``x/d``) in ``text``, or a reply that is only a number.

    A ``x/d`` score is rescaled to ``low + (high − low) · x / d``.

    Args:
        text: The judge's reply.
        low: Lowest allowed score.
        high: Highest allowed score.

    Returns:
        The score on the ``[low, high]`` scale.

    Raises:
        JudgeParseError: No score found, a zero denominator, or a score outside ``[low, high]``.

    Example:
        >>> parse_score("Reasoning... SCORE: 3. Wait, no. Score = 7")
        7.0
        >>> parse_score("**Score:** 4/5")
        8.0
        >>> parse_score(" 6 ")
        6.0
        >>> parse_score("I think it is good")
        Traceback (most recent call last):
        ...
        turnkit.critics.judge.JudgeParseError: no 'SCORE: <number>' in judge reply 'I think it is good'
    """
    matches = list(_TAGGED.finditer(text))
    found = matches[-1] if matches else _BARE.match(text)
    if found is None:
        raise JudgeParseError(f"no 'SCORE: <number>' in judge reply {_excerpt(text)!r}")
    value = float(found.group(1))
    if found.group(2) is not None:
        denominator = float(found.group(2))
        if denominator <= 0:
            raise JudgeParseError(f"score denominator must be positive in judge reply {_excerpt(text)!r}")
        value = low + (high - low) * value / denominator
    if not low <= value <= high:
        raise JudgeParseError(f"score {value:g} outside [{low:g}, {high:g}] in judge reply {_excerpt(text)!r}")
    return value


def _excerpt(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_transcript(messages: Sequence[Message], max_chars: int = 8000) -> str:
    """A plain-text transcript (``User: ...`` / ``Assistant: ...``), keeping the last ``max_chars`` characters.

    Example:
        >>> print(render_transcript([Message("user", "2+2?"), Message("assistant", "ANSWER: 4")]))
        User: 2+2?
        Assistant: ANSWER: 4
    """
    text = "\n".join(f"{m.role.capitalize()}: {m.content}" for m in messages)
    return text if len(text) <= max_chars else "..." + text[-max_chars:]


@dataclass(frozen=True)
class _Request:
    traj: int
    step: int
    prompt: str


class JudgeCritic:
    """Scores trajectories by asking a judge agent (see the module docstring).

    Args:
        judge: Any agent; it gets one single-message context per prompt.
        config: Prompting and parsing settings.
        name: Critic name (metric prefix inside :class:`~turnkit.critics.base.WeightedSum`).

    Example:
        >>> from turnkit.agents.scripted import ScriptedAgent
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> steps = (Step("q", AgentTurn("think"), 0.0), Step("q", AgentTurn("ANSWER: 4"), 1.0, True))
        >>> judge = JudgeCritic(ScriptedAgent(["SCORE: 5"]), JudgeConfig(granularity="step"))
        >>> judge.score(Trajectory("demo", 0, steps)).step_rewards
        (0.5, 0.5)
    """

    def __init__(self, judge: Agent, config: JudgeConfig | None = None, *, name: str = "judge") -> None:
        self.judge = judge
        self.config = config or JudgeConfig()
        self.name = name

    def prompts(self, trajectory: Trajectory) -> list[str]:
        """The judge prompts for one trajectory (one, or one per step).

        Raises:
            CriticError: ``reference_key`` is set but the trajectory has no task or the key is missing.

        Example:
            >>> from turnkit.agents.scripted import ScriptedAgent
            >>> from turnkit.types import AgentTurn, Step, Task, Trajectory
            >>> t = Trajectory("d", 0, (Step("2+2?", AgentTurn("ANSWER: 5"), 0.0),), task=Task("t", "2+2?"))
            >>> cfg = JudgeConfig(template="{task} | {transcript} | {reference}", reference_key="answer")
            >>> JudgeCritic(ScriptedAgent(["SCORE: 0"]), cfg).prompts(t)
            Traceback (most recent call last):
            ...
            turnkit.errors.CriticError: judge: task 't' has no privileged 'answer' (keys: [])
        """
        return [r.prompt for r in self._requests(0, trajectory)]

    def score(self, trajectory: Trajectory) -> CriticResult:
        """Score one trajectory (one judge call)."""
        return self.score_batch([trajectory])[0]

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
        """Score many trajectories with one ``act`` call per attempt over all their prompts.

        Raises:
            JudgeParseError: A reply stayed malformed after the retries (``on_malformed="raise"``).
        """
        requests = [r for i, t in enumerate(trajectories) for r in self._requests(i, t)]
        scores: list[float | None] = [None] * len(requests)
        replies = [""] * len(requests)
        errors: list[str] = [""] * len(requests)
        pending = list(range(len(requests)))
        for attempt in range(self.config.retries + 1):
            if not pending:
                break
            contexts = [
                Context(messages=(Message("user", requests[j].prompt),), env_id=self.name, turn=attempt)
                for j in pending
            ]
            turns = self.judge.act(contexts)
            if len(turns) != len(contexts):
                raise CriticError(f"{self.name}: judge returned {len(turns)} replies for {len(contexts)} prompts")
            still = []
            for j, turn in zip(pending, turns, strict=True):
                replies[j] = turn.text
                try:
                    scores[j] = parse_score(turn.text, self.config.low, self.config.high)
                except JudgeParseError as exc:
                    errors[j] = str(exc)
                    still.append(j)
            pending = still
        if pending and self.config.on_malformed == "raise":
            j = pending[0]
            r = requests[j]
            raise JudgeParseError(
                f"{self.name}: trajectory {r.traj} step {r.step}: {errors[j]} "
                f"({len(pending)} of {len(requests)} replies malformed after {self.config.retries} retries)"
            )
        return self._results(trajectories, requests, scores)

    def _results(
        self, trajectories: Sequence[Trajectory], requests: Sequence[_Request], scores: Sequence[float | None]
    ) -> list[CriticResult]:
        cfg = self.config
        rewards = [[0.0] * len(t.steps) for t in trajectories]
        malformed = [0] * len(trajectories)
        calls = [0] * len(trajectories)
        raw: list[list[float]] = [[] for _ in trajectories]
        for r, s in zip(requests, scores, strict=True):
            calls[r.traj] += 1
            if s is None:
                malformed[r.traj] += 1
                assert cfg.malformed_reward is not None  # checked in JudgeConfig for "record"
                rewards[r.traj][r.step] = cfg.malformed_reward
            else:
                raw[r.traj].append(s)
                rewards[r.traj][r.step] = (s - cfg.low) / (cfg.high - cfg.low)
        out = []
        for i in range(len(trajectories)):
            metrics = {"malformed": float(malformed[i]), "calls": float(calls[i])}
            if raw[i]:
                metrics["judge_score"] = sum(raw[i]) / len(raw[i])
            out.append(CriticResult(tuple(rewards[i]), metrics))
        return out

    def _requests(self, index: int, trajectory: Trajectory) -> list[_Request]:
        cfg = self.config
        if not trajectory.steps:
            return []
        task_text = trajectory.task.prompt if trajectory.task is not None else trajectory.initial_observation
        reference = self._reference(trajectory)
        fields = {
            "task": task_text,
            "reference": reference,
            "reference_block": REFERENCE_BLOCK.format(reference=reference) if cfg.reference_key else "",
            "low": f"{cfg.low:g}",
            "high": f"{cfg.high:g}",
        }
        messages = trajectory.messages()
        if cfg.granularity == "trajectory":
            transcript = render_transcript(messages, cfg.max_transcript_chars)
            prompt = cfg.prompt_template.format(transcript=transcript, **fields)
            return [_Request(index, len(trajectory.steps) - 1, prompt)]
        out = []
        for h, step in enumerate(trajectory.steps):
            transcript = render_transcript(messages[: 2 * h + 1], cfg.max_transcript_chars)
            prompt = cfg.prompt_template.format(transcript=transcript, action=step.action.text, step=h + 1, **fields)
            out.append(_Request(index, h, prompt))
        return out

    def _reference(self, trajectory: Trajectory) -> str:
        key = self.config.reference_key
        if key is None:
            return ""
        task = trajectory.task
        if task is None:
            raise CriticError(f"{self.name}: reference_key={key!r} needs Trajectory.task, but it is None")
        if key not in task.privileged:
            raise CriticError(
                f"{self.name}: task {task.task_id!r} has no privileged {key!r} (keys: {sorted(task.privileged)})"
            )
        return str(task.privileged[key])


@dataclass(frozen=True)
class JudgeServerConfig:
    """Keys of ``critic.judge`` in a run's config: where the judge model is served, and what it is shown.

    In training the judge answers greedily with at most ``max_tokens`` tokens, scores each episode once (on its
    last turn), and a malformed reply counts (``malformed`` metric) with reward ``malformed_reward``.

    Example:
        >>> JudgeServerConfig(url="http://127.0.0.1:8000/v1").model
        'judge'
    """

    url: str | None = None
    """OpenAI-compatible API root of the judge, e.g. ``http://127.0.0.1:8000/v1`` (required to build it)."""
    model: str = "judge"
    """The judge's served model name."""
    reference_key: str | None = "answer"
    """Key of ``Task.privileged`` shown to the judge as the reference (``None``: none)."""
    max_tokens: int = 64
    """Most tokens of one judge reply."""
    malformed_reward: float = 0.0
    """Reward of an episode whose judge reply cannot be read."""

    def __post_init__(self) -> None:
        configs.check_str(self, "url", optional=True)
        configs.check_str(self, "model")
        configs.check_str(self, "reference_key", optional=True)
        configs.check_int(self, "max_tokens")
        configs.check_float(self, "malformed_reward")


Config = JudgeServerConfig
"""The table keys of ``critic.judge`` (see :mod:`turnkit.critics.registry`)."""


def from_context(ctx: CriticContext, config: JudgeServerConfig) -> JudgeCritic:
    """An LLM judge over HTTP in a training run: greedy, one score per episode, malformed replies recorded.

    Raises:
        ConfigError: No ``url`` was given.
    """
    from turnkit.agents.openai import OpenAIAgent

    if not config.url:
        raise ConfigError("critic.judge needs url, the API root of an OpenAI-compatible judge server")
    agent = OpenAIAgent(
        config.url, config.model, temperature=0.0, max_tokens=config.max_tokens, seed=ctx.seed, token_ids=False
    )
    judge = JudgeConfig(
        reference_key=config.reference_key, on_malformed="record", malformed_reward=config.malformed_reward
    )
    return JudgeCritic(agent, judge)
