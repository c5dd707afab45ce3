"""SmolLM2-135M-Instruct on multi-turn MathEpisodes: an SFT warm start with LoRA, then a few GRPO steps.

Question (issue #39, item 4, groundwork): as it comes, SmolLM2 never writes MathEpisodes' ``ANSWER: <value>``
format (0/20), so every GRPO group ties and the loop has no signal. Does a short LoRA SFT warm start on oracle
demonstrations give it the format and some success on a task where a wrong answer gets a second try, do the
first GRPO steps from there see untied groups, and what does each phase cost on this 2-core box? One seed, one
float path: the cost and feasibility of the full study (>= 5 seeds, two float paths), not its claim.

Protocol:

* Task: ``turnkit/MathEpisodes-v0``, ``difficulty`` 1, ``kinds`` ``("arithmetic",)`` (one-digit addition and
  subtraction), ``max_attempts`` 2 (a wrong answer gets the feedback ``"Incorrect. 1 attempt left."`` and a
  retry), episodes cut at ``--max-turns`` turns (``max_episode_steps``; the model as it comes never answers, so
  without a cut every episode runs the env's 10 turns).
* Policy: ``resolve_model("smollm2")`` (float32; the GGUF's Q4_1 weights dequantised, an approximation of the
  released bf16 model), a rank-8 LoRA adapter (alpha 16, q/k/v/o projections; the ``turnkit train`` default for
  ``smollm2``), ``--max-new-tokens`` per turn, one torch thread.
* Demonstrations (seeds from 0; the held-out seeds start at 1,000,000,000): ``--demos`` episodes of the env's
  oracle (:func:`turnkit.rollout.demos.collect_demos`: one correct ``ANSWER: <value>`` turn each; the oracle has no
  wrong-answer mode) plus ``--retry-demos`` episodes played by :class:`WrongFirstOracle` (a wrong value, the
  reference +-1, then the correct one after the env's feedback). Of a retry episode only the second turn is
  trained (its prompt holds the wrong attempt and the feedback): the policy is not taught to answer wrongly, only
  to correct itself. Rows: :func:`turnkit.rollout.demos.demo_rows` (the policy's chat template, loss on the
  turn's ids + ``<|im_end|>``).
* SFT: :func:`turnkit.models.sft.train_sft` (the embedded tiny policy's SFT loop; it trains whatever has
  ``requires_grad``, here the adapter) for ``--sft-steps`` steps of ``--sft-batch`` rows, lr ``--sft-lr``.
* GRPO: :func:`turnkit.train.loop.train` from the warm start (the adapter trained on; the reference is the
  adapter-disabled base), ``--grpo-steps`` steps of ``--groups-per-step`` groups x ``--group-size`` episodes at
  T = 1, lr ``--grpo-lr``.
* Evaluation on ``--eval-episodes`` held-out seeds (from 1,000,000,000), greedy and sampled (T = 1), before SFT,
  after SFT and after GRPO: success (Wilson 95%), turns per episode, format rate (share of turns that state an
  answer: ``ANSWER:`` or ``\\boxed{}``), first-answer success, and recoveries (episodes whose first answer was
  wrong and whose retry was right).
* Every phase's wall time. The result file is rewritten after each phase (``"complete": false`` until the end),
  so a run cut short still leaves what it measured.

Example::

    python studies/smollm2_warmstart.py --out studies/results/smollm2_warmstart/avx512_s0.json
    python studies/smollm2_warmstart.py --check    # about a minute: the pipeline end to end at toy size
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
import torch
from common.provenance import write_result

import turnkit  # noqa: F401  (registers the envs)
from turnkit.agents.base import Context
from turnkit.envs.math.answers import extract_answer
from turnkit.models.names import load_policy, resolve_model
from turnkit.models.sft import SFTConfig, train_sft
from turnkit.rollout.collect import collect_batch
from turnkit.rollout.demos import collect_demos, demo_rows
from turnkit.stats import wilson_interval
from turnkit.train.config import EVAL_SEED_START, TrainConfig
from turnkit.train.loop import train
from turnkit.types import AgentTurn, Trajectory

ENV_ID = "turnkit/MathEpisodes-v0"
STEP_KEYS = (
    "step", "reward_mean", "success_rate", "tied_frac", "optimizer_steps", "mean_turns", "completion_tokens",
    "update_tokens", "generate_s", "update_s", "gen_tokens_per_s", "train_tokens_per_s",
)  # fmt: skip
"""What each GRPO step's record contributes to the result file (the loop's own names)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The study's command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="adapter init, SFT order, GRPO tasks and sampling")
    parser.add_argument("--difficulty", type=int, default=1)
    parser.add_argument("--kinds", nargs="+", default=["arithmetic"])
    parser.add_argument("--max-attempts", type=int, default=2)
    parser.add_argument("--max-turns", type=int, default=4, help="episode cut (max_episode_steps)")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--demos", type=int, default=64, help="oracle episodes (one correct turn each)")
    parser.add_argument("--retry-demos", type=int, default=64, help="wrong-then-right episodes (2nd turn trained)")
    parser.add_argument(
        "--retry-spread",
        type=int,
        default=1,
        help="a demonstrated wrong answer is the reference "
        "+- 1..N (N = 1: always +-1, which the model learns as a shortcut)",
    )
    parser.add_argument("--skip-before", action="store_true", help="no evaluation of the untrained model")
    parser.add_argument("--sft-steps", type=int, default=30)
    parser.add_argument("--sft-batch", type=int, default=8)
    parser.add_argument("--sft-lr", type=float, default=2e-3)
    parser.add_argument("--grpo-steps", type=int, default=10)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--groups-per-step", type=int, default=4)
    parser.add_argument("--grpo-lr", type=float, default=2e-4)
    parser.add_argument("--eval-episodes", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the float path depends on it)")
    parser.add_argument("--runs", default="runs/smollm2_warmstart", help="GRPO run folders")
    parser.add_argument("--out", default="studies/results/smollm2_warmstart/results.json")
    parser.add_argument("--check", action="store_true", help="toy size end to end (~1 min); no result file")
    args = parser.parse_args(argv)
    if args.check:
        args.demos, args.retry_demos, args.sft_steps, args.sft_batch = 8, 8, 4, 4
        args.grpo_steps, args.groups_per_step, args.eval_episodes = 1, 1, 4
    return args


class WrongFirstOracle:
    """Answers a wrong value first (the reference +- 1..``spread``), then the reference: a demonstrated retry.

    Example:
        >>> from turnkit.types import Message, Task
        >>> task = Task(task_id="t", prompt="2+2?", privileged={"answer": "4"}, family="math")
        >>> agent = WrongFirstOracle()
        >>> [t.text for t in agent.act([Context(messages=(Message("user", "2+2?"),), task=task, episode_seed=0)])]
        ['ANSWER: 5']
        >>> retry = (Message("user", "2+2?"), Message("assistant", "ANSWER: 5"), Message("user", "Incorrect."))
        >>> [t.text for t in agent.act([Context(messages=retry, task=task, episode_seed=0)])]
        ['ANSWER: 4']
    """

    uses_privileged = True

    def __init__(self, spread: int = 1) -> None:
        self.spread = spread

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One reply per context: wrong on the first turn, right afterwards."""
        out = []
        for ctx in contexts:
            assert ctx.task is not None  # uses_privileged: collect passes the task
            answer = str(ctx.task.privileged["answer"]).strip()
            if any(m.role == "assistant" for m in ctx.messages):
                out.append(AgentTurn(f"ANSWER: {answer}"))
                continue
            seed = ctx.episode_seed or 0
            shift = (1 + (seed // 2) % self.spread) * (1 if seed % 2 == 0 else -1)
            try:
                wrong = str(int(answer) + shift)
            except ValueError:
                wrong = answer + "0"  # not an integer (other kinds): still a wrong value
            out.append(AgentTurn(f"ANSWER: {wrong}"))
        return out


def env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The task's ``gymnasium.make`` arguments (``max_episode_steps`` is the turn cut)."""
    return {
        "difficulty": args.difficulty,
        "kinds": list(args.kinds),
        "max_attempts": args.max_attempts,
        "max_episode_steps": args.max_turns,
    }


def play(agent: Any, seeds: Sequence[int], args: argparse.Namespace) -> list[Trajectory]:
    """One episode per seed, all side by side (one agent call per round)."""
    envs = [gymnasium.make(ENV_ID, split="id", **env_kwargs(args)) for _ in seeds]
    try:
        return collect_batch(envs, agent, list(seeds))
    finally:
        for env in envs:
            env.close()


def episode_stats(trajs: Sequence[Trajectory]) -> dict[str, Any]:
    """Success (Wilson 95%), turns, format rate, first-answer success and recoveries of finished episodes."""
    n = len(trajs)
    wins = sum(t.success for t in trajs)
    turns = [len(t.steps) for t in trajs]
    texts = [s.action.text for t in trajs for s in t.steps]
    answered = [extract_answer(x) is not None for x in texts]
    first_right = sum(bool(t.steps) and t.success and len(t.steps) == 1 for t in trajs)
    return {
        "episodes": n,
        "success": wins / n,
        "success_ci": list(wilson_interval(wins, n)),
        "turns_mean": sum(turns) / n,
        "multi_turn_frac": sum(k >= 2 for k in turns) / n,
        "format_rate": sum(answered) / max(len(texts), 1),
        "first_turn_format_rate": sum(extract_answer(t.steps[0].action.text) is not None for t in trajs) / n,
        "first_answer_success": first_right / n,
        "recoveries": sum(t.success and len(t.steps) >= 2 for t in trajs),
        "errors": sum(t.error is not None for t in trajs),
        "examples": [[s.action.text for s in t.steps] for t in trajs[:3]],
    }


def evaluate(policy: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Greedy and sampled (T = 1) held-out evaluation, each with its wall time."""
    seeds = range(EVAL_SEED_START, EVAL_SEED_START + args.eval_episodes)
    out = {}
    for name, temperature in (("greedy", 0.0), ("sampled", 1.0)):
        t0 = time.time()
        trajs = play(policy.with_sampling(temperature=temperature, seed=args.seed), seeds, args)
        out[name] = {**episode_stats(trajs), "wall_s": round(time.time() - t0, 1)}
        s = out[name]
        print(
            f"  {name:<8} success {s['success']:.3f} [{s['success_ci'][0]:.3f}, {s['success_ci'][1]:.3f}]  "
            f"format {s['format_rate']:.3f}  turns {s['turns_mean']:.2f}  recoveries {s['recoveries']}  "
            f"({s['wall_s']:.0f} s)",
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    started = time.time()
    result: dict[str, Any] = {"settings": vars(args), "complete": False, "phases_s": {}}
    phases = result["phases_s"]

    def save() -> None:
        if not args.check:
            write_result(args.out, result, started=started)

    t0 = time.time()
    folder = resolve_model("smollm2", progress=False)
    policy = load_policy("smollm2", progress=False, temperature=1.0, max_new_tokens=args.max_new_tokens)
    result["start_model"] = str(folder)
    phases["load"] = round(time.time() - t0, 1)

    if not args.skip_before:
        print("before SFT", flush=True)
        t0 = time.time()
        result["before"] = evaluate(policy, args)
        phases["eval_before"] = round(time.time() - t0, 1)
        save()

    t0 = time.time()
    plain = collect_demos(ENV_ID, episodes=args.demos, seed=0, env_kwargs=env_kwargs(args))
    retry_seeds = range(args.demos, args.demos + args.retry_demos)
    retry = [t for t in play(WrongFirstOracle(args.retry_spread), retry_seeds, args) if t.success]
    rows = demo_rows(plain.trajectories, policy.tokenizer)
    rows += [r for r in demo_rows(retry, policy.tokenizer) if r.turn_index >= 1]
    result["demos"] = {
        "plain_episodes": len(plain.trajectories),
        "retry_episodes": len(retry),
        "rows": len(rows),
        "row_tokens_mean": sum(len(r.input_ids) for r in rows) / len(rows),
        "example_retry": [s.action.text for s in retry[0].steps] if retry else None,
    }
    phases["demos"] = round(time.time() - t0, 1)

    t0 = time.time()
    policy.attach_lora(r=8, alpha=16, seed=args.seed)
    sft_cfg = SFTConfig(
        steps=args.sft_steps, batch_size=args.sft_batch, seed=args.seed,
        optim={"lr": args.sft_lr, "warmup_steps": min(5, args.sft_steps)},
    )  # fmt: skip
    history = train_sft(policy.model, rows, sft_cfg, pad_id=policy.pad_token_id, progress=False)
    phases["sft"] = round(time.time() - t0, 1)
    tokens = sum(h["tokens"] for h in history)
    result["sft"] = {
        "loss_first": history[0]["loss"],
        "loss_last": history[-1]["loss"],
        "loss": [round(h["loss"], 4) for h in history],
        "tokens": tokens,
        "tokens_per_s": tokens / max(phases["sft"], 1e-9),
    }
    print(f"SFT {args.sft_steps} steps: loss {history[0]['loss']:.3f} -> {history[-1]['loss']:.3f} "
          f"({phases['sft']:.0f} s, {result['sft']['tokens_per_s']:.0f} tok/s)", flush=True)  # fmt: skip

    print("after SFT", flush=True)
    t0 = time.time()
    result["after_sft"] = evaluate(policy, args)
    phases["eval_after_sft"] = round(time.time() - t0, 1)
    save()

    if args.grpo_steps > 0:
        cfg = TrainConfig(
            env_id=ENV_ID,
            env_kwargs=env_kwargs(args),
            model="smollm2",  # the adapter is already attached (the warm start): training goes on in it
            grpo={"group_size": args.group_size},
            groups_per_step=args.groups_per_step,
            steps=args.grpo_steps,
            seed=args.seed,
            out_dir=str(Path(args.runs) / (f"seed{args.seed}" + ("-check" if args.check else ""))),
            optim={"lr": args.grpo_lr},
            lora={"r": 8},
            sampling={"max_new_tokens": args.max_new_tokens},
            eval={"every": 0, "episodes": args.eval_episodes},
            log={"checkpoint_every": args.grpo_steps, "rollouts_every": 0},
        )
        t0 = time.time()
        run = train(cfg, progress=False, policy=policy)
        phases["grpo"] = round(time.time() - t0, 1)
        steps = [{k: r[k] for k in STEP_KEYS if k in r} for r in run.history if "tied_frac" in r]
        result["grpo"] = {"steps": steps, "run_dir": str(run.run_dir)}
        for r in steps:
            print(f"  grpo step {r['step']}: reward {r['reward_mean']:.3f}  success {r['success_rate']:.3f}  "
                  f"tied_frac {r['tied_frac']:.2f}  gen {r['generate_s']:.0f} s  update {r['update_s']:.0f} s",
                  flush=True)  # fmt: skip
        print("after GRPO", flush=True)
        t0 = time.time()
        result["after_grpo"] = evaluate(run.policy, args)
        phases["eval_after_grpo"] = round(time.time() - t0, 1)
    result["complete"] = True
    save()
    print(f"phases (s): {phases}; total {time.time() - started:.0f} s" + ("" if args.check else f" -> {args.out}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
