import json

import gymnasium
import networkx as nx
import pytest

import turnkit  # noqa: F401
from turnkit.errors import DataError
from turnkit.search.expand import Expander
from turnkit.search.tree import SearchTree
from turnkit.types import AgentTurn


def small_tree() -> SearchTree:
    tree = SearchTree(env_id="demo", seed=7, observation="q0", meta={"note": "x"})
    a = tree.add_child(0, AgentTurn("a", (5, 6), (-0.1, -0.2), (1, 2)), observation="o1", env_reward=0.5, prior=0.3)
    tree.add_child(a, AgentTurn("b"), observation="end", terminal=True, info={"success": True, "k": (1, 2)})
    tree.add_child(0, AgentTurn("c"), observation="cut", truncated=True)
    tree.node(a).update(q=0.25, visits=3)
    tree.commit(2)
    return tree


def test_messages_alternate_and_end_with_the_nodes_observation():
    tree = small_tree()
    msgs = tree.messages(2)
    assert [m.role for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    assert [m.content for m in msgs] == ["q0", "a", "o1", "b", "end"]


def test_trajectory_of_a_path_carries_exact_turns_rewards_and_success():
    traj = small_tree().trajectory(2)
    assert [s.observation for s in traj.steps] == ["q0", "o1"]
    assert traj.steps[0].action.token_ids == (5, 6) and traj.steps[0].action.prompt_token_ids == (1, 2)
    assert traj.total_reward == 0.5 and traj.success and traj.steps[-1].terminated


def test_truncated_node_is_terminal_and_failed():
    tree = small_tree()
    attrs = tree.node(3)
    assert attrs["terminal"] and attrs["truncated"] and attrs["success"] is False
    assert tree.trajectory(3).steps[-1].truncated


def test_committed_path_follows_commit():
    assert small_tree().committed_path() == [0, 1, 2]


def test_save_load_round_trip_keeps_every_attribute(tmp_path):
    tree = small_tree()
    back = SearchTree.load(tree.save(tmp_path / "t.json"))
    assert sorted(back.graph.nodes) == sorted(tree.graph.nodes)
    for n in tree.graph.nodes:
        assert back.node(n) == tree.node(n)
    assert back.action(1) == tree.action(1)
    assert back.committed_path() == [0, 1, 2]
    assert back.graph.graph["note"] == "x" and back.seed == 7


def test_saved_file_is_plain_node_link_json(tmp_path):
    doc = json.loads(small_tree().save(tmp_path / "t.json").read_text())
    assert doc["format"] == "turnkit.search_tree" and doc["version"] == 1
    graph = nx.node_link_graph(doc["graph"], edges="edges")
    assert graph.number_of_nodes() == 4 and graph.edges[0, 1]["text"] == "a"


def test_snapshots_and_task_are_not_written(tmp_path):
    env = gymnasium.make("turnkit/MathEpisodes-v0")
    tree = Expander(env, _Fixed("ANSWER: 1")).new_tree(seed=0)
    text = tree.save(tmp_path / "t.json").read_text()
    assert tree.snapshots and tree.task is not None
    assert tree.task.privileged["answer"] not in json.loads(text)["graph"]["graph"].values()
    assert "rng_state" not in text and "privileged" not in text


def test_loading_a_non_tree_names_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "other"}')
    with pytest.raises(DataError, match=r"bad\.json: not a turnkit search tree"):
        SearchTree.load(bad)


def test_loading_broken_json_names_file_and_line(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{\n"format": \n')
    with pytest.raises(DataError, match=r"broken\.json:\d+: invalid JSON"):
        SearchTree.load(bad)


class _Fixed:
    def __init__(self, text):
        self.text = text

    def act(self, contexts):
        return [AgentTurn(self.text) for _ in contexts]
