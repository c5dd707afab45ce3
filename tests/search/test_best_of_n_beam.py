import gymnasium
import pytest

import turnkit  # noqa: F401
from turnkit.errors import ConfigError
from turnkit.search.beam import BeamConfig, beam_search
from turnkit.search.best_of_n import best_of_n
from turnkit.search.values import return_value


def math_env():
    return gymnasium.make("turnkit/MathEpisodes-v0", difficulty=1, kinds=("arithmetic",))


def test_best_of_n_ranks_successes_first(choice_agent):
    agent = choice_agent(["ANSWER: {answer}", "ANSWER: 0.5"], [0.3, 0.7])
    result = best_of_n(math_env(), agent, seed=0, n=8, max_turns=1)
    assert len(result.trajectories) == 8 and result.scores == sorted(result.scores, reverse=True)
    assert result.best.success and result.scores[0] == 1.0 and result.scores[-1] == -1.0


def test_best_of_n_counts_every_sampled_turn(choice_agent):
    agent = choice_agent(["ANSWER: 0.5", "ANSWER: 0.25"], [0.5, 0.5])  # always wrong: 3 turns each
    result = best_of_n(math_env(), agent, seed=1, n=4)
    assert result.stats.policy_contexts == 12 == sum(agent.calls)
    assert agent.calls == [4, 4, 4]  # one batched call per round


def test_best_of_n_pair_is_best_against_worst(choice_agent):
    agent = choice_agent(["ANSWER: {answer}", "ANSWER: 0.5"], [0.5, 0.5])
    pair = best_of_n(math_env(), agent, seed=2, n=6, max_turns=1).pair()
    assert pair is not None and pair.q_chosen == 1.0 and pair.q_rejected == -1.0
    assert pair.chosen != pair.rejected and pair.source == "best_of_n"


def test_best_of_n_uses_the_given_value_function(choice_agent):
    agent = choice_agent(["ANSWER: 0.5", "no answer here"], [0.5, 0.5])
    result = best_of_n(math_env(), agent, seed=0, n=4, max_turns=1, value_fn=lambda t: len(t.steps[0].action.text))
    assert result.scores[0] == len("no answer here")


def test_best_of_n_needs_n():
    with pytest.raises(ConfigError, match="n >= 1"):
        best_of_n(math_env(), None, seed=0, n=0)


def test_beam_keeps_width_and_finds_the_answer(choice_agent):
    agent = choice_agent(["ANSWER: {answer}", "ANSWER: 0.5", "ANSWER: 0.25"], [0.2, 0.4, 0.4])
    result = beam_search(math_env(), agent, seed=3, config=BeamConfig(width=2, expansions=3))
    assert result.success
    for depth in range(1, 4):
        alive = [n for n in result.tree.graph.nodes if result.tree.depth(n) == depth]
        parents = {result.tree.parent(n) for n in alive}
        assert len(parents) <= 2  # only `width` beams were expanded at each depth


def test_beam_scores_with_a_dense_value(choice_agent):
    env = gymnasium.make("turnkit/PhysicsPrediction-v0", kind="uniform")
    agent = choice_agent(["frame 3 A: x=1 y=1", "nothing"], [0.5, 0.5])
    result = beam_search(
        env, agent, seed=0, config=BeamConfig(width=1, expansions=2, max_depth=2), value_fn=return_value
    )
    assert len(result.trajectory.steps) <= 2 and result.tree.committed_path()[-1] != 0


def test_beam_config_validation():
    with pytest.raises(ConfigError, match="expansions"):
        BeamConfig(expansions=0)
