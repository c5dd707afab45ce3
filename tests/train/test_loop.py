from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch
from transformers import PreTrainedTokenizerFast

from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.checkpoint import MANIFEST
from turnkit.envs.core import Transition
from turnkit.learners import logprobs
from turnkit.learners.learner import Learner
from turnkit.rollout.demos import completion_ids
from turnkit.train.config import TrainConfig
from turnkit.train.loop import IDLE_STEPS_WARNING, rollout_metrics, sample_task_seeds, train, update
from turnkit.train.metrics import read_metrics
from turnkit.types import AgentTurn, ErrorCause, Message, Step, Trajectory, TrajectoryError

from .conftest import LETTER_ENV, LetterEnv, learner_of, make_policy

TIMING_KEYS = {
    *("rollout_s", "rollout_wait_s", "generate_s", "env_s", "update_s", "sync_s", "load_s", "play_s", "wait_s"),
    *("gen_tokens_per_s", "train_tokens_per_s"),
}


def scored_turn(policy: HFPolicy, prompt: list[int], completion: list[int]) -> AgentTurn:
    """A turn as HFPolicy would have recorded it: ids plus their log-probs under the current policy."""
    logp = policy.sequence_logprobs([prompt], [completion])[0].tolist()
    return AgentTurn("x", tuple(completion), tuple(logp), tuple(prompt), "stop")


def group_of_two(policy: HFPolicy, tokenizer: PreTrainedTokenizerFast) -> tuple[list[Trajectory], list[int], list[int]]:
    prompt = chat_prompt_ids(tokenizer, [Message("user", "What is 2 plus 2?")])
    good, bad = completion_ids(tokenizer, "ANSWER: 4"), completion_ids(tokenizer, "ANSWER: 5")
    trajs = [
        Trajectory("demo", 0, (Step("q", scored_turn(policy, prompt, good), 1.0, True),), group=0),
        Trajectory("demo", 0, (Step("q", scored_turn(policy, prompt, bad), 0.0, True),), group=0),
    ]
    return trajs, prompt, good


def total_logprob(policy: HFPolicy, prompt: list[int], completion: list[int]) -> float:
    return float(policy.sequence_logprobs([prompt], [completion]).sum())


def test_one_grpo_step_raises_the_rewarded_completion(tokenizer: PreTrainedTokenizerFast) -> None:
    policy = make_policy(tokenizer)
    trajs, prompt, good = group_of_two(policy, tokenizer)
    bad = list(trajs[1].steps[0].action.token_ids)
    before_good, before_bad = total_logprob(policy, prompt, good), total_logprob(policy, prompt, bad)
    cfg = TrainConfig(grpo={"group_size": 2}, optim={"lr": 1e-3})
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=cfg.optim.lr)
    metrics = update(Learner(policy, optimizer=optimizer), trajs, cfg)
    assert metrics["optimizer_steps"] == 1
    assert total_logprob(policy, prompt, good) > before_good
    assert total_logprob(policy, prompt, bad) < before_bad


def test_first_update_is_on_policy(tokenizer: PreTrainedTokenizerFast) -> None:
    policy = make_policy(tokenizer)
    trajs, _, _ = group_of_two(policy, tokenizer)
    cfg = TrainConfig(grpo={"group_size": 2})
    metrics = update(learner_of(policy, 1e-3), trajs, cfg)
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert metrics["clip_frac"] == 0.0


def test_errored_trajectories_are_masked_not_scored_as_zero(tokenizer: PreTrainedTokenizerFast) -> None:
    clean, masked = make_policy(tokenizer), make_policy(tokenizer)
    trajs, _, _ = group_of_two(clean, tokenizer)
    errored = dataclasses.replace(trajs[1], error=TrajectoryError(ErrorCause.ENV, "step: boom", 0))
    cfg = TrainConfig(grpo={"group_size": 2}, optim={"lr": 1e-3})
    update(learner_of(clean, cfg.optim.lr), trajs, cfg)
    update(learner_of(masked, cfg.optim.lr), [*trajs, errored], cfg)
    assert all(torch.equal(a, b) for a, b in zip(clean.model.parameters(), masked.model.parameters(), strict=True))
    assert rollout_metrics([*trajs, errored], max_new_tokens=8)["masked_errors"] == 1


def test_tied_groups_leave_the_policy_unchanged(tokenizer: PreTrainedTokenizerFast) -> None:
    policy = make_policy(tokenizer)
    trajs, _, _ = group_of_two(policy, tokenizer)
    tied = [dataclasses.replace(t, steps=(dataclasses.replace(t.steps[0], reward=1.0),)) for t in trajs]
    before = [p.detach().clone() for p in policy.model.parameters()]
    metrics = update(
        learner_of(policy, 1e-2),
        tied,
        TrainConfig(grpo={"group_size": 2}),
    )
    assert metrics["optimizer_steps"] == 0 and metrics["tied_frac"] == 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, policy.model.parameters(), strict=True))


@pytest.mark.parametrize("skip", [True, False])
def test_tied_frac_counts_each_tied_episode_once(tokenizer: PreTrainedTokenizerFast, skip: bool) -> None:
    # One informative group (rewards 1, 0) and one tied group (1, 1): 2 of 4 scored episodes tie, whether the
    # tied ones are left out of the update or kept in it.
    policy = make_policy(tokenizer)
    trajs, _, _ = group_of_two(policy, tokenizer)
    tied = [dataclasses.replace(t, group=1, steps=(dataclasses.replace(t.steps[0], reward=1.0),)) for t in trajs]
    cfg = TrainConfig(grpo={"group_size": 2}, update={"skip_zero_advantage": skip})
    metrics = update(learner_of(policy, 1e-3), [*trajs, *tied], cfg)
    assert metrics["tied_frac"] == 0.5 and metrics["optimizer_steps"] == 1


class SilentEnv(LetterEnv):
    """Rewards every reply 0: no group ever has a signal."""

    def respond(self, action: str) -> Transition:
        return Transition("Done.", reward=0.0, terminated=True, info={"success": False})


SILENT_ENV = "turnkit-test/Silent-v0"
if SILENT_ENV not in gymnasium.registry:
    gymnasium.register(SILENT_ENV, entry_point=SilentEnv, max_episode_steps=2)


def test_a_run_that_never_updates_warns(tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    cfg = dataclasses.replace(run_config(tmp_path, IDLE_STEPS_WARNING), env_id=SILENT_ENV, log={"checkpoint_every": 0})
    with pytest.warns(UserWarning, match=f"{IDLE_STEPS_WARNING} steps in a row took no optimizer step"):
        train(cfg, policy=fresh_policy(tokenizer), progress=False)
    assert [r["tied_frac"] for r in training_records(tmp_path / "metrics.jsonl")] == [1.0] * IDLE_STEPS_WARNING


@pytest.mark.parametrize("skip", [True, False])
def test_a_short_run_whose_groups_all_tie_warns_once_even_when_tied_rows_are_trained(
    tokenizer: PreTrainedTokenizerFast, tmp_path: Path, skip: bool
) -> None:
    cfg = dataclasses.replace(
        run_config(tmp_path, 2), env_id=SILENT_ENV, log={"checkpoint_every": 0}, update={"skip_zero_advantage": skip}
    )
    with pytest.warns(UserWarning, match=r"2 steps in a row .* \(tied_frac 1.00\).* SFT warm start") as seen:
        train(cfg, policy=fresh_policy(tokenizer), progress=False)
    assert sum("steps in a row" in str(w.message) for w in seen) == 1


def test_task_seeds_avoid_the_held_out_range() -> None:
    cfg = TrainConfig(eval={"seed": 10, "episodes": 2**31 - 20})  # only 20 legal seeds: 0..9 and 2**31-10..
    seeds = sample_task_seeds(np.random.default_rng(0), 12, cfg)
    assert all(s < 10 or 2**31 - 10 <= s < 2**31 for s in seeds) and len(set(seeds)) == 12


def fresh_policy(tokenizer: PreTrainedTokenizerFast) -> HFPolicy:
    return make_policy(tokenizer, max_new_tokens=8)


def run_config(out: Path, steps: int) -> TrainConfig:
    return TrainConfig(
        env_id=LETTER_ENV,
        env_kwargs={},
        steps=steps,
        grpo={"group_size": 4},
        groups_per_step=3,
        optim={"lr": 3e-3},
        out_dir=str(out),
        seed=7,
        sampling={"max_new_tokens": 8},
        log={"checkpoint_every": 1},
    )


def training_records(path: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in read_metrics(path)]


def test_a_run_keeps_its_evaluation_episodes_and_the_rollouts_it_learned_from(
    tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    cfg = dataclasses.replace(run_config(tmp_path, 3), eval={"every": 2, "episodes": 5}, log={"rollouts_every": 2})
    train(cfg, policy=fresh_policy(tokenizer), progress=False)
    evals = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "eval_success" in r]
    assert [r["step"] for r in evals] == [2, 3]
    for r in evals:
        folder = tmp_path / "eval" / f"step-{r['step']:06d}"
        episodes = [json.loads(line) for line in (folder / "trajectories.jsonl").read_text().splitlines()]
        assert len(episodes) == 5 and np.mean([e["success"] for e in episodes]) == r["eval_success"]
        assert json.loads((folder / "summary.json").read_text())["episodes"] == 5
    kept = sorted(p.parent.name for p in (tmp_path / "rollouts").glob("*/trajectories.jsonl"))
    assert kept == ["step-000002", "step-000003"]  # every 2 steps and after the last
    episodes = (tmp_path / "rollouts" / "step-000003" / "trajectories.jsonl").read_text().splitlines()
    assert len(episodes) == cfg.grpo.group_size * cfg.groups_per_step


def as_written_before_the_tables(ckpt: Path) -> None:
    """Rewrite a checkpoint as turnkit wrote it before the ``grpo`` table and the manifest existed."""
    state = json.loads((ckpt / "state.json").read_text())
    config = {k: v for k, v in state["config"].items() if k not in ("critic", "grpo")}
    state["config"] = {**config, **{k: v for k, v in state["config"]["grpo"].items() if k != "max_tokens"}}
    (ckpt / "state.json").write_text(json.dumps(state))
    (ckpt / MANIFEST).unlink()  # such checkpoints also predate the manifest (else: damaged, rightly)


@pytest.mark.parametrize("written", ["now", "before the tables"])
def test_resume_continues_the_same_run(tokenizer: PreTrainedTokenizerFast, tmp_path: Path, written: str) -> None:
    """A run stopped after step 1 and resumed ends as the uninterrupted run, also from an old checkpoint."""
    full = train(run_config(tmp_path / "full", 3), policy=fresh_policy(tokenizer), progress=False)
    train(run_config(tmp_path / "part", 1), policy=fresh_policy(tokenizer), progress=False)
    if written != "now":
        as_written_before_the_tables(tmp_path / "part" / "checkpoints" / "step-000001")
    resumed = train(run_config(tmp_path / "part", 3), policy=fresh_policy(tokenizer), resume=True, progress=False)
    expected = training_records(tmp_path / "full" / "metrics.jsonl")
    assert all(r["optimizer_steps"] == 1 for r in expected)  # the policy really changed along the way
    assert training_records(tmp_path / "part" / "metrics.jsonl") == expected
    pairs = zip(full.policy.model.parameters(), resumed.policy.model.parameters(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)


def test_resume_refuses_a_different_run(tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    from turnkit.errors import ConfigError

    train(run_config(tmp_path, 1), policy=fresh_policy(tokenizer), progress=False)
    other = dataclasses.replace(run_config(tmp_path, 2), optim={"lr": 1.0})
    with pytest.raises(ConfigError, match="optim"):
        train(other, policy=fresh_policy(tokenizer), resume=True, progress=False)


def test_lora_run_trains_only_the_adapter_and_resumes(tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    cfg = dataclasses.replace(
        run_config(tmp_path, 2), lora={"r": 4}, grpo={"group_size": 4, "kl_coef": 0.1}, optim={"lr": 1e-2}
    )
    result = train(cfg, policy=fresh_policy(tokenizer), progress=False)
    assert (tmp_path / "checkpoints" / "step-000002" / "adapter" / "adapter_config.json").is_file()
    base = fresh_policy(tokenizer).model.state_dict()
    merged = {k.replace("base_model.model.", "").replace(".base_layer", ""): v
              for k, v in result.policy.model.state_dict().items() if "lora_" not in k}  # fmt: skip
    assert all(torch.equal(merged[k], base[k]) for k in base)
    assert "kl_ref" in read_metrics(tmp_path / "metrics.jsonl")[-1]


@pytest.mark.parametrize("loss_agg", ["token_mean", "seq_mean", "seq_sum_norm"])
def test_micro_batches_take_the_same_step_as_one_pass(tokenizer: PreTrainedTokenizerFast, loss_agg: str) -> None:
    """Gradient accumulation over 1-row micro-batches: the same gradient, step and metrics as the whole minibatch.

    SGD without clipping, so that a wrongly weighted micro-batch changes the step (Adam's first step and a clipped
    norm would hide a uniform scale).
    """
    whole, micro = make_policy(tokenizer), make_policy(tokenizer)
    prompt = chat_prompt_ids(tokenizer, [Message("user", "What is 2 plus 2?")])
    answers = [("ANSWER: 4", 1.0), ("ANSWER: 5", 0.0), ("4", 0.0), ("The answer is ANSWER: 4", 1.0)]
    trajs = [
        Trajectory("demo", 0, (Step("q", scored_turn(whole, prompt, completion_ids(tokenizer, a)), r, True),), group=0)
        for a, r in answers
    ]
    grpo = {"group_size": 4, "loss_agg": loss_agg, **({"max_tokens": 16} if loss_agg == "seq_sum_norm" else {})}
    metrics = {}
    for policy, rows in ((whole, 0), (micro, 1)):
        cfg = TrainConfig(grpo=grpo, optim={"max_grad_norm": 0.0}, update={"micro_batch_rows": rows})
        metrics[rows] = update(learner_of(policy, 0.5, sgd=True, optim=cfg.optim), trajs, cfg)
    start = make_policy(tokenizer)
    moved = [(p - q).abs().max() for p, q in zip(whole.model.parameters(), start.model.parameters(), strict=True)]
    assert max(moved) > 1e-3  # the step is large enough to see a wrong weight
    for p, q in zip(whole.model.parameters(), micro.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=0)
    for key in ("loss", "pg_loss", "grad_norm", "ratio_mean", "ratio_max", "clip_frac"):
        assert metrics[1][key] == pytest.approx(metrics[0][key], abs=1e-6), key


def test_default_token_budget_takes_the_one_pass_step(
    tokenizer: PreTrainedTokenizerFast, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows long enough that the default ``micro_batch_tokens`` splits them: the step of one pass (budget 0)."""
    monkeypatch.setattr(logprobs, "PLAIN_LOGITS_BYTES", 0)  # a tiny model's logits would take one pass anyway
    whole, micro = make_policy(tokenizer), make_policy(tokenizer)
    prompt = chat_prompt_ids(tokenizer, [Message("user", "What is 2 plus 2? " * 12)])
    answers = [("ANSWER: 4", 1.0), ("ANSWER: 5", 0.0), ("4", 0.0), ("The answer is ANSWER: 4", 1.0)] * 2
    trajs = [
        Trajectory("demo", 0, (Step("q", scored_turn(whole, prompt, completion_ids(tokenizer, a)), r, True),), group=0)
        for a, r in answers
    ]
    budget = TrainConfig().update.micro_batch_tokens
    assert budget > 0 and len(answers) * len(prompt) > budget  # the default does split this batch
    metrics = {}
    for policy, tokens in ((whole, 0), (micro, budget)):
        cfg = TrainConfig(grpo={"group_size": 8}, optim={"max_grad_norm": 0.0}, update={"micro_batch_tokens": tokens})
        metrics[tokens] = update(learner_of(policy, 0.5, sgd=True, optim=cfg.optim), trajs, cfg)
    start = make_policy(tokenizer)
    moved = [(p - q).abs().max() for p, q in zip(whole.model.parameters(), start.model.parameters(), strict=True)]
    assert max(moved) > 1e-3
    for p, q in zip(whole.model.parameters(), micro.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=0)
    for key in ("loss", "pg_loss", "grad_norm", "ratio_mean", "clip_frac"):
        assert metrics[budget][key] == pytest.approx(metrics[0][key], abs=1e-6), key


def test_micro_batch_tokens_must_be_non_negative() -> None:
    from turnkit.errors import ConfigError

    with pytest.raises(ConfigError, match="micro_batch_tokens"):
        TrainConfig(update={"micro_batch_tokens": -1})


def test_micro_batch_rows_must_be_non_negative() -> None:
    from turnkit.errors import ConfigError

    with pytest.raises(ConfigError, match="micro_batch_rows"):
        TrainConfig(update={"micro_batch_rows": -1})
