import math

import gymnasium
import pytest

import turnkit  # noqa: F401
from turnkit.envs.core import restore_env
from turnkit.errors import ConfigError
from turnkit.search.expand import Expander, SearchStats, length_normalised_prior
from turnkit.search.mcts import MCTS, MCTSConfig
from turnkit.search.tree import SearchTree
from turnkit.types import AgentTurn

MATH = "turnkit/MathEpisodes-v0"


def math_env():
    return gymnasium.make(MATH, difficulty=1, kinds=("arithmetic",))


@pytest.mark.parametrize(
    ("field", "value"),
    [("iterations", 0), ("depth_limit", 0), ("parallel", 0), ("w_exp", -1.0), ("gamma", 0.0), ("gamma", 1.5)],
)
def test_config_rejects_bad_values(field, value):
    with pytest.raises(ConfigError, match=f"MCTSConfig.{field}"):
        MCTSConfig(**{field: value})


def test_config_rejects_more_root_actions_than_breadth():
    with pytest.raises(ConfigError, match="root_n_actions=5 exceeds breadth_limit=4"):
        MCTSConfig(root_n_actions=5)


def test_defaults_are_the_mcts_dpo_ones():
    cfg = MCTSConfig()
    assert (cfg.w_exp, cfg.prior_exponent, cfg.breadth_limit, cfg.gamma, cfg.iterations) == (1.0, 1.25, 4, 1.0, 64)


def test_prior_is_length_normalised_probability():
    turn = AgentTurn("abc", (1, 2, 3), (-0.5, -1.0, -1.5))
    assert length_normalised_prior(turn) == pytest.approx(math.exp(-3.0 / 3**1.25))


def hand_tree():
    """Root with children a (Q=0.5, N=3, prior 0.2) and b (Q=0.1, N=0, prior 0.9)."""
    tree = SearchTree(env_id="demo", seed=0, observation="q")
    a = tree.add_child(0, AgentTurn("a"), observation="o", prior=0.2)
    b = tree.add_child(0, AgentTurn("b"), observation="o", prior=0.9)
    tree.node(0)["visits"] = 4
    tree.node(a).update(q=0.5, visits=3)
    tree.node(b).update(q=0.1, visits=0)
    return tree, a, b


def test_puct_selection_matches_the_formula():
    tree, a, b = hand_tree()
    # a: 0.5 + 0.2 * sqrt(4) / 4 = 0.6 ; b: 0.1 + 0.9 * 2 / 1 = 1.9
    assert MCTS(MCTSConfig())._select(tree, 0, {}) == b
    # with w_exp = 0.1: a = 0.51, b = 0.28
    assert MCTS(MCTSConfig(w_exp=0.1))._select(tree, 0, {}) == a


def test_virtual_loss_steers_a_parallel_simulation_away():
    tree, a, b = hand_tree()
    # pending on b: Q_b -> (0.1 * 1 - 1 * 1) / 2 = -0.45; bonus 0.9 * sqrt(4 + 1) / 2 = 1.006 -> 0.556
    # a: 0.5 + 0.2 * sqrt(5) / 4 = 0.612
    assert MCTS(MCTSConfig())._select(tree, 0, {0: 1, b: 1}) == a


def test_fresh_child_q_is_parent_value_plus_edge_reward():
    tree = SearchTree(env_id="demo", seed=0, observation="q")
    tree.node(0).update(value=0.3, evaluation=0.2)
    c = tree.add_child(0, AgentTurn("x"), observation="end", terminal=True, info={"success": True})
    MCTS(MCTSConfig())._init_child(tree, 0, c, SearchStats())
    attrs = tree.node(c)
    assert attrs["evaluation"] == 1.0  # outcome +1
    assert attrs["reward"] == pytest.approx(1.0 - 0.2)  # e(c) - e(parent)
    assert attrs["q"] == pytest.approx(0.3 + 0.8) and attrs["visits"] == 0


def test_backup_is_the_visit_weighted_mean():
    tree = SearchTree(env_id="demo", seed=0, observation="q")
    a = tree.add_child(0, AgentTurn("a"), observation="o")
    b = tree.add_child(0, AgentTurn("b"), observation="o")
    a1 = tree.add_child(a, AgentTurn("a1"), observation="o")
    a2 = tree.add_child(a, AgentTurn("a2"), observation="o")
    tree.node(a).update(reward=0.1, visits=4)
    tree.node(a1).update(reward=1.0, visits=1)
    tree.node(a2).update(reward=0.0, q=0.0, visits=3)
    tree.node(b).update(q=-1.0, visits=0)
    MCTS(MCTSConfig(gamma=0.5))._backup(tree, [0, a, a1])
    assert tree.node(a1)["q"] == 1.0 and tree.node(a1)["visits"] == 2  # leaf: Q = r + γ·0
    assert tree.node(a)["value"] == pytest.approx((2 * 1.0 + 3 * 0.0) / 5)  # 0.4
    assert tree.node(a)["q"] == pytest.approx(0.1 + 0.5 * 0.4) and tree.node(a)["visits"] == 5
    # root: a weighs max(1, 5) = 5 with Q 0.3, unvisited b weighs 1 with its first-play Q of -1
    assert tree.node(0)["value"] == pytest.approx((5 * 0.3 + 1 * -1.0) / 6)


def test_search_finds_the_answer_a_weak_policy_rarely_gives_first(choice_agent):
    agent = choice_agent(["ANSWER: {answer}", "ANSWER: 0.5", "ANSWER: 0.25", "ANSWER: 0.75"], [0.2, 0.3, 0.3, 0.2])
    cfg = MCTSConfig(iterations=8, root_multiplier=2, n_actions=4, parallel=4, depth_limit=2)
    first_right = 0
    for seed in range(6):
        result = MCTS(cfg).search(math_env(), agent, seed=seed)
        first_right += result.trajectory.steps[0].info.get("success", False)
    assert first_right >= 5  # the policy alone: 20% per episode


def test_all_leaves_of_a_round_share_one_policy_call(choice_agent):
    agent = choice_agent(["ANSWER: 0.125", "ANSWER: 0.5", "ANSWER: 0.25"], [0.2, 0.4, 0.4])
    cfg = MCTSConfig(iterations=4, root_multiplier=1, n_actions=2, parallel=4, depth_limit=3)
    expander = MCTS(cfg).expander(math_env(), agent)
    tree = expander.new_tree(seed=1)
    MCTS(cfg).run(tree, expander, 0, 4)
    assert agent.calls[0] == 2  # one fresh root: one leaf, n_actions samples
    assert max(agent.calls) > 2  # later rounds batch several leaves together
    assert expander.stats.policy_calls == len(agent.calls) <= cfg.depth_limit


def test_breadth_and_depth_limits_hold(choice_agent):
    agent = choice_agent([f"ANSWER: 0.{i}" for i in range(1, 10)], [1] * 9)
    cfg = MCTSConfig(iterations=12, root_multiplier=1, n_actions=3, breadth_limit=3, depth_limit=2)
    search = MCTS(cfg)
    expander = search.expander(math_env(), agent)
    tree = expander.new_tree(seed=2)
    search.run(tree, expander, 0, 12)
    assert max(len(tree.children(n)) for n in tree.graph.nodes) <= 3
    assert max(tree.depth(n) for n in tree.graph.nodes) <= 2


def test_exact_duplicate_turns_are_dropped(choice_agent):
    agent = choice_agent(["ANSWER: 0.5"], [1.0])
    result = MCTS(MCTSConfig(iterations=4, root_multiplier=1, n_actions=4)).search(math_env(), agent, seed=0)
    assert all(len(result.tree.children(n)) <= 1 for n in result.tree.graph.nodes)


def test_every_node_matches_replaying_its_path(choice_agent):
    agent = choice_agent(["ANSWER: {answer}", "ANSWER: 0.5", "thinking"], [0.2, 0.4, 0.4])
    result = MCTS(MCTSConfig(iterations=6, root_multiplier=1, n_actions=3, depth_limit=3)).search(
        math_env(), agent, seed=4
    )
    fresh = math_env()
    for n in result.tree.graph.nodes:
        obs, _ = fresh.reset(seed=4)
        for child in result.tree.path(n)[1:]:
            obs = fresh.step(result.tree.edge(child)["text"])[0]
        assert obs == result.tree.node(n)["observation"]
    restore_env(fresh, result.tree.snapshots[0])  # snapshots stay restorable


def test_same_seed_same_tree(choice_agent):
    cfg = MCTSConfig(iterations=6, root_multiplier=1, n_actions=2)
    docs = []
    for _ in range(2):
        agent = choice_agent(["ANSWER: {answer}", "ANSWER: 0.5", "ANSWER: 7"], [0.3, 0.4, 0.3])
        docs.append(MCTS(cfg).search(math_env(), agent, seed=3).tree.to_dict()["graph"]["nodes"])
    assert docs[0] == docs[1]


def test_salt_changes_the_samples(choice_agent):
    cfg = MCTSConfig(iterations=6, root_multiplier=1, n_actions=2)
    texts = []
    for salt in (0, 1):
        agent = choice_agent([f"ANSWER: 0.{i}" for i in range(1, 10)], [1] * 9)
        tree = MCTS(cfg).search(math_env(), agent, seed=3, salt=salt).tree
        texts.append([tree.edge(c)["text"] for c in sorted(tree.graph.nodes)[1:]])
    assert texts[0] != texts[1]


def test_critic_value_enters_the_evaluation(choice_agent):
    agent = choice_agent(["thinking", "more thinking"], [0.5, 0.5])
    seen = []

    def critic(traj):
        seen.append(len(traj.steps))
        return 0.1 * len(traj.steps)

    cfg = MCTSConfig(iterations=2, root_multiplier=1, critic_weight=2.0, max_turns=2)
    tree = MCTS(cfg, critic=critic).search(math_env(), agent, seed=0).tree
    assert seen and tree.node(0)["evaluation"] == 0.0
    for n in sorted(tree.graph.nodes)[1:]:
        attrs = tree.node(n)
        outcome = (1.0 if attrs["success"] else -1.0) if attrs["terminal"] else 0.0
        assert attrs["evaluation"] == pytest.approx(outcome + 2.0 * 0.1 * tree.depth(n))


def test_commits_until_the_episode_ends(choice_agent):
    agent = choice_agent(["ANSWER: 0.5", "ANSWER: 0.25"], [0.5, 0.5])  # always wrong: 3 attempts
    result = MCTS(MCTSConfig(iterations=4, root_multiplier=1)).search(math_env(), agent, seed=0)
    path = result.tree.committed_path()
    assert len(path) == 4 and result.tree.is_terminal(path[-1]) and not result.success
    assert result.stats.wall_seconds >= result.stats.policy_seconds > 0


def test_policy_without_logprobs_gets_a_uniform_prior():
    class Plain:
        def act(self, contexts):
            return [AgentTurn(f"ANSWER: 0.{i}") for i, _ in enumerate(contexts)]

    expander = Expander(math_env(), Plain())
    tree = expander.new_tree(seed=0)
    kids = expander.expand(tree, [(0, 4)])[0]
    assert [tree.edge(c)["prior"] for c in kids] == [0.25] * 4


def test_lockstep_search_equals_separate_searches_with_fewer_calls(choice_agent):
    cfg = MCTSConfig(iterations=4, root_multiplier=1, n_actions=2, depth_limit=2)
    texts = ["ANSWER: {answer}", "ANSWER: 0.5", "ANSWER: 0.25"]
    alone_agent = choice_agent(texts, [0.2, 0.4, 0.4])
    alone = [MCTS(cfg).search(math_env(), alone_agent, seed=s).tree.to_dict()["graph"]["nodes"] for s in range(3)]
    batch_agent = choice_agent(texts, [0.2, 0.4, 0.4])
    results = MCTS(cfg).search_many([math_env() for _ in range(3)], batch_agent, seeds=[0, 1, 2])
    assert [r.tree.to_dict()["graph"]["nodes"] for r in results] == alone
    assert len(batch_agent.calls) < len(alone_agent.calls) and sum(batch_agent.calls) == sum(alone_agent.calls)
    assert results[0].stats is results[2].stats and results[0].stats.policy_contexts == sum(batch_agent.calls)


def test_lockstep_search_needs_one_env_per_task(choice_agent):
    env = math_env()
    with pytest.raises(ValueError, match="distinct env instances"):
        MCTS(MCTSConfig()).search_many([env, env], choice_agent(["x"], [1.0]), seeds=[0, 1])
