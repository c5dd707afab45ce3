"""Reference policies without privileged data: a random clicker and WebShop's rule baseline.

* :class:`RandomClicker`: searches the instruction, then clicks a uniformly random label each turn
  (deterministic per episode seed and turn). The floor of the success rate.
* :class:`SearchThenBuy`: WebShop's rule baseline (Yao et al. 2022, Table 2): search the instruction, open
  the first result, buy it without choosing options. ``pick_options=True`` first clicks every option value
  the instruction names (``color: black``) that the product page offers.

Example:
    >>> import gymnasium, turnkit
    >>> env = gymnasium.make("turnkit/WebShop-v0")
    >>> traj = turnkit.collect(env, SearchThenBuy(), seed=1)
    >>> [s.action.text.split("[")[0] for s in traj.steps]
    ['search', 'click', 'click']
    >>> 0.0 <= traj.total_reward <= 1.0
    True
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from turnkit.agents.base import Context
from turnkit.envs.web.webshop.pages import BUY_NOW
from turnkit.types import AgentTurn

_LABEL = re.compile(r"\[([^\]\n]+)\]")
_OPTION = re.compile(r"(\w+): ([^,]+),")
_PRODUCT = re.compile(r"^\[(B0[A-Z0-9]{8})\]", re.MULTILINE)


def instruction_of(context: Context) -> str:
    """The instruction from the episode's first observation (``Instruction: ...``)."""
    first = context.messages[0].content if context.messages else ""
    line = first.splitlines()[0] if first else ""
    return line.removeprefix("Instruction:").strip()


def page_labels(observation: str) -> list[str]:
    """The bracketed labels of a page observation, in order (the ``Commands:`` line excluded).

    Example:
        >>> page_labels("[Back to Search] [Next >]\\n[B0ABCDEFGH] Lamp $9.00\\nCommands: click[one of the ...]")
        ['Back to Search', 'Next >', 'B0ABCDEFGH']
    """
    body = "\n".join(line for line in observation.splitlines() if not line.startswith("Commands:"))
    return _LABEL.findall(body)


class RandomClicker:
    """Search the instruction, then click random labels (see the module docstring).

    Args:
        seed: Mixed into the per-episode RNG.
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One command per context."""
        out = []
        for ctx in contexts:
            page = ctx.messages[-1].content if ctx.messages else ""
            labels = page_labels(page)
            if "search[your query]" in page or not labels:
                out.append(AgentTurn(text=f"search[{instruction_of(ctx)}]"))
                continue
            rng = np.random.default_rng([self.seed, ctx.episode_seed or 0, ctx.turn])
            out.append(AgentTurn(text=f"click[{labels[int(rng.integers(len(labels)))]}]"))
        return out


class SearchThenBuy:
    """WebShop's rule baseline: search the instruction, click the first result, buy.

    Args:
        pick_options: Before buying, select the option values the instruction names.
    """

    def __init__(self, pick_options: bool = False) -> None:
        self.pick_options = pick_options

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One command per context."""
        out = []
        for ctx in contexts:
            page = ctx.messages[-1].content if ctx.messages else ""
            first = _PRODUCT.search(page)
            if f"[{BUY_NOW}]" in page:
                text = f"click[{self._next_option(ctx, page) or BUY_NOW}]"
            elif first is not None:
                text = f"click[{first.group(1)}]"
            else:
                text = f"search[{instruction_of(ctx)}]"
            out.append(AgentTurn(text=text))
        return out

    def _next_option(self, ctx: Context, page: str) -> str | None:
        if not self.pick_options:
            return None
        wanted = dict(_OPTION.findall(instruction_of(ctx)))
        for line in page.splitlines():
            group, _, rest = line.partition(":")
            value = wanted.get(group.strip())
            if value is not None and f"[{value}]" in rest and f"[{value}] (selected)" not in rest:
                return value
        return None
