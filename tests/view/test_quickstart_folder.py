"""`turnkit view` over a real (micro) quickstart folder: the run, its curves, its evaluations and their episodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.view.conftest import serve, texts, visit
from turnkit.browser import Tab
from turnkit.view import ViewerApi

pytest.importorskip("torch")
from turnkit.models.embedded import TinyRecipe
from turnkit.models.sft import SFTConfig
from turnkit.models.tiny import TinyModelConfig
from turnkit.train.quickstart import QuickstartConfig, run_quickstart

# two GRPO steps of a micro policy rarely change it; the loop says so, and that is not what this test checks
pytestmark = pytest.mark.filterwarnings("ignore:.*took no optimizer step:UserWarning")

MICRO = TinyRecipe(
    model=TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_position_embeddings=512),
    sft=SFTConfig(steps=4, batch_size=16),
    vocab_size=300,
    corpus_tasks=20,
    demo_episodes=16,
    max_new_tokens=8,
)


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("quickstart")
    train = {"groups_per_step": 2, "grpo": {"group_size": 2}, "sampling": {"max_new_tokens": 8}, "max_turns": 2}
    cfg = QuickstartConfig(out_dir=str(out / "qs"), steps=2, eval_episodes=6, recipe=MICRO, train_overrides=train,
                           cache=str(out / "cache"))  # fmt: skip
    run_quickstart(cfg, progress=False, verbose=False)
    return out / "qs"


def test_quickstart_folder_shows_run_evaluations_and_episodes(quickstart: Path, tab: Tab) -> None:
    api = ViewerApi(quickstart)
    _, sources = api.answer("sources", {})
    kinds = {s["id"]: s["kinds"] for s in sources["sources"]}
    assert kinds == {
        ".": ["run"],
        "eval/rl-greedy": ["eval"],
        "eval/rl-sampled": ["eval"],
        "eval/sft-greedy": ["eval"],
        "eval/sft-sampled": ["eval"],
        "train": ["run"],
        "train/rollouts/step-000002": ["rollouts"],  # the last step's episodes as the learner saw them
    }
    _, top = api.answer("run", {"id": "."})
    assert [e["label"] for e in top["evals"]] == [
        "SFT start, greedy", "after RL, greedy", "SFT start, sampled T=1.0", "after RL, sampled T=1.0"
    ]  # fmt: skip
    _, train = api.answer("run", {"id": "train"})
    assert {"reward_mean", "success_rate", "policy_lag"} <= set(train["keys"]) and train["problems"] == []
    _, page = api.answer("episodes", {"id": "eval/rl-greedy"})
    assert page["total"] == 6 and [e["seed"] for e in page["items"]] == list(range(1_000_000_000, 1_000_000_006))
    _, learner = api.answer("episode", {"id": "train/rollouts/step-000002", "i": "0"})
    assert all("advantage" in s and len(s["mask"]) == len(s["token_ids"]) for s in learner["steps"])
    for server in serve(quickstart):
        visit(tab, server, "runs?id=.")
        assert len(texts(tab, "#evals tr")) == 5 and "quickstart.png" in texts(tab, ".card .muted")[0]
        assert texts(tab, "a.child-run") == ["train curves →"]
        assert texts(tab, "a.child-episodes") == [
            f"eval/{e} episodes →" for e in ("rl-greedy", "rl-sampled", "sft-greedy", "sft-sampled")
        ]
        assert texts(tab, "#rollout-links a.child-rollouts") == ["train/rollouts/step-000002"]
        assert tab.evaluate("window.violations") == []
        visit(tab, server, "episodes?id=eval/rl-greedy&ep=0")
        assert len(texts(tab, "#episode-list tr[data-index]")) == 6 and texts(tab, "#episode .turn")
