"""The learned IRL rewards (AfD reward model, IQLearn's extracted reward) as search value functions.

Search takes any ``Trajectory -> float``; a critic plugs in as ``lambda t: critic.score(t).total``. These tests
check that it does for best-of-N, beam search and MCTS, with prefixes of every depth (the root has no turn).

Run: python -m pytest -q tests/search/test_learned_critics.py
"""

from __future__ import annotations

import gymnasium
import pytest

import turnkit  # noqa: F401
from turnkit.critics.afd import AfDCritic
from turnkit.critics.iqlearn import IQLearnReward
from turnkit.search.beam import BeamConfig, beam_search
from turnkit.search.best_of_n import best_of_n
from turnkit.search.mcts import MCTS, MCTSConfig
from turnkit.types import AgentTurn, Step, Trajectory

PREFERRED, OTHER = "ANSWER: 0.25", "ANSWER: 0.5"


class TextOnly:
    """The search tests' ChoiceAgent with its turns as text only (its ids are stand-ins, not the critic's
    tokenizer's), as an API agent or a demonstration records them: the critics score them through the chat
    template."""

    def __init__(self, agent):
        self.agent = agent

    def act(self, contexts):
        return [AgentTurn(turn.text) for turn in self.agent.act(contexts)]


def math_env():
    return gymnasium.make("turnkit/MathEpisodes-v0", difficulty=1, kinds=("arithmetic",))


@pytest.fixture(scope="module")
def afd_critic(tiny_hf):
    """A reward model fitted to prefer PREFERRED over OTHER as the reply to MathEpisodes tasks."""
    env = math_env()
    prompts = [env.reset(seed=s)[0] for s in range(8)]
    env.close()

    def episodes(text):
        return [Trajectory("m", 0, (Step(p, AgentTurn(text), 0.0, terminated=True),)) for p in prompts]

    critic = AfDCritic.from_policy(tiny_hf(seed=3))
    fit = critic.fit(episodes(PREFERRED), negatives=episodes(OTHER), steps=40, batch_size=8, lr=1e-2)
    assert fit["accuracy"] == 1.0
    return critic


def value(critic):
    return lambda t: critic.score(t).total


def test_the_reward_model_chooses_best_of_n(afd_critic, choice_agent):
    agent = TextOnly(choice_agent([OTHER, PREFERRED], [0.5, 0.5]))
    result = best_of_n(math_env(), agent, seed=0, n=6, max_turns=1, value_fn=value(afd_critic))
    assert {t.steps[0].action.text for t in result.trajectories} == {OTHER, PREFERRED}
    assert result.best.steps[0].action.text == PREFERRED


def test_the_reward_model_steers_beam_search(afd_critic, choice_agent):
    agent = TextOnly(choice_agent([OTHER, PREFERRED], [0.5, 0.5]))
    config = BeamConfig(width=1, expansions=4, max_depth=2)
    result = beam_search(math_env(), agent, seed=1, config=config, value_fn=value(afd_critic))
    assert [s.action.text for s in result.trajectory.steps] == [PREFERRED, PREFERRED]


def test_the_reward_model_enters_mcts_evaluations(afd_critic, choice_agent):
    agent = TextOnly(choice_agent([OTHER, PREFERRED], [0.5, 0.5]))
    cfg = MCTSConfig(iterations=3, root_multiplier=1, max_turns=1, outcome_weight=0.0)
    tree = MCTS(cfg, critic=value(afd_critic)).search(math_env(), agent, seed=2).tree
    evaluations = {tree.action(n).text: tree.node(n)["evaluation"] for n in list(tree.graph.nodes)[1:]}
    assert evaluations.keys() == {OTHER, PREFERRED} and evaluations[PREFERRED] > evaluations[OTHER]


def test_iqlearn_reward_scores_every_prefix_in_mcts(tiny_hf, choice_agent):
    critic = IQLearnReward(tiny_hf(seed=4))
    seen: list[int] = []

    def scored(t):
        seen.append(len(t.steps))
        return critic.score(t).total

    agent = TextOnly(choice_agent([OTHER, PREFERRED], [0.5, 0.5]))
    tree = (
        MCTS(MCTSConfig(iterations=2, root_multiplier=1, max_turns=2), critic=scored)
        .search(math_env(), agent, seed=0)
        .tree
    )
    assert tree.graph.number_of_nodes() > 1 and set(seen) == {0, 1, 2}  # the root, first and second turns
    assert critic.score(Trajectory("m", 0)).total == 0.0  # no turn yet: no reward
