"""`MiniWoBEnv`: MiniWoB++ web tasks in turnkit's own headless Chromium, as a text env.

## Description
The MiniWoB++ task pages of the ``miniwob`` wheel (click a button, fill a form, pick from a list...) run
unchanged in a :class:`~turnkit.browser.Tab`, served from ``http://miniwob.invalid/`` by
:mod:`~turnkit.envs.web.miniwob.assets` (no HTTP server, no network, no Selenium). The policy reads the
task's instruction and a text listing of the page's visible elements, and acts on them by ref.

## Action
One action per message (the first one found; text around it is ignored):
``click[ref]`` (a real mouse click at the element's centre, through DevTools ``Input`` events),
``type[ref, text]`` (focus the field, select its content and insert ``text``, which replaces it; an empty
text clears the field) or ``select[ref, option]`` (choose a list option by its text). See
:mod:`~turnkit.envs.web.miniwob.actions`.

## Observation
The first observation (also ``task.prompt``) explains the actions, then shows ``Instruction:`` (MiniWoB's
utterance, ``core.getUtterance()``) and ``Page:``, one line per visible element with a stable ref
(:mod:`~turnkit.envs.web.miniwob.observe`). Each later observation says what the action did and shows the
page again, or the final reward once MiniWoB ends the episode. An invalid message gets feedback only (the
page did not change).

## Rewards
MiniWoB's own JavaScript decides: when the page calls ``core.endEpisode``, the step's reward is
``WOB_RAW_REWARD_GLOBAL``, MiniWoB's reward *without* its time penalty, in ``[-1, 1]`` (some tasks give
partial credit, e.g. ``click-checkboxes``: the fraction of boxes right, minus the fraction wrong). Every other
step gives 0. We keep the raw scale rather than mapping it to ``[0, 1]``: a wrong final answer (-1) and running
out of turns (0) stay distinguishable, as in MiniWoB. ``info["success"]`` is ``raw reward > 0`` (MiniWoB's
convention) on the terminal step.

## Determinism
The page's ``Math.random`` is seeded from the episode RNG twice: by an init script before any page script
runs (``?tkseed=`` in the URL), and with MiniWoB's ``Math.seedrandom(seed)`` right before ``genProblem``.
MiniWoB's 10-second wall-clock episode limit and countdown are switched off (turn limits replace them:
``max_episode_steps=12`` at registration), and only tasks whose pages do not read the clock or animate
are curated (:mod:`~turnkit.envs.web.miniwob.tasks`). The same seed gives the same page in any process.
Snapshots replay the actions (``TextEnv``'s default): :meth:`begin` rebuilds the same page from the seed.

## Splits
Only ``"id"``. MiniWoB's generators have no held-out attribute values or combinations to build ``ood`` or
``combo`` splits from, and splitting page seeds into ranges would only relabel the same distribution. The
natural out-of-distribution axis is the *task*: train on some task names (``task=[...]``) and evaluate on
others.

## Episode end
MiniWoB ends the episode (right or wrong answer), or ``max_invalid_actions`` + 1 invalid messages; the
``TimeLimit`` wrapper of ``gymnasium.make`` truncates after 12 steps.

## Failures
Invalid messages (malformed actions, unknown refs, typing into a button, an option a list does not have, and
the ``TextEnv`` checks: empty, too long, NUL bytes...) are observations with ``info["invalid_action"]``
(``"malformed_action"``, ``"unknown_ref"``, ``"wrong_element"``, ...), counted against
``max_invalid_actions``. A browser that crashes, hangs or cannot start raises
:class:`~turnkit.browser.BrowserError` (the rollout layer records ``ErrorCause.BROWSER``); the next
``reset`` starts over on a fresh page.

## Arguments
``task``: a curated task name (default ``"click-button"``) or a sequence of them (each episode draws one);
``allow_uncurated``: also accept the wheel's other task pages (at your own risk: they may animate, read the
clock or need drag-and-drop); ``timeout_s``: deadline of one browser call; plus ``split``, ``tasks``,
``max_invalid_actions``, ``max_action_chars``, ``render_mode`` of :class:`~turnkit.TextEnv`.

Example:
    >>> env = MiniWoBEnv(task="click-button")  # gymnasium.make("turnkit/MiniWoB-v0") adds the TimeLimit
    >>> obs, info = env.reset(seed=0)
    >>> print(obs.split("\\n\\n")[1])
    Instruction: Click on the "submit" button.
    Page:
    [1] input text value=""
    [2] input text value=""
    [3] span "bibendum diam ut:"
    [4] input text value=""
    [5] button "submit"
    [6] div "at porttitor lacus"
    [7] span "pulvinar viverra aliquet:"
    [8] input text value=""
    >>> obs, reward, terminated, truncated, info = env.step("click[5]")
    >>> print(obs)
    Clicked [5] button "submit". MiniWoB ended the episode: reward 1.00 (success).
    >>> reward, terminated, info["success"]
    (1.0, True, True)
    >>> env.close()
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from turnkit.browser import BrowserError, Tab
from turnkit.envs.core import TextEnv, Transition
from turnkit.envs.web.miniwob.actions import ACTION_HELP, UNKNOWN_REF, WRONG_ELEMENT, Action, ParseError, parse_action
from turnkit.envs.web.miniwob.assets import resolve, task_names, task_url
from turnkit.envs.web.miniwob.observe import format_element, format_page
from turnkit.envs.web.miniwob.scripts import (
    INIT_SCRIPT,
    OBSERVE_JS,
    SETTLE_JS,
    clear_field_js,
    click_point_js,
    focus_field_js,
    select_js,
    start_js,
)
from turnkit.envs.web.miniwob.tasks import CURATED
from turnkit.errors import ConfigError
from turnkit.types import Task

FAMILY = "web.miniwob"
"""``task.family``: the oracle lives in ``turnkit.envs.web.miniwob.oracle``."""

VIEWPORT = (640, 480)
"""The page size in CSS pixels (MiniWoB's task area is the top-left 160 x 210)."""

INTRO = (
    'You are using a web page to do MiniWoB task "{name}". Act with one action per message: '
    f"{ACTION_HELP}, where ref is an element's number in the page listing."
)
"""The first line of every first observation."""


class MiniWoBEnv(TextEnv):
    """MiniWoB++ tasks in headless Chromium (see the module docstring)."""

    splits: ClassVar[tuple[str, ...]] = ("id",)

    def __init__(
        self,
        *,
        task: str | Sequence[str] = "click-button",
        allow_uncurated: bool = False,
        timeout_s: float = 5.0,
        split: str = "id",
        tasks: Sequence[Task] | None = None,
        max_invalid_actions: int = 3,
        max_action_chars: int = 4_096,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(
            split=split,
            tasks=tasks,
            max_invalid_actions=max_invalid_actions,
            max_action_chars=max_action_chars,
            render_mode=render_mode,
        )
        names = (task,) if isinstance(task, str) else tuple(task)
        if not names:
            raise ConfigError("task must name at least one MiniWoB task")
        known = set(task_names()) if allow_uncurated else set(CURATED)
        for name in names:
            if name not in known:
                hint = "" if allow_uncurated else " (allow_uncurated=True accepts every page of the wheel)"
                raise ConfigError(f"unknown MiniWoB task {name!r}; choose from {sorted(known)}{hint}")
        if timeout_s <= 0:
            raise ConfigError(f"timeout_s must be > 0, got {timeout_s}")
        self.task_names = names
        """The task names episodes are drawn from."""
        self.allow_uncurated = allow_uncurated
        self.timeout_s = float(timeout_s)
        self._tab: Tab | None = None
        self._fresh: tuple[int, str, int] | None = None  # (tab navigations, name, seed) of an untouched page
        self._first_obs = ""
        self._items: dict[int, dict[str, Any]] = {}  # the latest listing, by ref

    # ------------------------------------------------------------------ TextEnv hooks
    def generate_task(self, rng: np.random.Generator) -> Task:
        """Draw a task name and a page seed, and load the page: the prompt is the first observation."""
        name = self.task_names[int(rng.integers(len(self.task_names)))]
        return self.make_task(name, int(rng.integers(1, 2**31 - 1)))

    def make_task(self, name: str, page_seed: int) -> Task:
        """The task of MiniWoB page ``name`` with ``page_seed`` (loads the page: the prompt is its first view).

        Play it with ``env.reset(options={"task": task})``, or collect several into ``tasks=[...]`` for a fixed
        evaluation set. ``name`` need not be one of ``task_names`` but must be curated (or ``allow_uncurated``).

        Example:
            >>> env = MiniWoBEnv()
            >>> task = env.make_task("enter-text", 42)
            >>> env.reset(options={"task": task})[0] == task.prompt, task.metadata
            (True, {'task': 'enter-text'})
            >>> env.close()
        """
        known = task_names() if self.allow_uncurated else CURATED
        if name not in known:
            raise ConfigError(f"unknown MiniWoB task {name!r}; choose from {sorted(known)}")
        seed = int(page_seed)
        prompt = self._load(name, seed)
        digest = hashlib.sha256(f"{name}:{seed}".encode()).hexdigest()[:12]
        return Task(
            task_id=f"miniwob-{name}-{digest}",
            prompt=prompt,
            privileged={"page_seed": seed},
            family=FAMILY,
            split=self.split,
            metadata={"task": name},
        )

    def begin(self, task: Task) -> str:
        """Show the task's page, freshly started (reused when :meth:`generate_task` just loaded it)."""
        name, seed = str(task.metadata.get("task", "")), task.privileged.get("page_seed")
        if not name or not isinstance(seed, int):
            raise ConfigError(f"task {task.task_id!r} needs metadata['task'] and an int privileged['page_seed']")
        tab = self._tab
        if tab is not None and tab.running and self._fresh == (tab.navigations, name, seed):
            return self._first_obs  # the listing (self._items) is still the first page's
        return self._load(name, seed)

    def respond(self, action: str) -> Transition:
        """Parse and perform one action, then report what MiniWoB's page says."""
        try:
            act = parse_action(action)
        except ParseError as exc:
            return self.reject(str(exc), exc.reason)
        self._fresh = None
        did = self._perform(act)
        if isinstance(did, Transition):
            return did
        self.tab.evaluate(SETTLE_JS, await_promise=True)
        state = self.tab.evaluate(OBSERVE_JS)
        info: dict[str, Any] = {"action": str(act)}
        if state["done"]:
            raw = float(state["raw_reward"])
            verdict = "success" if raw > 0 else "failure"
            obs = f"{did} MiniWoB ended the episode: reward {raw:.2f} ({verdict})."
            return Transition(obs, raw, True, {**info, "raw_reward": raw, "success": raw > 0})
        return Transition(f"{did}\n{self._page_text(state)}", 0.0, False, info)

    def extra_info(self) -> dict[str, Any]:
        """The task name in every info dict."""
        return {"miniwob_task": str(self.task.metadata.get("task", ""))}

    # ------------------------------------------------------------------ browser
    @property
    def tab(self) -> Tab:
        """The env's page (one per env; its Chromium process is shared with the other envs of the process)."""
        if self._tab is None:
            self._tab = Tab(resolve, viewport=VIEWPORT, timeout_s=self.timeout_s, init_script=INIT_SCRIPT)
        return self._tab

    def screenshot(self) -> np.ndarray:
        """The page as a ``(480, 640, 3)`` ``uint8`` image (for multimodal policies and debugging)."""
        return self.tab.screenshot()

    def close(self) -> None:
        """Close the env's page (the shared Chromium stops with the last page)."""
        if self._tab is not None:
            self._tab.close()
            self._tab = None
        self._fresh = None
        super().close()

    # ------------------------------------------------------------------ internals
    def _load(self, name: str, seed: int) -> str:
        tab = self.tab
        tab.goto(task_url(name, seed=seed))
        if not tab.evaluate(start_js(seed)):
            raise BrowserError(f"MiniWoB task {name!r} did not become ready")
        tab.evaluate(SETTLE_JS, await_promise=True)  # a frame is drawn: input events hit-test the new page
        state = tab.evaluate(OBSERVE_JS)
        self._first_obs = f"{INTRO.format(name=name)}\n\n{self._page_text(state)}"
        self._fresh = (tab.navigations, name, seed)
        return self._first_obs

    def _page_text(self, state: dict[str, Any]) -> str:
        self._items = {int(it["ref"]): it for it in state["items"]}
        return format_page(str(state["utterance"]), state["items"], truncated=bool(state["truncated"]))

    def _perform(self, act: Action) -> str | Transition:
        """Do ``act`` on the page: a sentence saying what was done, or the rejection of an unusable action."""
        item = self._items.get(act.ref)
        if item is None:
            msg = f"There is no element [{act.ref}] on the page; use a ref from the latest listing."
            return self.reject(msg, UNKNOWN_REF)
        what = format_element({k: v for k, v in item.items() if k in ("ref", "tag", "type", "text")})
        tab = self.tab
        if act.verb == "click":
            point = tab.evaluate(click_point_js(act.ref))
            if "error" in point:
                return self.reject(f"Element {what} cannot be clicked ({point['error']}).", WRONG_ELEMENT)
            tab.click(point["x"], point["y"])
            return f"Clicked {what}."
        if act.verb == "type":
            focus = tab.evaluate(focus_field_js(act.ref))
            if "error" in focus:
                return self.reject(f"Cannot type into {what}: {focus['error']}.", WRONG_ELEMENT)
            if act.text:
                tab.insert_text(act.text)
            else:
                tab.evaluate(clear_field_js(act.ref))
            return f"Typed {json_quote(act.text)} into {what}."
        chosen = tab.evaluate(select_js(act.ref, act.text))
        if "error" in chosen:
            options = chosen.get("options")
            extra = f"; its options are {', '.join(json_quote(o) for o in options)}" if options else ""
            msg = f"Cannot select {json_quote(act.text)} in {what}: {chosen['error']}{extra}."
            return self.reject(msg, WRONG_ELEMENT)
        return f"Selected {json_quote(chosen['selected'])} in {what}."


def json_quote(text: str) -> str:
    """``text`` as a JSON string literal (how the env quotes page and action text).

    Example:
        >>> print(json_quote('say "hi"'))
        "say \\"hi\\""
    """
    return json.dumps(text, ensure_ascii=False)
