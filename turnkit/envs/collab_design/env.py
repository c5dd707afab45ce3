"""`CollabDesignEnv`: build a web page with a simulated human who compares renders (ColBench frontend).

## Description
The policy gets a vague request (page kind, topic, colour mood) and writes HTML/CSS over several turns.
Every turn's HTML is rendered in headless Chromium at 640 x 480 (:mod:`turnkit.browser`); the simulated
human compares the render with the hidden reference render and describes the most visible differences
(:mod:`~turnkit.envs.collab_design.human`). Designs are procedural with ``id``/``ood``/``combo`` splits
(:mod:`~turnkit.envs.collab_design.generator`).

## Action
A message with HTML: a ```` ```html ```` block, or raw markup. A message without HTML gets a request for
HTML. ``I WANT TO ANSWER:`` followed by HTML ends the episode with that HTML as the final page.

## Observation
The human's reply (at most ``reply_chars`` characters), or the final score after the last turn.

## Rewards
0 on every turn but the last; the last turn scores the final render against the reference
(:func:`~turnkit.envs.collab_design.score.design_score`, in [0, 1]: half pixels, half text blocks, so
wording counts). ``info`` reports ``similarity`` (that score), ``visual_similarity`` and
``text_similarity`` of every rendered turn (progress signals for critics; the policy never sees them).

## Episode end
At ``I WANT TO ANSWER:`` or after ``max_turns`` turns (the last message is then the answer).
``info["success"]``: final similarity >= ``success_threshold``
(:data:`SUCCESS_THRESHOLD` by default).

## Failures
A page that hangs or crashes its renderer is the agent's fault: the human says so, and the turn scores 0.
A browser that cannot start or keeps failing raises :class:`~turnkit.browser.BrowserError`, which the
rollout layer records as ``ErrorCause.BROWSER``.

## Arguments
``split``, ``max_turns``, ``success_threshold``, ``human`` (``None`` for :class:`RuleBasedHuman`, a
:class:`DesignHuman`, or any turnkit Agent, wrapped in :class:`LLMHuman`), ``feedback_items``,
``reply_chars``, ``render_timeout_s``, ``javascript``, ``browser`` (a :class:`~turnkit.browser.Browser`
owned by the caller), ``share_browser`` (without ``browser``: ``True`` (default) takes the process-wide
reference-counted browser of :func:`~turnkit.browser.shared_pool`, so the G copies of a group or batch
cost one Chromium, released in ``close()`` or when the env is collected; ``False`` starts a private
browser, stopped in ``close()``), plus the :class:`~turnkit.TextEnv` arguments.

Example:
    >>> env = CollabDesignEnv()  # gymnasium.make("turnkit/CollabDesign-v0") adds the 10-turn TimeLimit
    >>> obs, info = env.reset(seed=0)
    >>> obs.startswith("I need a page")
    True
    >>> obs, reward, terminated, truncated, info = env.step("```html\\n<body style='background:#1e1e1e'></body>\\n```")
    >>> reward, terminated, info["similarity"] < 0.7
    (0.0, False, True)
    >>> obs.startswith("The main background colour should be")
    True
    >>> env.close()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from turnkit.browser import Browser, BrowserError, PageError, Render, shared_pool
from turnkit.browser.pool import Lease
from turnkit.envs.collab_design.differences import find_differences
from turnkit.envs.collab_design.generator import SPLITS, VIEWPORT, design_task, sample_design
from turnkit.envs.collab_design.human import DesignHuman, LLMHuman, RuleBasedHuman, View
from turnkit.envs.collab_design.protocol import NO_HTML_REPLY, PAGE_ERROR_REPLY, extract_html, split_answer
from turnkit.envs.collab_design.score import design_score
from turnkit.envs.core import TextEnv, Transition
from turnkit.errors import ConfigError
from turnkit.types import Task

SUCCESS_THRESHOLD = 0.9
"""Final similarity that counts as success (see ``docs/envs/collab_design.md`` for the calibration)."""


class CollabDesignEnv(TextEnv):
    """Collaborative front-end design against a hidden reference page (see the module docstring)."""

    splits: ClassVar[tuple[str, ...]] = SPLITS

    def __init__(
        self,
        *,
        split: str = "id",
        tasks: Sequence[Task] | None = None,
        max_turns: int = 10,
        success_threshold: float = SUCCESS_THRESHOLD,
        human: DesignHuman | Any | None = None,
        feedback_items: int = 3,
        reply_chars: int = 400,
        render_timeout_s: float = 5.0,
        javascript: bool = True,
        browser: Browser | None = None,
        share_browser: bool = True,
        max_invalid_actions: int = 3,
        max_action_chars: int = 32_000,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(
            split=split,
            tasks=tasks,
            max_invalid_actions=max_invalid_actions,
            max_action_chars=max_action_chars,
            render_mode=render_mode,
        )
        if max_turns < 1:
            raise ConfigError(f"max_turns must be >= 1, got {max_turns}")
        if not 0.0 <= success_threshold <= 1.0:
            raise ConfigError(f"success_threshold must be in [0, 1], got {success_threshold}")
        if browser is not None and browser.viewport != VIEWPORT:
            raise ConfigError(f"browser viewport must be {VIEWPORT}, got {browser.viewport}")
        self.max_turns = max_turns
        self.success_threshold = success_threshold
        if human is None:
            human = RuleBasedHuman(max_items=feedback_items, max_chars=reply_chars)
        elif not isinstance(human, DesignHuman):
            human = LLMHuman(human, max_chars=reply_chars)
        self.human: DesignHuman = human
        self._owns_browser = browser is None
        self._share_browser = share_browser
        self._browser = browser
        self._lease: Lease | None = None
        self._render_timeout_s = render_timeout_s
        self._javascript = javascript
        self._similarities: list[float] = []

    # ------------------------------------------------------------------ TextEnv hooks
    def generate_task(self, rng: np.random.Generator) -> Task:
        """A procedural design of ``self.split``."""
        return design_task(sample_design(rng, self.split), self.max_turns)

    def begin(self, task: Task) -> str:
        """Start an episode: the public request."""
        if "reference_html" not in task.privileged:
            raise ConfigError(f"task {task.task_id!r} has no privileged['reference_html']")
        self._similarities = []
        return task.prompt

    def respond(self, action: str) -> Transition:
        """Render the agent's HTML, score it and let the human reply (or finish the episode)."""
        answered, body = split_answer(action)
        final = answered or self._turn >= self.max_turns
        html = extract_html(body)
        info: dict[str, Any] = {"answered": answered, "rendered": False, "page_error": None}
        sim, reply = 0.0, NO_HTML_REPLY
        info["visual_similarity"] = info["text_similarity"] = 0.0
        if html is not None:
            reference = self._render_reference()
            try:
                mine = self.browser.render(html)
            except PageError as exc:
                info["page_error"] = exc.reason
                reply = PAGE_ERROR_REPLY.get(exc.reason, PAGE_ERROR_REPLY["crash"])
            else:
                info["rendered"] = True
                score = design_score(mine, reference)
                sim = score.total
                info["visual_similarity"], info["text_similarity"] = score.visual, score.text
                if not final:
                    diffs = tuple(find_differences(mine, reference))
                    reply = self.human.reply(View(self.task, mine, reference, sim, diffs))
        self._similarities.append(sim)
        info["similarity"] = sim
        if not final:
            return Transition(reply, 0.0, False, info)
        success = sim >= self.success_threshold
        verdict = "that matches my design" if success else "that is not quite my design"
        how = "You answered" if answered else "That was the last turn"
        obs = f"{how}. Your final page scores {sim:.3f} in similarity to the page I wanted: {verdict}."
        return Transition(obs, sim, True, {**info, "success": success})

    def extra_info(self) -> dict[str, Any]:
        """``max_turns`` in every info dict."""
        return {"max_turns": self.max_turns}

    def get_state(self) -> Any:
        """The similarity history (the task and counters are kept by :class:`TextEnv`)."""
        return {"similarities": list(self._similarities)}

    def set_state(self, state: Any) -> None:
        """Install a :meth:`get_state` value."""
        self._similarities = list(state["similarities"])

    # ------------------------------------------------------------------ browser
    @property
    def browser(self) -> Browser:
        """The env's browser (started lazily on the first render; shared by default, see ``share_browser``)."""
        if self._browser is None:
            settings = {"viewport": VIEWPORT, "timeout_s": self._render_timeout_s, "javascript": self._javascript}
            if self._share_browser:
                # released in close(), or when an unclosed env (a group's clone) is garbage-collected
                self._lease = shared_pool().lease(**settings)
                self._browser = self._lease.browser
            else:
                self._browser = Browser(**settings)  # type: ignore[arg-type]
        return self._browser

    @property
    def similarities(self) -> tuple[float, ...]:
        """The similarity of every turn of the current episode so far (0 for turns without a render)."""
        return tuple(self._similarities)

    def _render_reference(self) -> Render:
        try:
            # stripped like extract_html() strips the agent's HTML, so an exact copy is a cache hit
            return self.browser.render(str(self.task.privileged["reference_html"]).strip())
        except PageError as exc:  # the reference is static HTML: a failure here is the browser's
            raise BrowserError(f"the reference page of {self.task.task_id} failed to render: {exc}") from exc

    def close(self) -> None:
        """Stop the env's private browser, or release its hold on the pool's shared one.

        The pool stops a shared browser when its last holder lets go; a browser passed as ``browser=`` is left
        to its owner.
        """
        if self._lease is not None:
            self._lease.release()
            self._lease = None
            self._browser = None
        elif self._owns_browser and self._browser is not None:
            self._browser.close()
            self._browser = None
        super().close()
