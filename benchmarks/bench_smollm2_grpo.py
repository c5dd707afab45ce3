"""One GRPO step on SmolLM2-135M-Instruct (fp32, LoRA): turnkit's `update` against TRL's `GRPOTrainer`, CPU.

Both sides start from the converted `smollm2` folder (fp32) with a fresh rank-8 LoRA on q/k/v/o (alpha 16,
dropout 0; `turnkit train`'s default for smollm2) and train it with AdamW (lr 2e-4 constant, no weight decay,
gradient clip 1.0) on PPO-clip (epsilon 0.2, token-mean over the batch: TRL's ``loss_type="dapo"``; no KL, no
reference model, one epoch, one minibatch). Every step: ``--prompts`` in-memory prompts (chosen so that the model
writes long answers, so most completions reach ``--max-new-tokens``) x ``--group-size`` completions sampled at
temperature 1, scored by the same trivial reward (distinct words / 50). turnkit trains tied groups too
(``skip_zero_advantage=false``), as TRL does. TRL runs without gradient checkpointing (its default is on) and
without vLLM; no hub access (``HF_HUB_OFFLINE=1``).

turnkit's step is what `turnkit train` does minus the env: ``HFPolicy.act`` over the step's contexts (the
policy's sampling seed set per step as ``train()`` sets it), one :class:`~turnkit.types.Trajectory` per
completion, then :func:`turnkit.train.loop.update` (advantages, token batch, forward, backward, clip, AdamW).
TRL's step is ``trainer.train()`` itself, timed from ``on_step_begin`` to ``on_step_end``; its rollout
(``_generate_and_score_completions``: generation, rewards, advantages, padding) is timed inside it, so its
update is the step less the rollout (loss forward with TRL's log-prob and entropy pass, backward, clip, AdamW,
scheduler and Trainer hooks). The two sides alternate step by step (a turnkit step runs inside TRL's
``on_step_end``, outside TRL's clock); the first ``--warmup`` steps of each are dropped.

Columns: ``update tok/s`` = trained tokens (non-padding prompt + completion tokens in the update's forward pass)
/ update time, generation excluded; ``step tok/s`` = (generated + trained) / whole step, generation included.
``× TRL`` is turnkit's rate over TRL's, per step pair (moments apart), median over the pairs.

The TRL config (``matched_grpo_config``), timers (``timed_trainer_class``, ``optimizer_timer``) and ``quiet`` are
benchmarks/peers/bench_grpo.py's.

Run: HF_HUB_OFFLINE=1 python benchmarks/bench_smollm2_grpo.py [--prompts 4 --group-size 4 --max-new-tokens 32]
     (defaults: --warmup 1 --trials 3 --threads 1)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from turnkit.agents.base import Context
from turnkit.models.names import resolve_model
from turnkit.train.config import TrainConfig
from turnkit.train.loop import build_policy, prepare_policy, step_sampling_seed, update
from turnkit.types import Message, Step, Trajectory

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))  # `turnkit bench` loads this file by path
from bench_grpo import matched_grpo_config, optimizer_timer, quiet, timed_trainer_class

PROMPTS = [
    "Write a long story about a dragon who learns to cook.",
    "Describe the water cycle in detail, step by step.",
    "List twenty animals and one fact about each.",
    "Explain how a car engine works, in as much detail as you can.",
    "Write a long letter to a friend about your summer.",
    "Describe a busy city market in vivid detail.",
    "Explain the rules of chess to a beginner.",
    "Write a detailed recipe for bread, with every step.",
]
LORA = {"r": 8, "alpha": 16, "targets": ("q_proj", "k_proj", "v_proj", "o_proj")}
LR = 2e-4


def reward(text: str) -> float:
    """The trivial reward both sides use: distinct words / 50 (varied, so groups rarely tie)."""
    return len(set(text.split())) / 50


def trl_reward(completions: Sequence[Any], **_: Any) -> list[float]:
    return [reward(c[0]["content"] if isinstance(c, list) else str(c)) for c in completions]


def one_turn_trajectories(contexts: Sequence[Context], turns: Sequence[Any], group_size: int) -> list[Trajectory]:
    """One-turn trajectories of sampled ``turns``, rewarded by :func:`reward`, ``group_size`` per group in order."""
    return [
        Trajectory(
            env_id="bench",
            seed=c.episode_seed,
            steps=(Step(observation=c.messages[0].content, action=t, reward=reward(t.text), terminated=True),),
            group=i // group_size,
        )
        for i, (c, t) in enumerate(zip(contexts, turns, strict=True))
    ]


class TurnkitSide:
    """One step: ``HFPolicy.act`` over prompts x group size, trajectories with the trivial reward, ``update``."""

    def __init__(self, args: argparse.Namespace, out_dir: Path) -> None:
        self.cfg = TrainConfig(
            model="smollm2",
            grpo={"group_size": args.group_size, "kl_coef": 0.0, "clip_eps": 0.2},
            groups_per_step=args.prompts,
            out_dir=str(out_dir),
            optim={"lr": LR, "weight_decay": 0.0, "max_grad_norm": 1.0},
            lora={"r": LORA["r"], "alpha": LORA["alpha"], "targets": LORA["targets"]},
            sampling={"max_new_tokens": args.max_new_tokens, "temperature": 1.0, "top_p": 1.0},
            update={"skip_zero_advantage": False},  # TRL trains zero-advantage rows too: the same tokens on both sides
        )
        self.policy = build_policy(self.cfg, progress=False)
        self.learner = prepare_policy(self.policy, self.cfg)  # AdamW at lr=LR, no weight decay
        self.args = args
        self.steps = 0

    def step(self) -> dict[str, float]:
        self.steps += 1
        k, g = self.args.prompts, self.args.group_size
        prompts = [PROMPTS[(self.steps * k + i) % len(PROMPTS)] for i in range(k)]
        contexts = [
            Context(messages=(Message("user", p),), episode_seed=self.steps * 1000 + i)
            for i, p in enumerate(prompts)
            for _ in range(g)
        ]
        seed = step_sampling_seed(self.cfg.seed, self.steps)  # as train() seeds each step's sampling
        self.policy.sampling = dataclasses.replace(self.policy.sampling, seed=seed)
        start = time.perf_counter()
        turns = self.policy.act(contexts)
        generated = time.perf_counter()
        trajs = one_turn_trajectories(contexts, turns, g)
        metrics = update(self.learner, trajs, self.cfg)
        end = time.perf_counter()
        return {
            "step": end - start,
            "generate": generated - start,
            "update": end - generated,
            "generated_tokens": float(sum(len(t.token_ids) for t in turns)),
            "trained_tokens": metrics["update_tokens"],
            "rows": metrics["rows"],
        }


def trl_trainer(args: argparse.Namespace, out_dir: Path, on_step: Any) -> Any:
    """TRL's GRPOTrainer over the fp32 folder with the same LoRA, batch and optimizer; ``on_step(times)`` per step."""
    import datasets
    import trl
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, PrinterCallback, TrainerCallback

    total = args.warmup + args.trials
    k, g = args.prompts, args.group_size
    config = matched_grpo_config(
        trl, out_dir, group_size=g, batch_size=k * g, steps=total, max_new_tokens=args.max_new_tokens, lr=LR
    )
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(k * total)]
    dataset = datasets.Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": p}] for p in prompts], "seed": list(range(len(prompts)))}
    )
    folder = resolve_model("smollm2", progress=False)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    lora = LoraConfig(
        r=LORA["r"],
        lora_alpha=LORA["alpha"],
        target_modules=list(LORA["targets"]),
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
    )
    trainer = timed_trainer_class(trl)(
        model=model, reward_funcs=trl_reward, args=config, train_dataset=dataset, peft_config=lora
    )
    trainer.timers, trainer.tokens, trainer.seen, trainer.prompt_ids = {}, {}, [], {}
    trainer.add_callback(optimizer_timer(trainer))
    trainer.remove_callback(PrinterCallback)

    class Clock(TrainerCallback):
        def on_step_begin(self, *a: Any, **kw: Any) -> None:
            trainer.timers.clear()
            self.start = time.perf_counter()

        def on_step_end(self, *a: Any, **kw: Any) -> None:
            on_step(time.perf_counter() - self.start, dict(trainer.timers), dict(trainer.tokens))

    trainer.add_callback(Clock())
    return trainer


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    samples: dict[str, list[dict[str, float]]] = {"turnkit": [], "TRL": []}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench-smollm2-grpo-") as tmp, quiet():
        tk = TurnkitSide(args, Path(tmp) / "turnkit")

        def on_trl_step(step_s: float, timers: dict[str, float], tokens: dict[str, float]) -> None:
            update_s = timers["training_step"] - timers["rollout"] + timers["optimizer"]
            samples["TRL"].append(
                {
                    "step": step_s,
                    "generate": timers["generate"],
                    "update": update_s,
                    "generated_tokens": tokens["generated"],
                    "trained_tokens": tokens["trained"],
                    "rows": tokens["completions"],
                }
            )
            samples["turnkit"].append(tk.step())
            load.append(os.getloadavg()[0])
            print(f"  step {len(samples['TRL'])} done, load {load[-1]:.2f}", flush=True)

        trl_trainer(args, Path(tmp) / "trl", on_trl_step).train()
    for side in samples:
        samples[side] = samples[side][args.warmup :]
    return {"samples": samples, "load": load}


def rates(s: dict[str, float]) -> dict[str, float]:
    return {
        "update_tok_s": s["trained_tokens"] / s["update"],
        "step_tok_s": (s["generated_tokens"] + s["trained_tokens"]) / s["step"],
        "gen_tok_s": s["generated_tokens"] / s["generate"],
    }


def print_table(out: dict[str, Any], args: argparse.Namespace) -> None:
    import transformers
    import trl

    samples, load = out["samples"], out["load"]
    print(
        f"\nGRPO step, SmolLM2-135M-Instruct fp32 + LoRA r={LORA['r']} (q/k/v/o, alpha {LORA['alpha']}), "
        f"{args.prompts} prompts x {args.group_size} completions x <= {args.max_new_tokens} tokens, "
        f"{args.threads} torch thread(s), medians of {args.trials} alternating steps after {args.warmup} warm-up; "
        f"trl {trl.__version__}, transformers {transformers.__version__}, torch {torch.__version__}; "
        f"load average (1-min) {min(load):.2f}-{max(load):.2f}\n"
    )
    print("| side | update tok/s | × TRL | step tok/s (with generation) | × TRL | generate tok/s | update s | step s "
          "| generated + trained tokens |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    pairs = list(zip(samples["turnkit"], samples["TRL"], strict=True))
    for side in ("turnkit", "TRL"):
        rows = samples[side]
        r = {key: statistics.median(rates(s)[key] for s in rows) for key in ("update_tok_s", "step_tok_s", "gen_tok_s")}
        idx = 0 if side == "turnkit" else 1
        x_upd = statistics.median(rates(p[idx])["update_tok_s"] / rates(p[1])["update_tok_s"] for p in pairs)
        x_step = statistics.median(rates(p[idx])["step_tok_s"] / rates(p[1])["step_tok_s"] for p in pairs)
        med = {key: statistics.median(s[key] for s in rows) for key in rows[0]}
        print(
            f"| {side} | {r['update_tok_s']:.0f} | {x_upd:.2f} | {r['step_tok_s']:.0f} | {x_step:.2f} | "
            f"{r['gen_tok_s']:.0f} | {med['update']:.1f} | {med['step']:.1f} | "
            f"{med['generated_tokens']:.0f} + {med['trained_tokens']:.0f} |"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--prompts", type=int, default=4, help="prompts (groups) per step")
    parser.add_argument("--group-size", type=int, default=4, help="completions per prompt (TRL's num_generations)")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="completion length limit")
    parser.add_argument("--warmup", type=int, default=1, help="steps per side dropped before the trials")
    parser.add_argument("--trials", type=int, default=3, help="timed steps per side")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print_table(run(args), args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
