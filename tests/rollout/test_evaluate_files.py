"""An evaluation writes each finished block of episodes as it goes, and its summary at the end."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from turnkit.agents.base import Context
from turnkit.rollout.evaluate import evaluate
from turnkit.types import AgentTurn


class Watcher:
    """Answers "ANSWER: 0" and notes, at every call, how many episodes the file already holds."""

    def __init__(self, path: Path) -> None:
        self.path, self.seen = path, []

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        self.seen.append((len(lines), (self.path.parent / "summary.json").exists()))
        return [AgentTurn("ANSWER: 0") for _ in contexts]


def test_episodes_reach_the_file_block_by_block(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("{}")  # an earlier run's summary must not survive into this one
    agent = Watcher(tmp_path / "trajectories.jsonl")
    env_kwargs = {"max_attempts": 1}
    summary = evaluate("turnkit/MathEpisodes-v0", agent, episodes=3, batch_size=1, env_kwargs=env_kwargs,
                       out_dir=tmp_path, progress=False)  # fmt: skip
    assert agent.seen == [(0, False), (1, False), (2, False)]  # one-turn episodes, one block of one each
    records = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert [r["seed"] for r in records] == [0, 1, 2]
    assert json.loads((tmp_path / "summary.json").read_text())["episodes"] == summary.episodes == 3
