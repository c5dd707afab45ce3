"""The Runs view of a folder laid out as a quickstart's: results first, pictures that fit, rollouts folded away."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.view import builders
from tests.view.conftest import serve, texts, visit
from tests.view.test_pages import count, text
from turnkit.browser import Tab
from turnkit.view import ViewerServer


@pytest.fixture(scope="module")
def quickstart_like(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ViewerServer]:
    yield from serve(builders.write_quickstart_like(tmp_path_factory.mktemp("runs") / "quickstart"))


ABOVE_RESULTS = """[...document.querySelectorAll('#view a')].filter(
  a => a.compareDocumentPosition(document.querySelector('#evals')) & Node.DOCUMENT_POSITION_FOLLOWING
).map(a => a.textContent)"""

PICTURES = """Promise.all([...document.querySelectorAll('#view .card img')].map(i => i.decode().then(() => [
  i.getAttribute('src'), i.naturalWidth, i.getBoundingClientRect().width,
  i.closest('main').getBoundingClientRect().width])))"""


def test_pictures_fit_the_column(tab: Tab, quickstart_like: ViewerServer) -> None:
    for fragment, src in (("runs?id=.", "/files/quickstart.png"), ("runs?id=train", "/files/train/curves.png")):
        visit(tab, quickstart_like, fragment)
        [(shown, natural, width, column)] = tab.evaluate(PICTURES, await_promise=True)
        assert shown == src and natural == 2310
        assert 600 < width < column, (fragment, width, column)  # drawn across the column, not past it
    assert tab.evaluate("window.violations") == []


def href(tab: Tab, selector: str) -> str:
    return tab.evaluate(f"document.querySelector({selector!r}).getAttribute('href')")


KINDS = """Object.fromEntries([...document.querySelectorAll('aside a[data-source]')]
  .map(a => [a.dataset.source, a.querySelector('.kinds').textContent]))"""


def test_results_come_before_the_episode_links(tab: Tab, quickstart_like: ViewerServer) -> None:
    visit(tab, quickstart_like, "runs?id=.")
    assert text(tab, "#run-title") == "Run quickstart"
    assert len(texts(tab, "#evals tr")) == 5
    evals = [f"eval/{e} episodes →" for e in ("rl-greedy", "rl-sampled", "sft-greedy", "sft-sampled")]
    assert texts(tab, "a.child-episodes") == evals
    assert tab.evaluate(ABOVE_RESULTS) == []  # no link sits between the title and the results
    assert count(tab, "#rollout-links a.child-rollouts") == 34
    assert not tab.evaluate("document.querySelector('#rollout-links').open")  # folded: none of the 34 shows
    shown = "[...document.querySelectorAll('a.child-rollouts')].filter(a => a.checkVisibility()).length"
    assert tab.evaluate(shown) == 0
    assert text(tab, "#rollout-links summary") == "Training rollouts: 34 kept steps, as the learner saw them"
    assert href(tab, "#nav-episodes") == "#episodes?id=eval%2Frl-greedy"  # the tab opens an evaluation under it


def test_rollout_folders_are_named_as_such(tab: Tab, quickstart_like: ViewerServer) -> None:
    visit(tab, quickstart_like, "runs?id=train")
    assert "train/rollouts/step-000010" not in texts(tab, "aside a[data-source]")  # not a run
    visit(tab, quickstart_like, "episodes?id=train/rollouts/step-000010")
    kinds = tab.evaluate(KINDS)
    assert kinds["eval/rl-greedy"] == "eval" and kinds["train/rollouts/step-000010"] == "rollouts"
    assert text(tab, "#view h2") == "Episodes of train/rollouts/step-000010"
    assert href(tab, "#nav-runs") == "#runs?id=train"  # the run the rollouts belong to
