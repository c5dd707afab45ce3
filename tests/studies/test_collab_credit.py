"""The CollabCode oracle-credit study (studies/collab_credit.py): its arms, its per-episode measures on real
CollabCode episodes, and the report's pairing of each arm with the outcome-only control, seed for seed.

Run: python -m pytest -q tests/studies/test_collab_credit.py
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium
import pytest

import turnkit
from turnkit.envs.collab_code.agents import AnswerAtOnceAgent, ClarifyingAgent
from turnkit.learners.estimators import RUN_ESTIMATORS

from .test_study_records import _load


@pytest.fixture(scope="module")
def study() -> ModuleType:
    return _load("collab_credit")


def test_each_arm_reads_the_oracle_through_its_estimator(study: ModuleType, tmp_path: Path) -> None:
    expected = {"grpo": (None, "grpo"), "oracle": (["oracle"], "pav"), "oracle-mrt": (["oracle"], "mrt")}
    for arm, (critics, estimator) in expected.items():
        cfg = study.arm_config(arm, 1, str(tmp_path / arm))
        assert (list(cfg.critic) or None) == critics and cfg.grpo.estimator == estimator in RUN_ESTIMATORS
        assert (cfg.env_id, cfg.model, cfg.seed) == ("turnkit/CollabCode-v0", "tiny-agent", 1)
        # the held-out range the loop keeps out of training is the study's
        assert (cfg.eval.seed, cfg.eval.episodes) == (study.EVAL_SEED, study.EVAL_EPISODES)
    with pytest.raises(ValueError, match="unknown arm 'orcale'"):
        study.arm_config("orcale", 0, str(tmp_path))


def test_measures_count_questions_and_uncovered_facts_on_real_episodes(study: ModuleType) -> None:
    env = gymnasium.make("turnkit/CollabCode-v0")
    asking = turnkit.collect(env, ClarifyingAgent(), seed=study.EVAL_SEED)
    at_once = turnkit.collect(env, AnswerAtOnceAgent(), seed=study.EVAL_SEED)
    env.close()
    m = study.episode_measures(asking)
    assert m["questions"] == len(asking.steps) - 1 >= 1 and m["facts"] == 1.0 and m["success"] == 1.0
    assert m["reward"] == asking.total_reward == 1.0
    m = study.episode_measures(at_once)
    assert (m["questions"], m["facts"]) == (0.0, 0.0) and m["reward"] == at_once.total_reward < 1.0


def _ev(success: float, questions: float) -> dict[str, Any]:
    e = {"success": success, "reward": success + 0.2, "questions": questions, "facts": questions / 4}
    return {d: {**e, "asked_any": 1.0, "episodes": 200, "errors": 0} for d in ("greedy", "sampled")}


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_report_pairs_each_arm_with_the_control_seed_for_seed(study: ModuleType, tmp_path: Path) -> None:
    for seed, s in ((0, 0.40), (1, 0.50), (2, 0.30)):
        _write(study.seed_file(tmp_path, "native", "grpo", seed), {"seed": seed, "eval": _ev(s, 1.0)})
    for seed, s in ((0, 0.50), (2, 0.45), (3, 0.90)):  # seed 3 has no control: it must not enter the pairing
        _write(study.seed_file(tmp_path, "native", "oracle", seed), {"seed": seed, "eval": _ev(s, 2.0)})
    _write(tmp_path / "native" / "start.json", {"eval": _ev(0.10, 0.5)})
    summary = study.summarize(tmp_path)
    assert list(summary) == ["native"] and summary["native"]["start"]["greedy"]["success"] == 0.10
    arms = summary["native"]["arms"]
    assert arms["grpo"]["seeds"] == [0, 1, 2] and "delta" not in arms["grpo"]["sampled"]["success"]
    oracle = arms["oracle"]
    assert oracle["seeds"] == [0, 2, 3] and oracle["sampled"]["success"]["mean"] == pytest.approx(0.6167, abs=1e-4)
    for decoding in ("greedy", "sampled"):
        d = oracle[decoding]["success"]["delta"]
        assert d["per_seed"] == pytest.approx([0.10, 0.15]) and d["mean"] == pytest.approx(0.125)
        lo, hi = d["ci95"]
        assert lo < 0.125 < hi and hi - lo == pytest.approx(2 * 12.706 * 0.025, rel=1e-3)  # t(0.975, 1) s / √2
        assert oracle[decoding]["questions"]["delta"]["per_seed"] == [1.0, 1.0]
        assert oracle[decoding]["facts"]["delta"]["mean"] == pytest.approx(0.25)
    rows = study.table(summary).splitlines()
    assert "| native | greedy | start (before RL) | | 0.100 | 0.300 | 0.50 | 0.125 |" in rows
    assert any(r.startswith("| native | sampled | oracle | 0 2 3 | 0.617 +0.125 [") for r in rows)
