"""The SWEET math study's shared pieces: its pinned SFT start, LoRA policy copies, RFT and pair (DPO) training,
bootstrap intervals, and the per-seed summary lines.

``studies/sweet_math.py`` defined them; ``prime.py``, ``async_quickstart.py``, ``sweet_collab.py`` and
``sweet_collab_policy.py`` reuse them, so they live here rather than in one study script.

Example:
    >>> interval_line("x", [0.1, 0.1])
    'x: +0.100 [+0.100, +0.100]  (per seed +0.100, +0.100)'
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from turnkit.agents.hf import HFPolicy
from turnkit.critics.sweet import SweetCritic, outcome_pairs
from turnkit.learners.sft import select_successful
from turnkit.models.embedded import TinyRecipe
from turnkit.models.sft import SFTConfig, train_sft
from turnkit.models.tiny import TinyModelConfig
from turnkit.rollout.batch import TokenRow
from turnkit.train.dpo import DPOConfig, SegmentedPair, train_dpo
from turnkit.types import Trajectory

STUDY_RECIPE = TinyRecipe(
    model=TinyModelConfig(
        hidden_size=128, num_layers=2, num_heads=4, intermediate_size=384, max_position_embeddings=1024
    ),
    vocab_size=1024,
    corpus_tasks=3000,
    demo_episodes=2000,
    sft=SFTConfig(steps=400, batch_size=32, optim={"lr": 3e-3}),
    max_new_tokens=24,
)
"""The SFT start, pinned so that a change of the embedded default does not silently change this study."""


def bootstrap_ci(values: Sequence[float], rng: np.random.Generator, reps: int = 2000) -> tuple[float, float]:
    v = np.asarray(values, dtype=float)
    means = v[rng.integers(0, len(v), size=(reps, len(v)))].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def pair_outcomes(critic: SweetCritic, trajs: Sequence[Trajectory], pairs: Sequence[tuple[int, int]]) -> list[float]:
    needed = sorted({i for p in pairs for i in p})
    scores = dict(zip(needed, critic.trajectory_scores([trajs[i] for i in needed]), strict=True))
    return [1.0 if scores[a] > scores[b] else 0.5 if scores[a] == scores[b] else 0.0 for a, b in pairs]


def fresh_policy(base: HFPolicy, seed: int) -> HFPolicy:
    policy = HFPolicy(
        copy.deepcopy(base.model),
        base.tokenizer,
        max_new_tokens=base.sampling.max_new_tokens,
        max_batch_size=64,
        seed=seed,
    )
    policy.attach_lora(r=16, alpha=32, seed=seed)
    return policy


def train_rft(policy: HFPolicy, trajs: Sequence[Trajectory], steps: int, batch: int, lr: float) -> dict[str, float]:
    kept = select_successful(trajs)
    rows = [
        TokenRow.from_prompt_completion(s.action.prompt_token_ids, s.action.token_ids) for t in kept for s in t.steps
    ]
    hist = train_sft(
        policy.model,
        rows,
        SFTConfig(steps=steps, batch_size=batch, optim={"lr": lr, "warmup_steps": 5, "min_lr_ratio": 1.0}),
        pad_id=policy.pad_token_id,
        progress=False,
    )
    return {"trajectories": len(kept), "rows": len(rows), "final_nll": hist[-1]["loss"]}


def trajectory_pairs(trajs: Sequence[Trajectory], per_task: int, seed: int) -> list[SegmentedPair]:
    keep = [t for t in trajs if t.error is None and t.steps]
    index = outcome_pairs(
        [t.total_reward for t in keep],
        [t.group for t in keep],
        max_pairs_per_group=per_task,
        rng=np.random.default_rng(seed),
    )

    def side(t: Trajectory) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
        return tuple((tuple(s.action.prompt_token_ids), tuple(s.action.token_ids)) for s in t.steps)

    return [SegmentedPair(side(keep[a]), side(keep[b])) for a, b in index]


def train_pairs(
    policy: HFPolicy,
    pairs: Sequence[SegmentedPair],
    steps: int,
    batch: int,
    lr: float,
    *,
    beta: float = 0.1,
    nll_coef: float = 0.01,
    seed: int = 0,
) -> dict[str, float]:
    """Standard DPO plus ``nll_coef`` x chosen NLL (per token) with :func:`turnkit.train.dpo.train_dpo`.

    Sides are sums over their segments (every turn of an episode for multi-turn DPO); ``steps`` full batches
    drawn from a stream of seeded permutations; the policy already carries its LoRA adapter (``fresh_policy``).
    """
    cfg = DPOConfig(
        beta=beta, conservative=False, steps=steps, batch_size=batch, optim={"lr": lr}, nll_weight=nll_coef, seed=seed
    )
    hist = train_dpo(policy, pairs, cfg, progress=False)
    tail = hist[-max(1, steps // 10) :]
    return {
        "pairs": len(pairs),
        "final_loss": float(np.mean([h.get("dpo_loss", h["loss"]) for h in tail])),
        "final_acc": float(np.mean([h["accuracy"] for h in tail])),
    }


def by_float_path(runs: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Result files grouped by their machine record's float path, each group sorted by ``--seed``."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault(r.get("machine", {}).get("float_path", "?"), []).append(r)
    return {path: sorted(g, key=lambda r: int(r["args"].get("seed", 0))) for path, g in sorted(groups.items())}


def interval_line(label: str, values: Sequence[float]) -> str:
    """``label: mean [lo, hi]  (per seed ...)`` with a Student-t 95% interval over seeds.

    Example:
        >>> interval_line("x", [0.1, 0.1])
        'x: +0.100 [+0.100, +0.100]  (per seed +0.100, +0.100)'
    """
    from turnkit.stats import mean_ci

    mean, lo, hi = mean_ci(list(values))
    return f"{label}: {mean:+.3f} [{lo:+.3f}, {hi:+.3f}]  (per seed {', '.join(f'{v:+.3f}' for v in values)})"


COLLAPSE_FRACTION = 0.5
"""A run *collapsed* when its held-out success ends below this fraction of ``π_0``'s (issue #21)."""


def collapsed(success: float, start: float) -> bool:
    """Whether a held-out success ``success`` is a collapse from a start of ``start``.

    Example:
        >>> collapsed(0.2, start=0.536), collapsed(0.3, start=0.536)
        (True, False)
    """
    return success < COLLAPSE_FRACTION * start


def collapse_line(label: str, successes: Sequence[float], seeds: Sequence[str], start: float) -> str:
    """``label: collapsed k/n (seeds ...)``: the runs whose success fell below ``COLLAPSE_FRACTION`` of ``start``.

    Example:
        >>> collapse_line("  sweet", [0.02, 0.41, 0.23], ["0", "1", "2"], start=0.536)
        '  sweet: collapsed 2/3 (seeds 0, 2)'
        >>> collapse_line("  rft", [0.54], ["0"], start=0.536)
        '  rft: collapsed 0/1'
    """
    hit = [seed for seed, success in zip(seeds, successes, strict=True) if collapsed(success, start)]
    return f"{label}: collapsed {len(hit)}/{len(seeds)}" + (f" (seeds {', '.join(hit)})" if hit else "")
