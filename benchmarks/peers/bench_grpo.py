"""GRPO step throughput: turnkit's training loop against TRL's ``GRPOTrainer``, same model, same work, CPU.

Both sides train the same tiny Llama-style model (built once here with :mod:`turnkit.models.tiny`, saved with
``save_pretrained`` to a temporary folder, and loaded from it by each side) on the same MathEpisodes arithmetic
tasks, with identical settings:

* the same prompts: step ``k`` of every side plays the same ``--groups`` task seeds (the order TRL's sampler
  draws them in), each rendered by the tokenizer's chat template (the prompt ids are compared, and must match);
* ``--group-size`` completions per prompt (TRL's ``num_generations``), one optimizer step per generation batch
  (``per_device_train_batch_size`` = groups x group size, no gradient accumulation, one PPO epoch, one minibatch);
* exactly ``--max-new-tokens`` sampled tokens per completion on both sides: the saved tokenizer's EOS is a token
  id the model cannot emit (one past its vocabulary), so no completion stops early and both sides sample, score
  and train on the same number of tokens;
* sampling at temperature 1, top-p 1; fp32; full fine-tuning (no LoRA); AdamW (``torch.optim.AdamW``, TRL's
  ``optim="adamw_torch"``), the same constant learning rate, no weight decay, gradient clip 1.0; PPO-clip loss
  with epsilon 0.2, token-mean aggregation (TRL's ``loss_type="dapo"``), no KL term (``beta=0``), no reference
  model; TRL without gradient checkpointing (its default is on; turnkit does not checkpoint) and without vLLM;
* every completion is scored the way the env scores it: turnkit's loop plays one MathEpisodes turn per episode
  (``max_turns=1``: reset, then ``step`` parses ``ANSWER:`` and checks it); TRL's reward function resets a
  MathEpisodes env to the row's seed and calls ``step`` with the decoded completion, so it runs the same code.

Rows (all in one process, one torch thread by default, interleaved step by step with the order rotated every
trial; the first ``--warmup`` steps of each side are discarded, then medians over ``--trials`` steps):

* ``turnkit train loop``: one step of :mod:`turnkit.train.loop` as ``train()`` runs it (``rollout`` of all groups
  in one batched collection with token-exact contexts, then ``update``), without its JSONL log line;
* ``turnkit train loop, HFPolicy max_batch_size=N``: the same, sampling the whole step's N completions in one
  batch (``HFPolicy`` splits generation into batches of at most 32 contexts by default, TRL does not split;
  ``train(cfg, policy=HFPolicy(..., max_batch_size=N))`` gets this). ``--no-variant`` leaves it out;
* ``TRL GRPOTrainer``: ``trainer.train()`` itself, run in a helper thread that a ``TrainerCallback`` pauses after
  every optimizer step (``on_step_end``), so each of its steps is timed whole, the trainer's own bookkeeping
  (dataloader, logging hooks, scheduler) included;
* ``TRL GRPOTrainer + EnvRollout``: the same trainer with :class:`turnkit.integrations.trl.EnvRollout` as its
  ``rollout_func`` (turnkit's ``HFPolicy`` samples and turnkit's env scores; TRL updates). ``--no-envrollout``
  leaves it out.

Columns (milliseconds per step, medians): ``generate`` is time inside the sampler (turnkit: ``HFPolicy.act``;
TRL: ``model.generate``); ``score`` is env reset + step (turnkit: the envs' own time; TRL: its reward
function); ``batch`` is the rest of the rollout (turnkit: the collector's bookkeeping; TRL: prompt templating
and tokenising, decoding, padding, advantages); ``update`` is turning the rollout into one optimizer step
(turnkit: ``update()``: advantages, token batch, forward, backward, clip, AdamW; TRL: its ``training_step``
after the rollout plus clipping and ``optimizer.step()``); ``other`` is the rest of the step. Token counts per
step: *generated* = sampled completion tokens; *trained* = non-padding prompt + completion tokens in the
update's forward pass. ``tokens/s`` = (generated + trained) / step time; ``gen tok/s`` = generated /
``generate``; ``upd tok/s`` = trained / ``update``. ``× turnkit`` is a row's steps/s over the first row's (ratio
of the medians); ``per trial`` is the median over trials of the first row's step time over the row's, each pair
taken moments apart in the same trial (steadier when the load changes); ``CPU time`` is the same with the CPU
time of the thread that runs the step (``time.thread_time``; with one torch thread that is all of the step's
work, and it counts little of the time other processes take the core away). The load average is printed beside the
tables: the box is shared, so trust the ratios more than the absolute numbers.

``--profile`` also prints, per row, the functions with the most own time over the timed steps (cProfile).

Needs the ``[peers]`` extra's packages (TRL); run with the peers interpreter:

Run:  .venv-peers/bin/python benchmarks/peers/bench_grpo.py
      (defaults: --groups 8 --group-size 8 --max-new-tokens 32 --warmup 2 --trials 9 --threads 1)
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import gymnasium
import torch

import turnkit  # noqa: F401  (registers the envs)
from turnkit.integrations.trl import EnvRollout, env_reward
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer, save_tiny
from turnkit.train.config import TrainConfig
from turnkit.train.loop import (
    build_policy,
    prepare_policy,
    rollout_metrics,
    step_sampling_seed,
    token_exact_chat,
    update,
)
from turnkit.train.rollouts import RolloutJob, play

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the house benchmarks' helpers
from bench_training import TimedEnv

ENV = "turnkit/MathEpisodes-v0"
ENV_KWARGS: dict[str, Any] = {"difficulty": 1, "kinds": ["arithmetic"]}
FIRST_SEED = 10_000
STOP = "<|stop|>"
PARTS = ("generate", "score", "batch", "update", "other")
BASELINE = "turnkit train loop"


# ---------------------------------------------------------------------------------------------- shared set-up


def build_model_dir(path: Path, hidden_size: int, layers: int) -> tuple[Path, int]:
    """Build the tiny model once, with an EOS the model cannot emit, and save it; returns (folder, parameters)."""
    tok = build_tiny_tokenizer()
    cfg = TinyModelConfig(
        hidden_size=hidden_size, num_layers=layers, num_heads=4, intermediate_size=11 * hidden_size // 4
    )
    model = build_tiny_model(tok, cfg, seed=0)
    tok.add_special_tokens({"eos_token": STOP})  # id == the model's vocab size: never sampled, so never a stop
    model.config.eos_token_id = None
    model.generation_config.eos_token_id = tok.eos_token_id
    save_tiny(model, tok, path)
    return path, sum(p.numel() for p in model.parameters())


def task_prompts(seeds: Sequence[int]) -> list[str]:
    env = gymnasium.make(ENV, **ENV_KWARGS)
    prompts = [env.reset(seed=s)[0] for s in seeds]
    env.close()
    return prompts


class Profiled:
    """A cProfile that runs between ``on()`` and ``off()`` once armed (after the warm-up), if enabled at all."""

    def __init__(self, enabled: bool) -> None:
        self.profile = cProfile.Profile() if enabled else None
        self.armed = False

    def on(self) -> None:
        if self.profile is not None and self.armed:
            self.profile.enable()

    def off(self) -> None:
        if self.profile is not None:
            self.profile.disable()

    def top(self, n: int = 18) -> str:
        if self.profile is None:
            return ""
        out = io.StringIO()
        pstats.Stats(self.profile, stream=out).sort_stats("tottime").print_stats(n)
        return out.getvalue()


# ---------------------------------------------------------------------------------------------- turnkit


class TurnkitSide:
    """One step of turnkit's training loop per call, with the same steps ``train()`` takes (no log line)."""

    def __init__(
        self,
        name: str,
        model_dir: Path,
        args: argparse.Namespace,
        out_dir: Path,
        profiled: Profiled,
        *,
        max_batch_size: int | None = None,
    ) -> None:
        self.name = name
        self.cfg = TrainConfig(
            model=str(model_dir),
            env_id=ENV,
            env_kwargs=dict(ENV_KWARGS),
            max_turns=1,
            grpo={"group_size": args.group_size, "kl_coef": 0.0},
            groups_per_step=args.groups,
            out_dir=str(out_dir),
            optim={"lr": args.lr, "weight_decay": 0.0, "max_grad_norm": 1.0},
            lora={"r": 0},
            sampling={"max_new_tokens": args.max_new_tokens, "temperature": 1.0, "top_p": 1.0},
            update={
                "skip_zero_advantage": False
            },  # TRL trains on zero-advantage rows too: the same tokens on both sides
        )
        self.policy = build_policy(self.cfg, progress=False)
        if max_batch_size is not None:  # train(cfg, policy=HFPolicy(..., max_batch_size=n)) does the same
            self.policy.max_batch_size = max_batch_size
        self.learner = prepare_policy(self.policy, self.cfg)
        self.envs = [
            TimedEnv(gymnasium.make(ENV, split=self.cfg.split, **self.cfg.env_kwargs))
            for _ in range(self.cfg.grpo.group_size * self.cfg.groups_per_step)
        ]
        self.chat = token_exact_chat(self.policy, self.cfg)
        self.profiled = profiled
        self.steps = 0
        self.prompt_ids: dict[int, tuple[int, ...]] = {}

    def step(self, seeds: Sequence[int]) -> dict[str, float]:
        self.steps += 1
        for env in self.envs:
            env.seconds = 0.0
        self.profiled.on()
        start, cpu = time.perf_counter(), time.thread_time()
        seed = step_sampling_seed(self.cfg.seed, self.steps)  # as train() seeds each step's sampling
        self.policy.sampling = dataclasses.replace(self.policy.sampling, seed=seed)
        job = RolloutJob(self.steps, list(seeds), seed, self.cfg.grpo.group_size)
        trajs, timing = play(self.policy, self.envs, job, max_turns=self.cfg.max_turns, chat=self.chat)
        record = rollout_metrics(trajs, self.cfg.sampling.max_new_tokens)
        t_update = time.perf_counter()
        metrics = update(self.learner, trajs, self.cfg)
        update_s = time.perf_counter() - t_update
        wall, cpu = time.perf_counter() - start, time.thread_time() - cpu
        self.profiled.off()
        for traj in trajs:
            if traj.seed is not None and traj.steps:
                self.prompt_ids.setdefault(traj.seed, traj.steps[0].action.prompt_token_ids)
        env_s = sum(env.seconds for env in self.envs)
        return {
            "step": wall,
            "step_cpu": cpu,
            "generate": timing["generate_s"],
            "score": env_s,
            "batch": timing["rollout_s"] - timing["generate_s"] - env_s,
            "update": update_s,
            "other": wall - timing["rollout_s"] - update_s,
            "generated_tokens": float(record["completion_tokens"]),
            "trained_tokens": float(metrics["update_tokens"]),
            "completions": float(record["episodes"]),
        }

    def close(self) -> None:
        for env in self.envs:
            env.close()


# ---------------------------------------------------------------------------------------------- TRL


def env_score_reward() -> Callable[..., list[float]]:
    """A TRL reward function that scores a completion as MathEpisodes does: reset to the row's task, one step."""
    env = gymnasium.make(ENV, **ENV_KWARGS)

    def env_score(completions: Sequence[Any], seed: Sequence[int], **_: Any) -> list[float]:
        rewards = []
        for completion, task_seed in zip(completions, seed, strict=True):
            text = completion[0]["content"] if isinstance(completion, list) else str(completion)
            env.reset(seed=int(task_seed))
            rewards.append(float(env.step(text)[1]))
        return rewards

    return env_score


class TimedEnvRollout(EnvRollout):
    """EnvRollout that adds up the time inside the policy's ``act`` and inside its envs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.act_s = 0.0
        super().__init__(*args, **kwargs)

    def _env(self, index: int) -> gymnasium.Env:
        while len(self._envs) <= index:
            self._envs.append(TimedEnv(gymnasium.make(self.env_id, **self.env_kwargs)))
        return self._envs[index]

    def env_seconds(self) -> float:
        return sum(env.seconds for env in self._envs if isinstance(env, TimedEnv))

    def reset_timers(self) -> None:
        self.act_s = 0.0
        for env in self._envs:
            if isinstance(env, TimedEnv):
                env.seconds = 0.0

    def policy_for(self, trainer: Any) -> Any:
        policy = super().policy_for(trainer)
        act = policy.act

        def timed_act(contexts: Any) -> Any:
            start = time.perf_counter()
            try:
                return act(contexts)
            finally:
                self.act_s += time.perf_counter() - start

        policy.act = timed_act  # type: ignore[method-assign]
        return policy


def timed_trainer_class(trl: Any) -> type:
    """``trl.GRPOTrainer`` with timers around its rollout, sampler, reward and training step."""

    class TimedGRPOTrainer(trl.GRPOTrainer):
        def _timed(self, key: str, fn: Callable[..., Any], *a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.timers[key] = self.timers.get(key, 0.0) + time.perf_counter() - start

        def _generate_single_turn(self, *a: Any, **k: Any) -> Any:
            return self._timed("generate", super()._generate_single_turn, *a, **k)

        def _calculate_rewards(self, *a: Any, **k: Any) -> Any:
            return self._timed("reward", super()._calculate_rewards, *a, **k)

        def _generate_and_score_completions(self, inputs: Any) -> Any:
            self.seen.append([int(row["seed"]) for row in inputs])
            out = self._timed("rollout", super()._generate_and_score_completions, inputs)
            self.tokens["generated"] = float(
                (out["completion_mask"] * out["tool_mask"]).sum()
                if out.get("tool_mask") is not None
                else out["completion_mask"].sum()
            )
            self.tokens["trained"] = float(out["prompt_mask"].sum() + out["completion_mask"].sum())
            self.tokens["completions"] = float(len(inputs))
            if not self.prompt_ids:
                for row, ids, mask in zip(inputs, out["prompt_ids"], out["prompt_mask"], strict=True):
                    self.prompt_ids.setdefault(int(row["seed"]), tuple(ids[mask.bool()].tolist()))
            return out

        def training_step(self, *a: Any, **k: Any) -> Any:
            out = self._timed("training_step", super().training_step, *a, **k)
            self.timers["training_step_end"] = time.perf_counter()
            return out

    return TimedGRPOTrainer


def matched_grpo_config(
    trl: Any, out_dir: Path, *, group_size: int, batch_size: int, steps: int, max_new_tokens: int, lr: float
) -> Any:
    """TRL's ``GRPOConfig`` set to do what one turnkit GRPO step does: constant AdamW lr, clip 1.0, PPO clip 0.2,
    token-mean loss (``dapo``), no KL, one pass per batch, fp32 on the CPU, T = 1, no logging or saving.

    Example:
        >>> import trl
        >>> cfg = matched_grpo_config(trl, Path("/tmp/g"), group_size=4, batch_size=16, steps=3, max_new_tokens=8,
        ...                           lr=2e-4)
        >>> cfg.num_generations, cfg.per_device_train_batch_size, cfg.loss_type, cfg.beta
        (4, 16, 'dapo', 0.0)
    """
    return trl.GRPOConfig(
        output_dir=str(out_dir),
        num_generations=group_size,
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=1,
        max_steps=steps,
        max_completion_length=max_new_tokens,
        temperature=1.0,
        top_p=1.0,
        learning_rate=lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        optim="adamw_torch",
        beta=0.0,
        epsilon=0.2,
        loss_type="dapo",
        num_iterations=1,
        gradient_checkpointing=False,
        use_cpu=True,
        bf16=False,
        report_to=[],
        logging_steps=10**6,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )


def optimizer_timer(trainer: Any) -> Any:
    """A callback that times clipping and ``optimizer.step()`` (from the end of ``training_step`` on)."""
    from transformers import TrainerCallback

    class OptimizerTimer(TrainerCallback):
        def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            trainer.timers["optimizer"] = time.perf_counter() - trainer.timers.pop("training_step_end")

    return OptimizerTimer()


class TrlSide:
    """``trainer.train()`` in a helper thread, paused after every optimizer step; ``step()`` runs one more."""

    def __init__(
        self,
        name: str,
        model_dir: Path,
        args: argparse.Namespace,
        out_dir: Path,
        seeds: Sequence[int],
        profiled: Profiled,
        *,
        env_rollout: bool = False,
    ) -> None:
        import datasets
        import trl
        from transformers import PrinterCallback, TrainerCallback

        self.name = name
        self.profiled = profiled
        total = args.warmup + args.trials
        config = matched_grpo_config(
            trl, out_dir, group_size=args.group_size, batch_size=args.group_size * args.groups, steps=total,
            max_new_tokens=args.max_new_tokens, lr=args.lr,
        )  # fmt: skip
        self.rollout: TimedEnvRollout | None = None
        if env_rollout:
            self.rollout = TimedEnvRollout(
                ENV, seeds=seeds, env_kwargs=ENV_KWARGS, max_turns=1, max_new_tokens=args.max_new_tokens
            )
            dataset = self.rollout.dataset
            rewards: Any = env_reward
        else:
            prompts = task_prompts(seeds)
            dataset = datasets.Dataset.from_dict(
                {"prompt": [[{"role": "user", "content": p}] for p in prompts], "seed": list(seeds)}
            )
            rewards = env_score_reward()
        cls = timed_trainer_class(trl)
        self.trainer = cls(
            model=str(model_dir),
            reward_funcs=rewards,
            args=config,
            train_dataset=dataset,
            rollout_func=self.rollout,
        )
        self.trainer.timers = {}
        self.trainer.tokens = {}
        self.trainer.seen = []
        self.trainer.prompt_ids = {}
        self.trainer.add_callback(optimizer_timer(self.trainer))
        self.trainer.remove_callback(PrinterCallback)  # it prints the end-of-run metrics; the tables report ours

        side = self

        class Pause(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                side.profiled.off()
                side.cpu_s = time.thread_time() - side.cpu_start
                side.done.release()
                side.go.acquire()
                if side.stopping:  # close() before the planned last step: end train() here
                    control.should_training_stop = True
                side.cpu_start = time.thread_time()
                side.profiled.on()

        self.go, self.done = threading.Semaphore(0), threading.Semaphore(0)
        self.cpu_start = self.cpu_s = 0.0  # CPU time of the trainer's thread in the current / last step
        self.stopping = False
        self.trainer.add_callback(Pause())
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"trl-{name}", daemon=True)
        self.thread.start()

    def planned_seeds(self, steps: int, group_size: int) -> list[list[int]]:
        """The task seeds TRL's sampler hands step 1, 2, ... (one per group; a fresh sampler repeats its order)."""
        sampler = self.trainer._get_train_sampler(self.trainer.train_dataset)
        seeds = [int(self.trainer.train_dataset[int(i)]["seed"]) for i in sampler]
        per_step = len(seeds) // steps
        return [seeds[k * per_step : (k + 1) * per_step : group_size] for k in range(steps)]

    def _run(self) -> None:
        self.go.acquire()
        self.cpu_start = time.thread_time()
        try:
            if self.stopping:  # closed before its first step
                return
            self.profiled.on()
            self.trainer.train()
        except BaseException as exc:  # handed to the main thread by step()
            self.error = exc
        finally:
            self.profiled.off()
            self.done.release()

    def step(self, seeds: Sequence[int]) -> dict[str, float]:
        del seeds  # TRL's own sampler picks them (planned_seeds says which)
        timers = self.trainer.timers
        timers.clear()
        if self.rollout is not None:
            self.rollout.reset_timers()
        start = time.perf_counter()
        self.go.release()
        self.done.acquire()
        wall = time.perf_counter() - start
        if self.error is not None:
            raise RuntimeError(f"{self.name} failed") from self.error
        if self.rollout is not None:
            generate = self.rollout.act_s
            score = self.rollout.env_seconds() + timers.get("reward", 0.0)
        else:
            generate, score = timers["generate"], timers["reward"]
        update_s = timers["training_step"] - timers["rollout"] + timers["optimizer"]
        return {
            "step": wall,
            "step_cpu": self.cpu_s,
            "generate": generate,
            "score": score,
            "batch": timers["rollout"] - generate - score,
            "update": update_s,
            "other": wall - timers["rollout"] - update_s,
            "generated_tokens": self.trainer.tokens["generated"],
            "trained_tokens": self.trainer.tokens["trained"],
            "completions": self.trainer.tokens["completions"],
        }

    def close(self) -> None:
        self.stopping = True
        while self.thread.is_alive():
            self.go.release()
            self.thread.join(timeout=60)
        if self.rollout is not None:
            self.rollout.close()


# ---------------------------------------------------------------------------------------------- the run


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence progress bars and the warnings TRL and transformers print on every CPU run."""
    import transformers

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def summarise(samples: list[dict[str, float]]) -> dict[str, float]:
    med = {key: statistics.median(s[key] for s in samples) for key in samples[0]}
    step_tokens = [(s["generated_tokens"] + s["trained_tokens"]) / s["step"] for s in samples]
    return {
        "steps_per_s": 1.0 / med["step"],
        "step_ms": 1e3 * med["step"],
        "step_cpu_ms": 1e3 * med["step_cpu"],
        **{f"{part}_ms": 1e3 * med[part] for part in PARTS},
        "generated_tokens": med["generated_tokens"],
        "trained_tokens": med["trained_tokens"],
        "completions": med["completions"],
        "tokens_per_s": statistics.median(step_tokens),
        "gen_tokens_per_s": statistics.median(s["generated_tokens"] / s["generate"] for s in samples),
        "update_tokens_per_s": statistics.median(s["trained_tokens"] / s["update"] for s in samples),
        "step_ms_min": 1e3 * min(s["step"] for s in samples),
        "step_ms_max": 1e3 * max(s["step"] for s in samples),
    }


def build_sides(args: argparse.Namespace, model_dir: Path, root: Path, seeds: Sequence[int], sides: list[Any]) -> None:
    """Append the rows to ``sides`` (so a failure leaves the ones made for closing), baseline first: turnkit,
    [turnkit with one generation batch], TRL, [TRL + EnvRollout]."""
    tk = TurnkitSide(BASELINE, model_dir, args, root / "turnkit", Profiled(args.profile))
    sides.append(tk)
    batch = args.groups * args.group_size
    if not args.no_variant and batch > tk.policy.max_batch_size:
        name = f"turnkit train loop, HFPolicy max_batch_size={batch}"
        sides.append(
            TurnkitSide(name, model_dir, args, root / "turnkit-batch", Profiled(args.profile), max_batch_size=batch)
        )
    sides.append(TrlSide("TRL GRPOTrainer", model_dir, args, root / "trl", seeds, Profiled(args.profile)))
    if not args.no_envrollout:
        name = "TRL GRPOTrainer + EnvRollout"
        sides.append(TrlSide(name, model_dir, args, root / "trl-er", seeds, Profiled(args.profile), env_rollout=True))


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    total = args.warmup + args.trials
    seeds = list(range(FIRST_SEED, FIRST_SEED + args.groups * total))
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-grpo-") as tmp, quiet():
        root = Path(tmp)
        model_dir, params = build_model_dir(root / "model", args.hidden_size, args.layers)
        sides: list[Any] = []
        try:
            build_sides(args, model_dir, root, seeds, sides)
            trl_side = next(side for side in sides if side.name == "TRL GRPOTrainer")
            tk = sides[0]
            profiles = {side.name: side.profiled for side in sides}
            plan = trl_side.planned_seeds(total, args.group_size)
            samples: dict[str, list[dict[str, float]]] = {s.name: [] for s in sides}
            load_samples = []
            for k in range(total):
                for prof in profiles.values():
                    prof.armed = k >= args.warmup
                shift = k % len(sides)
                for side in sides[shift:] + sides[:shift]:
                    result = side.step(plan[k])
                    if k >= args.warmup:
                        samples[side.name].append(result)
                load_samples.append(os.getloadavg()[0])
                if not args.json:
                    print(f"  step {k + 1}/{total} done, load {load_samples[-1]:.2f}", flush=True)
            checks = {
                "same_seeds_as_planned": all(
                    [s[:: args.group_size] for s in side.trainer.seen] == plan
                    for side in sides
                    if isinstance(side, TrlSide)
                ),
                "same_prompt_ids": all(
                    side.trainer.prompt_ids[seed] == tk.prompt_ids[seed]
                    for side in sides
                    if isinstance(side, TrlSide)
                    for seed in side.trainer.prompt_ids
                ),
            }
        finally:
            for side in sides:
                side.close()
    results = {name: summarise(s) for name, s in samples.items()}
    base = results[BASELINE]
    for row in results.values():
        row["x_turnkit_steps_per_s"] = row["steps_per_s"] / base["steps_per_s"]
    for name, row in results.items():  # the same ratio trial by trial (steps taken moments apart), then the median
        pairs = zip(samples[BASELINE], samples[name], strict=True)
        row["x_turnkit_per_trial"] = statistics.median(b["step"] / s["step"] for b, s in pairs)
        pairs = zip(samples[BASELINE], samples[name], strict=True)
        row["x_turnkit_cpu_per_trial"] = statistics.median(b["step_cpu"] / s["step_cpu"] for b, s in pairs)
    return {
        "settings": {
            "params": params,
            "hidden_size": args.hidden_size,
            "layers": args.layers,
            "groups": args.groups,
            "group_size": args.group_size,
            "completions_per_step": args.groups * args.group_size,
            "max_new_tokens": args.max_new_tokens,
            "lr": args.lr,
            "threads": args.threads,
            "warmup": args.warmup,
            "trials": args.trials,
            "torch": torch.__version__,
            "trl": __import__("trl").__version__,
            "transformers": __import__("transformers").__version__,
        },
        "checks": checks,
        "load_avg": {
            "before": list(load_before),
            "during_median_1m": statistics.median(load_samples),
            "during_max_1m": max(load_samples),
            "after": list(os.getloadavg()),
        },
        "rows": results,
        "samples": samples,
        "profiles": {name: p.top() for name, p in profiles.items()} if args.profile else {},
    }


def print_tables(out: dict[str, Any]) -> None:
    s, load = out["settings"], out["load_avg"]
    print(
        f"\nGRPO step, {s['params'] / 1e6:.2f}M-parameter tiny Llama "
        f"(hidden {s['hidden_size']}, {s['layers']} layers), "
        f"{s['groups']} prompts x {s['group_size']} completions x {s['max_new_tokens']} tokens per step, "
        f"{s['threads']} torch thread(s), medians of {s['trials']} interleaved steps after {s['warmup']} warm-up; "
        f"trl {s['trl']}, transformers {s['transformers']}, torch {s['torch']}"
    )
    print(
        f"load average: before {load['before'][0]:.2f}, during (1-min, median/max) "
        f"{load['during_median_1m']:.2f}/{load['during_max_1m']:.2f}, after {load['after'][0]:.2f}; "
        f"checks: {out['checks']}\n"
    )
    print(
        "| row | steps/s | × turnkit | × turnkit, per trial | × turnkit, CPU time per trial | step ms (min-max) "
        "| step CPU ms | tokens/s | generated + trained |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in out["rows"].items():
        print(
            f"| {name} | {r['steps_per_s']:.3f} | {r['x_turnkit_steps_per_s']:.2f} | {r['x_turnkit_per_trial']:.2f} | "
            f"{r['x_turnkit_cpu_per_trial']:.2f} | {r['step_ms']:.0f} "
            f"({r['step_ms_min']:.0f}-{r['step_ms_max']:.0f}) | {r['step_cpu_ms']:.0f} | {r['tokens_per_s']:.0f} | "
            f"{r['generated_tokens']:.0f} + {r['trained_tokens']:.0f} |"
        )
    print("\n| row | generate ms | score ms | batch ms | update ms | other ms | gen tok/s | upd tok/s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in out["rows"].items():
        print(
            f"| {name} | {r['generate_ms']:.0f} | {r['score_ms']:.1f} | {r['batch_ms']:.1f} | {r['update_ms']:.0f} | "
            f"{r['other_ms']:.1f} | {r['gen_tokens_per_s']:.0f} | {r['update_tokens_per_s']:.0f} |"
        )
    for name, text in out["profiles"].items():
        print(f"\n--- profile: {name} (own time over the timed steps) ---\n{text}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=8, help="prompts (tasks) per step")
    parser.add_argument("--group-size", type=int, default=8, help="completions per prompt (num_generations)")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="tokens sampled per completion (exactly)")
    parser.add_argument("--hidden-size", type=int, default=256, help="tiny model width (256: turnkit's default)")
    parser.add_argument("--layers", type=int, default=4, help="tiny model depth")
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--warmup", type=int, default=2, help="steps per side discarded before the trials")
    parser.add_argument("--trials", type=int, default=9, help="timed steps per side")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--no-envrollout", action="store_true", help="leave out the TRL + EnvRollout row")
    parser.add_argument(
        "--no-variant", action="store_true", help="leave out the turnkit row that samples the whole step in one batch"
    )
    parser.add_argument("--profile", action="store_true", help="also print each row's cProfile top functions")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args([a for a in (argv or []) if a != "--"])
    out = run(args)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print_tables(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(__import__("sys").argv[1:]))
