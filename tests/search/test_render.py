import gymnasium

import turnkit  # noqa: F401
from turnkit.search.mcts import MCTS, MCTSConfig
from turnkit.search.render import layout, render_html, render_png
from turnkit.search.tree import SearchTree
from turnkit.types import AgentTurn


def searched_tree(choice_agent):
    agent = choice_agent(["ANSWER: {answer}", "ANSWER: 0.5", "<b>&x</b>"], [0.3, 0.4, 0.3])
    env = gymnasium.make("turnkit/MathEpisodes-v0", difficulty=1)
    return MCTS(MCTSConfig(iterations=6, root_multiplier=1, n_actions=3)).search(env, agent, seed=0).tree


def test_layout_centres_parents_over_children():
    tree = SearchTree(env_id="d", seed=0, observation="q")
    a = tree.add_child(0, AgentTurn("a"), observation="o")
    for t in "xyz":
        tree.add_child(a, AgentTurn(t), observation="o")
    tree.add_child(0, AgentTurn("b"), observation="o")
    pos = layout(tree)
    assert pos[a] == (1.0, 1.0) and pos[0] == (2.0, 0.0)
    assert sorted(x for n, (x, y) in pos.items() if y == 2.0) == [0.0, 1.0, 2.0]


def test_png_is_written(tmp_path, choice_agent):
    path = render_png(searched_tree(choice_agent), tmp_path / "pics" / "t.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_html_is_self_contained_and_escaped(tmp_path, choice_agent):
    tree = searched_tree(choice_agent)
    text = render_html(tree, tmp_path / "t.html").read_text()
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert text.count("<title>") >= len(tree)  # one tooltip per node (plus the page title)
    if any(tree.edge(n)["text"] == "<b>&x</b>" for n in list(tree.graph.nodes)[1:]):
        assert "&lt;b&gt;&amp;x&lt;/b&gt;" in text and "<b>&x</b>" not in text
