"""`CollabCodeEnv`: ColBench-style collaborative backend coding with a simulated human."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from turnkit.envs.collab_code.generator import SPLITS, check_kinds, generate
from turnkit.envs.collab_code.grading import (
    ANSWER_MARKER,
    COLBENCH_FORBIDDEN,
    GradeResult,
    extract_code,
    grade,
    shared_sandbox,
    split_answer,
    trusted_sandbox,
)
from turnkit.envs.collab_code.human import Human, RuleBasedHuman
from turnkit.envs.core import TextEnv, Transition
from turnkit.errors import ConfigError, EnvError
from turnkit.sandbox import Sandbox
from turnkit.tools import ToolsArg
from turnkit.types import Message, Task

INSTRUCTIONS = (
    "You are helping a person write a Python function. They know what they need but not how to code it, "
    "and they only answer briefly. Ask them questions to find out the details. You can send at most "
    "{turns} messages. When you are ready, write {marker} followed by the complete function in a "
    "```python code block; it will be run on hidden test calls."
)
"""The instructions above every task prompt (``{turns}`` and ``{marker}`` are filled in)."""


class CollabCodeEnv(TextEnv):
    r"""Write a Python function for a simulated human who knows the hidden details.

    ## Description
    ColBench's backend-programming task (Zhou et al., SWEET-RL, 2025): the request is vague on purpose, the
    human knows the hidden parameters (a cutoff and whether it is inclusive, a rounding rule, a tie-break, an
    output format, ...), and only asking the right questions gets every hidden test right. Tasks come from
    the procedural families of :mod:`turnkit.envs.collab_code.families` or from a task list such as
    :func:`~turnkit.envs.collab_code.loaders.load_colbench`.

    ## Observation
    A ``str``. On ``reset``: the instructions, then the request and ``The signature of the function is: def
    ...``. After a question: the human's reply (at most two sentences and 400 characters; ``"I don't
    know."`` when the hidden facts do not cover it). After the answer: the score, e.g. ``"Your function
    passed 7 of 10 hidden tests."``.

    ## Action
    A ``str``, one message to the human. A message containing ``I WANT TO ANSWER:`` is the answer: the code
    after it (the first fenced code block's content if there is one). The ``max_turns``-th message is the
    answer whatever it says (the whole message, fence stripped), as in ColBench.

    ## Rewards
    ``0`` per question; on the answer, the fraction of hidden test calls whose outcome equals the
    reference's (see :mod:`turnkit.envs.collab_code.grading`: both run in separate fresh sandbox executions).

    ## Episode End
    Terminated on the answer (``info["success"]``: every test passed) or after too many invalid actions.
    ``gymnasium.make("turnkit/CollabCode-v0")`` also adds a 10-step ``TimeLimit``, which coincides with the
    forced answer on the 10th message.

    ## Info
    Every step: ``turns_left``. On the answer: ``success``, ``tests_passed``, ``tests_total``,
    ``grading_error`` (``None`` or one of ``forbidden``, ``no_code``, ``syntax_error``, ``crash``,
    ``timeout``, ``memory``, ``output_limit``, ``malformed``), ``grading_detail`` (its cause, from the answer's
    run only)
    and ``answered`` (``True`` if the marker was used, ``False`` for a forced answer). Never the reference,
    the tests, their expected values or the hidden facts (read those through :meth:`privileged`).

    ## Arguments
    * ``split``: ``"id"``, ``"ood"`` or ``"combo"`` (see :mod:`turnkit.envs.collab_code.generator`).
    * ``kinds``: families to draw from (default all seven).
    * ``tasks``: a fixed task list instead of the generator.
    * ``human``: the simulated human (default :class:`~turnkit.envs.collab_code.human.RuleBasedHuman`; or
      an :class:`~turnkit.envs.collab_code.llm_human.LLMHuman`).
    * ``sandbox``: where answers run (default: this process's shared persistent ``LocalSandbox``; the env
      never closes a sandbox it was given).
    * ``reference_sandbox``: where references run, never an answer (default: this process's
      :func:`~turnkit.envs.collab_code.grading.trusted_sandbox`); must differ from ``sandbox``.
    * ``max_turns``: messages per episode, the last being the forced answer (default 10).
    * ``per_test_timeout_s``: alarm per hidden test call (default 1 s, as ColBench).
    * ``forbidden``: substrings that score an answer 0 unseen (default ColBench's list; ``()`` disables).
    * ``max_invalid_actions``, ``max_action_chars``, ``render_mode``: see :class:`TextEnv`.
    * ``tools``: tools the agent may call (see :mod:`turnkit.tools`), e.g. ``["python"]``: a scratchpad
      session to run a draft on its own examples before answering. Tool calls never reach the human; they
      count as messages (``turns_left``, the ``TimeLimit``) but are never taken as the forced answer.
      ``submit``'s answer is graded as ``I WANT TO ANSWER:`` followed by it. Grading does not see the tool
      session: the answer runs in the grading sandbox's fresh executions, not in the agent's session.

    ## Failures
    A fault the answer can cause is its result, scored like any wrong answer (``grading_error``): bad code, a
    crash, a timeout, a forged or garbled result (``malformed``), values the host could not otherwise read (a
    5,000-digit int, a 50,000-deep list). Learners train on it. A :class:`~turnkit.errors.SandboxError` (the
    executor itself failed: bubblewrap missing, the sandbox cannot start, or its worker died, hung or answered
    out of turn while running the answer, after which it is replaced) is raised from ``reset`` or ``step`` and
    never scored 0; :func:`turnkit.collect` records it as ``Trajectory.error`` with ``ErrorCause.SANDBOX``,
    which learners mask. A reference that fails in the sandbox (a broken loaded task) raises
    :class:`~turnkit.errors.EnvError`.

    Example:
        >>> env = CollabCodeEnv(kinds=("grade",))
        >>> obs, info = env.reset(seed=12)
        >>> print(obs.splitlines()[-1])
        The signature of the function is: def grade_outcome(score)
        >>> env.step("What is the cutoff score for passing, and does a score exactly at the cutoff pass?")[0]
        'The passing cutoff is 65 points. A score exactly at the cutoff counts as a pass.'
        >>> env.step("What should the function return?")[0]
        'Return True for a pass and False for a fail.'
        >>> env.step("Is the weather nice?")[0]
        "I don't know."
        >>> answer = "I WANT TO ANSWER:\n```python\ndef grade_outcome(score):\n    return score >= 65\n```"
        >>> obs, reward, terminated, truncated, info = env.step(answer)
        >>> obs, reward, info["tests_passed"], info["success"]
        ('Your function passed 10 of 10 hidden tests.', 1.0, 10, True)
    """

    splits = SPLITS
    submit_template = f"{ANSWER_MARKER}\n{{answer}}"

    def __init__(
        self,
        *,
        split: str = "id",
        kinds: Iterable[str] | None = None,
        tasks: Sequence[Task] | None = None,
        human: Human | None = None,
        sandbox: Sandbox | None = None,
        reference_sandbox: Sandbox | None = None,
        max_turns: int = 10,
        per_test_timeout_s: float = 1.0,
        forbidden: Sequence[str] = COLBENCH_FORBIDDEN,
        max_invalid_actions: int = 3,
        max_action_chars: int = 16_384,
        render_mode: str | None = None,
        tools: ToolsArg = None,
    ) -> None:
        super().__init__(
            split=split,
            tasks=tasks,
            max_invalid_actions=max_invalid_actions,
            max_action_chars=max_action_chars,
            render_mode=render_mode,
            tools=tools,
        )
        self.kinds = check_kinds(kinds)
        if isinstance(max_turns, bool) or not isinstance(max_turns, (int, np.integer)) or max_turns < 1:
            raise ConfigError(f"max_turns must be an int >= 1, got {max_turns!r}")
        if isinstance(per_test_timeout_s, bool) or not isinstance(per_test_timeout_s, (int, float)):
            raise ConfigError(f"per_test_timeout_s must be a number, got {per_test_timeout_s!r}")
        if not 0 < per_test_timeout_s <= 60:
            raise ConfigError(f"per_test_timeout_s must be in (0, 60], got {per_test_timeout_s!r}")
        if isinstance(forbidden, str) or not all(isinstance(f, str) and f for f in forbidden):
            raise ConfigError(f"forbidden must be a sequence of non-empty strings, got {forbidden!r}")
        if human is not None and not callable(getattr(human, "reply", None)):
            raise ConfigError(f"human must have reply(task, dialogue), got {type(human).__name__}")
        for task in tasks or ():
            _check_task(task)
        self.human: Human = human if human is not None else RuleBasedHuman()
        self.max_turns = int(max_turns)
        self.per_test_timeout_s = float(per_test_timeout_s)
        self.forbidden = tuple(forbidden)
        if sandbox is not None and sandbox is reference_sandbox:
            raise ConfigError("sandbox and reference_sandbox must differ: a sandbox that runs answers is never trusted")
        self._sandbox = sandbox
        self._reference_sandbox = reference_sandbox
        self._dialogue: list[Message] = []

    # ------------------------------------------------------------------ TextEnv hooks
    def generate_task(self, rng: np.random.Generator) -> Task:
        """A procedural task of ``self.split`` from the families in ``self.kinds``."""
        return generate(rng, split=self.split, kinds=self.kinds)

    def begin(self, task: Task) -> str:
        """Check that the grading sandbox is available, then show the instructions and the request."""
        _check_task(task)
        _ = self.sandbox  # start it now: an unavailable sandbox fails at reset, not at the answer
        if self._reference_sandbox is None:
            trusted_sandbox()
        first = INSTRUCTIONS.format(turns=self.max_turns, marker=ANSWER_MARKER) + "\n\n" + task.prompt
        self._dialogue = [Message("user", first)]
        return first

    def respond(self, action: str) -> Transition:
        """A question gets the human's reply; the answer (or the last allowed message) gets graded."""
        self._dialogue.append(Message("assistant", action))
        code = split_answer(action)
        if code is not None:
            return self._finish(code, answered=True)
        if self._turn >= self.max_turns:
            return self._finish(extract_code(action), answered=False)
        reply = self.human.reply(self.task, tuple(self._dialogue))
        self._dialogue.append(Message("user", reply))
        return Transition(reply)

    def get_state(self) -> dict[str, Any]:
        """The dialogue so far (O(turns); the rule-based human has no other state)."""
        return {"dialogue": list(self._dialogue)}

    def set_state(self, state: dict[str, Any]) -> None:
        """Install a state from :meth:`get_state`."""
        self._dialogue = list(state["dialogue"])

    def extra_info(self) -> dict[str, Any]:
        """``turns_left`` on every info dict."""
        return {"turns_left": max(0, self.max_turns - self._turn)}

    # ------------------------------------------------------------------ public API
    @property
    def sandbox(self) -> Sandbox:
        """The grading sandbox (the shared one unless one was passed in)."""
        return self._sandbox if self._sandbox is not None else shared_sandbox()

    @property
    def dialogue(self) -> tuple[Message, ...]:
        """The conversation so far, from the agent's side (for LLM humans and critics)."""
        return tuple(self._dialogue)

    def grade_code(self, code: str) -> GradeResult:
        """Grade code against the current task's hidden tests (no episode state changes).

        Raises:
            SandboxError: The sandbox infrastructure failed.
        """
        privileged = self.privileged()
        return grade(
            self.sandbox,
            str(privileged["reference"]),
            code,
            list(privileged["tests"]),
            per_test_timeout_s=self.per_test_timeout_s,
            forbidden=self.forbidden,
            reference_sandbox=self._reference_sandbox,
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> CollabCodeEnv:
        """Copy the episode state but share the sandbox and the human (a process or a model, not state)."""
        shared = {id(x): x for x in (self._sandbox, self._reference_sandbox, self.human)}
        clone = copy.copy(self)
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            clone.__dict__[key] = shared[id(value)] if id(value) in shared else copy.deepcopy(value, memo)
        return clone

    # ------------------------------------------------------------------ internals
    def _finish(self, code: str, *, answered: bool) -> Transition:
        result = self.grade_code(code)
        text = f"Your function passed {result.passed} of {result.total} hidden tests."
        cause = ": ".join(x for x in (result.error, result.detail) if x)
        if cause:
            text += f" ({cause})"
        info = {
            "success": result.success,
            "tests_passed": result.passed,
            "tests_total": result.total,
            "grading_error": result.error,
            "grading_detail": result.detail,
            "answered": answered,
        }
        return Transition(text, reward=result.reward, terminated=True, info=info)


def _check_task(task: Task) -> None:
    privileged = task.privileged
    reference, tests = privileged.get("reference"), privileged.get("tests")
    if not isinstance(reference, str) or not reference.strip():
        raise EnvError(f"task {task.task_id!r} has no privileged 'reference' code")
    if not isinstance(tests, (list, tuple)) or not tests or not all(isinstance(t, str) for t in tests):
        raise EnvError(f"task {task.task_id!r} needs privileged 'tests': a non-empty list of call expressions")
