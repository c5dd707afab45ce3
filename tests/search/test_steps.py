"""Step-level search: MCTS over reasoning steps inside a turn (``MCTSConfig.step_delimiter``).

Run: python -m pytest tests/search/test_steps.py -q
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import gymnasium
import numpy as np
import pytest
import torch

from turnkit.agents.base import Context
from turnkit.agents.sampling import context_seeds
from turnkit.agents.scripted import ScriptedAgent
from turnkit.envs.core import TextEnv, Transition
from turnkit.errors import AgentError, ConfigError
from turnkit.learners.dpo import split_at_divergence
from turnkit.search.beam import BeamConfig, beam_search
from turnkit.search.mcts import MCTS, MCTSConfig
from turnkit.search.pairs import PairConfig, sibling_pair, tree_pairs
from turnkit.types import AgentTurn, Message, Task


class LineSum(TextEnv):
    """Add two digits; the reply may reason over lines but must end with ``ANSWER: n``. One turn.

    Every action the env receives is appended to the class-level ``received`` list (outside the env's
    snapshotted state), so tests can see exactly what reached ``env.step``.
    """

    final_answer_markers = ("ANSWER:",)
    received: ClassVar[list[str]] = []

    def generate_task(self, rng):
        a, b = (int(x) for x in rng.integers(1, 5, size=2))
        return Task(f"linesum-{a}-{b}", f"Add {a} and {b}.", {"answer": str(a + b)}, family="linesum")

    def begin(self, task):
        return task.prompt

    def respond(self, action):
        LineSum.received.append(action)
        ok = action.strip().endswith(f"ANSWER: {self.privileged()['answer']}")
        return Transition("Correct." if ok else "Wrong.", float(ok), True, {"success": ok})


gymnasium.register(id="test_search/LineSum-v0", entry_point=LineSum, max_episode_steps=3)


class StepAgent:
    """A scripted policy that writes one line per call: ``lines[k]`` lists the choices for the k-th line.

    It continues ``Context.prefix_text`` (the line index is the number of lines in it) and stops at the
    delimiter like a real model: ``finish_reason="stop_string"``. Each line is one "token" (id ``100 + k*10
    + choice``) with its exact log-prob; ``"{answer}"`` is replaced by the task's answer (privileged agent).
    Records every context it saw.
    """

    supports_prefix = True
    uses_privileged = True

    def __init__(self, lines: Sequence[Sequence[str]], seed: int = 0) -> None:
        self.lines = [list(choices) for choices in lines]
        self.seed = seed
        self.seen: list[Context] = []
        self._rng = np.random.default_rng(seed)

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        self.seen.extend(contexts)
        # the turn so far is part of what the sample depends on (as in HFPolicy)
        views = [
            Context((*c.messages, Message("assistant", c.prefix_text)), c.env_id, c.turn, c.episode_seed)
            for c in contexts
        ]
        out = []
        for ctx, s in zip(contexts, context_seeds(views, seed=self.seed, rng=self._rng), strict=True):
            k = min(ctx.prefix_text.count("\n"), len(self.lines) - 1)
            choices = self.lines[k]
            i = int(np.random.default_rng(s).integers(len(choices)))
            text = choices[i].replace("{answer}", str(ctx.task.privileged["answer"]) if ctx.task else "")
            stopped = bool(ctx.stop) and text.endswith(ctx.stop)
            out.append(
                AgentTurn(
                    text,
                    token_ids=(100 + 10 * k + i,),
                    logprobs=(math.log(1 / len(choices)),),
                    prompt_token_ids=(1, *ctx.prefix_token_ids),
                    finish_reason="stop_string" if stopped else "stop",
                )
            )
        return out


LINES = [
    ["I add.\n", "Hmm.\n"],
    ["ANSWER: {answer}\n", "ANSWER: 0\n", "Still thinking.\n"],
    ["ANSWER: {answer}", "ANSWER: 1"],
]
STEPS = MCTSConfig(
    iterations=8, root_multiplier=1, n_actions=2, breadth_limit=3, parallel=2, depth_limit=3, step_delimiter="\n"
)


def search(agent, config=STEPS, seed=0):
    LineSum.received.clear()
    return MCTS(config).search(gymnasium.make("test_search/LineSum-v0"), agent, seed=seed)


def test_mcts_builds_intra_turn_nodes_and_commits_a_whole_turn():
    result = search(StepAgent(LINES))
    tree = result.tree
    partial = [n for n in tree.graph.nodes if n and tree.is_partial(n)]
    assert partial
    for n in partial:  # mid-turn: same env state as the turn's start, no reward, not terminal
        assert not tree.is_terminal(n) and tree.node(n)["env_reward"] == 0.0 and tree.turn(n) == 0
        assert tree.snapshots[n] is tree.snapshots[tree.turn_start(n)]
    path = tree.committed_path()
    assert len(path) >= 3 and tree.is_terminal(path[-1])
    assert all(tree.is_partial(n) for n in path[1:-1])
    [step] = result.trajectory.steps  # one turn, made of the committed steps
    assert step.action.text == "".join(tree.step_action(n).text for n in path[1:])
    assert step.action.token_ids == tuple(t for n in path[1:] for t in tree.step_action(n).token_ids)
    assert step.action == tree.action(path[-1])
    assert result.success and tree.graph.graph["committed_success"]


def test_only_whole_turns_reach_the_env():
    result = search(StepAgent(LINES))
    tree = result.tree
    finished = [n for n in sorted(tree.graph.nodes) if n and not tree.is_partial(n)]
    assert LineSum.received == [tree.action(n).text for n in finished]
    assert result.stats.env_steps == len(finished) < len(tree) - 1
    assert all("ANSWER:" in text for text in LineSum.received)
    for n in finished:  # the env's marker ends a turn: no step after an ANSWER line
        assert tree.action(n).text.count("ANSWER:") == 1


def test_the_agent_is_asked_for_one_step_after_the_exact_prefix():
    agent = StepAgent(LINES)
    search(agent)
    assert all(c.stop == ("\n",) and c.messages[-1].role == "user" for c in agent.seen)
    continued = [c for c in agent.seen if c.prefix_text]
    assert continued
    for c in continued:  # one token per line in this agent
        assert len(c.prefix_token_ids) == c.prefix_text.count("\n") >= 1
        assert c.prefix_token_ids[0] in (100, 101)


def test_max_turn_steps_ends_a_turn_that_never_stops():
    config = MCTSConfig(**{**STEPS.to_dict(), "max_turn_steps": 3, "final_markers": ()})
    result = search(StepAgent([["la\n"]]), config)
    assert set(LineSum.received) == {"la\nla\nla\n"} and not result.success


def test_explicit_final_markers_override_the_env():
    config = MCTSConfig(**{**STEPS.to_dict(), "final_markers": ("Hmm.",)})
    search(StepAgent(LINES), config)
    assert "Hmm.\n" in LineSum.received and "I add.\nANSWER: 7\n" not in LineSum.received


def test_step_siblings_give_step_pairs_through_the_pair_extraction():
    tree = search(StepAgent(LINES)).tree
    forks = [n for n in tree.graph.nodes if len(tree.children(n)) >= 2]
    assert any(tree.is_partial(n) for n in forks)
    for node in forks:
        a, b = tree.children(node)[:2]
        prefix = tree.action(node).token_ids if node and tree.is_partial(node) else ()
        # the policy saw the same prompt + prefix ids for both steps, and each step is one token here
        assert tree.step_action(a).prompt_token_ids == tree.step_action(b).prompt_token_ids == (1, *prefix)
        pair = sibling_pair(tree, a, b)
        start = tree.turn_start(a)
        assert pair.prompt == tree.messages(start) and pair.prompt[-1].role == "user"
        assert pair.prompt_token_ids == (1,) and pair.step == tree.depth(node)
        assert pair.chosen_token_ids[:-1] == pair.rejected_token_ids[:-1] == prefix  # shared prefix, then the step
        assert pair.chosen == tree.action(node).text + tree.step_action(a).text if prefix else tree.step_action(a).text
        example = split_at_divergence(pair.prompt_token_ids, pair.chosen_token_ids, pair.rejected_token_ids, 1.0)
        assert example.chosen_ids == tree.step_action(a).token_ids  # the DPO loss sees only the steps
        assert example.rejected_ids == tree.step_action(b).token_ids
    pairs = tree_pairs(tree, PairConfig(scope="all", require_success=False))
    assert any(p.step >= 1 and len(p.chosen_token_ids) >= 2 for p in pairs)  # pairs inside a turn


def test_step_trees_save_and_load(tmp_path):
    from turnkit.search.tree import SearchTree

    tree = search(StepAgent(LINES)).tree
    back = SearchTree.load(tree.save(tmp_path / "t.json"))
    last = tree.committed_path()[-1]
    assert back.action(last) == tree.action(last)
    assert back.trajectory(last).steps[0].action.text == tree.trajectory(last).steps[0].action.text


def test_partial_trajectories_show_the_turn_so_far_to_critics():
    seen = []

    def critic(traj):
        seen.append(traj)
        return 0.0

    LineSum.received.clear()
    MCTS(STEPS, critic=critic).search(gymnasium.make("test_search/LineSum-v0"), StepAgent(LINES), seed=0)
    partial = [t for t in seen if t.steps and t.steps[-1].info.get("partial")]
    assert partial and all(t.steps[-1].action.text.endswith("\n") for t in partial)
    assert all(not t.final_observation for t in partial)


def test_an_agent_that_cannot_continue_a_turn_is_refused():
    with pytest.raises(AgentError, match="supports_prefix"):
        search(ScriptedAgent(["ANSWER: 1"]))


@pytest.mark.parametrize(
    ("field", "value"), [("step_delimiter", ""), ("max_turn_steps", 0), ("final_markers", "ANSWER:")]
)
def test_config_rejects_bad_step_options(field, value):
    with pytest.raises(ConfigError, match=f"MCTSConfig.{field}"):
        MCTSConfig(**{field: value})


def test_without_a_delimiter_the_search_is_turn_level():
    agent = StepAgent([["I add.\nANSWER: {answer}", "ANSWER: 0"]])
    result = search(agent, MCTSConfig(**{**STEPS.to_dict(), "step_delimiter": None}))
    tree = result.tree
    assert all(not tree.is_partial(n) and tree.turn(n) == tree.depth(n) for n in tree.graph.nodes)
    assert all(c.stop == () and c.prefix_text == "" for c in agent.seen)
    assert result.stats.env_steps == len(tree) - 1


def test_beam_search_over_steps():
    LineSum.received.clear()
    config = BeamConfig(width=2, expansions=2, step_delimiter="\n")
    result = beam_search(gymnasium.make("test_search/LineSum-v0"), StepAgent(LINES), seed=0, config=config)
    assert result.success and any(result.tree.is_partial(n) for n in result.tree.graph.nodes)
    assert all("ANSWER:" in text for text in LineSum.received)


def test_a_real_policy_searches_steps_token_in_token_out(tiny_hf):
    """A tiny HF policy: every played turn is the exact concatenation of its step ids and log-probs."""
    from turnkit.agents.hf import chat_prompt_ids

    policy = tiny_hf(seed=0, max_new_tokens=12)
    tok = policy.tokenizer
    env = gymnasium.make("test_search/LineSum-v0")
    env.reset(seed=0)
    prompt = chat_prompt_ids(tok, [Message("user", env.unwrapped.task.prompt)])
    target = tok("I add.\nANSWER: 5", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    opt = torch.optim.Adam(policy.model.parameters(), lr=1e-2)
    policy.model.train()
    for _ in range(60):  # a push towards two-line answers; sampling still varies
        loss = policy.model(
            input_ids=torch.tensor([prompt + target]), labels=torch.tensor([[-100] * len(prompt) + target])
        ).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    policy.model.eval()
    LineSum.received.clear()
    config = MCTSConfig(**{**STEPS.to_dict(), "iterations": 4, "final_markers": ()})
    tree = MCTS(config).search(env, policy, seed=0).tree
    finished = [n for n in sorted(tree.graph.nodes) if n and not tree.is_partial(n)]
    assert any(tree.is_partial(tree.parent(n)) for n in finished)  # some turn was played in >= 2 steps
    for n in finished:
        turn = tree.action(n)
        assert tuple(turn.prompt_token_ids) == tuple(prompt)
        assert turn.text == policy._decode(list(turn.token_ids))
        recomputed = policy.sequence_logprobs([turn.prompt_token_ids], [turn.token_ids])[0]
        assert torch.allclose(recomputed, torch.tensor(turn.logprobs), atol=1e-4)
    assert LineSum.received == [tree.action(n).text for n in finished]


def test_pictures_mark_mid_turn_nodes(tmp_path):
    from turnkit.search.render import render_html, render_png

    tree = search(StepAgent(LINES)).tree
    page = render_html(tree, tmp_path / "t.html").read_text()
    partial = sum(1 for n in tree.graph.nodes if n and tree.is_partial(n))
    assert page.count('stroke-dasharray="3,2"') == partial
    assert "mid-turn" in page and "I add." in page
    assert render_png(tree, tmp_path / "t.png").stat().st_size > 0
