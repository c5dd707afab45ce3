import json

import gymnasium
import pytest

import turnkit  # noqa: F401
from turnkit.errors import ConfigError, DataError
from turnkit.search.mcts import MCTS, MCTSConfig
from turnkit.search.pairs import (
    PairConfig,
    PreferencePair,
    has_value,
    pairs_to_dataset,
    read_pairs,
    trajectory_pair,
    tree_pairs,
    visit_confidence,
    write_pairs,
)
from turnkit.search.tree import SearchTree
from turnkit.types import AgentTurn, Message, Step, Trajectory


def three_way_tree(success: bool = True, seed: int = 0) -> SearchTree:
    """Root with children Q = 1.0 (N 6, committed), 0.2 (N 3), -1.0 (N 2)."""
    tree = SearchTree(env_id="demo", seed=seed, observation="q")
    kids = []
    for text, q, n in (("good", 1.0, 6), ("meh", 0.2, 3), ("bad", -1.0, 2)):
        c = tree.add_child(
            0,
            AgentTurn(text, (len(text),), prompt_token_ids=(1, 2)),
            observation="done",
            terminal=True,
            info={"success": success and text == "good"},
        )
        tree.node(c).update(q=q, visits=n)
        kids.append(c)
    tree.commit(kids[0])
    return tree


def test_confidence_formula():
    assert visit_confidence(6, 2) == pytest.approx(1 / (1 + 2 / 6))
    assert visit_confidence(0, 3) == pytest.approx(1 / 4)  # max(1, N_w)


def test_lowest_q_rule_picks_the_worst_sibling():
    [pair] = tree_pairs(three_way_tree())
    assert (pair.chosen, pair.rejected) == ("good", "bad")
    assert (pair.q_chosen, pair.q_rejected, pair.n_chosen, pair.n_rejected) == (1.0, -1.0, 6, 2)
    assert pair.confidence == pytest.approx(0.75) and pair.step == 0 and pair.source == "mcts"


def test_random_rule_picks_any_non_best_sibling_reproducibly():
    picks = {tree_pairs(three_way_tree(seed=s), PairConfig(rejected="random"))[0].rejected for s in range(20)}
    assert picks == {"meh", "bad"}
    again = [tree_pairs(three_way_tree(seed=3), PairConfig(rejected="random", seed=1))[0].rejected for _ in range(3)]
    assert len(set(again)) == 1


def test_failed_trees_give_no_pairs_unless_asked():
    tree = three_way_tree(success=False)
    assert tree_pairs(tree) == []
    assert len(tree_pairs(tree, PairConfig(require_success=False))) == 1


def test_min_q_gap_filters_close_pairs():
    tree = three_way_tree()
    assert tree_pairs(tree, PairConfig(min_q_gap=2.5)) == []
    [pair] = tree_pairs(tree, PairConfig(min_q_gap=1.0))  # only "bad" is 2.0 below
    assert pair.rejected == "bad"


def retry_tree() -> SearchTree:
    """A last-attempt state with a stall the search did not follow (Q 0), a wrong answer (-1), a right one (1)."""
    tree = SearchTree(env_id="demo", seed=0, observation="2+2? (1 attempt left)")
    stall = tree.add_child(0, AgentTurn(": 4"), observation="No answer yet.")
    wrong = tree.add_child(0, AgentTurn("ANSWER: 5"), observation="Wrong.", terminal=True, info={"success": False})
    tree.node(stall).update(q=0.0, visits=1)
    tree.node(wrong).update(q=-1.0, visits=2)
    return tree


def test_an_unfollowed_stall_beats_a_wrong_last_answer_unless_a_value_is_required():
    tree = retry_tree()
    [pair] = tree_pairs(tree, PairConfig(require_success=False))
    assert (pair.chosen, pair.rejected, pair.q_chosen) == (": 4", "ANSWER: 5", 0.0)  # the defect
    assert tree_pairs(tree, PairConfig(require_success=False, require_value=True)) == []
    right = tree.add_child(0, AgentTurn("ANSWER: 4"), observation="Correct.", terminal=True, info={"success": True})
    tree.node(right).update(q=1.0, visits=3)
    [pair] = tree_pairs(tree, PairConfig(require_success=False, require_value=True))
    assert (pair.chosen, pair.rejected) == ("ANSWER: 4", "ANSWER: 5")  # the stall is neither side


def test_a_stall_gets_a_value_once_the_search_reaches_an_end_below_it():
    tree = retry_tree()
    stall = tree.children(0)[0]
    assert not has_value(tree, stall)
    deeper = tree.add_child(stall, AgentTurn("hmm"), observation="No answer yet.")
    assert not has_value(tree, stall)
    tree.add_child(deeper, AgentTurn("ANSWER: 4"), observation="Correct.", terminal=True, info={"success": True})
    assert has_value(tree, stall) and has_value(tree, deeper)
    tree.node(tree.children(0)[1])["evaluation"] = 0.0  # a terminal node counts even when scored 0
    assert has_value(tree, tree.children(0)[1])


def test_require_value_on_a_real_search_with_retries(choice_agent):
    agent = choice_agent(["ANSWER: {answer}", "ANSWER: 0.5", "hmm"], [0.3, 0.4, 0.3])
    env = gymnasium.make("turnkit/MathEpisodes-v0", difficulty=1, max_attempts=2)
    config = MCTSConfig(iterations=6, root_multiplier=1, n_actions=3, depth_limit=2, gamma=0.25)
    unfollowed = 0
    for seed in range(6):
        tree = MCTS(config).search(env, agent, seed=seed).tree
        loose = tree_pairs(tree, PairConfig(scope="all", require_success=False, min_q_gap=0.6))
        strict = tree_pairs(tree, PairConfig(scope="all", require_success=False, min_q_gap=0.6, require_value=True))
        nodes = [c for c in tree.graph.nodes if c != tree.root and has_value(tree, c)]
        valued = {(tree.messages(tree.parent(c)), tree.action(c).text) for c in nodes}
        for pair in strict:
            assert (pair.prompt, pair.chosen) in valued and (pair.prompt, pair.rejected) in valued
        unfollowed += sum(p.chosen == "hmm" and p.q_chosen == 0.0 for p in loose)
        assert not any(p.chosen == "hmm" and p.q_chosen == 0.0 for p in strict)
    assert unfollowed > 0  # the loose rule really did prefer unfollowed stalls here


def test_pair_config_validation():
    with pytest.raises(ConfigError, match="min_q_gap"):
        PairConfig(min_q_gap=-1)


def test_pairs_from_a_real_search_share_prompt_and_differ(choice_agent):
    agent = choice_agent(["ANSWER: {answer}", "ANSWER: 0.5", "ANSWER: 0.25", "hmm"], [0.25, 0.25, 0.25, 0.25])
    env = gymnasium.make("turnkit/MathEpisodes-v0", difficulty=1)
    pairs = []
    for seed in range(4):
        tree = MCTS(MCTSConfig(iterations=8, root_multiplier=1, n_actions=3)).search(env, agent, seed=seed).tree
        found = tree_pairs(tree, PairConfig(scope="all", require_success=False))
        for pair in found:
            parent_prompts = {tree.messages(n) for n in tree.graph.nodes}
            assert pair.prompt in parent_prompts
            assert pair.chosen != pair.rejected and pair.q_chosen > pair.q_rejected
        pairs += found
    assert pairs


def test_identical_turns_are_not_a_pair():
    with pytest.raises(DataError, match="same turn"):
        PreferencePair((Message("user", "q"),), "a", "a")


def test_jsonl_round_trip(tmp_path):
    pairs = tree_pairs(three_way_tree())
    assert read_pairs(write_pairs(pairs, tmp_path / "p.jsonl")) == pairs


def test_records_are_trl_conversational():
    rec = tree_pairs(three_way_tree())[0].to_record()
    assert rec["prompt"] == [{"role": "user", "content": "q"}]
    assert rec["chosen"] == [{"role": "assistant", "content": "good"}]
    assert rec["rejected"] == [{"role": "assistant", "content": "bad"}]
    assert rec["prompt_token_ids"] == [1, 2] and rec["chosen_token_ids"] == [4]


def test_bad_row_names_file_and_line(tmp_path):
    path = tmp_path / "p.jsonl"
    good = json.dumps(tree_pairs(three_way_tree())[0].to_record())
    path.write_text(
        good + "\n" + json.dumps({"prompt": "q", "chosen": [{"role": "user", "content": "x"}], "rejected": "y"}) + "\n"
    )
    with pytest.raises(DataError, match=r"p\.jsonl:2: a completion must be one assistant message"):
        read_pairs(path)


def test_exported_file_loads_with_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    pairs = tree_pairs(three_way_tree()) + tree_pairs(three_way_tree(seed=5))
    path = write_pairs(pairs, tmp_path / "p.jsonl")
    ds = datasets.load_dataset("json", data_files=str(path), split="train")
    assert ds.num_rows == 2
    assert {
        "prompt",
        "chosen",
        "rejected",
        "q_chosen",
        "q_rejected",
        "n_chosen",
        "n_rejected",
        "step",
        "env_id",
        "seed",
    } <= set(ds.column_names)
    assert ds[0]["chosen"] == [{"role": "assistant", "content": "good"}]
    assert pairs_to_dataset(pairs).num_rows == 2


def ep(*actions, reward_last=0.0):
    steps = tuple(Step(f"obs{i}", AgentTurn(a, (i + 10,), prompt_token_ids=(9, i)), 0.0) for i, a in enumerate(actions))
    return Trajectory("demo", 1, steps, initial_observation="obs0", final_observation="end")


def test_trajectory_pair_compares_at_the_first_different_turn():
    pair = trajectory_pair(ep("x", "y", "z"), ep("x", "w"), score_better=1.0, score_worse=-1.0)
    assert pair.step == 1 and (pair.chosen, pair.rejected) == ("y", "w")
    assert [m.content for m in pair.prompt] == ["obs0", "x", "obs1"]
    assert pair.prompt_token_ids == (9, 1) and pair.source == "best_of_n"


def test_trajectory_pair_of_identical_episodes_is_none():
    assert trajectory_pair(ep("x"), ep("x")) is None


def test_trajectory_pair_refuses_different_tasks():
    other = Trajectory("demo", 2, ep("x").steps, initial_observation="other")
    with pytest.raises(DataError, match="same task"):
        trajectory_pair(ep("x"), other)
