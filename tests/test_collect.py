"""turnkit.rollout.collect: batched episodes, same-seed groups, errors as data, privileged contexts."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium
import pytest

import turnkit
from turnkit.agents.base import Context
from turnkit.agents.scripted import ScriptedAgent
from turnkit.envs.core import TextEnv, Transition
from turnkit.rollout.collect import collect_batch
from turnkit.types import AgentTurn, ErrorCause, Task

ENV_ID = "tk-test/Parrot-v0"


class Parrot(TextEnv):
    """Repeats the agent; "stop" ends the episode (success), "boom" makes the env raise."""

    def generate_task(self, rng):
        word = str(rng.choice(["kiwi", "mango", "papaya", "lychee", "durian"]))
        return Task(task_id=f"parrot-{word}", prompt=f"Say something ({int(rng.integers(1000))}).",
                    privileged={"word": word}, family="parrot")  # fmt: skip

    def begin(self, task):
        if task.task_id == "parrot-broken":
            raise RuntimeError("cannot start")
        return task.prompt

    def respond(self, action):
        if action == "boom":
            raise RuntimeError("parrot exploded")
        done = action == "stop"
        return Transition(f"heard {action}", reward=float(done), terminated=done, info={"success": done})


gymnasium.register(id=ENV_ID, entry_point=Parrot, max_episode_steps=5)


class Recorder:
    """Replies with ``reply(ctx)`` and records every batch of contexts it was called with."""

    def __init__(self, reply=lambda ctx: "hello", *, privileged: bool = False, fail_on_call: int | None = None):
        self.reply = reply
        self.uses_privileged = privileged
        self.fail_on_call = fail_on_call
        self.calls: list[list[Context]] = []

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        self.calls.append(list(contexts))
        if self.fail_on_call == len(self.calls):
            raise TimeoutError("policy server timed out")
        return [AgentTurn(text=self.reply(ctx)) for ctx in contexts]


def envs(n: int) -> list[gymnasium.Env]:
    return [gymnasium.make(ENV_ID) for _ in range(n)]


def stop_at(turns: dict[int, int]):
    """Episode with seed s says "stop" at turn turns[s] (and "hello" before)."""
    return lambda ctx: "stop" if ctx.turn == turns.get(ctx.episode_seed, 99) else "hello"


# ------------------------------------------------------------------------------------------ batching
def test_agent_sees_every_live_context_in_one_call() -> None:
    agent = Recorder(stop_at({0: 0, 1: 2, 2: 1}))
    trajs = collect_batch(envs(3), agent, [0, 1, 2])
    assert [len(batch) for batch in agent.calls] == [3, 2, 1]
    assert [[c.episode_seed for c in batch] for batch in agent.calls] == [[0, 1, 2], [1, 2], [1]]
    assert [len(t.steps) for t in trajs] == [1, 3, 2]


def test_contexts_carry_the_conversation_so_far() -> None:
    agent = Recorder(stop_at({4: 2}))
    traj = collect_batch(envs(1), agent, [4])[0]
    last = agent.calls[-1][0]
    assert (last.turn, last.env_id) == (2, ENV_ID)
    assert [m.role for m in last.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert list(last.messages[:4]) == traj.messages()[:4]
    assert last.messages[-1].content == traj.steps[-1].observation == "heard hello"


def test_trajectory_records_the_episode() -> None:
    traj = turnkit.collect(gymnasium.make(ENV_ID), ScriptedAgent(["hi", "stop"]), seed=7)
    assert (traj.env_id, traj.seed, traj.error, traj.success) == (ENV_ID, 7, None, True)
    assert traj.initial_observation == traj.steps[0].observation and traj.initial_observation.startswith("Say")
    assert [s.action.text for s in traj.steps] == ["hi", "stop"]
    assert traj.steps[1].observation == "heard hi"
    assert traj.reset_info["task_id"] == traj.task.task_id


def test_time_limit_truncates() -> None:
    traj = turnkit.collect(gymnasium.make(ENV_ID), ScriptedAgent(["hi"]), seed=0)
    assert len(traj.steps) == 5 and traj.steps[-1].truncated and not traj.steps[-1].terminated


def test_max_turns_truncates_an_env_without_time_limit() -> None:
    traj = turnkit.collect(Parrot(), ScriptedAgent(["hi"]), seed=0, max_turns=3)
    assert len(traj.steps) == 3 and traj.steps[-1].truncated
    assert traj.env_id == "Parrot"


def test_reset_options_reach_the_env() -> None:
    task = Task(task_id="custom", prompt="Custom prompt.")
    traj = collect_batch([Parrot()], ScriptedAgent(["stop"]), [0], reset_options=[{"task": task}])[0]
    assert traj.initial_observation == "Custom prompt." and traj.task == task


def test_envs_and_seeds_must_match() -> None:
    with pytest.raises(ValueError, match="2 envs but 1 seeds"):
        collect_batch(envs(2), ScriptedAgent(["x"]), [0])


def test_envs_must_be_distinct_instances() -> None:
    env = gymnasium.make(ENV_ID)
    with pytest.raises(ValueError, match="distinct env instances"):
        collect_batch([env, env], ScriptedAgent(["x"]), [0, 1])


# ------------------------------------------------------------------------------------------ same-seed groups
def test_group_episodes_start_identically() -> None:
    group = turnkit.collect_group(gymnasium.make(ENV_ID), ScriptedAgent(["stop"]), seed=11, group_size=4)
    assert len({t.initial_observation for t in group}) == 1
    assert all(t.task == group[0].task for t in group)
    assert [(t.seed, t.group) for t in group] == [(11, 11)] * 4


def test_group_from_a_factory_with_explicit_group_index() -> None:
    group = turnkit.collect_group(
        lambda: gymnasium.make(ENV_ID), ScriptedAgent(["stop"]), seed=3, group_size=2, group=0
    )
    assert [t.group for t in group] == [0, 0] and group[0].task == group[1].task


def test_group_closes_the_envs_it_made_and_not_the_callers(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[int] = []
    monkeypatch.setattr(Parrot, "close", lambda self: closed.append(id(self)))
    mine = gymnasium.make(ENV_ID)
    turnkit.collect_group(mine, ScriptedAgent(["stop"]), seed=1, group_size=4)
    assert len(closed) == 3 and id(mine.unwrapped) not in closed
    closed.clear()
    turnkit.collect_group(lambda: gymnasium.make(ENV_ID), ScriptedAgent(["stop"]), seed=1, group_size=2)
    assert len(closed) == 2


def test_group_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="group_size must be >= 1"):
        turnkit.collect_group(gymnasium.make(ENV_ID), ScriptedAgent(["x"]), seed=0, group_size=0)


# ------------------------------------------------------------------------------------------ errors as data
def test_agent_exception_marks_live_episodes_and_spares_finished_ones() -> None:
    agent = Recorder(stop_at({0: 0}), fail_on_call=2)
    done, failed_a, failed_b = collect_batch(envs(3), agent, [0, 1, 2])
    assert done.error is None and done.success
    for traj in (failed_a, failed_b):
        assert traj.error.cause is ErrorCause.AGENT and traj.error.step == 1
        assert traj.error.message == "TimeoutError: policy server timed out"
        assert len(traj.steps) == 1  # the step before the failure is kept


def test_agent_returning_too_few_turns_is_an_agent_error() -> None:
    class Short:
        def act(self, contexts):
            return [AgentTurn(text="stop")]

    trajs = collect_batch(envs(2), Short(), [0, 1])
    assert all(t.error.cause is ErrorCause.AGENT for t in trajs)
    assert "agent returned 1 turns for 2 contexts" in trajs[0].error.message


def test_env_exception_ends_only_that_episode() -> None:
    agent = Recorder(lambda ctx: "boom" if ctx.episode_seed == 1 and ctx.turn == 1 else stop_at({0: 2, 2: 2})(ctx))
    ok_a, broken, ok_b = collect_batch(envs(3), agent, [0, 1, 2])
    assert broken.error.cause is ErrorCause.ENV and broken.error.step == 1
    assert broken.error.message == "step: RuntimeError: parrot exploded"
    assert ok_a.error is None and ok_b.error is None and ok_a.success and ok_b.success
    assert [len(batch) for batch in agent.calls] == [3, 3, 2]


def test_env_exception_at_reset_is_recorded() -> None:
    broken = Task(task_id="parrot-broken", prompt="never shown")
    trajs = collect_batch(envs(2), ScriptedAgent(["stop"]), [0, 1], reset_options=[{"task": broken}, None])
    assert trajs[0].error.cause is ErrorCause.ENV and trajs[0].error.message.startswith("reset: RuntimeError")
    assert trajs[0].steps == () and trajs[1].success


# ------------------------------------------------------------------------------------------ privileged data
def test_policy_contexts_never_carry_the_task() -> None:
    agent = Recorder(stop_at({0: 1}))
    traj = collect_batch(envs(1), agent, [0])[0]
    assert all(ctx.task is None for batch in agent.calls for ctx in batch)
    assert traj.task is not None and traj.task.privileged["word"]  # critics still get it on the trajectory


def test_privileged_agents_get_the_task() -> None:
    agent = Recorder(lambda ctx: "stop", privileged=True)
    traj = collect_batch(envs(1), agent, [5])[0]
    assert agent.calls[0][0].task == traj.task
    assert agent.calls[0][0].task.privileged == {"word": traj.task.privileged["word"]}


def test_final_observation_is_the_envs_reply_to_the_last_action():
    import gymnasium

    from turnkit.agents.oracle import OracleAgent
    from turnkit.rollout.collect import collect

    traj = collect(gymnasium.make("turnkit/MathEpisodes-v0"), OracleAgent(), seed=5)
    assert traj.final_observation.startswith("Correct")
    assert traj.steps[-1].observation != traj.final_observation


# ------------------------------------------------------------------------------------------ budgets, stops, starts
class Tokens:
    """A token-level agent: replies ``reply(ctx)`` as byte ids + EOS, conditioning on the stored context ids."""

    def __init__(self, reply=lambda ctx: "hello") -> None:
        from turnkit.models.tiny import build_tiny_tokenizer

        self.tokenizer = build_tiny_tokenizer()
        self.reply = reply

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        from turnkit.agents.hf import chat_prompt_ids

        out = []
        for ctx in contexts:
            text = self.reply(ctx)
            ids = (*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.tokenizer.eos_token_id)
            prompt = ctx.prompt_token_ids or tuple(chat_prompt_ids(self.tokenizer, ctx.messages))
            out.append(AgentTurn(text, ids, (-1.0,) * len(ids), prompt, "stop"))
        return out


def completion_length(traj) -> int:
    first, last = traj.steps[0].action, traj.steps[-1].action
    return len(last.prompt_token_ids) + len(last.token_ids) - len(first.prompt_token_ids)


def test_max_tokens_cuts_the_turn_that_crosses_it() -> None:
    from turnkit.rollout.chat import ChatDelta

    agent = Tokens()
    [traj] = collect_batch(envs(1), agent, [0], chat=ChatDelta(agent.tokenizer), max_tokens=3)
    [step] = traj.steps  # the next context could not fit another sampled id
    assert step.action.text == "hel" and step.action.finish_reason == "length" and len(step.action.token_ids) == 3
    assert traj.final_observation == "heard hel" and step.truncated and not step.terminated  # the env got the cut text


def test_max_tokens_bounds_every_episode_of_a_batch() -> None:
    from turnkit.rollout.chat import ChatDelta

    agent = Tokens()
    chat = ChatDelta(agent.tokenizer)
    free = collect_batch(envs(2), agent, [0, 1], chat=chat)
    budget = completion_length(free[0]) - 10  # the full five-turn episode does not fit
    for traj in collect_batch(envs(2), agent, [0, 1], chat=chat, max_tokens=budget):
        assert 1 < len(traj.steps) < len(free[0].steps)
        assert completion_length(traj) <= budget and traj.steps[-1].truncated
        assert [s.action.token_ids for s in traj.steps[:-1]] == [s.action.token_ids for s in free[0].steps[:-2]]


def test_max_tokens_needs_a_chat_template() -> None:
    from turnkit.errors import ConfigError

    with pytest.raises(ConfigError, match="max_tokens needs chat="):
        collect_batch(envs(1), Tokens(), [0], max_tokens=10)


def test_an_empty_token_turn_within_a_budget_ends_the_episode() -> None:
    from turnkit.rollout.chat import ChatDelta

    class Full(Tokens):  # the model's context window is full after the first turn
        def act(self, contexts):
            turns = super().act(contexts)
            return [t if c.turn == 0 else AgentTurn("", (), (), t.prompt_token_ids, "prompt_too_long")
                    for c, t in zip(contexts, turns, strict=True)]  # fmt: skip

    agent = Full()
    [traj] = collect_batch(envs(1), agent, [0], chat=ChatDelta(agent.tokenizer), max_tokens=500)
    assert len(traj.steps) == 1 and traj.steps[0].truncated and traj.error is None


def test_a_conversation_that_outgrows_the_context_window_ends_truncated_without_a_budget() -> None:
    from turnkit.agents.hf import HFPolicy
    from turnkit.models.tiny import TinyModelConfig, build_tiny_model
    from turnkit.rollout.batch import build_turn_batch
    from turnkit.rollout.chat import ChatDelta

    tok = Tokens().tokenizer
    cfg = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_position_embeddings=96)
    policy = HFPolicy(build_tiny_model(tok, cfg, seed=0), tok, max_new_tokens=8)
    trajs = collect_batch(envs(3), policy, [0, 1, 2], chat=ChatDelta(tok))
    assert all(t.error is None for t in trajs)
    cut = [t for t in trajs if t.steps[-1].truncated and not t.steps[-1].terminated]
    assert cut, "96 positions should not hold five turns of this env"
    assert all(s.action.token_ids for t in trajs for s in t.steps)  # no empty turn reaches the env or a learner
    build_turn_batch(trajs, pad_id=0)  # token-in/token-out rows build (an empty turn raises DataError)


def test_stop_ends_an_episode_truncated() -> None:
    seen = []

    def stop(traj) -> bool:
        seen.append(len(traj.steps))
        return len(traj.steps) == 2

    [traj] = collect_batch(envs(1), Recorder(), [0], stop=stop)
    assert seen == [1, 2] and len(traj.steps) == 2 and traj.steps[-1].truncated


def test_starts_continue_a_restored_episode() -> None:
    from turnkit.envs.core import snapshot_env
    from turnkit.rollout.collect import Start
    from turnkit.types import Message

    env = gymnasium.make(ENV_ID)
    first, _ = env.reset(seed=3)
    reply, *_ = env.step("a")
    before = (Message("user", first), Message("assistant", "a"), Message("user", reply))
    forced = (*before[:-1], Message("user", f"{reply} Now say stop."))
    agent = Recorder(lambda ctx: "stop" if ctx.turn == 2 else "b", privileged=True)
    starts = [Start(snapshot_env(env), before, prompt=forced), None]
    branch, fresh = collect_batch(envs(2), agent, [3, 3], starts=starts)
    assert [c.turn for c in agent.calls[0]] == [1, 0] and [c.turn for c in agent.calls[1]] == [2, 1]
    assert agent.calls[0][0].messages == forced and agent.calls[1][0].messages[:3] == before  # forced once
    assert branch.initial_observation == reply and [s.action.text for s in branch.steps] == ["b", "stop"]
    assert branch.success and branch.task == fresh.task == agent.calls[0][0].task
    assert fresh.initial_observation == first and fresh.steps[0].observation == first


def test_a_start_that_cannot_be_restored_is_an_env_error() -> None:
    from turnkit.rollout.collect import Start

    [traj] = collect_batch(envs(1), Recorder(), [0], starts=[Start(None, ())])  # type: ignore[arg-type]
    assert traj.error.cause is ErrorCause.ENV and traj.error.message.startswith("restore:") and not traj.steps
