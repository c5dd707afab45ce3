"""Agents and envs the Ray tests send to workers: importable by name (``tests.distributed.helpers``) there too."""

from __future__ import annotations

import time
from collections.abc import Sequence

from turnkit.agents.base import Context
from turnkit.agents.oracle import OracleAgent
from turnkit.types import AgentTurn

MATH = "turnkit/MathEpisodes-v0"
LETTERS = "tests.train.conftest:turnkit-test/Letters-v0"
"""The training tests' one-turn env, registered in a worker by importing its module (gymnasium's ``module:id``)."""


class SlowOracle:
    """The oracle, ``delay`` seconds per call: chunks take long enough to kill a worker in the middle of one."""

    uses_privileged = True

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.oracle = OracleAgent()

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        time.sleep(self.delay)
        return self.oracle.act(contexts)


def slow_oracle(delay: float):
    """An agent factory: every worker gets a :class:`SlowOracle`."""
    return lambda index: SlowOracle(delay)
