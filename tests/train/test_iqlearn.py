"""The IQLearn loop: λ = 0 is SFT bit for bit, the TD term acts, online mixing, resume, bad input."""

from __future__ import annotations

import copy
import json
import shutil

import pytest
import torch

from tests.train.conftest import make_policy
from turnkit.checkpoint import MANIFEST, checkpoint_path
from turnkit.errors import CheckpointWarning, ConfigError, DataError
from turnkit.models.sft import SFTConfig, train_sft
from turnkit.rollout.demos import collect_demos, demo_rows
from turnkit.train.iqlearn import IQLearnConfig, train_iqlearn

ENV_KWARGS = {"difficulty": 1}


@pytest.fixture(scope="module")
def rows(tokenizer):
    demos = collect_demos("turnkit/MathEpisodes-v0", episodes=24, seed=0, env_kwargs=ENV_KWARGS)
    return demo_rows(demos.trajectories, tokenizer)


def _cfg(tmp_path, **changes):
    optim = {"lr": 5e-3, "warmup_steps": 2}
    base = dict(steps=8, batch_size=8, optim=optim, eval_episodes=0, out_dir=str(tmp_path / "run"))
    return IQLearnConfig(**{**base, **changes})


def _same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_lambda_zero_trains_the_same_weights_as_sft(tokenizer, rows, tmp_path):
    policy = make_policy(tokenizer, seed=3)
    reference = copy.deepcopy(policy.model)
    cfg = _cfg(tmp_path, lam=0.0, seed=5)
    result = train_iqlearn(cfg, policy=policy, rows=rows, progress=False)
    sft_cfg = SFTConfig(steps=8, batch_size=8, optim={"lr": 5e-3, "warmup_steps": 2}, seed=5)
    train_sft(reference, rows, sft_cfg, pad_id=int(tokenizer.pad_token_id), progress=False)
    assert _same_weights(result.policy.model, reference)
    assert [r["nll"] for r in result.history] == pytest.approx([r["loss"] for r in result.history])


def test_the_td_term_shrinks_the_td_residual(tokenizer, rows, tmp_path):
    runs = {}
    for lam in (0.0, 1.0):
        cfg = _cfg(tmp_path / f"lam{lam}", lam=lam, steps=45, seed=0)
        runs[lam] = train_iqlearn(cfg, policy=make_policy(tokenizer, seed=0), rows=rows, progress=False).history
    # On the last steps the regularised run's squared TD residual is far below the MLE run's.
    late = {lam: sum(r["td_sq"] for r in h[-5:]) / 5 for lam, h in runs.items()}
    assert late[1.0] < 0.5 * late[0.0], late


def test_online_mixes_policy_samples_into_the_td_term(tokenizer, rows, tmp_path):
    cfg = _cfg(tmp_path, lam=0.5, alpha=0.25, online_every=4, online_episodes=3, max_new_tokens=6)
    history = train_iqlearn(cfg, policy=make_policy(tokenizer), rows=rows, progress=False).history
    refreshed = [r["step"] for r in history if "sample_success" in r]
    assert refreshed == [1, 5]
    assert all("td_sq_policy" in r for r in history)


def test_resume_repeats_an_uninterrupted_run(tokenizer, rows, tmp_path):
    cfg = _cfg(tmp_path, lam=0.3, alpha=0.25, online_every=3, online_episodes=2, checkpoint_every=4, steps=8)
    full = train_iqlearn(cfg, policy=make_policy(tokenizer), rows=rows, progress=False)
    shutil.rmtree(checkpoint_path(full.run_dir, 8))  # LATEST still names it: the run falls back to step 4
    older = checkpoint_path(full.run_dir, 4)  # ...which was written before `stop_grad_next` existed
    state = json.loads((older / "state.json").read_text())
    del state["config"]["stop_grad_next"]
    (older / "state.json").write_text(json.dumps(state))
    (older / MANIFEST).unlink()  # such checkpoints also predate the manifest (else: damaged, rightly)
    with pytest.warns(CheckpointWarning, match="step-000008 is damaged"):
        resumed = train_iqlearn(cfg, resume=True, policy=make_policy(tokenizer), rows=rows, progress=False)
    assert _same_weights(full.policy.model, resumed.policy.model)
    assert [r["step"] for r in resumed.history] == list(range(1, 9))
    with pytest.raises(ConfigError, match="lam"):
        train_iqlearn(
            IQLearnConfig(**{**cfg.to_dict(), "lam": 0.9}), resume=True, policy=make_policy(tokenizer), rows=rows
        )


def test_bad_settings_and_empty_data(tokenizer, tmp_path):
    with pytest.raises(ConfigError, match="lam"):
        IQLearnConfig(lam=-0.1)
    with pytest.raises(ConfigError, match="gamma"):
        IQLearnConfig(gamma=2.0)
    with pytest.raises(DataError, match="no demonstration rows"):
        train_iqlearn(_cfg(tmp_path), policy=make_policy(tokenizer), rows=[], progress=False)


def test_demonstrations_from_a_chat_jsonl(tokenizer, tmp_path):
    from pathlib import Path

    fixtures = Path(__file__).parents[1] / "fixtures" / "chat_demos"
    good = _cfg(tmp_path, steps=2, batch_size=2, demos=str(fixtures / "multi_turn.jsonl"))
    assert train_iqlearn(good, policy=make_policy(tokenizer), progress=False).steps_done == 2
    bad = _cfg(tmp_path / "bad", demos=str(fixtures / "bad_line.jsonl"))
    with pytest.raises(DataError, match=r"bad_line\.jsonl:4: invalid JSON"):
        train_iqlearn(bad, policy=make_policy(tokenizer), progress=False)


def test_the_extracted_reward_drives_the_grpo_loop_as_a_critic(tokenizer, rows, tmp_path):
    from turnkit.train.config import TrainConfig
    from turnkit.train.loop import train

    iq = train_iqlearn(_cfg(tmp_path / "iq", steps=2, checkpoint_every=0), policy=make_policy(tokenizer), rows=rows)
    cfg = TrainConfig(
        grpo={"group_size": 2},
        critic={"iqlearn": {"model": str(iq.run_dir)}},
        steps=1,
        groups_per_step=2,
        max_turns=1,
        out_dir=str(tmp_path / "grpo"),
        sampling={"max_new_tokens": 4},
    )
    result = train(cfg, policy=make_policy(tokenizer, seed=1, max_new_tokens=4), progress=False)
    assert "iqlearn/iqlearn_return" in result.history[0]
    with pytest.raises(ConfigError, match=r"critic\.iqlearn needs model"):
        train(TrainConfig(critic="iqlearn", out_dir=str(tmp_path / "g2")), policy=make_policy(tokenizer))


def test_an_old_flat_config_loads_and_its_checkpoint_resumes(tokenizer, rows, tmp_path):
    """Flat ``lr``/``lora_r`` keys (configs before the optim/lora tables) migrate with one warning naming them."""
    import json

    from turnkit.checkpoint import MANIFEST

    with pytest.warns(FutureWarning, match=r"lr -> optim\.lr, warmup_steps -> optim\.warmup_steps") as seen:
        old = IQLearnConfig.from_dict({"lr": 5e-3, "warmup_steps": 2, "lora_r": 2, "steps": 2})
    assert len(seen) == 1 and (old.optim.lr, old.optim.schedule, old.lora.r) == (5e-3, "cosine", 2)
    cfg = _cfg(tmp_path, steps=2, checkpoint_every=1)
    full = train_iqlearn(cfg, policy=make_policy(tokenizer), rows=rows, progress=False)
    shutil.rmtree(checkpoint_path(full.run_dir, 2))  # LATEST still names it: the run falls back to step 1
    state = checkpoint_path(full.run_dir, 1) / "state.json"
    data = json.loads(state.read_text())
    optim = data["config"].pop("optim")  # as the run wrote it before the tables
    data["config"].update(
        {k: optim[k] for k in ("lr", "warmup_steps", "min_lr_ratio", "weight_decay", "max_grad_norm")}
    )
    lora = data["config"].pop("lora")
    data["config"].update(lora_r=lora["r"], lora_alpha=lora["alpha"])
    state.write_text(json.dumps(data))
    (state.parent / MANIFEST).unlink()  # a checkpoint from before manifests: read unverified
    with pytest.warns(CheckpointWarning, match="step-000002 is damaged"):
        resumed = train_iqlearn(cfg, resume=True, policy=make_policy(tokenizer), rows=rows, progress=False)
    assert _same_weights(full.policy.model, resumed.policy.model)
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in full.history]
