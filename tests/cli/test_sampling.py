"""Sampling flags on the commands that run an agent: `turnkit eval` and `turnkit synth` take them, as users need."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnkit.cli import main
from turnkit.cli.agents import make_agent
from turnkit.errors import ConfigError
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer, save_tiny

SMALL = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tok = build_tiny_tokenizer()
    return save_tiny(build_tiny_model(tok, SMALL), tok, tmp_path_factory.mktemp("sampling") / "model")


def test_a_model_agent_takes_the_flags_and_keeps_the_rest(model_dir: Path) -> None:
    agent = make_agent(f"hf:{model_dir}", seed=3, sampling={"max_new_tokens": 5, "temperature": 0.0})
    assert (agent.sampling.max_new_tokens, agent.sampling.temperature) == (5, 0.0)
    assert agent.sampling.top_p == make_agent(f"hf:{model_dir}").sampling.top_p
    served = make_agent("openai:http://127.0.0.1:9/v1#m", sampling={"max_new_tokens": 7, "top_p": 0.5})
    assert (served.max_tokens, served.top_p) == (7, 0.5)


def test_an_agent_that_does_not_sample_refuses_the_flags() -> None:
    with pytest.raises(ConfigError, match="agent 'oracle' does not sample"):
        make_agent("oracle", sampling={"temperature": 0.5})


def eval_action_lengths(model_dir: Path, out: Path, max_new_tokens: int) -> list[int]:
    """The length of every action of a 2-episode sampled eval (each tiny-tokenizer token decodes to one character)."""
    argv = ["eval", "turnkit/MathEpisodes-v0", "--agent", f"hf:{model_dir}", "--episodes", "2", "--quiet",
            "--max-new-tokens", str(max_new_tokens), "--temperature", "1.0", "--threads", "1",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    episodes = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    return [len(step["action"]) for ep in episodes for step in ep["steps"]]


def test_eval_generates_within_max_new_tokens(model_dir: Path, tmp_path: Path) -> None:
    short = eval_action_lengths(model_dir, tmp_path / "short", 3)
    longer = eval_action_lengths(model_dir, tmp_path / "longer", 12)
    assert short and max(short) <= 3
    assert max(longer) > 3  # the untrained model does not end its turns early: the flag is what cut them


def test_bad_flags_are_named(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = ["eval", "turnkit/MathEpisodes-v0", "--episodes", "1", "--quiet", "--out", str(tmp_path)]
    assert main([*base, "--agent", "oracle", "--temperature", "0.5"]) == 2
    assert "agent 'oracle' does not sample" in capsys.readouterr().err
    assert main([*base, "--agent", f"hf:{model_dir}", "--max-new-tokens", "0"]) == 2
    assert "SamplingConfig.max_new_tokens must be an int >= 1, got 0" in capsys.readouterr().err


def test_synth_takes_the_same_flags() -> None:
    import argparse

    from turnkit.cli.agents import sampling_changes
    from turnkit.cli.synth import add_commands

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    args = parser.parse_args(["synth", "turnkit/MathEpisodes-v0", "--max-new-tokens", "16", "--threads", "2"])
    assert sampling_changes(args) == {"max_new_tokens": 16} and args.threads == 2
