"""A random-action baseline for MiniWoB: a valid action on a uniformly chosen element of the latest page.

Lists get a random option, text fields a random word of the instruction, every other element a click.
Seeded by the episode seed, the first observation and the turn, so a run is reproducible and episodes of one
seed on different pages differ. It is the floor the scripted solvers and
trained policies are compared with in ``docs/envs/miniwob.md``.

Example:
    >>> from turnkit.envs.web.miniwob.view import Element, PageView
    >>> page = PageView("Select Bo and click Submit.", (Element(1, "select", options=("Ana", "Bo")),))
    >>> random_action(page, np.random.default_rng(0))
    'select[1, Bo]'
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from turnkit.agents.base import Context
from turnkit.envs.web.miniwob.view import PageView, latest_page
from turnkit.types import AgentTurn

_TEXT_FIELDS = ("text", "password", "number", "email", "search", "tel", "url")


def random_action(page: PageView, rng: np.random.Generator) -> str:
    """One valid action on a uniformly chosen element of ``page`` (``click[1]`` on an empty page)."""
    if not page.elements:
        return "click[1]"
    e = page.elements[int(rng.integers(len(page.elements)))]
    if e.tag == "select" and e.options:
        return f"select[{e.ref}, {e.options[int(rng.integers(len(e.options)))]}]"
    if e.tag == "textarea" or (e.tag == "input" and e.type in _TEXT_FIELDS):
        words = page.instruction.replace('"', " ").split() or ["x"]
        return f"type[{e.ref}, {words[int(rng.integers(len(words)))].strip('.,')}]"
    return f"click[{e.ref}]"


def random_reply(context: Context) -> str:
    """:func:`random_action` on the latest page of ``context`` (a ``check_env`` policy)."""
    observations = [m.content for m in context.messages if m.role == "user"]
    page = latest_page(observations) or PageView("", ())
    first = zlib.crc32(observations[0].encode()) if observations else 0  # differs between pages of one seed
    seed = [int(context.episode_seed or 0) & 0xFFFFFFFF, first, int(context.turn)]
    return random_action(page, np.random.default_rng(seed))


class RandomWebAgent:
    """A batched agent of :func:`random_reply` (``uses_privileged = False``).

    Example:
        >>> import turnkit
        >>> from turnkit.envs.web.miniwob.env import MiniWoBEnv
        >>> env = MiniWoBEnv(task="click-test")
        >>> traj = turnkit.collect(env, RandomWebAgent(), seed=0)
        >>> traj.success  # the page has one button
        True
        >>> env.close()
    """

    uses_privileged = False

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One random action per context."""
        return [AgentTurn(text=random_reply(ctx)) for ctx in contexts]
