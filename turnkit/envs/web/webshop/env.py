"""`WebShopEnv`: buy the product an instruction describes in a shop served over real HTTP (Yao et al. 2022).

## Description
Each episode generates a small shop from the episode RNG (:mod:`~turnkit.envs.web.webshop.catalogue`) and
an instruction such as ``i am looking for a led and dimmable desk lamp with color: black, and price lower
than 40.00 dollars``. The shop runs on a real HTTP server on 127.0.0.1 (one per process, one session per
episode; :mod:`~turnkit.envs.web.webshop.server`), which holds all episode state. Splits: ``id``, ``ood``
(unseen categories or attribute values) and ``combo`` (held-out attribute pairs).

## Action
``search[query]`` (on a page with the search box) or ``click[label]`` (any label shown in brackets:
``Back to Search``, ``Next >``, ``< Prev``, a product id, an option value, ``Buy Now``), as in WebShop. The
first such command in the message counts. Anything else, an unknown label, an empty query or a search without
a search box is an invalid action (:meth:`~turnkit.TextEnv.reject`): feedback and the same page again,
``info["invalid_action"]``, and the episode ends after more than ``max_invalid_actions`` of them; never an
exception.

## Observation
The page as text: one line per page line, clickable labels in brackets, then the commands available. The
first observation starts with the instruction. ``render="text"`` parses the server's HTML in Python;
``render="chromium"`` loads the same page in Chromium and reads the DOM (the same labels; a test checks
50 pages); :meth:`WebShopEnv.screenshot` gives its pixels.

## Rewards
0 until ``click[Buy Now]``; then WebShop's purchase reward in [0, 1]
(:func:`~turnkit.envs.web.webshop.reward.purchase_reward`), with its parts in ``info["reward_parts"]``.
``info["success"]``: the reward is 1 (every attribute, option, the price and the type right).

## Episode end
At the purchase. ``gymnasium.make`` adds a 15-step ``TimeLimit``.

## Failures
A server that died, hung (``request_timeout_s``) or lost the session raises
:class:`~turnkit.envs.web.webshop.client.ShopServerError` (an ``EnvError``, recorded on the trajectory as
``ErrorCause.ENV``); the next ``reset`` starts a fresh server. A Chromium crash is a ``BrowserError``.

Example:
    >>> from turnkit.envs.web.webshop.catalogue import find_target, goal_for, shop_for
    >>> env = WebShopEnv()
    >>> obs, info = env.reset(seed=0)
    >>> obs.splitlines()[0].startswith("Instruction: i am looking for a")
    True
    >>> goal = goal_for(env.task.metadata["shop_seed"], "id")
    >>> obs, *_ = env.step(f"search[{' '.join(goal.attributes)} {goal.type_name}]")
    >>> target = find_target(shop_for(env.task.metadata["shop_seed"], "id"), goal)
    >>> f"[{target.pid}]" in obs
    True
    >>> obs, reward, terminated, _, info = env.step(f"click[{target.pid}]")
    >>> for _, value in goal.options:
    ...     obs, reward, terminated, _, info = env.step(f"click[{value}]")
    >>> obs, reward, terminated, _, info = env.step("click[Buy Now]")
    >>> reward, terminated, info["success"]
    (1.0, True, True)
    >>> env.close()
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from turnkit.envs.core import TextEnv, Transition
from turnkit.envs.web.webshop.catalogue import SPLITS, goal_for
from turnkit.envs.web.webshop.client import ShopClient, ShopServerError
from turnkit.envs.web.webshop.pages import search_url
from turnkit.envs.web.webshop.renderers import ChromiumRenderer, PageGone, make_renderer
from turnkit.envs.web.webshop.view import PageView
from turnkit.errors import ConfigError, EnvError
from turnkit.types import Task

FAMILY = "web.webshop"
"""The family name on tasks (the oracle lives in ``turnkit.envs.web.webshop.oracle``)."""

_COMMAND = re.compile(r"\b(search|click)\s*\[([^\]\n]*)\]", re.IGNORECASE)


def parse_command(action: str) -> tuple[str, str] | None:
    """The first ``search[...]`` or ``click[...]`` in ``action``: ``(verb, argument)``, or ``None``.

    Example:
        >>> parse_command("I will look. search[red cotton t-shirt]")
        ('search', 'red cotton t-shirt')
        >>> parse_command("CLICK[ Buy Now ]"), parse_command("buy it")
        (('click', 'Buy Now'), None)
    """
    m = _COMMAND.search(action)
    return (m.group(1).lower(), m.group(2).strip()) if m else None


def page_text(view: PageView) -> str:
    """The observation text of a page: its lines, then the commands it allows.

    Example:
        >>> print(page_text(PageView(("[Back to Search]",), (("Back to Search", "/"),), False)))
        [Back to Search]
        Commands: click[one of the bracketed labels]
    """
    commands = []
    if view.has_search:
        commands.append("search[your query]")
    if view.labels:
        commands.append("click[one of the bracketed labels]")
    return "\n".join((*view.lines, "Commands: " + " or ".join(commands)))


class WebShopEnv(TextEnv):
    """WebShop-style shopping over a loopback HTTP server (see the module docstring).

    Args:
        split: ``"id"``, ``"ood"`` or ``"combo"``.
        tasks: A fixed task list (tasks made by this env's generator, e.g. loaded from JSONL).
        render: ``"text"`` (default) or ``"chromium"``.
        request_timeout_s: Deadline of one request to the shop server.
        browser_timeout_s: Deadline of one Chromium navigation (``render="chromium"``).
        max_invalid_actions: Invalid messages (empty, too long, not text) allowed before the episode ends.
        max_action_chars: Longest accepted message.
        render_mode: See :class:`~turnkit.TextEnv`.
    """

    splits: ClassVar[tuple[str, ...]] = SPLITS

    def __init__(
        self,
        *,
        split: str = "id",
        tasks: Sequence[Task] | None = None,
        render: str = "text",
        request_timeout_s: float = 5.0,
        browser_timeout_s: float = 10.0,
        max_invalid_actions: int = 3,
        max_action_chars: int = 4_000,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(
            split=split,
            tasks=tasks,
            max_invalid_actions=max_invalid_actions,
            max_action_chars=max_action_chars,
            render_mode=render_mode,
        )
        if render not in ("text", "chromium"):
            raise ConfigError(f"render must be 'text' or 'chromium', got {render!r}")
        self.render_kind = render
        self._client = ShopClient(timeout_s=request_timeout_s)
        extra = {"timeout_s": browser_timeout_s} if render == "chromium" else {}
        self._renderer = make_renderer(render, self._client, **extra)
        self._sid: str | None = None
        self._path = ""
        self._view = PageView((), (), False)
        self._stale_tab = False

    # ------------------------------------------------------------------ TextEnv hooks
    def generate_task(self, rng: np.random.Generator) -> Task:
        """A shop seed from ``rng``; the goal is the shop's generated goal."""
        seed = int(rng.integers(2**31 - 1))
        goal = goal_for(seed, self.split)
        return Task(
            task_id=f"webshop-{self.split}-{seed}",
            prompt=f"Instruction: {goal.instruction()}",
            privileged={
                "goal": {
                    "type_name": goal.type_name,
                    "attributes": list(goal.attributes),
                    "options": {g: v for g, v in goal.options},
                    "price_upper": goal.price_upper,
                }
            },
            family=FAMILY,
            split=self.split,
            difficulty=float(len(goal.attributes) + len(goal.options)),
            metadata={"shop_seed": seed, "product_type": goal.type_name},
        )

    def begin(self, task: Task) -> str:
        """Open a session for the task's shop and show the start page."""
        if "shop_seed" not in task.metadata:
            raise EnvError(f"task {task.task_id!r} has no metadata['shop_seed'] (not a WebShop task)")
        self._end_session()
        self._sid = self._client.new_session(int(task.metadata["shop_seed"]), task.split)
        self._view = self._show("/")
        return f"{task.prompt}\n\n{page_text(self._view)}"

    def respond(self, action: str) -> Transition:
        """Apply ``search[...]`` or ``click[...]``."""
        command = parse_command(action)
        if command is None:
            return self._feedback("Use search[query] or click[label] (a label shown in brackets).", "no_command")
        verb, arg = command
        if verb == "search":
            if not self._view.has_search:
                return self._feedback("There is no search box on this page; click[Back to Search] first.", "no_search")
            if not arg:
                return self._feedback("The search query is empty.", "empty_query")
            target = search_url("", arg, 1)
        else:
            href = self._view.href(arg)
            if href is None:
                return self._feedback(f"There is no [{arg[:80]}] on this page.", "unknown_label")
            target = href
        try:
            self._view = self._show(target)
        except PageGone as exc:
            return self._feedback(f"That did not work: {exc}", "page_error")
        if not target.endswith("/buy"):
            return Transition(page_text(self._view), 0.0, False, {"page": self._page_kind()})
        bought = self._client.state(str(self._sid))["bought"]
        parts = bought["reward"]
        reward = float(parts["total"])
        info = {"page": "done", "reward_parts": parts, "success": reward >= 1.0 - 1e-9}
        return Transition(page_text(self._view), reward, True, info)

    def get_state(self) -> Any:
        """The server's session state, the current page's path and view (O(state), no replay)."""
        return {"session": self._client.state(str(self._sid)), "path": self._path, "view": self._view}

    def set_state(self, state: Any) -> None:
        """Install a :meth:`get_state` value into this env's session on the server."""
        if self._sid is None or self._client.server is None or not self._client.server.alive:
            self._sid = self._client.new_session(int(state["session"]["seed"]), state["session"]["split"])
        self._client.put_state(self._sid, state["session"])
        self._path, self._view = state["path"], state["view"]
        self._stale_tab = True

    # ------------------------------------------------------------------ public extras
    @property
    def page(self) -> PageView:
        """The current page as the renderer read it (lines, links with session-relative targets, search box).

        Example:
            >>> env = WebShopEnv()
            >>> _ = env.reset(seed=0)
            >>> env.page.has_search, env.page.labels
            (True, ())
            >>> env.close()
        """
        return self._view

    @property
    def page_path(self) -> str:
        """The current page's path relative to the session (``"/"``, ``"/search?q=..."``, ``"/item/<id>"``)."""
        return self._path

    def screenshot(self) -> np.ndarray:
        """The current page's pixels (``render="chromium"`` only).

        Raises:
            EnvError: The env renders text.
        """
        if not isinstance(self._renderer, ChromiumRenderer):
            raise EnvError("screenshot() needs render='chromium'")
        if self._stale_tab and self._page_kind() != "done":  # restored from a snapshot: show the page again
            self._renderer.show(self._base + re.sub(r"/select\?.*$", "", self._path))
            self._stale_tab = False
        return self._renderer.screenshot()

    def close(self) -> None:
        """End the session, close the connection and the browser tab."""
        try:
            self._end_session()
        finally:
            self._renderer.close()
            self._client.close()
            super().close()

    # ------------------------------------------------------------------ internals
    @property
    def _base(self) -> str:
        return f"/s/{self._sid}"

    def _show(self, path: str) -> PageView:
        """Show ``path`` (relative to the session); the view keeps session-relative links (restorable anywhere)."""
        base = self._base
        view = self._renderer.show(base + path)
        links = tuple((label, href[len(base) :] if href.startswith(base + "/") else href) for label, href in view.links)
        self._path, self._stale_tab = path, False
        return PageView(view.lines, links, view.has_search)

    def _page_kind(self) -> str:
        parts = self._path.split("?")[0].strip("/").split("/")
        if parts == [""]:
            return "home"
        if parts[0] == "item" and parts[-1] == "buy":
            return "done"
        return {"search": "results", "item": "item"}.get(parts[0], "other")

    def _feedback(self, message: str, why: str) -> Transition:
        """An unusable command: counted as invalid (see :meth:`~turnkit.TextEnv.reject`), the page shown again."""
        tr = self.reject(message, why)
        return dataclasses.replace(tr, observation=f"{tr.observation}\n\n{page_text(self._view)}")

    def _end_session(self) -> None:
        if self._sid is not None and self._client.server is not None and self._client.server.alive:
            with contextlib.suppress(ShopServerError):  # the session is gone with its server
                self._client.request("DELETE", f"/s/{self._sid}")
        self._sid = None
