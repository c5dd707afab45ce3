from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import gymnasium
import pytest

from turnkit.agents.base import Context
from turnkit.agents.oracle import OracleAgent
from turnkit.agents.scripted import ScriptedAgent
from turnkit.errors import ConfigError
from turnkit.rollout.collect import collect_batch
from turnkit.rollout.records import trajectory_to_record
from turnkit.train.quickstart import QuickstartConfig, aggregate_seeds, retry_stats, run_quickstart, run_seeds
from turnkit.types import AgentTurn

from .conftest import MICRO_RECIPE

RETRY_TASK = {"difficulty": 1, "kinds": ["arithmetic"], "max_attempts": 2}
"""The quickstart's task with a retry after a wrong answer."""
MICRO_TRAIN = {
    "groups_per_step": 2,
    "grpo": {"group_size": 2},
    "sampling": {"max_new_tokens": 8},
    "max_turns": 2,
    "env_kwargs": RETRY_TASK,
}


def micro(out: Path, **kwargs: object) -> QuickstartConfig:
    return QuickstartConfig(
        out_dir=str(out), steps=2, eval_episodes=6, recipe=MICRO_RECIPE, train_overrides=MICRO_TRAIN,
        cache=str(out / "cache"), **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip


class WrongThenRight:
    """Answers 999 first, then the reference answer (an oracle that needs one retry)."""

    uses_privileged = True

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        return [AgentTurn("ANSWER: 999" if c.turn == 0 else f"ANSWER: {c.task.privileged['answer']}") for c in contexts]


def play(agent: object, seeds: list[int]) -> list[dict]:
    """Real episodes of the quickstart's task, as the records an evaluation writes."""
    envs = [gymnasium.make("turnkit/MathEpisodes-v0", **RETRY_TASK) for _ in seeds]
    return [trajectory_to_record(t) for t in collect_batch(envs, agent, seeds)]


def test_retry_stats_counts_wins_after_a_wrong_answer_as_recoveries() -> None:
    first_try = play(OracleAgent(), [0, 1])
    wrong_then_right = play(WrongThenRight(), [2])
    never = play(ScriptedAgent(["ANSWER: 999"]), [3])
    stats = retry_stats(first_try + wrong_then_right + never)
    assert wrong_then_right[0]["success"] and len(wrong_then_right[0]["steps"]) == 2
    assert (stats["first_try"], stats["recoveries"]) == (0.5, 0.25)
    assert stats["mean_turns"] == (1 + 1 + 2 + RETRY_TASK["max_attempts"]) / 4
    lo, hi = stats["recoveries_ci95"]
    assert lo < 0.25 < hi
    assert retry_stats(play(ScriptedAgent(["no idea", "ANSWER: 999"]), [4]))["recoveries"] == 0.0


def test_quickstart_writes_summary_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    summary = run_quickstart(micro(tmp_path), progress=False)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["before"]["episodes"] == 6 and on_disk["train_config"]["steps"] == 2
    assert on_disk["improvement"] == pytest.approx(summary["after"]["success"] - summary["before"]["success"])
    lo, hi = on_disk["after"]["ci95"]
    assert lo <= on_disk["after"]["success"] <= hi
    assert on_disk["eval_seeds"] == [1_000_000_000, 1_000_000_005]
    assert on_disk["env_kwargs"]["max_attempts"] >= 2
    for name, part in (("rl-greedy", on_disk["after"]), ("sft-sampled", on_disk["sampled"]["before"])):
        with open(tmp_path / "eval" / name / "trajectories.jsonl") as f:
            assert {k: part[k] for k in ("first_try", "recoveries", "mean_turns")} == {
                k: v for k, v in retry_stats(json.loads(line) for line in f).items() if k != "recoveries_ci95"
            }
        assert part["first_try"] + part["recoveries"] == pytest.approx(part["success"])
    assert (tmp_path / "quickstart.png").stat().st_size > 1000
    out = capsys.readouterr().out
    assert "SFT start" in out and "won on a retry" in out


@pytest.mark.slow
def test_quickstart_over_seeds_aggregates_every_seed(tmp_path: Path) -> None:
    agg = run_seeds(micro(tmp_path), [0, 1], progress=False)
    assert [r["seed"] for r in agg["runs"]] == [0, 1]
    for mode in ("sampled", "greedy"):
        lo, hi = agg[mode]["improvement_ci95"]
        assert lo <= agg[mode]["improvement_mean"] <= hi
        runs = [r if mode == "greedy" else r["sampled"] for r in agg["runs"]]
        assert agg[mode]["recoveries_after_mean"] == pytest.approx(sum(r["after"]["recoveries"] for r in runs) / 2)
    assert (tmp_path / "seed-1" / "summary.json").is_file()


def _seed_summary(seed: int, before: float, after: float) -> dict:
    def evaluation(success: float, eval_s: float) -> dict:
        return {"success": success, "recoveries": 0.1, "mean_turns": 1.5, "eval_s": eval_s}

    decoding = {
        "before": evaluation(before, 3.0 + seed),
        "after": evaluation(after, 4.0),
        "improvement": after - before,
    }
    return {"seed": seed, "wall_s": 10.0 * seed, **decoding, "sampled": dict(decoding)}


def test_aggregate_seeds_merges_runs_launched_apart() -> None:
    early = [_seed_summary(s, 0.5, a) for s, a in ((0, 0.6), (1, 0.7))]
    later = [_seed_summary(s, 0.5, a) for s, a in ((3, 0.9), (4, 0.8))]
    agg = aggregate_seeds(early + later)  # their start evaluations differ only in timing
    assert agg["seeds"] == [0, 1, 3, 4] and agg["wall_s_per_seed"] == [0.0, 10.0, 30.0, 40.0]
    for mode in ("sampled", "greedy"):
        assert agg[mode]["improvement_mean"] == pytest.approx(0.25)
        assert agg[mode]["after_success_mean"] == pytest.approx(0.75)
        lo, hi = agg[mode]["improvement_ci95"]
        assert lo < 0.25 < hi


def test_aggregate_seeds_refuses_runs_from_different_starts() -> None:
    other_greedy_start = {**_seed_summary(3, 0.55, 0.6), "sampled": _seed_summary(3, 0.5, 0.6)["sampled"]}
    with pytest.raises(ConfigError, match=r"seeds \[0, 3\] start from different greedy evaluations"):
        aggregate_seeds([_seed_summary(0, 0.5, 0.6), other_greedy_start])
    with pytest.raises(ConfigError, match="at least one run"):
        aggregate_seeds([])
