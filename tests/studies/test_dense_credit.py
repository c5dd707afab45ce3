"""The dense-credit study (studies/dense_credit.py): each arm's critic and estimator, each arm trained and evaluated
end to end on a tiny policy, and the report's ``summary.json`` (paired with the control, seed for seed).

Run: python -m pytest -q tests/studies/test_dense_credit.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium
import pytest
from transformers import PreTrainedTokenizerFast

from tests.train.conftest import make_policy
from turnkit.learners.estimators import RUN_ESTIMATORS

from .test_study_records import _load


@pytest.fixture(scope="module")
def study() -> ModuleType:
    return _load("dense_credit")


def test_each_arm_reads_its_critic_through_its_paper_estimator(study: ModuleType, tmp_path: Path) -> None:
    expected = {"oracle": ("oracle", "pav"), "oracle-binary": ("oracle", "pav"), "prime": ("prime", "prime")}
    expected |= {"prime-turn": ("prime", "prime"), "prime-norm": ("prime", "prime")}
    expected |= {"mrt": ("mrt", "mrt"), "pav": ("pav", "pav")}
    assert set(study.ARMS) == {study.CONTROL, "prime-outcome", *expected}
    for arm, (critic, estimator) in expected.items():
        cfg = study.arm_config(arm, 2, str(tmp_path / arm))
        assert list(cfg.critic) == [critic] and cfg.grpo.estimator == estimator in RUN_ESTIMATORS
        # the control's recipe otherwise: same groups, no KL, the held-out seeds kept out of training
        assert (cfg.grpo.group_size, cfg.grpo.kl_coef, cfg.steps, cfg.eval.episodes) == (4, 0.0, 20, 200)
    assert study.arm_config("oracle-binary", 0, str(tmp_path)).critic == {"oracle": {"weight": 1.0, "partial": False}}
    assert study.arm_config("prime-turn", 0, str(tmp_path)).critic == {"prime": {"weight": 1.0, "labels": "turn"}}
    assert study.arm_config("prime-norm", 0, str(tmp_path)).critic == {"prime": {"weight": 1.0, "norm": "batch"}}
    # ``prime`` without its PRM: the outcome alone through PRIME's estimator, otherwise the same run
    outcome, prime = (study.arm_config(arm, 0, str(tmp_path / arm)) for arm in ("prime-outcome", "prime"))
    assert not outcome.critic and outcome.grpo == prime.grpo and outcome.update == prime.update


def test_the_control_and_unknown_arms_are_refused(study: ModuleType) -> None:
    with pytest.raises(SystemExit, match="orcale"):
        study.parse_args(["run", "--arms", "orcale"])
    with pytest.raises(SystemExit, match=r"smollm2_grpo\.py"):
        study.parse_args(["run", "--arms", "grpo"])
    assert study.parse_args(["report", "--arms", "grpo"]).arms == ["grpo"]  # reading it is fine
    assert study.parse_args(["run", "--arms", "grpo", "--steps", "40"]).steps == 40  # at another length it runs


MICRO = {
    "env_id": "turnkit/MathEpisodes-v0",
    "env_kwargs": {"difficulty": 1, "kinds": ["arithmetic"], "max_attempts": 2, "max_episode_steps": 3},
    "grpo": {"group_size": 2},
    "groups_per_step": 1,
    "steps": 1,
    "sampling": {"max_new_tokens": 6},
    "log": {"checkpoint_every": 1},
}


@pytest.mark.parametrize("arm", ["oracle", "prime", "mrt", "pav"])
def test_each_arm_trains_and_evaluates_end_to_end(
    study: ModuleType, tokenizer: PreTrainedTokenizerFast, tmp_path: Path, arm: str
) -> None:
    cfg = study.arm_config(arm, 0, str(tmp_path / "run"), eval_episodes=2, base=MICRO)
    result = study.train_and_evaluate(arm, cfg, make_policy(tokenizer), 2)
    (record,) = result["steps"]
    assert record["step"] == 1 and f"{arm}/total" in record and "critic_s" in record
    assert result["train_config"]["grpo"]["estimator"] == study.ARMS[arm][1]
    for decoding in study.DECODINGS:
        assert result["eval"][decoding]["episodes"] == 2
        assert {"success", "recoveries", "first_answer_success", "turns_mean"} <= result["eval"][decoding].keys()


def _ev(success: float, recoveries: int) -> dict[str, Any]:
    e = {"success": success, "episodes": 200, "recoveries": recoveries, "first_answer_success": 0.3, "turns_mean": 2.5}
    return {d: e for d in ("greedy", "sampled")}


def _control(root: Path, successes: dict[int, float], key: str = "k1") -> Path:
    control = root / "control"
    for seed, s in successes.items():
        _write(control / "native" / f"seed-{seed}.json", {"seed": seed, "eval": _ev(s, 10)})
    _write(control / "native" / "start.json", {"warm_start": {"adapter_dir": f"/cache/warmstart/{key}"}})
    return control


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_report_pairs_each_arm_with_the_control_seed_for_seed(study: ModuleType, tmp_path: Path) -> None:
    control = _control(tmp_path, {0: 0.40, 1: 0.50, 2: 0.30})
    out = tmp_path / "out"
    for seed, s in ((0, 0.50), (2, 0.45)):  # seed 1 not run yet: it must not enter the pairing
        _write(
            study.seed_file(out, "oracle", "native", seed), {"seed": seed, "warm_start_key": "k1", "eval": _ev(s, 20)}
        )
    _write(study.seed_file(out, "prime", "native", 0), {"seed": 0, "warm_start_key": "k1", "eval": _ev(0.35, 0)})
    study.report(out, control)
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["machine"]["float_path"] and on_disk["wall_s"] >= 0
    arms = on_disk["arms"]
    assert set(arms) == {"grpo", "oracle", "prime"} and (out / "dense_credit.png").is_file()
    assert arms["grpo"]["native"]["seeds"] == [0, 1, 2]
    oracle = arms["oracle"]["native"]
    assert oracle["seeds"] == [0, 2]
    for decoding in ("sampled", "greedy"):
        d = oracle[decoding]
        assert d["success"] == pytest.approx(0.475) and d["won_on_retry"] == pytest.approx(0.1)
        assert d["delta_vs_grpo"]["per_seed"] == pytest.approx([0.10, 0.15])
        assert d["delta_vs_grpo"]["mean"] == pytest.approx(0.125)
        assert d["won_on_retry_delta_vs_grpo"]["per_seed"] == pytest.approx([0.05, 0.05])  # 20 vs 10 in 200
        lo, hi = d["delta_vs_grpo"]["ci95"]
        assert lo < 0.125 < hi and hi - lo == pytest.approx(2 * 12.706 * 0.025, rel=1e-3)  # t(0.975, 1) s / √2
    one = arms["prime"]["native"]["sampled"]
    assert one["delta_vs_grpo"]["mean"] == pytest.approx(-0.05) and one["delta_vs_grpo"]["ci95"] == [None, None]
    assert math.isclose(one["won_on_retry"], 0.0)
    assert "| native | sampled | oracle | 0 2 | 0.500 0.450 | 0.475 | +0.125 [" in study.table(arms)


def test_report_refuses_a_seed_without_its_control_or_from_another_warm_start(
    study: ModuleType, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    _write(study.seed_file(out, "oracle", "native", 3), {"seed": 3, "warm_start_key": "k1", "eval": _ev(0.5, 1)})
    with pytest.raises(SystemExit, match="no control for oracle native seed 3"):
        study.summarize(out, _control(tmp_path, {0: 0.4}))
    _write(study.seed_file(out, "oracle", "native", 3), {"seed": 3, "warm_start_key": "k2", "eval": _ev(0.5, 1)})
    with pytest.raises(SystemExit, match="warm start k2 is not the control's"):
        study.summarize(out, _control(tmp_path, {3: 0.4}))


def _logged_run(run_dir: Path, right_credit: float, close_credit: float) -> None:
    """A run folder as the loop logs it: two episodes of one task, the first right at once (oracle gain 1), the
    second close (gain < 1), then right; the critic credits the two first turns ``right_credit``/``close_credit``."""
    env_kwargs = {"difficulty": 2, "kinds": ["arithmetic"], "max_attempts": 3, "max_episode_steps": 4}
    _write(run_dir / "config.json", {"env_id": "turnkit/MathEpisodes-v0", "env_kwargs": env_kwargs})
    env = gymnasium.make("turnkit/MathEpisodes-v0", **env_kwargs)
    env.reset(seed=7)
    answer = int(env.unwrapped.privileged()["answer"])
    env.close()
    episodes = (
        [(f"ANSWER: {answer}", right_credit)],
        [(f"ANSWER: {answer + 1}", close_credit), (f"ANSWER: {answer}", 0)],
    )
    rows = [
        {
            "env_id": "turnkit/MathEpisodes-v0",
            "seed": 7,
            "group": 0,
            "steps": [{"observation": "o", "action": a, "reward": 0.0, "critic_rewards": {"prime": c}} for a, c in ep],
        }
        for ep in episodes
    ]
    logged = run_dir / "rollouts" / "step-000010" / "trajectories.jsonl"
    logged.parent.mkdir(parents=True)
    logged.write_text("\n".join(json.dumps(r) for r in rows))


@pytest.mark.parametrize(("right", "close", "expected"), [(0.9, 0.1, 1.0), (0.1, 0.9, 0.0), (0.5, 0.5, 0.5)])
def test_critic_agreement_orders_turns_as_the_oracle_does(
    study: ModuleType, tmp_path: Path, right: float, close: float, expected: float
) -> None:
    """One pair the oracle orders (the first turns); a critic that credits them alike scores 0.5."""
    _logged_run(tmp_path, right, close)
    assert study.critic_agreement("prime", tmp_path) == {"pairs": 1, "agreement": expected, "episodes": 2}
    assert study.critic_agreement("grpo", tmp_path) is None
