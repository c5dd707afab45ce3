"""PAV didactic experiment (arXiv 2410.08146, App. B) on CPU: outcome-only RL vs progress rewards.

The task is ``turnkit/PAVDidactic-v0`` (``turnkit.envs.pav_didactic``): write at most 10 tokens from a
vocabulary of 15 (EOS = 14); reward 1 iff the planted run ``y*`` (5 tokens) appears. For speed the
training loop runs the env's own vectorised dynamics (``turnkit.envs.pav_didactic.prover``: the match
automaton the env uses; ``tests/envs/pav_didactic`` checks that both agree step by step).

Protocol (paper values in brackets where they differ):

* base policy: a GRU, 3 layers × 128, SFT on 3,200 sequences of the γ = 5 prover;
* RL: REINFORCE, batch 64, Adam 1e-3; per-step coefficient ``c_h = (R − b) + α A^μ(s_h, a_h)`` with ``α = 1``,
  ``b`` the leave-one-out batch mean (RLOO), ``A^μ`` the prover advantage (``turnkit.critics.progress``);
  outcome-only RL is ``α = 0``;
* ``Q^μ`` is exact (dynamic programming over the match automaton, ``prover_values``) [> 100 Monte Carlo
  rollouts]; ``--q mc`` uses fresh Monte Carlo rollouts per prefix instead, as the paper does;
* accuracy = success rate of 512 fresh samples from the policy, every ``--eval-every`` iterations.

Outputs under ``--out``: ``results.json`` (every curve), ``accuracy_vs_iterations.png`` (outcome vs progress,
mean ± min/max over seeds) and ``prover_sweep.png`` (iterations to the target accuracy and accuracy at a
fixed iteration vs prover strength γ). ``results.json`` carries the machine record and the wall time
(``machine``, ``wall_s``: :func:`common.provenance.write_result`); a merged one also each part's record
(``machine_per_part``, ``None`` for files written before records existed).

Usage::

    python studies/pav_didactic.py                       # main comparison + γ sweep, 3 seeds
    python studies/pav_didactic.py --only main --iters 400
    python studies/pav_didactic.py --q mc --rollouts 128 --only main
    python studies/pav_didactic.py --check           # a few minutes: does progress still learn first here?
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from common.provenance import write_result
from torch import nn

from turnkit.critics.progress import best_of_k, prover_advantages
from turnkit.envs.pav_didactic.prover import (
    EOS,
    SEQ_LEN,
    VOCAB_SIZE,
    match_states,
    mc_values_at,
    prover_probs,
    prover_values,
    q_after_steps,
    step_mask,
    transition_table,
)
from turnkit.errors import ConfigError
from turnkit.learners.advantages import rloo_advantages

try:  # run as a script (studies/ on sys.path) or imported as studies.pav_didactic
    from pav_didactic_plots import load_sweeps, plot_compare, plot_main, plot_sweep
except ImportError:  # pragma: no cover
    from studies.pav_didactic_plots import load_sweeps, plot_compare, plot_main, plot_sweep

PLANTED = (3, 7, 1, 9, 2, 4, 6, 11)
"""The planted run is its first ``--target-len`` tokens (distinct tokens behave alike up to relabelling)."""


@dataclass(frozen=True)
class RunConfig:
    """One RL run."""

    seed: int = 0
    target: tuple[int, ...] = PLANTED[:6]
    alpha: float = 1.0
    gamma: float = 10.0
    best_of: int = 1
    iters: int = 600
    batch: int = 64
    lr: float = 1e-3
    optimizer: str = "adam"
    momentum: float = 0.9
    q: str = "exact"
    rollouts: int = 128
    eval_every: int = 10
    eval_samples: int = 512
    target_acc: float = 0.9
    sft_samples: int = 3200
    sft_gamma: float = 5.0
    sft_epochs: int = 8
    sft_lr: float = 1e-3


class Policy(nn.Module):
    """Autoregressive token policy: embedding → 3-layer GRU (128) → logits over the 15 tokens."""

    def __init__(self, hidden: int = 128, layers: int = 3, vocab: int = VOCAB_SIZE) -> None:
        super().__init__()
        self.vocab = vocab
        self.embed = nn.Embedding(vocab + 1, hidden)  # + BOS
        self.gru = nn.GRU(hidden, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        """``log π(a_h | a_<h)`` of every position, ``[N, T]`` (teacher forcing)."""
        bos = torch.full_like(tokens[:, :1], self.vocab)
        out, _ = self.gru(self.embed(torch.cat([bos, tokens[:, :-1]], dim=1)))
        logits = self.head(out).log_softmax(-1)
        return logits.gather(-1, tokens[..., None]).squeeze(-1)

    @torch.no_grad()
    def sample(self, n: int, length: int, gen: torch.Generator) -> torch.Tensor:
        """``n`` sequences of ``length`` tokens (positions after the end are masked by the caller)."""
        x = torch.full((n, 1), self.vocab, dtype=torch.long)
        h = None
        out = []
        for _ in range(length):
            o, h = self.gru(self.embed(x), h)
            x = torch.multinomial(self.head(o[:, -1]).softmax(-1), 1, generator=gen)
            out.append(x)
        return torch.cat(out, dim=1)


def init_policy(seed: int) -> Policy:
    """A policy whose parameters come from an explicit generator (uniform ±1/sqrt(fan-in), zero biases)."""
    policy = Policy()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "bias" in name:
                p.zero_()
            else:
                bound = 1.0 / math.sqrt(p.shape[-1])
                p.uniform_(-bound, bound, generator=gen)
    return policy


def sample_prover(target: tuple[int, ...], gamma: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` sequences from the prover ``μ_γ`` (vectorised over the match automaton)."""
    table = transition_table(target)
    cum = np.cumsum(prover_probs(target, gamma), axis=1)
    m = len(target)
    k = np.zeros(n, dtype=np.int64)
    out = np.zeros((n, SEQ_LEN), dtype=np.int64)
    for h in range(SEQ_LEN):
        a = np.minimum((rng.random(n)[:, None] > cum[np.minimum(k, m - 1)]).sum(axis=1), EOS)
        out[:, h] = a
        k = table[k, a]
    return out


def success(table: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """1.0 where the planted run appears before EOS."""
    states = match_states(table, tokens)
    mask = step_mask(table, tokens)
    found = (states[:, 1:] == table.shape[0] - 1) & mask
    return found.any(axis=1).astype(np.float64)


def sft(policy: Policy, cfg: RunConfig, table: np.ndarray) -> float:
    """Supervised fine-tuning on prover samples; returns the final mean token NLL."""
    rng = np.random.default_rng([cfg.seed, 1])
    data = sample_prover(cfg.target, cfg.sft_gamma, cfg.sft_samples, rng)
    mask = torch.as_tensor(step_mask(table, data), dtype=torch.float32)
    tokens = torch.as_tensor(data)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.sft_lr)  # SFT is the same whatever the RL optimizer
    nll = float("nan")
    for _ in range(cfg.sft_epochs):
        order = rng.permutation(len(data))
        for i in range(0, len(data), cfg.batch):
            idx = torch.as_tensor(order[i : i + cfg.batch])
            lp = policy.log_probs(tokens[idx])
            loss = -(lp * mask[idx]).sum() / mask[idx].sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            nll = float(loss.detach())
    return nll


def prover_q(
    cfg: RunConfig, table: np.ndarray, values: np.ndarray, tokens: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``Q^μ(s_h, a_h)`` per step and ``V^μ(s_0)``: exact table lookups or fresh Monte Carlo rollouts."""
    if cfg.q == "exact":
        q, v0 = q_after_steps(table, values, tokens)
    else:
        states = match_states(table, tokens)[:, 1:]
        left = np.broadcast_to(SEQ_LEN - 1 - np.arange(SEQ_LEN), states.shape)
        est = mc_values_at(cfg.target, cfg.gamma, states.ravel(), left.ravel(), cfg.rollouts, rng)
        q = np.where(tokens == EOS, 0.0, est.reshape(states.shape))
        q = np.where(states == len(cfg.target), 1.0, q) * step_mask(table, tokens)
        v0 = np.full(
            len(tokens), mc_values_at(cfg.target, cfg.gamma, np.zeros(1), np.full(1, SEQ_LEN), cfg.rollouts, rng)[0]
        )
    return best_of_k(q, cfg.best_of), best_of_k(v0, cfg.best_of)


def rl_optimizer(policy: Policy, cfg: RunConfig) -> torch.optim.Optimizer:
    """The RL optimizer.

    * ``adam`` (the paper's): per-parameter steps ``lr · m / sqrt(v)`` with ``v`` the running mean of the
      squared gradient, so multiplying the advantages by any constant leaves the steps unchanged;
    * ``sgd``: SGD with momentum; steps are proportional to the gradient;
    * ``frozen-adam``: SGD with momentum on the gradient divided by a *fixed* per-parameter scale (see
      :func:`frozen_second_moment`): Adam's conditioning, without its invariance to the advantages' scale.
    """
    if cfg.optimizer == "adam":
        return torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    if cfg.optimizer in ("sgd", "frozen-adam"):
        return torch.optim.SGD(policy.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    raise ConfigError(f"unknown optimizer {cfg.optimizer!r} (adam, sgd or frozen-adam)")


def frozen_second_moment(
    policy: Policy, table: np.ndarray, seed: int, batches: int = 32, batch: int = 64
) -> list[torch.Tensor]:
    """``sqrt(E[g²]) + 1e-8`` per parameter, ``g`` the batch gradient of the token NLL on the policy's own samples.

    This is the denominator Adam would use for the SFT policy, measured once at the start of RL and then
    held fixed; it depends on the base policy and the seed only, not on the prover.
    """
    gen = torch.Generator().manual_seed(20_000 + seed)
    params = list(policy.parameters())
    sq = [torch.zeros_like(p) for p in params]
    for _ in range(batches):
        tokens = policy.sample(batch, SEQ_LEN, gen)
        mask = torch.as_tensor(step_mask(table, tokens.numpy()), dtype=torch.float32)
        loss = -(policy.log_probs(tokens) * mask).sum() / mask.sum()
        for s, g in zip(sq, torch.autograd.grad(loss, params), strict=True):
            s += g.pow(2) / batches
    return [s.sqrt() + 1e-8 for s in sq]


def evaluate(policy: Policy, table: np.ndarray, n: int, gen: torch.Generator) -> float:
    """Success rate of ``n`` fresh samples."""
    return float(success(table, policy.sample(n, SEQ_LEN, gen).numpy()).mean())


def run(cfg: RunConfig, base: dict | None = None) -> dict:
    """SFT (or load ``base`` weights), then RL; returns the accuracy curve and timings."""
    table = transition_table(cfg.target)
    values = prover_values(cfg.target, cfg.gamma)
    policy = init_policy(cfg.seed)
    start = time.perf_counter()
    if base is None:
        sft(policy, cfg, table)
    else:
        policy.load_state_dict(base)
    base_state = {k: v.clone() for k, v in policy.state_dict().items()}
    gen = torch.Generator().manual_seed(cfg.seed)
    eval_gen = torch.Generator().manual_seed(10_000 + cfg.seed)
    rng = np.random.default_rng([cfg.seed, 2])
    opt = rl_optimizer(policy, cfg)
    denom = frozen_second_moment(policy, table, cfg.seed) if cfg.optimizer == "frozen-adam" else None
    iters, acc, train_acc = [0], [evaluate(policy, table, cfg.eval_samples, eval_gen)], []
    for it in range(1, cfg.iters + 1):
        tokens = policy.sample(cfg.batch, SEQ_LEN, gen).numpy()
        mask = step_mask(table, tokens)
        reward = success(table, tokens)
        coef = rloo_advantages(torch.as_tensor(reward), torch.zeros(cfg.batch, dtype=torch.long)).numpy()
        coef = np.broadcast_to(coef[:, None], mask.shape).copy()
        if cfg.alpha != 0.0:
            q, v0 = prover_q(cfg, table, values, tokens, rng)
            coef = coef + cfg.alpha * prover_advantages(q, v0)
        lp = policy.log_probs(torch.as_tensor(tokens))
        weight = torch.as_tensor(coef * mask, dtype=torch.float32)
        loss = -(weight * lp).sum() / cfg.batch
        opt.zero_grad()
        loss.backward()
        if denom is not None:
            for p, d in zip(policy.parameters(), denom, strict=True):
                p.grad /= d
        opt.step()
        train_acc.append(float(reward.mean()))
        if it % cfg.eval_every == 0:
            iters.append(it)
            acc.append(evaluate(policy, table, cfg.eval_samples, eval_gen))
    reached = [i for i, a in zip(iters, acc, strict=True) if a >= cfg.target_acc]
    return {
        "config": asdict(cfg),
        "iters": iters,
        "accuracy": acc,
        "train_accuracy": train_acc,
        "iters_to_target": reached[0] if reached else None,
        "prover_v0": float(values[0, SEQ_LEN]),
        "seconds": time.perf_counter() - start,
        "base_state": base_state,
    }


# ---------------------------------------------------------------------------------------------- experiments
def _public(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "base_state"}


def main_comparison(base_cfg: RunConfig, seeds: list[int], log: list[str]) -> tuple[dict, dict]:
    """Outcome-only vs progress (and the same with Monte Carlo Q if asked) per seed, sharing each SFT base."""
    runs: dict[str, list[dict]] = {"outcome": [], "progress": []}
    bases: dict[int, dict] = {}
    for seed in seeds:
        outcome = run(replace(base_cfg, seed=seed, alpha=0.0))
        bases[seed] = outcome["base_state"]
        progress = run(replace(base_cfg, seed=seed), base=bases[seed])
        for name, r in (("outcome", outcome), ("progress", progress)):
            runs[name].append(_public(r))
            log.append(
                f"main seed={seed} {name:8s} iters_to_{base_cfg.target_acc}={r['iters_to_target']} "
                f"final_acc={r['accuracy'][-1]:.3f} ({r['seconds']:.0f} s)"
            )
            print(log[-1], flush=True)
    return runs, bases


def prover_sweep(base_cfg: RunConfig, gammas: list[float], seeds: list[int], bases: dict, log: list[str]) -> dict:
    """Progress rewards with provers of strength γ (each seed starts from its SFT base)."""
    out: dict[str, list[dict]] = {}
    for gamma in gammas:
        out[str(gamma)] = []
        for seed in seeds:
            r = run(replace(base_cfg, seed=seed, gamma=gamma), base=bases.get(seed))
            bases.setdefault(seed, r["base_state"])
            out[str(gamma)].append(_public(r))
            log.append(
                f"sweep gamma={gamma:g} seed={seed} iters_to_target={r['iters_to_target']} "
                f"acc@{base_cfg.iters}={r['accuracy'][-1]:.3f} ({r['seconds']:.0f} s)"
            )
            print(log[-1], flush=True)
    return out


def advantage_table(target: tuple[int, ...], gammas: list[float], n: int = 20_000) -> list[str]:
    """Mean prover advantage by kind of token on ``n`` sequences of the γ = 5 policy (the SFT data)."""
    table = transition_table(target)
    tokens = sample_prover(target, 5.0, n, np.random.default_rng(0))
    mask = step_mask(table, tokens)
    states = match_states(table, tokens)[:, :-1]
    correct = (tokens == np.array(target)[np.minimum(states, len(target) - 1)]) & mask
    eos = (tokens == EOS) & mask
    rows = ["gamma  V0        mean|A|   A(next y* token)  A(EOS)     A(other)"]
    for g in gammas:
        q, v0 = q_after_steps(table, prover_values(target, g), tokens)
        a = prover_advantages(q, v0)
        rows.append(
            f"{g:<6g} {v0[0]:.2e}  {np.abs(a[mask]).mean():.2e}  {a[correct].mean():+.2e}         "
            f"{a[eos].mean():+.2e}  {a[mask & ~correct & ~eos].mean():+.2e}"
        )
    return rows


def mc_sparsity(target: tuple[int, ...], gammas: list[float], rollouts: int, n: int = 2000) -> list[str]:
    """How often the paper's Monte Carlo ``Q̂^μ`` is exactly 0, on ``n`` sequences of the γ = 5 policy (the SFT data).

    Per prover: the share of non-terminal steps whose ``Q̂`` (``rollouts`` fresh prover rollouts) is 0, and the
    share of all steps whose advantage ``Q̂_h − Q̂_{h−1}`` is non-zero (``V̂(s_0)`` taken as 0).
    """
    table = transition_table(target)
    tokens = sample_prover(target, 5.0, n, np.random.default_rng(0))
    mask = step_mask(table, tokens)
    states = match_states(table, tokens)[:, 1:]
    left = np.broadcast_to(SEQ_LEN - 1 - np.arange(SEQ_LEN), states.shape)
    rng = np.random.default_rng(1)
    rows = [f"gamma  share of steps with Q̂ = 0  share of steps with Â != 0   ({rollouts} rollouts)"]
    for g in gammas:
        est = mc_values_at(target, g, states[mask], left[mask], rollouts, rng)
        live = (states[mask] < len(target)) & (tokens[mask] != EOS)
        q = np.zeros(mask.shape)
        q[mask] = np.where(tokens[mask] == EOS, 0.0, np.where(states[mask] == len(target), 1.0, est))
        adv = prover_advantages(q, np.zeros(len(tokens)))
        rows.append(f"{g:<6g} {(est[live] == 0).mean():.3f}                     {(adv[mask] != 0).mean():.3f}")
    return rows


def gradient_scales(cfg: RunConfig, gammas: list[float], n: int = 512) -> list[str]:
    """Size of the progress-only policy gradient ``∇ Σ_h A^μ_h log π / n`` at the SFT base, per prover.

    Columns: global norm, per-parameter RMS (Adam's ``eps`` is 1e-8), and the RMS after dividing by the
    frozen second moment (:func:`frozen_second_moment`), i.e. what ``frozen-adam`` steps with. Last row: the
    outcome-only gradient of a batch of 64 with one success (RLOO coefficient ≈ 1 on it).
    """
    table = transition_table(cfg.target)
    policy = init_policy(cfg.seed)
    sft(policy, cfg, table)
    tokens = policy.sample(n, SEQ_LEN, torch.Generator().manual_seed(cfg.seed)).numpy()
    mask = step_mask(table, tokens)
    denom = frozen_second_moment(policy, table, cfg.seed)
    params = list(policy.parameters())

    def scales(coef: np.ndarray, batch: int) -> str:
        loss = -(torch.as_tensor(coef * mask, dtype=torch.float32) * policy.log_probs(torch.as_tensor(tokens)))
        grads = torch.autograd.grad(loss.sum() / batch, params)
        flat = torch.cat([g.flatten() for g in grads])
        pre = torch.cat([(g / d).flatten() for g, d in zip(grads, denom, strict=True)])
        rms = flat.pow(2).mean().sqrt()
        return f"{float(flat.norm()):.2e}  {float(rms):.2e}  {float(pre.pow(2).mean().sqrt()):.2e}"

    rows = ["gamma  |grad|    rms       rms/frozen"]
    for g in gammas:
        q, v0 = q_after_steps(table, prover_values(cfg.target, g), tokens)
        rows.append(f"{g:<6g} {scales(prover_advantages(q, v0), n)}")
    one = np.zeros((n, 1))
    one[0] = 1.0
    rows.append(f"R(1/64) {scales(one, 64)}")
    return rows


def lr_tune(base_cfg: RunConfig, lrs: list[float], log: list[str]) -> dict:
    """Progress runs (γ = ``base_cfg.gamma``, seed ``base_cfg.seed``) at each learning rate, one SFT base."""
    out: dict[str, dict] = {}
    base = None
    for lr in lrs:
        r = run(replace(base_cfg, lr=lr), base=base)
        base = r["base_state"]
        out[str(lr)] = _public(r)
        log.append(
            f"tune {base_cfg.optimizer} lr={lr:g} gamma={base_cfg.gamma:g} iters_to_target={r['iters_to_target']} "
            f"acc={[round(a, 2) for a in r['accuracy'][::5]]} ({r['seconds']:.0f} s)"
        )
        print(log[-1], flush=True)
    return out


def main_lines(runs: dict[str, list[dict]], target_acc: float = 0.9) -> list[str]:
    """The main comparison's claim, seed by seed: progress rewards reach the target accuracy first.

    A run that never reached the target counts as later than any that did.

    Example:
        >>> runs = {"outcome": [{"iters_to_target": 220}, {"iters_to_target": None}],
        ...         "progress": [{"iters_to_target": 60}, {"iters_to_target": 40}]}
        >>> main_lines(runs)[-1]
        'progress reaches 90% before outcome-only on every seed (2/2): holds here'
    """
    lines, first = [], 0
    pairs = zip(runs["outcome"], runs["progress"], strict=True)
    for seed, (outcome, progress) in enumerate(pairs):
        o, p = outcome["iters_to_target"], progress["iters_to_target"]
        first += p is not None and (o is None or p < o)
        lines.append(f"seed {seed}: iterations to {target_acc:.0%}: outcome-only {o or '—'}, progress {p or '—'}")
    n = len(runs["progress"])
    verdict = "holds here" if first == n else "does NOT hold here"
    lines.append(f"progress reaches {target_acc:.0%} before outcome-only on every seed ({first}/{n}): {verdict}")
    return lines


def sweep_summary(sweep: dict[str, list[dict]], outcome: list[dict], at: int) -> list[str]:
    """One row per prover (and outcome-only): iterations to the target per seed, median, accuracy at ``at``."""

    def row(name: str, runs: list[dict]) -> str:
        its = [r["iters_to_target"] for r in runs]
        cap = runs[0]["iters"][-1]
        med = np.median([cap + 1 if i is None else i for i in its])
        acc = [r["accuracy"][r["iters"].index(at)] for r in runs if at in r["iters"]]
        med_s = "—" if med > cap else f"{med:g}"
        its_s = ", ".join("—" if i is None else str(i) for i in its)
        return f"| {name} | {its_s} | {med_s} | {', '.join(f'{a:.3f}' for a in acc)} | {np.mean(acc):.3f} |"

    rows = [f"| prover | iterations to target (per seed) | median | accuracy at {at} (per seed) | mean |"]
    rows.append("|---|---|---|---|---|")
    if outcome:
        rows.append(row("outcome only", outcome))
    rows += [row(f"γ = {float(k):g}", sweep[k]) for k in sorted(sweep, key=float)]
    return rows


def stored_outcome_runs(path: Path, seeds: list[int] | None = None, cfg: RunConfig | None = None) -> list[dict]:
    """The outcome-only runs of an earlier ``results.json`` (its main comparison's, else its sweep's).

    With ``seeds``, fails unless the stored runs start with those seeds; with ``cfg``, warns where they were
    trained differently (optimizer, learning rate, evaluation samples, fewer iterations), since the sweep's
    summary and plot then compare against another baseline.
    """
    stored = json.loads(path.read_text())
    outcome = stored.get("main", {}).get("outcome") or stored.get("sweep_outcome")
    if not outcome:
        raise SystemExit(f"{path}: no outcome-only runs in it (neither main.outcome nor sweep_outcome)")
    if seeds is None:
        return outcome
    have = [r["config"]["seed"] for r in outcome]
    if have[: len(seeds)] != list(seeds):
        raise SystemExit(f"{path}: its outcome-only runs are seeds {have}, this sweep needs {list(seeds)}")
    theirs = outcome[0]["config"]
    for key in ("optimizer", "lr", "eval_samples", "iters") if cfg is not None else ():
        mine, stored_value = getattr(cfg, key), theirs.get(key, "adam" if key == "optimizer" else None)
        if stored_value != mine and not (key == "iters" and stored_value > mine):
            print(f"warning: {path}'s outcome-only runs used {key}={stored_value}, this sweep {key}={mine}", flush=True)
    return outcome[: len(seeds)]


def replot(out: Path) -> None:
    """Redraw both plots from a finished run's ``results.json``."""
    results = json.loads((out / "results.json").read_text())
    cfg = RunConfig(**{**results["config"], "target": tuple(results["config"]["target"])})
    if "main" in results:
        plot_main(results["main"], cfg, out / "accuracy_vs_iterations.png")
    if "sweep" in results:
        sweep = results["sweep"]
        first = next(iter(sweep.values()))[0]["config"]
        sweep_cfg = replace(cfg, iters=first["iters"])
        outcome = results.get("main", {}).get("outcome", []) or results.get("sweep_outcome", [])
        if not outcome and "outcome_from" in results:
            outcome = stored_outcome_runs(Path(results["outcome_from"]))
        plot_sweep(sweep, outcome, sweep_cfg, results.get("sweep_at", 100), out / "prover_sweep.png")


def merge(dirs: list[str], out: Path) -> None:
    """One ``results.json`` from sweeps split over several runs (the first config and outcome runs win)."""
    started = time.time()
    parts = [json.loads((Path(d) / "results.json").read_text()) for d in dirs]
    merged = {"config": parts[0]["config"], "merged_from": dirs, "sweep": {}, "log": []}
    merged["machine_per_part"] = [part.get("machine") for part in parts]
    for part in parts:
        merged["sweep"].update(part.get("sweep", {}))
        merged["log"] += part.get("log", [])
        if "sweep_outcome" in part and "sweep_outcome" not in merged:
            merged["sweep_outcome"] = part["sweep_outcome"]
        merged["sweep_at"] = part.get("sweep_at", 100)
    outcome = merged.get("sweep_outcome", [])
    merged["summary"] = sweep_summary(merged["sweep"], outcome, merged["sweep_at"])
    write_result(out / "results.json", merged, started=started)
    replot(out)
    print("\n".join(merged["summary"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="studies/results/pav_didactic")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=600, help="RL iterations of the main comparison")
    ap.add_argument("--sweep-iters", type=int, default=300, help="RL iterations per sweep run")
    ap.add_argument("--target-len", type=int, default=6)
    ap.add_argument("--gamma", type=float, default=10.0, help="prover strength of the main comparison")
    ap.add_argument("--gammas", default="1,2,5,10,15,25,50,100")
    ap.add_argument("--best-of", type=int, default=1, help="Best-of-K transform of the prover Q")
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--q", choices=("exact", "mc"), default="exact")
    ap.add_argument("--rollouts", type=int, default=128)
    ap.add_argument("--eval-samples", type=int, default=512, help="fresh samples per accuracy estimate")
    ap.add_argument("--sweep-at", type=int, default=100, help="iteration at which the sweep compares accuracy")
    ap.add_argument("--only", choices=("main", "sweep", "all", "tune"), default="all")
    ap.add_argument(
        "--optimizer", choices=("adam", "sgd", "frozen-adam"), default="adam", help="RL optimizer (SFT is always Adam)"
    )
    ap.add_argument("--lr", type=float, default=1e-3, help="RL learning rate")
    ap.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    ap.add_argument("--lrs", default="1,10,100", help="learning rates tried by --only tune (γ = --gamma, seed 0)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--replot", action="store_true", help="only redraw the plots from --out/results.json")
    ap.add_argument("--advantages", action="store_true", help="only print the prover advantage table")
    ap.add_argument("--mc-sparsity", action="store_true", help="only print how often Monte Carlo Q̂ is exactly 0")
    ap.add_argument("--grad-scales", action="store_true", help="only print the progress gradient's size per γ")
    ap.add_argument("--merge", default=None, help="only merge the sweeps of dir+dir+... into --out and plot them")
    ap.add_argument("--compare", default=None, help='only plot accuracy at --sweep-at vs γ: "label=dir+dir;label=dir"')
    ap.add_argument("--outcome-from", default=None, help="results.json whose outcome-only runs the sweep reuses")
    ap.add_argument("--check", action="store_true", help="a few minutes: does the main ordering hold here?")
    args = ap.parse_args()
    if args.check:  # two seeds of the main comparison, 250 iterations (outcome-only needs 210-400 for 90%)
        args = ap.parse_args(["--only", "main", "--seeds", "2", "--iters", "250", "--out", "runs/pav_didactic_check"])
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = RunConfig(
        target=PLANTED[: args.target_len],
        gamma=args.gamma,
        alpha=args.alpha,
        best_of=args.best_of,
        iters=args.iters,
        lr=args.lr,
        eval_samples=args.eval_samples,
        optimizer=args.optimizer,
        momentum=args.momentum,
        q=args.q,
        rollouts=args.rollouts,
    )
    seeds = list(range(args.seeds))
    if args.replot:
        replot(out)
        return
    if args.merge:
        merge(args.merge.split("+"), out)
        return
    if args.mc_sparsity:
        gammas = [float(x) for x in args.gammas.split(",")]
        print("\n".join(mc_sparsity(PLANTED[: args.target_len], gammas, args.rollouts)))
        return
    if args.grad_scales:
        print("\n".join(gradient_scales(cfg, [float(x) for x in args.gammas.split(",")])))
        return
    if args.compare:
        rows = plot_compare(load_sweeps(args.compare), args.sweep_at, out / f"accuracy_at_{args.sweep_at}_vs_gamma.png")
        print("\n".join(rows))
        return
    if args.advantages:
        print("\n".join(advantage_table(PLANTED[: args.target_len], [float(x) for x in args.gammas.split(",")])))
        return
    log: list[str] = []
    results: dict = {"config": asdict(cfg)}
    started, start = time.time(), time.perf_counter()
    if args.only == "tune":
        results["tune"] = lr_tune(replace(cfg, iters=args.sweep_iters), [float(x) for x in args.lrs.split(",")], log)
        results["log"] = log
        write_result(out / "results.json", results, started=started)
        return
    runs, bases = main_comparison(cfg, seeds, log) if args.only in ("main", "all") else ({}, {})
    if runs:
        results["main"] = runs
        results["main_summary"] = main_lines(runs, cfg.target_acc)
        print("\n".join(results["main_summary"]), flush=True)
        plot_main(runs, cfg, out / "accuracy_vs_iterations.png")
    if args.only in ("sweep", "all"):
        sweep_cfg = replace(cfg, iters=args.sweep_iters)
        gammas = [float(x) for x in args.gammas.split(",")]
        outcome = list(runs.get("outcome", []))
        if not outcome and args.outcome_from:
            outcome = stored_outcome_runs(Path(args.outcome_from), seeds, sweep_cfg)
            results["outcome_from"] = args.outcome_from
        if not outcome:
            for s in seeds:
                r = run(replace(sweep_cfg, seed=s, alpha=0.0), base=bases.get(s))
                bases.setdefault(s, r["base_state"])
                outcome.append(_public(r))
                log.append(f"sweep outcome seed={s} iters_to_target={r['iters_to_target']} ({r['seconds']:.0f} s)")
                print(log[-1], flush=True)
            results["sweep_outcome"] = outcome
        results["sweep"] = prover_sweep(sweep_cfg, gammas, seeds, bases, log)
        results["summary"] = sweep_summary(results["sweep"], outcome, args.sweep_at)
        print("\n".join(results["summary"]), flush=True)
        plot_sweep(results["sweep"], outcome, sweep_cfg, args.sweep_at, out / "prover_sweep.png")
    results["sweep_at"] = args.sweep_at
    results["log"] = log
    results["seconds"] = time.perf_counter() - start
    write_result(out / "results.json", results, started=started)
    print(f"done in {results['seconds']:.0f} s; wrote {out}")


if __name__ == "__main__":
    main()
