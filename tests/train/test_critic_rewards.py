"""Critics in the GRPO loop: dense per-turn critic rewards replace env rewards in the advantages."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from transformers import PreTrainedTokenizerFast

from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.agents.scripted import ScriptedAgent
from turnkit.checkpoint import MANIFEST
from turnkit.configs import apply_overrides
from turnkit.critics.base import CriticContext
from turnkit.critics.registry import CriticSet, build_critics, critic_rewards
from turnkit.envs.core import TextEnv, Transition
from turnkit.errors import ConfigError
from turnkit.rollout.demos import completion_ids
from turnkit.train import loop
from turnkit.train.config import TrainConfig
from turnkit.train.loop import train, update
from turnkit.train.metrics import read_metrics
from turnkit.types import AgentTurn, ErrorCause, Message, Step, Task, Trajectory, TrajectoryError

from .conftest import learner_of, make_policy


class SecondTurnEnv(TextEnv):
    """Two turns, whatever is said: turn 1 is a "thinking" turn (reward 0), turn 2 ends it with success.

    A forced one-turn answer from the start fails (the episode is not over) and from after turn 1 succeeds,
    so MRT's ``J`` is exactly ``[0, 1]`` and the outcome 1 for every policy: the bonus is hand-computable.
    """

    def generate_task(self, rng: np.random.Generator) -> Task:
        return Task(task_id=f"two-{int(rng.integers(0, 9))}", prompt="Think, then answer.", family="test")

    def begin(self, task: Task) -> str:
        self.calls = 0
        return task.prompt

    def get_state(self) -> Any:
        return self.calls

    def set_state(self, state: Any) -> None:
        self.calls = state

    def respond(self, action: str) -> Transition:
        self.calls += 1
        if self.calls >= 2:
            return Transition("Done.", reward=1.0, terminated=True, info={"success": True})
        return Transition("Go on.", reward=0.0)


SECOND_TURN_ENV = "turnkit-test/SecondTurn-v0"
if SECOND_TURN_ENV not in gymnasium.registry:
    gymnasium.register(SECOND_TURN_ENV, entry_point=SecondTurnEnv, max_episode_steps=4)


class ScriptedPolicy:
    """Stands in for an HFPolicy inside the critic: ``with_sampling`` gives a scripted agent (no model)."""

    def with_sampling(self, **_: Any) -> ScriptedAgent:
        return ScriptedAgent(["some words here"])


def two_turn_trajectory(tokens: tuple[int, int]) -> Trajectory:
    env = gymnasium.make(SECOND_TURN_ENV)
    obs, _ = env.reset(seed=3)
    steps = []
    for n in tokens:
        turn = AgentTurn("x " * n, tuple(range(n)))
        nxt, reward, terminated, truncated, info = env.step(turn.text)
        steps.append(Step(obs, turn, reward, terminated, truncated, info))
        obs = nxt
    return Trajectory(SECOND_TURN_ENV, 3, tuple(steps), initial_observation=steps[0].observation, group=0)


# ---------------------------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("critic", "message"),
    [
        ("prm", r"TrainConfig\.critic: unknown critic 'prm' \(did you mean 'prime'\?\); use one of \['afd'"),
        ("no_colon.module", r"critic 'no_colon.module': cannot import no_colon.module"),
        (1, r"TrainConfig\.critic must be a critic name or a table"),
        ({"mrt": "x"}, r"TrainConfig\.critic\.mrt must be a weight or a table"),
        ({"mrt": {"weight": True}}, r"TrainConfig\.critic\.mrt\.weight must be a finite number"),
        ({"mrt": float("nan")}, r"TrainConfig\.critic\.mrt\.weight must be a finite number"),
        ({"pav": {"best_of": 0}}, r"TrainConfig\.critic\.pav: PAVConfig\.best_of must be an int >= 1"),
        ({"prime": {"optim": {"lr": 0.0}}}, r"TrainConfig\.critic\.prime: PrimeConfig\.optim: OptimConfig\.lr must be"),
        (
            {"prime": {"optim": {"r": 4}}},
            r"PrimeConfig\.optim: unknown OptimConfig key 'r' \(did you mean PrimeConfig's 'lora\.r'\?\)",
        ),
        ({"mrt": {"samples": 0}}, r"TrainConfig\.critic\.mrt: MRTConfig\.samples must be an int >= 1"),
        ({"mrt": {"temperature": 0.0}}, r"MRTConfig\.temperature must be a finite number > 0"),
        ({"mrt": {"budget": -4}}, r"MRTConfig\.budget must be null or a finite number > 0"),
        ({"mrt": {"force": None}}, r"MRTConfig\.force must be a string"),
        ({"sweet": {"stepz": 2}}, r"unknown SweetConfig key 'stepz' \(did you mean 'steps'\?\)"),
        ({"m:f": {"samples": 2}}, r"critic 'm:f': a 'module:callable' factory takes a weight only"),
    ],
)
def test_bad_critic_config_is_a_config_error(critic: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainConfig(critic=critic)


def test_critic_config_from_overrides_and_its_defaults() -> None:
    cfg = apply_overrides(TrainConfig(), ["critic=mrt", "critic.mrt.weight=0.5", "critic.mrt.force="])
    assert cfg.critic == {"mrt": {"weight": 0.5, "force": ""}}
    assert cfg.loss_config().per_turn and not TrainConfig().loss_config().per_turn


def context(**changes: Any) -> CriticContext:
    """The critics' view of a run on the two-turn env, with a scripted stand-in for the live policy."""
    base = CriticContext(ScriptedPolicy(), lambda: None, lambda: gymnasium.make(SECOND_TURN_ENV))  # type: ignore[arg-type]
    return dataclasses.replace(base, **changes)


def test_mrt_budget_defaults_to_the_episode_token_budget() -> None:
    critics = build_critics({"mrt": {}}, context(max_new_tokens=10, max_turns=3))
    assert isinstance(critics, CriticSet) and critics.parts[0][2].budget == 30.0
    assert build_critics({"mrt": {"budget": 7}}, context()).parts[0][2].budget == 7.0
    assert build_critics({}, context()) is None


# ---------------------------------------------------------------------------------------------- the critic


def test_mrt_critic_rewards_are_env_reward_plus_alpha_progress() -> None:
    """J = [0, 1], outcome 1: progress p = [1, 0]; credit "advantage" rewards α(p_h − p_{h+1}) = [α, 0]."""
    critics = build_critics({"mrt": {"weight": 0.5, "samples": 3, "budget": 20, "force": ""}}, context())
    traj = two_turn_trajectory((4, 6))
    rewards, metrics = critics.rewards([traj])
    assert rewards == [(0.5, 1.0)]  # env [0, 1] + 0.5 x [1, 0]
    assert metrics["mrt/V0"] == 0.0 and metrics["mrt/V_end"] == 1.0 and metrics["mrt/progress"] == 1.0
    # points (4, J=1), (10, 1): area = 4/2 + 16 = 18 of 20
    assert metrics["mrt/regret"] == pytest.approx(1 - 18 / 20)
    assert metrics["critic_reward_mean"] == pytest.approx(1.5) and metrics["env/total"] == 1.0


def test_errored_episodes_are_not_scored() -> None:
    critics = build_critics({"mrt": {"samples": 2, "force": ""}}, context())
    good = two_turn_trajectory((1, 1))
    bad = dataclasses.replace(good, error=TrajectoryError(ErrorCause.AGENT, "boom", 1))
    rewards, metrics = critic_rewards(critics.critic, [bad, good])
    assert rewards == [(0.0, 0.0), (1.0, 1.0)]
    assert metrics["mrt/progress"] == 1.0  # the mean over the one clean episode


# ---------------------------------------------------------------------------------------------- advantages


def scored(policy: HFPolicy, prompt: list[int], text: str, reward: float, done: bool) -> Step:
    ids = completion_ids(policy.tokenizer, text)
    logp = policy.sequence_logprobs([prompt], [ids])[0].tolist()
    return Step("q", AgentTurn(text, tuple(ids), tuple(logp), tuple(prompt), "stop"), reward, done)


def two_turn_group(policy: HFPolicy) -> list[Trajectory]:
    prompt = chat_prompt_ids(policy.tokenizer, [Message("user", "What is 2 plus 2?")])
    a = (scored(policy, prompt, "ANSWER: 5", 0.0, False), scored(policy, prompt, "ANSWER: 4", 1.0, True))
    b = (scored(policy, prompt, "ANSWER: 3", 0.0, False), scored(policy, prompt, "ANSWER: 6", 0.0, True))
    return [Trajectory("demo", 0, a, group=0), Trajectory("demo", 0, b, group=0)]


def captured_advantages(monkeypatch: pytest.MonkeyPatch) -> list:
    seen: list = []
    real = loop.build_turn_batch

    def spy(trajs: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["advantages"])
        return real(trajs, **kwargs)

    monkeypatch.setattr(loop, "build_turn_batch", spy)
    return seen


def test_critic_rewards_set_the_advantages_as_hand_computed(
    tokenizer: PreTrainedTokenizerFast, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RLOO on returns-to-go of the critic rewards [0.5, 1.0] and [-0.25, 0.0].

    Returns-to-go: A = [1.5, 1.0], B = [-0.25, 0.0]; baselines are the other episode's return:
    A − (−0.25) = [1.75, 1.25], B − 1.5 = [−1.75, −1.5]. Env rewards alone would give [1, 1], [−1, −1].
    """
    seen = captured_advantages(monkeypatch)
    cfg = TrainConfig(grpo={"group_size": 2, "estimator": "rloo"}, critic="mrt", optim={"lr": 1e-3})
    policy = make_policy(tokenizer)
    update(learner_of(policy, cfg.optim.lr), two_turn_group(policy), cfg,
           turn_rewards=[(0.5, 1.0), (-0.25, 0.0)])  # fmt: skip
    policy = make_policy(tokenizer)
    update(learner_of(policy, cfg.optim.lr), two_turn_group(policy),
           dataclasses.replace(cfg, critic={}))  # fmt: skip
    assert [list(a) for a in seen[0]] == [[1.75, 1.25], [-1.75, -1.5]]
    assert [list(a) for a in seen[1]] == [[1.0, 1.0], [-1.0, -1.0]]


def test_grpo_with_critic_rewards_normalises_by_the_episode_returns(
    tokenizer: PreTrainedTokenizerFast, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GRPO: episode returns 1.5 and −0.25, mean 0.625, sample std 1.75/√2 (+ adv_eps 1e-6)."""
    seen = captured_advantages(monkeypatch)
    cfg = TrainConfig(grpo={"group_size": 2, "estimator": "grpo"}, critic="mrt")
    policy = make_policy(tokenizer)
    update(learner_of(policy, 1e-3), two_turn_group(policy), cfg,
           turn_rewards=[(0.5, 1.0), (-0.25, 0.0)])  # fmt: skip
    std = 1.75 / 2**0.5 + 1e-6
    expected = [[0.875 / std, 0.375 / std], [-0.875 / std, -0.625 / std]]
    assert np.allclose(seen[0], expected, atol=1e-12)


# ---------------------------------------------------------------------------------------------- the loop


def loop_config(out: Path, **changes: Any) -> TrainConfig:
    base = TrainConfig(
        env_id=SECOND_TURN_ENV,
        env_kwargs={},
        steps=2,
        grpo={"group_size": 2, "estimator": "rloo"},
        groups_per_step=2,
        out_dir=str(out),
        seed=5,
        optim={"lr": 1e-3},
        sampling={"max_new_tokens": 6},
        log={"checkpoint_every": 1},
    )
    return dataclasses.replace(base, **changes)


def test_train_feeds_critic_rewards_and_logs_its_metrics(tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    cfg = loop_config(
        tmp_path,
        critic={"mrt": {"weight": 0.5, "samples": 2, "force": ""}},
        log={"checkpoint_every": 1, "rollouts_every": 1},
    )
    train(cfg, policy=make_policy(tokenizer), progress=False)
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert len(records) == 2
    for step, r in enumerate(records, start=1):
        # what the learner saw, as the run kept it for `turnkit view`
        lines = (tmp_path / "rollouts" / f"step-{step:06d}" / "trajectories.jsonl").read_text().splitlines()
        episodes = [json.loads(line) for line in lines]
        assert len(episodes) == 4
        for ep in episodes:
            assert all(len(s["action"].strip()) > 0 for s in ep["steps"]), "J is exact only when no reply is empty"
            credit = [s["critic_rewards"] for s in ep["steps"]]
            assert [c["env"] for c in credit] == [s["reward"] for s in ep["steps"]] == [0.0, 1.0]
            assert [c["env"] + c["mrt"] for c in credit] == [0.5, 1.0]  # the turn rewards the advantages used
            # every episode earned the same, but per-turn credit still prefers turn 1 (return-to-go 1.5) to
            # turn 2 (1.0) against the RLOO baseline 1.5 (the other episode's return): advantages [0, -0.5]
            assert [s["advantage"] for s in ep["steps"]] == [0.0, -0.5]
            assert all(s["mask"] == [1] * len(s["token_ids"]) for s in ep["steps"])
        assert r["mrt/V0"] == 0.0 and r["mrt/progress"] == 1.0 and r["critic_reward_mean"] == 1.5
        # C0 = max_new_tokens = 6: J jumps to 1 after turn 1's t1 tokens and stays there: regret t1 / 12
        regret = np.mean([len(ep["steps"][0]["token_ids"]) / 12 for ep in episodes])
        assert r["mrt/regret"] == pytest.approx(regret) and r["critic_s"] >= 0.0
        assert r["tied_frac"] == 0.0 and r["optimizer_steps"] == 1


def test_default_run_has_no_critic_and_old_checkpoints_resume(
    tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    cfg = loop_config(tmp_path, steps=1)
    train(cfg, policy=make_policy(tokenizer), progress=False)
    record = read_metrics(tmp_path / "metrics.jsonl")[0]
    assert not any(k.startswith(("mrt/", "env/", "critic")) for k in record)
    # a checkpoint written before the critic keys and the grpo table existed resumes as the same (critic-free) run
    state_path = tmp_path / "checkpoints" / "step-000001" / "state.json"
    state = json.loads(state_path.read_text())
    flat = {k: v for k, v in state["config"].items() if k not in ("critic", "grpo")}
    state["config"] = {**flat, **{k: v for k, v in state["config"]["grpo"].items() if k != "max_tokens"}}
    state_path.write_text(json.dumps(state))
    (state_path.parent / MANIFEST).unlink()  # such checkpoints also predate the manifest (else: damaged, rightly)
    resumed = train(dataclasses.replace(cfg, steps=2), policy=make_policy(tokenizer), resume=True, progress=False)
    assert resumed.steps_done == 2
    with pytest.raises(ConfigError, match="critic"):
        train(dataclasses.replace(cfg, steps=3, critic="mrt"), policy=make_policy(tokenizer), resume=True,
              progress=False)  # fmt: skip
