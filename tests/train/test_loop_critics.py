"""Every critic of ``TrainConfig.critic`` through ``turnkit train``: built, scored, updated and checkpointed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from turnkit.agents.scripted import ScriptedAgent
from turnkit.agents.serve import AgentServer
from turnkit.cli import main
from turnkit.errors import CheckpointWarning
from turnkit.models.tiny import build_tiny_model, save_tiny
from turnkit.train.metrics import read_metrics

from .conftest import LETTER_ENV, SMALL

FACTORY_MODULE = '''
from turnkit.critics.base import CriticResult


class Shouty:
    """Rewards every turn with its share of capital letters (a user's own critic)."""

    def score(self, trajectory):
        shares = [sum(c.isupper() for c in s.action.text) / max(len(s.action.text), 1) for s in trajectory.steps]
        return CriticResult(tuple(shares), {"upper": sum(shares)})


def make(context):
    assert context.seed == 3 and context.max_new_tokens == 6
    return Shouty()
'''


SMALL_CRITIC = {
    "mrt": {"samples": 2},
    "pav": {"samples": 2, "best_of": 2},
    "prime": {},
    "sweet": {"steps": 2, "reference_key": None},
}
"""Each built-in critic at test size (few samples, few critic steps; the test env has no privileged answer)."""


@pytest.fixture(scope="module")
def model_dir(tokenizer: PreTrainedTokenizerFast, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny(build_tiny_model(tokenizer, SMALL), tokenizer, tmp_path_factory.mktemp("critics") / "model")


def run_train(model_dir: Path, out: Path, *sets: str, resume: bool = False) -> list[dict]:
    base = [f"model={model_dir}", f"env_id={LETTER_ENV}", "env_kwargs={}", "steps=2", "grpo.group_size=4",
            "groups_per_step=2", "sampling.max_new_tokens=6", "optim.lr=1e-3", "log.checkpoint_every=1",
            "seed=3"]  # fmt: skip
    argv = ["train", "--out", str(out), "--quiet", "--threads", "1"]
    for item in [*base, *sets] if not resume else sets:
        argv += ["--set", item]
    assert main([*argv, "--resume"] if resume else argv) == 0
    return [r for r in read_metrics(out / "metrics.jsonl") if "reward_mean" in r]


@pytest.mark.parametrize(
    ("critic", "keys"),
    [
        ("mrt", ["mrt/V0", "mrt/progress", "mrt/regret"]),
        ("pav", ["pav/V0", "pav/progress"]),
        ("prime", ["prime/implicit_return", "prime/prm_kept"]),
        ("sweet", ["sweet/total"]),
    ],
)
def test_each_builtin_critic_trains_a_few_steps(model_dir: Path, tmp_path: Path, critic: str, keys: list[str]) -> None:
    records = run_train(model_dir, tmp_path / critic, f"critic={json.dumps({critic: SMALL_CRITIC[critic]})}")
    assert len(records) == 2
    for record in records:
        assert all(k in record for k in keys), sorted(k for k in record if "/" in k)
        assert record["critic_s"] > 0 and record["env/total"] == pytest.approx(record["reward_mean"])
    learned = critic in ("prime", "sweet")
    state = tmp_path / critic / "checkpoints" / "step-000002" / "critics" / critic
    assert state.is_dir() == learned
    if learned:
        assert (state / "optimizer.pt").is_file() and (state / "adapter" / "adapter_config.json").is_file()


def test_the_learned_critics_really_update(model_dir: Path, tmp_path: Path) -> None:
    """PRIME fits on groups with mixed outcomes and SWEET on pairs with different rewards: both take steps."""
    table = {"prime": {"weight": 1.0}, "sweet": {"weight": 0.5, **SMALL_CRITIC["sweet"]}}
    records = run_train(model_dir, tmp_path / "both", f"critic={json.dumps(table)}", "steps=2")
    assert any(r["prime/prm_kept"] > 0 and "prime/prm_loss" in r for r in records)
    assert any(r.get("sweet/pairs", 0) > 0 and "sweet/loss" in r for r in records)
    first = torch.load(tmp_path / "both/checkpoints/step-000001/critics/prime/optimizer.pt")
    second = torch.load(tmp_path / "both/checkpoints/step-000002/critics/prime/optimizer.pt")
    assert first["state"] and second["state"][0]["step"] > first["state"][0]["step"]


def test_a_weighted_sum_adds_each_critic_times_its_weight(model_dir: Path, tmp_path: Path) -> None:
    table = {"mrt": {"weight": 0.5, **SMALL_CRITIC["mrt"]}, "pav": {"weight": 2.0, **SMALL_CRITIC["pav"]}}
    records = run_train(model_dir, tmp_path / "sum", f"critic={json.dumps(table)}")
    for r in records:
        total = r["env/total"] + r["mrt/total"] + r["pav/total"]
        assert r["critic_reward_mean"] == pytest.approx(total)
        assert r["mrt/total"] == pytest.approx(0.5 * r["mrt/progress"])
        assert r["pav/total"] == pytest.approx(2.0 * r["pav/progress"])


def test_a_judge_over_http_scores_the_episodes(model_dir: Path, tmp_path: Path) -> None:
    with AgentServer(ScriptedAgent(["Fine work. SCORE: 7"]), model_name="judge") as server:
        keys = {"url": server.base_url, "reference_key": None}  # the letters env has no privileged answer
        records = run_train(model_dir, tmp_path / "judge", f"critic={json.dumps({'judge': keys})}")
    for r in records:
        assert r["judge/judge_score"] == 7.0 and r["judge/malformed"] == 0.0
        assert r["judge/total"] == pytest.approx(0.7)


def test_a_module_callable_factory_is_a_critic(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "my_critics.py").write_text(FACTORY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    records = run_train(model_dir, tmp_path / "own", "critic.my_critics:make.weight=2")
    assert all(r["my_critics:make/total"] == pytest.approx(2 * r["my_critics:make/upper"]) for r in records)


def test_an_unloadable_factory_is_named(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    argv = ["train", "--out", str(tmp_path), "--set", f"model={model_dir}", "--set", "critic=no_such_mod:make"]
    assert main([*argv, "--quiet"]) == 2
    assert "critic 'no_such_mod:make': cannot import module 'no_such_mod'" in capsys.readouterr().err


def test_a_judge_without_url_is_a_config_error(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["train", "--out", str(tmp_path), "--set", f"model={model_dir}", "--set", "critic=judge"]) == 2
    assert "critic.judge needs url" in capsys.readouterr().err


def test_resume_with_no_flags_continues_a_learned_critic_exactly(model_dir: Path, tmp_path: Path) -> None:
    """The run's saved config and the PRM's optimizer state come back: resuming equals never stopping."""
    whole = run_train(model_dir, tmp_path / "whole", "critic=prime", "steps=3")
    run_train(model_dir, tmp_path / "cut", "critic=prime", "steps=3")
    shutil.rmtree(tmp_path / "cut" / "checkpoints" / "step-000003")
    with pytest.warns(CheckpointWarning, match="step-000003"):  # the lost checkpoint is reported
        resumed = run_train(model_dir, tmp_path / "cut", resume=True)  # no --set at all
    assert json.loads((tmp_path / "cut" / "config.json").read_text())["model"] == str(model_dir)
    assert resumed[-1]["step"] == 3
    for key in ("reward_mean", "prime/implicit_return", "prime/prm_loss", "loss"):
        if key in whole[-1]:
            assert resumed[-1][key] == whole[-1][key], key
    a = torch.load(tmp_path / "whole/checkpoints/step-000003/critics/prime/optimizer.pt")
    b = torch.load(tmp_path / "cut/checkpoints/step-000003/critics/prime/optimizer.pt")
    assert all(torch.equal(a["state"][k]["exp_avg"], b["state"][k]["exp_avg"]) for k in a["state"])


def test_resume_refuses_a_config_file(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run_train(model_dir, tmp_path / "run", "steps=1")
    config = tmp_path / "other.toml"
    config.write_text("steps = 4\n")
    assert main(["train", "--out", str(tmp_path / "run"), "--config", str(config), "--resume", "--quiet"]) == 2
    assert "--resume reads the run's saved config" in capsys.readouterr().err
