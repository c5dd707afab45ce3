"""TRL on turnkit envs and data, for real: GRPOTrainer through EnvRollout, DPOTrainer on a synth dataset.

Everything runs offline on tiny models built here. The rollout tests without TRL are fast; the trainer tests
are marked slow (importing TRL alone takes ~15 s on the shared box).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch

import turnkit
from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.agents.scripted import ScriptedAgent
from turnkit.envs.core import TextEnv, Transition
from turnkit.errors import ConfigError, DataError, EnvError
from turnkit.integrations.trl import ChatDelta, EnvRollout, Episode, env_reward, trl_row
from turnkit.models.sft import SFTConfig, train_sft
from turnkit.models.threads import torch_threads
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer, load_tiny, save_tiny
from turnkit.rollout.batch import build_episode_batch, find_prefix_mismatch, gather_token_logprobs
from turnkit.rollout.collect import collect_batch
from turnkit.rollout.demos import collect_demos, demo_rows
from turnkit.types import AgentTurn, ErrorCause, Step, Task, Trajectory, TrajectoryError

MATH = "turnkit/MathEpisodes-v0"
MATH_KW = {"difficulty": 1, "kinds": ["arithmetic"]}  # up to three answers per episode: multi-turn
CODE = "turnkit/CollabCode-v0"
CODE_KW = {"max_turns": 3}  # the third message is graded (in the bubblewrap sandbox) whatever it says
# TRL turns gradient checkpointing on by default, through transformers names deprecated in transformers 5
pytestmark = pytest.mark.filterwarnings("ignore:.*gradient_checkpointing.* is deprecated:FutureWarning")


@pytest.fixture(scope="module", autouse=True)
def offline_on_one_thread() -> Iterator[None]:
    """No hub look-ups, no TRL experimental-feature warnings, one torch thread (much faster on a busy box)."""
    with pytest.MonkeyPatch.context() as mp, torch_threads(1):
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
        yield


@pytest.fixture(scope="module")
def math_model(tmp_path_factory) -> Path:
    """A tiny model taught the answer format by a short SFT: right sometimes, so GRPO groups have reward spread."""
    tok = build_tiny_tokenizer()
    cfg = TinyModelConfig(hidden_size=64, num_layers=1, num_heads=2, intermediate_size=128)
    model = build_tiny_model(tok, cfg, seed=0)
    demos = collect_demos(MATH, episodes=200, seed=10_000, env_kwargs=MATH_KW)
    sft = SFTConfig(steps=80, batch_size=16, optim={"lr": 1e-2, "warmup_steps": 5})
    train_sft(model, demo_rows(demos.trajectories, tok), sft, pad_id=tok.pad_token_id, progress=False)
    return save_tiny(model, tok, tmp_path_factory.mktemp("math-model"))


@pytest.fixture(scope="module")
def random_model(tmp_path_factory) -> Path:
    """A random tiny model with room for CollabCode's long first observation and several turns."""
    tok = build_tiny_tokenizer()
    cfg = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_position_embeddings=4096)
    return save_tiny(build_tiny_model(tok, cfg, seed=0), tok, tmp_path_factory.mktemp("random-model"))


def check_episode(episode: Episode, policy: HFPolicy, env_kwargs: dict) -> None:
    """Everything EnvRollout promises about one clean episode, checked against independent code paths."""
    traj = episode.trajectory
    assert traj.error is None and traj.steps
    sequence = (*episode.prompt_ids, *episode.completion_ids)
    # token-exact: each turn was sampled from a prefix of the one sequence TRL gets, and the first is the prompt
    assert episode.prompt_ids == traj.steps[0].action.prompt_token_ids
    assert find_prefix_mismatch(traj) is None
    for step in traj.steps:
        turn = step.action
        start = len(turn.prompt_token_ids)
        assert sequence[:start] == turn.prompt_token_ids
        assert sequence[start : start + len(turn.token_ids)] == turn.token_ids
    # the mask covers exactly the sampled ids; what it leaves out carries the env's replies
    sampled = [i for step in traj.steps for i in step.action.token_ids]
    assert [i for i, m in zip(episode.completion_ids, episode.env_mask, strict=True) if m] == sampled
    env_text = policy.tokenizer.decode(
        [i for i, m in zip(episode.completion_ids, episode.env_mask, strict=True) if not m]
    )
    for reply in [s.observation for s in traj.steps[1:]]:  # the env's reply to each turn but the last
        assert reply in env_text, (reply, env_text)
    # turnkit's own episode-row builder agrees on ids and mask
    batch = build_episode_batch([traj], pad_id=policy.pad_token_id)
    assert tuple(batch.input_ids[0].tolist()) == sequence
    assert batch.loss_mask[0].int().tolist() == [0] * len(episode.prompt_ids) + list(episode.env_mask)
    # the model scores the sequence with the sampling log-probs: the ids are what it generated in these contexts
    with torch.no_grad():
        logits = policy.model(input_ids=batch.input_ids).logits
    scored = gather_token_logprobs(logits, batch.input_ids, batch.loss_mask)[0, len(episode.prompt_ids) :]
    assert torch.allclose(scored, torch.tensor(episode.logprobs), atol=1e-4)
    # the reward is the env's return: replaying the texts in a fresh env gives the same rewards step by step
    assert episode.reward == traj.total_reward
    env = gymnasium.make(traj.env_id, **env_kwargs)
    replay = turnkit.collect(
        env, ScriptedAgent([s.action.text for s in traj.steps]), seed=traj.seed, max_turns=len(traj.steps)
    )
    env.close()
    assert [s.reward for s in replay.steps] == [s.reward for s in traj.steps]
    assert replay.final_observation == traj.final_observation


# ---------------------------------------------------------------------------------------------- without TRL


def test_math_episodes_are_token_exact_multi_turn(math_model):
    policy = HFPolicy.from_pretrained(math_model, max_new_tokens=12, seed=3)
    rollout = EnvRollout(MATH, seeds=range(8), env_kwargs=MATH_KW)
    episodes = rollout.play([s for s in range(4) for _ in range(4)], policy, max_completion_length=160)
    for episode in episodes:
        check_episode(episode, policy, MATH_KW)
    assert max(len(e.trajectory.steps) for e in episodes) >= 2  # retries after a wrong answer
    assert {e.reward for e in episodes} == {0.0, 1.0}
    groups = [{e.trajectory.initial_observation for e in episodes[g : g + 4]} for g in range(0, 16, 4)]
    assert all(len(g) == 1 for g in groups)  # a group is one task
    assert len({e.completion_ids for e in episodes}) > 4  # ... sampled differently per member
    rollout.close()


def test_contexts_stay_exact_where_re_tokenising_would_change_them():
    """With BPE merges, re-rendering the text of a turn changes its ids; the rollout's contexts do not."""
    corpus = [f"ANSWER: {i} Incorrect. {j} attempts left." for i in range(50) for j in range(3)]
    tok = build_tiny_tokenizer(corpus, vocab_size=400)
    model = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2), seed=1)
    policy = HFPolicy(model, tok, max_new_tokens=10, seed=0)
    rollout = EnvRollout(MATH, seeds=range(2), env_kwargs=MATH_KW)
    episodes = rollout.play([0, 0, 1, 1], policy, max_completion_length=200, max_turns=3)
    retokenised = 0
    for episode in episodes:
        check_episode(episode, policy, MATH_KW)
        for step in episode.trajectory.steps:
            retokenised += list(step.action.token_ids) != tok(step.action.text, add_special_tokens=False)["input_ids"]
    assert retokenised > 0  # the test would not see a re-tokenising rollout otherwise
    rollout.close()


def test_collab_code_episodes_are_graded_in_the_sandbox(random_model):
    policy = HFPolicy.from_pretrained(random_model, max_new_tokens=16, seed=0)
    rollout = EnvRollout(CODE, seeds=range(4), env_kwargs=CODE_KW)
    episodes = rollout.play([0, 0, 3, 3], policy, max_completion_length=1024)
    for episode in episodes:
        check_episode(episode, policy, CODE_KW)
        assert len(episode.trajectory.steps) == 3 and episode.trajectory.steps[-1].terminated
        assert "hidden tests" in episode.trajectory.final_observation  # the forced answer was run and graded
    rollout.close()


def test_the_budget_bounds_the_whole_episode(math_model):
    policy = HFPolicy.from_pretrained(math_model, max_new_tokens=12, seed=0)
    rollout = EnvRollout(MATH, seeds=range(4), env_kwargs=MATH_KW)
    for budget in (5, 40):
        episodes = rollout.play([0, 1, 2, 3], policy, max_completion_length=budget)
        for episode in episodes:
            assert len(episode.completion_ids) <= budget
            last = episode.trajectory.steps[-1]
            assert last.terminated or last.truncated
        assert any(e.trajectory.steps[-1].truncated for e in episodes)
    short = rollout.play([0, 1], policy, max_completion_length=5)
    assert all(len(e.trajectory.steps[0].action.token_ids) <= 5 for e in short)
    rollout.close()


class Flaky(TextEnv):
    """Some tasks break the env in step (an env fault, not a bad action)."""

    def generate_task(self, rng):
        broken = bool(rng.integers(2))
        return Task(f"flaky-{broken}", "Say something.", {"broken": broken}, family="flaky")

    def begin(self, task):
        return task.prompt

    def respond(self, action):
        return Transition("Thanks.", 1.0, True, {"success": True})

    def step(self, action):
        if self.privileged()["broken"]:  # before any action check, so that every action reaches it
            raise RuntimeError("the env broke")
        return super().step(action)


gymnasium.register(id="test_integrations/Flaky-v0", entry_point=Flaky, max_episode_steps=3)


def flaky_seeds(broken: bool, n: int) -> list[int]:
    env = gymnasium.make("test_integrations/Flaky-v0")
    seeds = []
    for seed in range(100):
        env.reset(seed=seed)
        if env.unwrapped.privileged()["broken"] == broken:
            seeds.append(seed)
    return seeds[:n]


def test_errored_episodes_get_no_reward_and_no_loss(random_model):
    seeds = [*flaky_seeds(False, 1), *flaky_seeds(True, 1)]
    policy = HFPolicy.from_pretrained(random_model, max_new_tokens=4)
    rollout = EnvRollout("test_integrations/Flaky-v0", seeds=seeds)
    good, bad = rollout.play(seeds, policy, max_completion_length=32)
    assert good.trajectory.error is None and good.reward == good.trajectory.total_reward and any(good.env_mask)
    assert bad.reward is None and bad.trajectory.error is not None and not any(bad.env_mask)
    assert "the env broke" in bad.trajectory.error.message and bad.completion_ids
    rollout.close()


def test_bad_input_fails_with_clear_errors(random_model):
    with pytest.raises(EnvError, match="did you mean 'turnkit/CollabCode-v0'"):
        EnvRollout("turnkit/CollabCod-v0")
    with pytest.raises(ConfigError, match="max_turns"):
        EnvRollout(MATH, max_turns=0)
    with pytest.raises(ConfigError, match="at least one seed"):
        EnvRollout(MATH, seeds=[])
    _, tok = load_tiny(random_model)
    tok.chat_template = None
    with pytest.raises(ConfigError, match="no chat_template"):
        ChatDelta(tok)
    # a template that drops earlier assistant messages would train on contexts the policy never saw
    tok.chat_template = (
        "{% for m in messages %}{% if m['role'] != 'assistant' or loop.last %}"
        "{{ '<|' + m['role'] + '|>' + m['content'] + '<|end|>' }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
    )
    with pytest.raises(ConfigError, match="prefix-preserving"):
        ChatDelta(tok).between_turns([1], "next")
    with pytest.raises(ConfigError, match="env_return"):
        env_reward(["x"])
    with pytest.raises(DataError, match="seed is 3 but the episode was played with seed 4"):
        env_reward(["x"], env_return=[1.0], seed=[3], env_seed=[4])


def test_trl_row_packs_a_hand_built_trajectory():
    t0 = AgentTurn("a", token_ids=(7, 2), logprobs=(-0.5, -0.25), prompt_token_ids=(1, 4))
    t1 = AgentTurn("b", token_ids=(8, 9), logprobs=(-1.0, -2.0), prompt_token_ids=(1, 4, 7, 2, 5, 6))
    t2 = AgentTurn("c", token_ids=(3,), logprobs=(-3.0,), prompt_token_ids=(1, 4, 7, 2, 5, 6, 8, 9, 5))
    steps = (Step("q", t0, 0.0), Step("r", t1, 0.5), Step("s", t2, 1.0, truncated=True, info={"success": True}))
    row = trl_row(Trajectory("d", 11, steps), pad_id=0)
    assert row == {
        "prompt_ids": [1, 4],
        "completion_ids": [7, 2, 5, 6, 8, 9, 5, 3],
        "logprobs": [-0.5, -0.25, 0.0, 0.0, -1.0, -2.0, 0.0, -3.0],
        "env_mask": [1, 1, 0, 0, 1, 1, 0, 1],
        "env_return": 1.5,
        "env_success": True,
        "env_seed": 11,
        "env_turns": 3,
    }
    no_logprobs = AgentTurn("a", token_ids=(7, 2), prompt_token_ids=(1, 4))  # a policy that reports none
    assert trl_row(Trajectory("d", 0, (Step("q", no_logprobs, 0.0),)), pad_id=0)["logprobs"] == [0.0, 0.0]


def test_trl_row_masks_errored_and_refuses_inexact_trajectories():
    t0 = AgentTurn("a", token_ids=(7, 2), logprobs=(-0.5, -0.25), prompt_token_ids=(1, 4))
    failed = Trajectory("d", 2, (Step("q", t0, 1.0),), error=TrajectoryError(ErrorCause.ENV, "boom", 1))
    row = trl_row(failed, pad_id=0)
    assert (row["prompt_ids"], row["completion_ids"], row["env_mask"], row["env_return"]) == ([1, 4], [0], [0], None)
    assert trl_row(Trajectory("d", 2), pad_id=0)["prompt_ids"] == [0]  # failed at reset: no prompt either
    retokenised = AgentTurn("b", token_ids=(8,), prompt_token_ids=(1, 4, 7, 5))  # id 2 re-rendered away
    with pytest.raises(DataError, match="not token-exact"):
        trl_row(Trajectory("d", 0, (Step("q", t0, 0.0), Step("r", retokenised, 0.0))), pad_id=0)
    with pytest.raises(DataError, match="no prompt or sampled ids"):
        trl_row(Trajectory("d", 0, (Step("q", AgentTurn("text only"), 0.0),)), pad_id=0)


class ToolScript:
    """A token-level agent with a script per turn: a python tool call, then answers (ids + EOS, like HFPolicy)."""

    def __init__(self, tok) -> None:
        self.tokenizer, self.pad_token_id = tok, tok.pad_token_id
        self.texts = ["<python>6 + 5</python>", "ANSWER: 998", "ANSWER: 999"]  # wrong: three turns

    def act(self, contexts):
        out = []
        for ctx in contexts:
            text = self.texts[min(ctx.turn, len(self.texts) - 1)]
            ids = (*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.tokenizer.eos_token_id)
            prompt = ctx.prompt_token_ids or tuple(chat_prompt_ids(self.tokenizer, ctx.messages, ctx.tools))
            out.append(AgentTurn(text, ids, (-1.0,) * len(ids), prompt, "stop"))
        return out


def turn_ids(traj: Trajectory) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    return [(s.action.prompt_token_ids, s.action.token_ids) for s in traj.steps]


def test_trl_rollout_and_the_loop_give_identical_ids_on_a_tool_env():
    """Tool replies are ``tool`` messages in both paths: the TRL rows are the loop's own ids, token for token."""
    tok = build_tiny_tokenizer()
    kw = {**MATH_KW, "tools": ["python"]}
    rollout = EnvRollout(MATH, seeds=range(2), env_kwargs=kw, max_turns=3)
    episodes = rollout.play([0, 0, 1], ToolScript(tok))  # type: ignore[arg-type]
    envs = [gymnasium.make(MATH, **kw) for _ in range(3)]
    loop = collect_batch(envs, ToolScript(tok), [0, 0, 1], max_turns=3, chat=ChatDelta(tok))
    for e in envs:
        e.close()
    rollout.close()
    for episode, traj in zip(episodes, loop, strict=True):
        assert traj.error is None and [m.role for m in traj.messages()][2:5] == ["tool", "assistant", "user"]
        assert turn_ids(episode.trajectory) == turn_ids(traj)
        last = traj.steps[-1].action
        assert (*episode.prompt_ids, *episode.completion_ids) == (*last.prompt_token_ids, *last.token_ids)
        env_ids = [i for i, m in zip(episode.completion_ids, episode.env_mask, strict=True) if not m]
        assert tok.decode(env_ids).startswith("<|tool|>11")  # the tool's output, rendered as a tool message


def test_trl_rollout_and_the_loop_sample_identical_ids(random_model):
    """With a sampling policy and a budget: the same seeds give the same ids through EnvRollout and collect_batch."""
    kw = {**MATH_KW, "tools": ["python"]}
    rollout = EnvRollout(MATH, seeds=range(2), env_kwargs=kw)
    policy = HFPolicy.from_pretrained(random_model, max_new_tokens=12, seed=5)
    episodes = rollout.play([0, 0, 1, 1], policy, max_completion_length=60)
    rollout.close()
    envs = [gymnasium.make(MATH, **kw) for _ in range(4)]
    again = HFPolicy(policy.model, policy.tokenizer, max_new_tokens=12, seed=5)
    loop = collect_batch(envs, again, [0, 0, 1, 1], chat=ChatDelta(policy.tokenizer), max_tokens=60)
    for e in envs:
        e.close()
    assert [turn_ids(e.trajectory) for e in episodes] == [turn_ids(t) for t in loop]
    assert [e.completion_ids for e in episodes] == [tuple(trl_row(t, pad_id=0)["completion_ids"]) for t in loop]
    assert len({e.completion_ids for e in episodes}) > 2 and all(len(e.completion_ids) <= 60 for e in episodes)


# ---------------------------------------------------------------------------------------------- with TRL


def recording_trainer(trl):
    """GRPOTrainer that keeps what TRL made of each generation batch (its padded tensors, before shuffling)."""

    class Recording(trl.GRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            self.recorded.append(({k: v for k, v in out.items()}, list(self.rollout_func.last_episodes)))
            return out

    return Recording


def grpo_args(trl, tmp_path, **changes):
    base = dict(
        output_dir=str(tmp_path / "out"),
        num_generations=4,
        per_device_train_batch_size=8,
        max_steps=3,
        learning_rate=1e-3,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        seed=0,
    )
    base.update(changes)
    return trl.GRPOConfig(**base)


def check_what_trl_received(recorded, group_size: int) -> None:
    """TRL's padded batch holds the episodes' ids and masks, and its advantages come from the env returns."""
    for out, episodes in recorded:
        assert len(episodes) == len(out["completion_ids"])
        for b, episode in enumerate(episodes):
            prompt = out["prompt_ids"][b][out["prompt_mask"][b].bool()].tolist()
            n = int(out["completion_mask"][b].sum())
            assert tuple(prompt) == episode.prompt_ids
            assert tuple(out["completion_ids"][b][:n].tolist()) == episode.completion_ids
            assert tuple(out["tool_mask"][b][:n].tolist()) == episode.env_mask
        if "old_per_token_logps" in out:  # TRL scored its own padded batch: the sampled ids get the sampling log-probs
            for b, episode in enumerate(episodes):
                mask = out["tool_mask"][b].bool() & out["completion_mask"][b].bool()
                scored = out["old_per_token_logps"][b][mask]
                sampled = torch.tensor([lp for lp, m in zip(episode.logprobs, episode.env_mask, strict=True) if m])
                assert torch.allclose(scored, sampled, atol=1e-4)
        returns = torch.tensor([e.reward for e in episodes]).view(-1, group_size)
        expected = (returns - returns.mean(1, keepdim=True)) / (returns.std(1, keepdim=True) + 1e-4)
        assert torch.allclose(out["advantages"], expected.flatten(), atol=1e-5)


@pytest.mark.slow
def test_grpo_trainer_trains_on_math_episodes(math_model, tmp_path):
    trl = pytest.importorskip("trl")
    rollout = EnvRollout(MATH, seeds=range(64), env_kwargs=MATH_KW, max_new_tokens=12)
    trainer = recording_trainer(trl)(
        model=str(math_model),
        reward_funcs=env_reward,
        args=grpo_args(trl, tmp_path, max_completion_length=128),
        train_dataset=rollout.dataset,
        rollout_func=rollout,
    )
    trainer.recorded = []
    start, _ = load_tiny(math_model)
    trainer.train()
    assert trainer.state.global_step == 3 and len(trainer.recorded) == 3
    check_what_trl_received(trainer.recorded, group_size=4)
    # the first batch was generated by the start model: check it like a rollout without TRL
    policy = HFPolicy(start, load_tiny(math_model)[1])
    first = trainer.recorded[0][1]
    for episode in first:
        check_episode(episode, policy, MATH_KW)
    episodes = [e for _, batch in trainer.recorded for e in batch]
    assert max(len(e.trajectory.steps) for e in episodes) >= 2
    returns = np.array([e.reward for e in episodes]).reshape(-1, 4)
    assert (returns.std(axis=1) > 0).any()  # some group has a reward spread, so there is a gradient
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 3 and all(math.isfinite(h["loss"]) for h in logs)
    for h, (_, batch) in zip(logs, trainer.recorded, strict=True):
        assert h["rewards/env_reward/mean"] == pytest.approx(np.mean([e.reward for e in batch]), abs=1e-6)
    trained = dict(trainer.model.named_parameters())
    moved = [n for n, p in start.named_parameters() if not torch.equal(p, trained[n].detach().cpu())]
    assert moved and all(torch.isfinite(p).all() for p in trained.values())
    rollout.close()


@pytest.mark.slow
def test_grpo_trainer_trains_on_collab_code(random_model, tmp_path):
    trl = pytest.importorskip("trl")
    rollout = EnvRollout(CODE, seeds=range(16), env_kwargs=CODE_KW, max_new_tokens=16)
    trainer = recording_trainer(trl)(
        model=str(random_model),
        reward_funcs=env_reward,
        # two updates per generation batch make TRL score the batch itself before the first update
        args=grpo_args(
            trl, tmp_path, max_steps=2, num_iterations=2, max_completion_length=512, per_device_train_batch_size=4
        ),
        train_dataset=rollout.dataset,
        rollout_func=rollout,
    )
    trainer.recorded = []
    trainer.train()
    assert trainer.state.global_step == 2 and len(trainer.recorded) == 1
    assert "old_per_token_logps" in trainer.recorded[0][0]
    check_what_trl_received(trainer.recorded, group_size=4)
    policy = HFPolicy(*load_tiny(random_model))
    for episode in trainer.recorded[0][1]:
        check_episode(episode, policy, CODE_KW)
        assert len(episode.trajectory.steps) == 3 and "hidden tests" in episode.trajectory.final_observation
    assert all(math.isfinite(h["loss"]) for h in trainer.state.log_history if "loss" in h)
    held_out = rollout.task_dataset(range(10**6, 10**6 + 2))  # TRL's evaluation plays held-out tasks too
    metrics = trainer.evaluate(eval_dataset=held_out)
    assert metrics["eval_reward"] == pytest.approx(np.mean([e.reward for e in rollout.last_episodes]), abs=1e-6)
    assert sorted({e.trajectory.seed for e in rollout.last_episodes}) == [10**6, 10**6 + 1]
    rollout.close()


@pytest.mark.slow
def test_trl_settings_the_rollout_cannot_honour_fail_clearly(random_model, tmp_path):
    trl = pytest.importorskip("trl")
    import datasets

    rollout = EnvRollout(MATH, seeds=range(8), env_kwargs=MATH_KW)
    _, no_template = load_tiny(random_model)
    no_template.chat_template = None
    plain = datasets.Dataset.from_dict({"prompt": [[{"role": "user", "content": "What is 1 plus 1?"}]] * 2})
    harder = EnvRollout(MATH, seeds=range(2), env_kwargs={"difficulty": 3}).dataset
    broken = EnvRollout("test_integrations/Flaky-v0", seeds=flaky_seeds(True, 2))  # every episode fails
    cases = [
        (grpo_args(trl, tmp_path, top_k=5), None, rollout, rollout.dataset, ConfigError, "top_k"),
        (grpo_args(trl, tmp_path), no_template, rollout, rollout.dataset, ConfigError, "chat_template"),
        (grpo_args(trl, tmp_path), None, rollout, plain, DataError, "no env seed"),
        (grpo_args(trl, tmp_path), None, rollout, harder, EnvError, "other env_kwargs"),
        (grpo_args(trl, tmp_path), None, broken, broken.dataset, EnvError, "every episode .* the env broke"),
    ]
    for args, processing_class, rollout_func, dataset, error, match in cases:
        model, tok = load_tiny(random_model)
        trainer = trl.GRPOTrainer(
            model=model,
            reward_funcs=env_reward,
            args=args,
            train_dataset=dataset,
            processing_class=processing_class or tok,
            rollout_func=rollout_func,
        )
        with pytest.raises(error, match=match):
            trainer.train()
    rollout.close()
    broken.close()


@pytest.mark.slow
def test_dpo_trainer_trains_on_a_synth_dataset(math_model, tmp_path):
    trl = pytest.importorskip("trl")
    import datasets
    from transformers import AutoTokenizer

    from turnkit.search.mcts import MCTSConfig
    from turnkit.search.pairs import PairConfig
    from turnkit.train.synth import SynthConfig, synthesize

    cfg = SynthConfig(
        MATH,
        iterations=1,
        tasks_per_iteration=6,
        env_kwargs=MATH_KW,
        mcts=MCTSConfig(iterations=4, root_multiplier=1, n_actions=4, depth_limit=1),
        pairs=PairConfig(require_success=False),
        train=False,
        render_trees=0,
    )
    result = synthesize(
        cfg, HFPolicy.from_pretrained(math_model, max_new_tokens=12), tmp_path / "synth", progress=False
    )
    data = datasets.load_dataset("json", data_files=str(tmp_path / "synth" / "dataset.jsonl"), split="train")
    assert len(data) == len(result.pairs) >= 4
    start, _ = load_tiny(math_model)
    trainer = trl.DPOTrainer(
        model=str(math_model),
        args=trl.DPOConfig(
            output_dir=str(tmp_path / "dpo"),
            beta=0.1,
            per_device_train_batch_size=4,
            max_steps=3,
            learning_rate=1e-3,
            logging_steps=1,
            report_to=[],
            save_strategy="no",
            use_cpu=True,
            bf16=False,
        ),
        train_dataset=data,
        processing_class=AutoTokenizer.from_pretrained(math_model),
    )
    trainer.train()
    assert trainer.state.global_step == 3
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    trained = dict(trainer.model.named_parameters())
    assert any(not torch.equal(p, trained[n].detach().cpu()) for n, p in start.named_parameters())
