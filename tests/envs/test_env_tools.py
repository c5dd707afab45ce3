"""Tools composed into a TextEnv: tool turns, submit, invalid calls, snapshots, and tool messages downstream."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium
import pytest
from transformers import PreTrainedTokenizerFast

import turnkit
from turnkit.agents.base import Context
from turnkit.agents.hf import chat_prompt_ids
from turnkit.agents.oracle import OracleAgent
from turnkit.envs.core import TextEnv, Transition, restore_env, snapshot_env
from turnkit.errors import ConfigError
from turnkit.models.bpe import build_bpe_tokenizer
from turnkit.rollout.batch import build_episode_batch, find_prefix_mismatch
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect_batch
from turnkit.tools import Toolbox, ToolResult, ToolSpec
from turnkit.types import AgentTurn, Task

MATH = "turnkit/MathEpisodes-v0"


class Counter:
    """A stateful tool that counts its real runs, to see what a restore executes."""

    stateful = True
    spec = ToolSpec("count", "Count.", {"type": "object", "properties": {"by": {"type": "string"}}}, primary="by")

    def __init__(self) -> None:
        self.total = 0
        self.runs = 0

    def call(self, arguments: Mapping[str, Any], *, timeout: float) -> ToolResult:
        self.runs += 1
        self.total += len(arguments.get("by", ""))
        return ToolResult(str(self.total))

    def close(self) -> None:
        self.total = 0


class Echo(TextEnv):
    """No get_state: snapshots replay the action history."""

    def generate_task(self, rng):
        return Task(task_id="echo", prompt="Say the word.", privileged={"word": "cat"})

    def begin(self, task):
        return task.prompt

    def respond(self, action):
        ok = action.strip() == "cat"
        return Transition("Yes." if ok else "No.", reward=float(ok), terminated=ok, info={"success": ok})


@pytest.fixture
def math_env():
    env = gymnasium.make(MATH, difficulty=1, kinds=("arithmetic",), tools=["python", "submit"])
    yield env
    env.close()


def test_a_tool_turn_spends_no_budget_or_attempt(math_env) -> None:
    obs, info = math_env.reset(seed=0)
    assert obs.startswith("What is 6 plus 5?") and "- python(code):" in obs
    obs, reward, terminated, truncated, info = math_env.step("Let me compute. <python>6 + 5</python>")
    assert (obs, reward, terminated, truncated) == ("11\n", 0.0, False, False)
    assert info["tool"] == {"name": "python", "status": "ok", "exit_code": 0, "truncated": False}
    assert (info["budget_used"], info["attempts_left"], info["turn"]) == (0, 3, 1)
    obs, reward, terminated, _, info = math_env.step(
        '<tool_call>{"name": "submit", "arguments": {"answer": "11"}}</tool_call>'
    )
    assert (obs, reward, terminated, info["success"]) == ("Correct.", 1.0, True, True)
    assert info["tool"]["name"] == "submit"


def test_a_wrong_submission_spends_an_attempt(math_env) -> None:
    math_env.reset(seed=0)
    obs, reward, terminated, _, info = math_env.step("<submit>12</submit>")
    assert (obs, reward, terminated, info["attempts_left"]) == ("Incorrect. 2 attempts left.", 0.0, False, 2)


def test_bad_calls_use_the_invalid_allowance(math_env) -> None:
    math_env.reset(seed=0)
    bad = ['<tool_call>{"name": "nope", "arguments": {}}</tool_call>', "<tool_call>{</tool_call>", "<python>1"]
    for i, text in enumerate(bad):
        obs, _, terminated, _, info = math_env.step(text)
        assert info["invalid_action"] == "bad_tool_call" and not terminated
        assert obs.endswith(f"{2 - i} more invalid message(s) end the episode.")
    assert "tool" in math_env.step('{"name": "python", "arguments": {"code": 1}}')[4]
    assert math_env.unwrapped._done  # the fourth invalid action ended it


def test_without_announce_the_first_observation_is_unchanged() -> None:
    plain = gymnasium.make(MATH).reset(seed=0)[0]
    quiet = gymnasium.make(MATH, tools={"tools": ["python"], "announce": False})
    assert quiet.reset(seed=0)[0] == plain
    assert quiet.unwrapped.tool_schemas[0]["function"]["name"] == "python"
    quiet.close()


def test_a_toolbox_belongs_to_one_env() -> None:
    box = Toolbox(["python"])
    Echo(tools=box)
    with pytest.raises(ConfigError, match="belongs to one env"):
        Echo(tools=box)


@pytest.mark.parametrize("env_class", ["math", "echo"])
def test_snapshots_replay_the_sessions(env_class: str) -> None:
    """Math keeps O(state) snapshots, Echo replays actions; both restore the python session's variables."""
    make = (lambda: gymnasium.make(MATH, tools=["python"])) if env_class == "math" else (lambda: Echo(tools=["python"]))
    env, other = make(), make()
    try:
        env.reset(seed=1)
        env.step("<python>x = 5</python>")
        snap = snapshot_env(env)
        env.step("<python>x = 99</python>")
        for target in (env, env, other):  # twice in place, then into a fresh instance
            restore_env(target, snap)
            assert target.step("<python>x</python>")[0] == "5\n"
    finally:
        env.close()
        other.close()


def test_a_replayed_history_runs_no_tool_until_the_next_call() -> None:
    counter = Counter()
    env = Echo(tools=[counter])
    env.reset(seed=0)
    env.step("<count>ab</count>")
    env.step("<count>c</count>")
    snap = env.snapshot()
    env.step("<count>dddd</count>")
    runs = counter.runs
    env.restore(snap)
    assert counter.runs == runs  # the Echo restore replayed three actions without running the tool
    assert env.step("<count></count>")[0] == "3"  # now [ab, c] is replayed into a fresh session, then ""
    assert counter.runs == runs + 3


def test_trajectories_record_tool_messages_and_the_oracle_uses_the_tools() -> None:
    env = gymnasium.make(MATH, difficulty=3, tools=["python", "submit"])
    traj = turnkit.collect(env, OracleAgent(), seed=11)
    env.close()
    roles = [m.role for m in traj.messages()]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"] and traj.success
    assert traj.messages()[4].content == f"{traj.task.privileged['answer']}\n"


class BpeAgent:
    """Replies with scripted texts encoded by the BPE tokenizer itself, conditioning on stored ids."""

    def __init__(self, tok: PreTrainedTokenizerFast, texts: Sequence[str]) -> None:
        self.tok, self.texts = tok, texts

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        out = []
        for ctx in contexts:
            text = self.texts[min(ctx.turn, len(self.texts) - 1)]
            ids = (*self.tok(text, add_special_tokens=False)["input_ids"], self.tok.eos_token_id)
            prompt = ctx.prompt_token_ids or tuple(chat_prompt_ids(self.tok, ctx.messages))
            out.append(AgentTurn(text, ids, (-1.0,) * len(ids), prompt, "stop"))
        return out


def test_tool_replies_are_token_exact_tool_messages() -> None:
    tok = build_bpe_tokenizer()
    envs = [gymnasium.make(MATH, tools=["python"]) for _ in range(2)]
    agent = BpeAgent(tok, ["<python>6 + 5</python>", "ANSWER: 0"])
    trajs = collect_batch(envs, agent, [0, 1], max_turns=2, chat=ChatDelta(tok))
    for e in envs:
        e.close()
    for traj in trajs:
        assert find_prefix_mismatch(traj) is None
        second = traj.steps[1].action.prompt_token_ids
        assert second == tuple(chat_prompt_ids(tok, traj.messages()[:3]))  # the template's own tool message
        assert "<|im_start|>tool\n" in tok.decode(second)
    batch = build_episode_batch(trajs, pad_id=tok.pad_token_id)
    row = batch.input_ids[0][batch.loss_mask[0].bool()]
    assert tok.decode(row).count("<python>") == 1 and "11" not in tok.decode(row)  # tool output is masked out


def test_mcts_branches_over_tool_sessions() -> None:
    """MCTS runs over a tool-equipped env (snapshots with live sessions) and commits the solving path."""
    from turnkit.agents.scripted import ScriptedAgent
    from turnkit.search.mcts import MCTS, MCTSConfig

    def reply(ctx: Context) -> str:
        steps = ["<python>x = 6 + 5</python>", "<python>x</python>"]
        return steps[ctx.turn] if ctx.turn < 2 else f"ANSWER: {ctx.messages[-1].content.strip()}"

    env = gymnasium.make(MATH, kinds=("arithmetic",), tools=["python"])
    try:
        result = MCTS(MCTSConfig(iterations=3, root_multiplier=1)).search(env, ScriptedAgent(reply), seed=0)
    finally:
        env.close()
    assert result.trajectory.success and [s.action.text for s in result.trajectory.steps][-1] == "ANSWER: 11"
