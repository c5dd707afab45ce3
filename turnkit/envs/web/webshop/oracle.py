"""The WebShop oracle: search for the goal, open the one product that satisfies it, pick the options, buy.

It reads the goal from the task, rebuilds the episode's shop from ``metadata["shop_seed"]`` to know which
product is the target (:func:`~turnkit.envs.web.webshop.catalogue.find_target`), and reads the page from the
last observation, so it recovers from any page a policy left it on (snapshots, MCTS branches).

Example:
    >>> import gymnasium, turnkit
    >>> from turnkit.agents.oracle import OracleAgent
    >>> env = gymnasium.make("turnkit/WebShop-v0", split="combo")
    >>> traj = turnkit.collect(env, OracleAgent(), seed=4)
    >>> traj.success, traj.total_reward
    (True, 1.0)
"""

from __future__ import annotations

from turnkit.agents.base import Context
from turnkit.envs.web.webshop.catalogue import find_target, goal_for, shop_for
from turnkit.envs.web.webshop.pages import BACK_TO_SEARCH, BUY_NOW, NEXT_PAGE
from turnkit.errors import AgentError


def goal_query(attributes: list[str] | tuple[str, ...], type_name: str) -> str:
    """The oracle's search words: the wanted attributes and the type.

    Example:
        >>> goal_query(["led", "dimmable"], "desk lamp")
        'led dimmable desk lamp'
    """
    return " ".join((*attributes, type_name))


def oracle_reply(context: Context) -> str:
    """The next command toward buying the target with the wanted options.

    Raises:
        AgentError: The context carries no WebShop task.
    """
    task = context.task
    if task is None or "shop_seed" not in task.metadata:
        raise AgentError("the WebShop oracle needs Context.task with metadata['shop_seed']")
    seed, split = int(task.metadata["shop_seed"]), task.split
    goal = goal_for(seed, split)
    target = find_target(shop_for(seed, split), goal)
    page = context.messages[-1].content if context.messages else ""
    if f"[{BUY_NOW}]" in page and target.title in page.splitlines():
        for group, value in goal.options:
            if f"{group}:" in page and f"[{value}] (selected)" not in _line(page, f"{group}:"):
                return f"click[{value}]"
        return f"click[{BUY_NOW}]"
    if f"[{target.pid}]" in page:
        return f"click[{target.pid}]"
    if "search[your query]" in page:
        return f"search[{goal_query(goal.attributes, goal.type_name)}]"
    if f"[{NEXT_PAGE}]" in page and "results) for:" in page:
        return f"click[{NEXT_PAGE}]"
    return f"click[{BACK_TO_SEARCH}]"


def _line(page: str, prefix: str) -> str:
    for line in page.splitlines():
        if line.startswith(prefix):
            return line
    return ""
