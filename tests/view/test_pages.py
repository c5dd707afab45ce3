"""Each view of the page, rendered by turnkit's own Chromium from the loopback server, checked in the DOM."""

from __future__ import annotations

from tests.view.conftest import texts, visit
from turnkit.browser import Tab
from turnkit.view import ViewerServer


def count(tab: Tab, selector: str) -> int:
    return tab.evaluate(f"document.querySelectorAll({selector!r}).length")


def text(tab: Tab, selector: str) -> str:
    return tab.evaluate(f"(document.querySelector({selector!r}) || {{textContent: ''}}).textContent")


def test_runs_view_draws_curves_evals_and_config(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "runs?id=train")
    assert text(tab, "#run-title") == "Run train"
    sources = tab.evaluate("[...document.querySelectorAll('aside a[data-source]')].map(a => a.dataset.source)")
    assert sources == ["eval", "eval-privileged", "rollouts", "synth", "train", "train-b"]
    keys = tab.evaluate("[...document.querySelectorAll('#charts svg')].map(s => s.dataset.key)")
    assert keys[:4] == ["reward_mean", "success_rate", "eval_success", "eval_reward"]
    assert {"loss", "approx_kl", "policy_lag", "length/total"} <= set(keys)
    points = tab.evaluate("document.querySelector('svg[data-key=\"loss\"] polyline').getAttribute('points')")
    assert len(points.split()) == 12
    rows = texts(tab, "#evals tr")[1:]
    assert len(rows) == 2 and "[0.350, 0.550]" in rows[0] and "[0.500, 0.700]" in rows[1]
    assert "lr" in texts(tab, "#config td")
    assert count(tab, "img[src='/files/train/curves.png']") == 0  # this run drew no curves.png
    assert count(tab, "#error") == 0
    assert tab.evaluate("window.violations") == []  # nothing the page's own policy had to block


def test_two_runs_side_by_side(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "runs?id=train&vs=train-b")
    runs = tab.evaluate(
        "[...document.querySelectorAll('svg[data-key=\"reward_mean\"] polyline')].map(p => p.dataset.run)"
    )
    assert runs == ["train", "train-b"]
    assert texts(tab, "#config tr.diff td:first-child") == ["steps"]  # the one config key that differs
    assert tab.evaluate("document.querySelector('#compare').value") == "train-b"
    swatches = "[...document.querySelectorAll('#view .legend .sw')].map(s => getComputedStyle(s).backgroundColor)"
    assert tab.evaluate(swatches) == ["rgb(47, 111, 214)", "rgb(224, 123, 31)"]  # blue, and the second in orange
    assert tab.evaluate("window.violations") == []


def test_the_page_lives_under_its_own_policy(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "runs?id=train")
    tab.evaluate("document.querySelector('#view').setAttribute('style', 'color: rgb(255, 0, 0)')")
    assert tab.evaluate("getComputedStyle(document.querySelector('#view')).color") != "rgb(255, 0, 0)"
    assert tab.evaluate("window.violations") == ["style-src-attr blocked inline"]  # the test's, not the page's
    visit(tab, server, "runs?id=eval")  # a new document: the list starts again


def test_eval_folder_shows_its_summary_interval(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "runs?id=eval")
    [row] = texts(tab, "#evals tr")[1:]
    assert row.startswith("evalsummary") and "60" in row
    assert count(tab, "#view a[href='#episodes?id=eval']") == 1


def test_episode_list_pages_sorts_and_filters(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "episodes?id=eval")
    assert count(tab, "#episode-list tr[data-index]") == 50
    assert text(tab, "#count") == "1–50 of 60"
    tab.evaluate("document.querySelector('#next').click()")
    tab.evaluate(WAIT_NEXT, await_promise=True)
    assert text(tab, "#count") == "51–60 of 60"
    visit(tab, server, "episodes?id=eval&sort=return&order=desc")
    returns = tab.evaluate("[...document.querySelectorAll('#episode-list tr[data-index]')].map(r => +r.dataset.return)")
    assert returns == sorted(returns, reverse=True) and returns[0] == 1.0
    visit(tab, server, "episodes?id=eval&error=timeout")
    assert texts(tab, "#episode-list tr[data-index] td:nth-child(6)") == ["timeout"] * 9
    assert "filtered from 60" in text(tab, "#count")


WAIT_NEXT = (
    "new Promise(ok => { const n = window.renders; const t = setInterval(() => {"
    " if (window.renders > n || document.querySelector('#count').textContent.startsWith('51')) {"
    " clearInterval(t); ok(true); } }, 10); })"
)


def test_episode_transcript_turn_by_turn(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "episodes?id=eval-privileged&ep=2")
    assert count(tab, "#episode .turn[data-turn]") == 2
    assert text(tab, "#final .msg") == "userCorrect."  # the env's reply to the last action
    roles = texts(tab, "#episode .msg .role")
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    assert "print(2+2)" in text(tab, ".turn[data-turn='0'] .msg.assistant")
    assert "tool python (ok)" in text(tab, ".turn[data-turn='0'] .head")
    assert texts(tab, ".turn[data-turn='1'] .env-reward") == ["1"]
    assert count(tab, ".turn[data-turn='1'] .tok") == 2  # the token ids written with tokens=True
    assert text(tab, "#ep-return") == "1"


def test_critic_rewards_advantage_and_trained_tokens(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "episodes?id=rollouts&ep=0")
    first = ".turn[data-turn='0']"
    assert texts(tab, f"{first} .critic") == ["env 0", "length -0.270"]  # 27 characters
    assert text(tab, f"{first} .advantage") == "advantage 0.500"
    assert count(tab, f"{first} .tok.trained") == 2 and count(tab, f"{first} .tok.untrained") == 1
    assert text(tab, ".turn[data-turn='1'] .advantage") == "advantage 0.250"


def test_errored_episode_names_its_cause_and_untrained_tokens(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "episodes?id=eval-privileged&ep=3")
    assert text(tab, "#ep-error") == "error (timeout): episode exceeded its 30 s budget"
    assert count(tab, "#episode .tok.untrained") == 3 and count(tab, "#episode .tok.trained") == 0


def test_privileged_data_needs_the_toggle(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "episodes?id=eval-privileged&ep=1")
    assert count(tab, "#privileged-data") == 0 and count(tab, "#privileged-hidden") == 1
    assert "hidden_tests" not in tab.evaluate("document.body.textContent")
    tab.evaluate("document.querySelector('#privileged').click()")
    tab.evaluate(WAIT_PRIVILEGED, await_promise=True)
    shown = text(tab, "#privileged-data")
    assert '"answer": "2"' in shown and "hidden_tests" in shown
    assert tab.evaluate("location.hash").endswith("priv=1")


WAIT_PRIVILEGED = (
    "new Promise(ok => { const t = setInterval(() => {"
    " if (document.querySelector('#privileged-data')) { clearInterval(t); ok(true); } }, 10); })"
)


def test_search_tree_with_visits_q_and_pairs(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "search?id=synth")
    assert texts(tab, "aside a[data-tree]") == ["iter_000/seed_0", "iter_000/seed_1"]
    nodes = tab.evaluate(
        "[...document.querySelectorAll('#tree g.node')].map(g => [+g.dataset.node, +g.dataset.visits])"
    )
    assert nodes == [[0, 10], [1, 7], [2, 3], [3, 5], [4, 2]]
    assert texts(tab, "#tree g.node.chosen") and count(tab, "#tree g.node.chosen") == 2
    assert count(tab, "#tree g.node.rejected") == 2 and count(tab, "#tree .edge.committed") == 2
    assert texts(tab, "#tree g.node text")[3] == "N=5 Q=1.00"
    assert count(tab, "#pairs tr[data-pair]") == 2
    fills = tab.evaluate(
        "[...document.querySelectorAll('#tree g.node')].map(g => [+g.dataset.q, g.querySelector('circle')"
        ".getAttribute('fill').match(/\\d+/g).map(Number)])"
    )
    for q, (r, g, b) in fills:  # red at -1, green at +1, the root (Q 0.4) coloured like any node
        assert (r > 180 and g < 80 and b < 80) if q == -1 else (g > r and g > b), (q, r, g, b)
    assert [q for q, _ in fills] == [0.4, 0.6, -1.0, 1.0, -1.0]
    assert "colour = Q (red −1 … green +1)" in text(tab, "#view p.muted")


def test_pair_links_to_its_node(tab: Tab, server: ViewerServer) -> None:
    visit(tab, server, "search?id=synth&tree=iter_000/seed_1")
    href = tab.evaluate("document.querySelector('#pairs tr[data-pair=\"1\"] a.pair-chosen').getAttribute('href')")
    assert href == "#search?id=synth&tree=iter_000%2Fseed_1&node=3"
    visit(tab, server, href[1:])
    assert tab.evaluate("document.querySelector('#node-detail').dataset.node") == "3"
    assert "ANSWER: 4" in text(tab, "#node-detail .msg.assistant")
    assert count(tab, "#tree g.node.selected[data-node='3']") == 1


def test_broken_folder_shows_file_and_line(tab: Tab, broken_server: ViewerServer) -> None:
    visit(tab, broken_server, "runs?id=cut-run")
    assert texts(tab, ".problem") == [
        "cut-run/metrics.jsonl:4: invalid JSON: Unterminated string starting at (column 13)"
    ]
    assert count(tab, "#charts svg") > 0  # the good lines still draw
    visit(tab, broken_server, "episodes?id=bad-eval")
    assert texts(tab, ".problem") == ["bad-eval/trajectories.jsonl:3: invalid JSON: Expecting value (column 1)"]
    assert count(tab, "#episode-list tr[data-index]") == 5
    visit(tab, broken_server, "search?id=cut-run")
    assert text(tab, "#error") == "'cut-run' holds no synth data (it holds: run)"
    visit(tab, broken_server, "search?id=cut-tree&tree=iter_000/seed_1")
    cut = text(tab, "#error")  # the whole sentence: where the string starts, and that the file ends there
    assert cut.startswith("cut-tree/iter_000/trees/seed_1.json:1: invalid JSON: Unterminated string starting at column")
    assert cut.endswith("; the file ends there (cut short, or still being written)")
    assert "Traceback" not in tab.evaluate("document.body.textContent")


def test_unknown_folder_says_what_it_looked_for(tab: Tab, empty_server: ViewerServer) -> None:
    visit(tab, empty_server, "runs")
    assert "holds no run, eval or synth folder" in text(tab, "#error")
    assert "No run folders here." in text(tab, "#view")
