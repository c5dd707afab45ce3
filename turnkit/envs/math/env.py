"""`MathEpisodesEnv`: multi-turn math problems with retries and an MRT-style thinking budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from turnkit.envs.core import TextEnv, Transition
from turnkit.envs.math.answers import answers_equal, extract_answer, parse_answer
from turnkit.envs.math.generator import KINDS, check_config, generate
from turnkit.errors import ConfigError
from turnkit.tools import ToolsArg
from turnkit.types import Task

FORMAT_LINE = "Reply with ANSWER: <value>."
"""The one-line format instruction under every problem."""
BUDGET_UNITS = ("words", "chars")
ANSWER_MARKER = "ANSWER:"


class MathEpisodesEnv(TextEnv):
    r"""Solve one math problem in a few turns: think, answer, get feedback, retry.

    ## Description
    Each episode poses one problem: a procedurally generated one (``arithmetic``, ``fractions``,
    ``linear`` equations or ``word`` problems; see ``turnkit.envs.math.generator``) or one from a task
    list such as :func:`~turnkit.envs.math.loaders.load_gsm8k`. Answers are checked for mathematical
    equivalence with sympy (``1/2``, ``0.5``, ``\\frac{1}{2}``, ``x = 1/2`` all match ``1/2``).

    ## Observation
    A ``str``. On ``reset``: the problem and one format line, e.g. ``"What is 3 plus 4?\nReply with
    ANSWER: <value>."`` (under 120 characters at difficulty 1, ``id`` and ``combo``). After each turn:
    short feedback (``"Correct."``, ``"Incorrect. 2 attempts left."``, ``"No answer yet. ..."``, ...).

    ## Action
    A ``str``: free text. The last ``ANSWER: <value>`` line is the answer (without one, the last
    ``\\boxed{<value>}``). A turn without an answer is a reasoning turn: allowed, but it spends budget.

    ## Rewards
    ``1.0`` on the turn with a correct answer, ``0.0`` on every other turn.

    ## Episode End
    Terminated on a correct answer (``info["success"] = True``); after ``max_attempts`` wrong answers,
    when the budget is used up, or after too many invalid actions (``info["success"] = False``).
    Truncated by the ``TimeLimit`` of ``gymnasium.make`` (10 turns for ``turnkit/MathEpisodes-v0``).

    ## Budget (MRT-style)
    Every turn spends its length from ``token_budget``, counted in whitespace-separated *words*
    (``len(action.split())``, the default) or in characters (``budget_unit="chars"``). Each turn is one
    MRT "episode"; ``info["episode_boundaries"]`` lists the cumulative budget used at the end of each
    turn. A turn that goes over the budget is not read and ends the episode; a turn that leaves no budget
    ends it after being read. Invalid actions (empty, too long, ...) spend nothing.

    ## Info
    ``kind``, ``attempts_left``, ``budget_used``, ``budget_left``, ``episode_boundaries``, ``answered``
    (this turn stated an answer), ``success`` on terminal steps, plus the :class:`TextEnv` keys. Never
    the reference answer: read that through :meth:`privileged` (critics, oracles).

    ## Arguments
    * ``split``: ``"id"``, ``"ood"`` or ``"combo"`` (see Splits). Ignored with ``tasks``.
    * ``difficulty``: 1 (one-digit addition/subtraction and the like) to 5.
    * ``kinds``: kinds to draw from, e.g. ``("arithmetic",)``; default all four.
    * ``tasks``: a fixed task list (e.g. ``load_gsm8k(path)``) instead of the generator.
    * ``max_attempts``: wrong answers allowed before the episode ends (default 3).
    * ``token_budget``: budget over all turns (default 512), in ``budget_unit`` (``"words"``/``"chars"``).
    * ``tools``: tools the agent may call, e.g. ``["python", "submit"]`` (see :mod:`turnkit.tools`). A tool turn
      spends no budget and no attempt; it counts as a turn for the ``TimeLimit``.
    * ``max_invalid_actions``, ``max_action_chars``, ``render_mode``: see :class:`TextEnv`.

    ## Splits
    * ``id``: operands from the difficulty's ranges (level 1: 1..9; level 2: 1..99, factors 2..12; ...), a
      fixed number of steps, and only the ``(op, style)`` pairs that are not held out.
    * ``ood``: the ``id`` pairs, but one more step and every step operand from a disjoint, larger range
      (``(hi, 10 hi]``; factors ``(f, 3f]``; denominators ``(d, 3d]``).
    * ``combo``: ``id`` ranges and steps, but each task uses a held-out ``(op, style)`` pair, e.g.
      subtraction in words (``"What is 7 minus 3?"``) while ``id`` has ``"Compute 7 - 3."`` and
      ``"What is 7 plus 3?"``. Held out: ``(sub, words)``, ``(mul, symbols)``, ``(div, words)``; word
      problems: ``(sub, money)``, ``(mul, objects)``, ``(div, money)``.

    Example:
        >>> env = MathEpisodesEnv(difficulty=1, kinds=("arithmetic",))
        >>> obs, info = env.reset(seed=0)
        >>> obs
        'What is 6 plus 5?\nReply with ANSWER: <value>.'
        >>> env.step("Let me add them.")[0]
        'No answer yet. Reply with ANSWER: <value>. 508 words left.'
        >>> obs, reward, terminated, truncated, info = env.step("ANSWER: 10")
        >>> obs, reward, terminated, info["attempts_left"]
        ('Incorrect. 2 attempts left.', 0.0, False, 2)
        >>> obs, reward, terminated, truncated, info = env.step("ANSWER: \\boxed{11}")
        >>> obs, reward, terminated, info["success"], info["episode_boundaries"]
        ('Correct.', 1.0, True, True, [4, 6, 8])
    """

    submit_template = f"{ANSWER_MARKER} {{answer}}"
    """The ``submit`` tool's answer is judged as ``ANSWER: <answer>``."""
    final_answer_markers = (ANSWER_MARKER,)
    """A reasoning step containing one of these ends the turn (read by step-level search, ``turnkit.search``)."""

    def __init__(
        self,
        *,
        split: str = "id",
        difficulty: int = 1,
        kinds: Sequence[str] = KINDS,
        tasks: Sequence[Task] | None = None,
        max_attempts: int = 3,
        token_budget: int = 512,
        budget_unit: str = "words",
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
        self.kinds = check_config(split if tasks is None else "id", difficulty, kinds)
        self.difficulty = int(difficulty)
        for name, value in (("max_attempts", max_attempts), ("token_budget", token_budget)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ConfigError(f"{name} must be an int >= 1, got {value!r}")
        if budget_unit not in BUDGET_UNITS:
            raise ConfigError(f"budget_unit must be one of {list(BUDGET_UNITS)}, got {budget_unit!r}")
        self.max_attempts = int(max_attempts)
        self.token_budget = int(token_budget)
        self.budget_unit = budget_unit
        self._attempts_left = self.max_attempts
        self._budget_used = 0
        self._boundaries: list[int] = []

    # ------------------------------------------------------------------ TextEnv hooks
    def generate_task(self, rng: np.random.Generator) -> Task:
        """A procedural task of ``self.split``/``self.difficulty``/``self.kinds`` drawn from ``rng``."""
        return generate(rng, split=self.split, difficulty=self.difficulty, kinds=self.kinds)

    def begin(self, task: Task) -> str:
        """Reset attempts and budget; the first observation is the problem plus the format line."""
        self._attempts_left = self.max_attempts
        self._budget_used = 0
        self._boundaries = []
        return f"{task.prompt}\n{FORMAT_LINE}"

    def respond(self, action: str) -> Transition:
        """Charge the budget, then treat the turn as reasoning or as an answer."""
        self._budget_used += self.cost(action)
        self._boundaries.append(self._budget_used)
        left = self.token_budget - self._budget_used
        if left < 0:
            return self._end(f"Budget exhausted ({self._budget_used}/{self.token_budget} {self.budget_unit}).")
        answer = extract_answer(action)
        if answer is None:
            if left == 0:
                return self._end("Budget exhausted with no answer.")
            return Transition(f"No answer yet. {FORMAT_LINE} {left} {self.budget_unit} left.", info={"answered": False})
        if answers_equal(answer, str(self.privileged()["answer"])):
            return Transition("Correct.", reward=1.0, terminated=True, info={"answered": True, "success": True})
        self._attempts_left -= 1
        why = "Incorrect."
        if parse_answer(answer) is None and parse_answer(str(self.privileged()["answer"])) is not None:
            why = "Incorrect (the answer is not a number or expression I can read)."
        if self._attempts_left == 0 or left == 0:
            tail = "No attempts left." if self._attempts_left == 0 else "No budget left."
            return self._end(f"{why} {tail}", answered=True)
        plural = "s" if self._attempts_left != 1 else ""
        return Transition(f"{why} {self._attempts_left} attempt{plural} left.", info={"answered": True})

    def get_state(self) -> dict[str, Any]:
        """The episode state: attempts left, budget used, turn boundaries (O(turns), no replay)."""
        return {"attempts_left": self._attempts_left, "budget_used": self._budget_used, "boundaries": self._boundaries}

    def set_state(self, state: dict[str, Any]) -> None:
        """Install a state from :meth:`get_state`."""
        self._attempts_left = int(state["attempts_left"])
        self._budget_used = int(state["budget_used"])
        self._boundaries = list(state["boundaries"])

    # ------------------------------------------------------------------ public API
    def extra_info(self) -> dict[str, Any]:
        """Kind, attempts left and budget, on every info dict (reset and invalid steps included).

        A turn's :class:`~turnkit.envs.core.Transition` adds only ``answered`` (and ``success``): these keys are
        merged in once, by :class:`~turnkit.envs.core.TextEnv`.
        """
        return {
            "kind": str(self.task.metadata.get("kind", "math")),
            "attempts_left": self._attempts_left,
            "budget_used": self._budget_used,
            "budget_left": max(0, self.token_budget - self._budget_used),
            "episode_boundaries": list(self._boundaries),
        }

    def cost(self, action: str) -> int:
        """The budget one turn spends: its number of words (or characters, with ``budget_unit="chars"``).

        Example:
            >>> MathEpisodesEnv().cost("ANSWER: 12  ok"), MathEpisodesEnv(budget_unit="chars").cost("ab c")
            (3, 4)
        """
        return len(action.split()) if self.budget_unit == "words" else len(action)

    # ------------------------------------------------------------------ internals
    def _end(self, message: str, answered: bool = False) -> Transition:
        return Transition(
            f"{message} The episode is over.", terminated=True, info={"answered": answered, "success": False}
        )
