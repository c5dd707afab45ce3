import argparse
import json

import gymnasium
import pytest

import turnkit
from turnkit.cli.synth import add_commands, cmd_synth, config_from_args
from turnkit.envs.core import TextEnv, Transition
from turnkit.errors import ConfigError
from turnkit.search.mcts import MCTS, MCTSConfig
from turnkit.search.pairs import PairConfig, read_pairs
from turnkit.search.tree import SearchTree
from turnkit.train.dpo import DPOConfig
from turnkit.train.synth import SynthConfig, synthesize
from turnkit.types import Task

SHORT_MATH = {"difficulty": 1, "token_budget": 12, "budget_unit": "chars"}  # random text ends episodes fast
SMALL = MCTSConfig(iterations=4, root_multiplier=1, n_actions=2, parallel=2, depth_limit=2)


class HotCold(TextEnv):
    """Guess a hidden digit from one to five; the env answers higher or lower (three guesses)."""

    def generate_task(self, rng):
        n = int(rng.integers(1, 6))
        return Task(
            f"hotcold-{int(rng.integers(1 << 30))}",  # not f"hotcold-{n}": info["task_id"] would leak the answer
            "Guess my number, one to five. Reply with a digit.",
            {"answer": str(n)},
            family="hotcold",
            split=self.split,
        )

    def begin(self, task):
        self._guesses = 0
        return task.prompt

    def respond(self, action):
        self._guesses += 1
        target = int(self.privileged()["answer"])
        digits = [c for c in action if c.isdigit()]
        if digits and int(digits[-1]) == target:
            return Transition("Correct.", 1.0, True, {"success": True})
        if self._guesses >= 3:
            return Transition("Out of guesses.", 0.0, True, {"success": False})
        if not digits:
            return Transition("Reply with a digit.")
        return Transition("Higher." if int(digits[-1]) < target else "Lower.")


gymnasium.register(id="test_search/HotCold-v0", entry_point=HotCold, max_episode_steps=5)


def test_the_new_env_passes_check_env():
    report = turnkit.check_env(gymnasium.make("test_search/HotCold-v0"), cross_process=False, policy=lambda ctx: "3")
    assert report.ok


def test_search_and_synth_run_on_the_new_env(tmp_path, tiny_hf, choice_agent):
    env = gymnasium.make("test_search/HotCold-v0")
    agent = choice_agent(["1", "2", "3", "4", "5", "hmm"], [1] * 6)
    result = MCTS(SMALL).search(env, agent, seed=0)
    assert result.tree.is_terminal(result.tree.committed_path()[-1])
    cfg = SynthConfig(
        "test_search/HotCold-v0",
        iterations=1,
        tasks_per_iteration=2,
        mcts=SMALL,
        pairs=PairConfig(require_success=False),
        dpo=DPOConfig(epochs=1),
        render_trees=1,
    )
    out = synthesize(cfg, tiny_hf(seed=1, max_new_tokens=3), tmp_path, progress=False)
    assert out.iterations[0]["tasks"] == 2 and (tmp_path / "iter_000" / "adapter" / "adapter_config.json").exists()


def test_mcts_runs_unchanged_on_physics(tiny_hf):
    env = gymnasium.make("turnkit/PhysicsPrediction-v0", kind="uniform")
    cfg = MCTSConfig(iterations=2, root_multiplier=1, n_actions=2, depth_limit=1, reward_weight=1.0)
    result = MCTS(cfg).search(env, tiny_hf(max_new_tokens=4), seed=0)
    assert len(result.trajectory.steps) >= 1 and result.stats.policy_contexts >= 2


def math_config(**changes):
    base = dict(
        env_id="turnkit/MathEpisodes-v0",
        iterations=1,
        tasks_per_iteration=2,
        mcts=SMALL,
        env_kwargs={"difficulty": 1},
        pairs=PairConfig(require_success=False),
        dpo=DPOConfig(epochs=1),
        render_trees=1,
        eval_episodes=4,
    )
    base.update(changes)
    return SynthConfig(**base)


def test_a_larger_iteration_count_continues_a_finished_run(tmp_path, choice_agent):
    agent = choice_agent(["ANSWER: 1", "ANSWER: 2"], [0.5, 0.5])
    synthesize(math_config(train=False, eval_episodes=0), agent, tmp_path, progress=False)
    calls = len(agent.calls)
    stamp = (tmp_path / "iter_000" / "trees" / "seed_0.json").stat().st_mtime_ns
    result = synthesize(math_config(train=False, eval_episodes=0, iterations=2), agent, tmp_path, progress=False)
    assert [m["iteration"] for m in result.iterations] == [0, 1]
    assert (tmp_path / "iter_000" / "trees" / "seed_0.json").stat().st_mtime_ns == stamp
    assert result.iterations[1]["search"]["policy_contexts"] == sum(agent.calls[calls:])


@pytest.mark.slow
def test_synth_writes_its_outputs_and_resumes(tmp_path, tiny_hf):
    first = synthesize(math_config(tasks_per_iteration=1, eval_episodes=2), tiny_hf(), tmp_path, progress=False)
    it = tmp_path / "iter_000"
    for name in (
        "pairs.jsonl",
        "metrics.json",
        "adapter/adapter_config.json",
        "trees/seed_0.json",
        "pictures/seed_0.png",
        "pictures/seed_0.html",
    ):
        assert (it / name).exists(), name
    assert "eval" in first.iterations[0] and "dpo" in first.iterations[0]
    assert read_pairs(tmp_path / "dataset.jsonl") == first.pairs
    stamp = (it / "trees" / "seed_0.json").stat().st_mtime_ns
    policy = tiny_hf()
    second = synthesize(
        math_config(tasks_per_iteration=1, eval_episodes=2, iterations=2), policy, tmp_path, progress=False
    )
    assert [m["iteration"] for m in second.iterations] == [0, 1]
    assert (it / "trees" / "seed_0.json").stat().st_mtime_ns == stamp  # iteration 0 was not redone
    assert policy.has_adapter and (tmp_path / "iter_001" / "adapter").is_dir()
    assert json.loads((tmp_path / "state.json").read_text())["config"]["iterations"] == 2


def test_synth_refuses_another_config_in_the_same_directory(tmp_path, choice_agent):
    agent = choice_agent(["ANSWER: 1"], [1.0])
    synthesize(math_config(train=False, eval_episodes=0), agent, tmp_path, progress=False)
    with pytest.raises(ConfigError, match=r"different config \(fields \['tasks_per_iteration'\]\)"):
        synthesize(math_config(train=False, eval_episodes=0, tasks_per_iteration=3), agent, tmp_path, progress=False)


def test_an_interrupted_iteration_reuses_its_saved_trees(tmp_path, choice_agent):
    cfg = math_config(train=False, eval_episodes=0, tasks_per_iteration=3)
    synthesize(cfg, choice_agent(["ANSWER: 1", "ANSWER: 2"], [0.5, 0.5]), tmp_path, progress=False)
    state = json.loads((tmp_path / "state.json").read_text())
    state["iterations"] = []  # as if the run died before finishing iteration 0
    (tmp_path / "state.json").write_text(json.dumps(state))
    (tmp_path / "iter_000" / "trees" / "seed_2.json").unlink()
    agent = choice_agent(["ANSWER: 1", "ANSWER: 2"], [0.5, 0.5])
    result = synthesize(cfg, agent, tmp_path, progress=False)
    assert result.iterations[0]["trees_reused"] == 2
    assert result.iterations[0]["search"]["policy_contexts"] == sum(agent.calls) > 0
    assert SearchTree.load(tmp_path / "iter_000" / "trees" / "seed_2.json").seed == 2


def test_training_needs_a_trainable_policy(tmp_path, choice_agent):
    with pytest.raises(ConfigError, match="needs an HFPolicy"):
        synthesize(math_config(), choice_agent(["x"], [1.0]), tmp_path, progress=False)


def test_best_of_n_search_kind(tmp_path, choice_agent):
    agent = choice_agent(["ANSWER: {answer}", "ANSWER: 0.5"], [0.5, 0.5])
    cfg = math_config(search="best_of_n", best_of_n=4, train=False, eval_episodes=0, pairs=PairConfig())
    result = synthesize(cfg, agent, tmp_path, progress=False)
    assert all(p.source == "best_of_n" for p in result.pairs) and result.pairs


def parse(argv):
    parser = argparse.ArgumentParser(prog="turnkit")
    add_commands(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli_flags_reach_the_config():
    args = parse(
        [
            "synth",
            "turnkit/MathEpisodes-v0",
            "--simulations",
            "5",
            "--rejected",
            "random",
            "--any-outcome",
            "--standard-dpo",
            "--beta",
            "0.2",
            "--env-kwarg",
            "difficulty=2",
            "--tasks",
            "3",
        ]
    )
    cfg = config_from_args(args)
    assert cfg.mcts.iterations == 5 and cfg.pairs.rejected == "random" and not cfg.pairs.require_success
    assert not cfg.dpo.conservative and cfg.dpo.beta == 0.2 and cfg.env_kwargs == {"difficulty": 2}
    assert cfg.tasks_per_iteration == 3
    assert cfg.pairs.scope == "committed" and cfg.dpo.nll_weight == 0.0  # defaults untouched


def test_cli_pair_and_lora_flags_reach_the_config():
    argv = "synth turnkit/MathEpisodes-v0 --pair-scope all --min-q-gap 0.6 --nll-weight 0.5 --lora-r 4"
    argv += " --lora-targets q_proj,up_proj --batch-size 16 --gamma 0.25"
    cfg = config_from_args(parse(argv.split()))
    assert cfg.pairs.scope == "all" and cfg.pairs.min_q_gap == 0.6 and cfg.mcts.gamma == 0.25
    assert cfg.dpo.nll_weight == 0.5 and cfg.dpo.batch_size == 16 and cfg.dpo.nll_scope == "turn"
    assert config_from_args(parse([*argv.split(), "--nll-scope", "suffix"])).dpo.nll_scope == "suffix"
    assert cfg.dpo.lora.r == 4 and cfg.dpo.lora.alpha == 8 and cfg.dpo.lora.targets == ("q_proj", "up_proj")


def test_cli_step_flags_reach_the_config():
    default = config_from_args(parse(["synth", "turnkit/MathEpisodes-v0"]))
    assert default.mcts.step_delimiter is None and default.mcts.final_markers is None
    argv = "synth turnkit/MathEpisodes-v0 --steps line --final-marker ANSWER: --max-turn-steps 6"
    cfg = config_from_args(parse(argv.split()))
    assert cfg.mcts.step_delimiter == "\n" and cfg.mcts.final_markers == ("ANSWER:",)
    assert cfg.mcts.max_turn_steps == 6
    assert config_from_args(parse([*argv.split()[:2], "--steps", "paragraph"])).mcts.step_delimiter == "\n\n"


def test_cli_runs_synth_with_any_agent(tmp_path, capsys):
    args = parse(
        [
            "synth",
            "turnkit/MathEpisodes-v0",
            "--policy",
            "oracle",
            "--no-train",
            "--iterations",
            "1",
            "--tasks",
            "2",
            "--simulations",
            "2",
            "--root-multiplier",
            "1",
            "--out",
            str(tmp_path),
            "--quiet",
        ]
    )
    assert cmd_synth(args) == 0
    out = capsys.readouterr().out
    assert "iter 0: 2 tasks, search success 1.000" in out and "dataset.jsonl" in out


def test_a_state_written_with_flat_dpo_keys_resumes(tmp_path):
    """A synth folder from before DPOConfig's optim/lora tables (flat lr, lora_r ...) is the same run."""
    from dataclasses import replace

    from turnkit.train.synth import STATE, STATE_VERSION, _load_state

    cfg = math_config(tasks_per_iteration=1)
    saved = cfg.to_dict()
    optim, lora = saved["dpo"].pop("optim"), saved["dpo"].pop("lora")  # as the state was written before the tables
    saved["dpo"].update(lr=optim["lr"], max_grad_norm=optim["max_grad_norm"])
    saved["dpo"].update(lora_r=lora["r"], lora_alpha=lora["alpha"], lora_targets=lora["targets"])
    (tmp_path / STATE).write_text(json.dumps({"version": STATE_VERSION, "config": saved, "iterations": []}))
    assert _load_state(tmp_path, cfg)["config"] == cfg.to_dict()
    (tmp_path / STATE).write_text(json.dumps({"version": STATE_VERSION, "config": saved, "iterations": []}))
    with pytest.raises(ConfigError, match=r"different config \(fields \['dpo'\]\)"):
        _load_state(tmp_path, replace(cfg, dpo=DPOConfig(optim={"lr": 0.1})))
