r"""The AfD study's evaluation: best-of-N with each reward model against one sample, and two reference selectors.

The package fits and saves the reward models (:func:`turnkit.train.afd.train_afd`, ``turnkit afd``); this module
is what ``studies/irl_afd.py`` measures with them:

* :func:`run_afd`: :func:`~turnkit.train.afd.train_afd`, then N SFT samples per held-out task ranked by each
  reward model and by the closed-form ``log π_SFT − log π_init``
  (:class:`~turnkit.critics.afd.ClosedFormCritic`), judged by the env's success (the gold reward) with a Wilson
  95% interval and win/tie/lose counts against one independent SFT sample of the same task
  (:func:`compare_success`); ``summary.json``.
* Reference selectors without a reward model: a plurality vote over the candidates (:func:`plurality_choice`)
  and the floor of an uninformative critic (:func:`distinct_reply_success`); how well a critic ranks within a
  task (:func:`within_task_spearman`).
* :func:`summary_table`: the plain-text table of a summary.

Seeds: evaluation tasks start at ``eval_seed`` (3·10⁶), disjoint from the reward model's training prompts
(2·10⁶ on), the SFT demonstrations and the quickstart's held-out seeds.

Example:
    >>> from turnkit.types import AgentTurn, Step, Trajectory
    >>> ep = lambda text: Trajectory("d", 0, (Step("q", AgentTurn(text), 0.0, True),))
    >>> plurality_choice([ep("7"), ep("8"), ep("8")])
    1
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnkit.agents.hf import HFPolicy
from turnkit.critics.afd import ClosedFormCritic
from turnkit.critics.base import Critic
from turnkit.errors import ConfigError
from turnkit.stats import wilson_interval
from turnkit.train.afd import (
    AfDRunConfig,
    best_of_n,
    group_episodes,
    group_scores,
    sample_episodes,
    select_best,
    train_afd,
)
from turnkit.types import Trajectory

from .text_metrics import spearman


@dataclass(frozen=True)
class AfDStudyConfig(AfDRunConfig):
    """:class:`~turnkit.train.afd.AfDRunConfig` plus the evaluation's settings (what :func:`run_afd` reads).

    Example:
        >>> AfDStudyConfig().ns, AfDStudyConfig().eval_episodes
        ((1, 4, 16), 200)
        >>> AfDStudyConfig(ns=(0, 4))
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: AfDStudyConfig.ns must be sizes >= 1, got (0, 4)
    """

    ns: tuple[int, ...] = (1, 4, 16)
    """Best-of-N sizes (the candidates of the smaller Ns are the first ones of the largest)."""
    closed_form: bool = True
    """Also rank the candidates with the closed-form baseline (:class:`~turnkit.critics.afd.ClosedFormCritic`)."""
    eval_episodes: int = 200
    """Held-out tasks for best-of-N."""
    eval_seed: int = 3_000_000
    """First evaluation task seed."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.ns or min(self.ns) < 1:
            raise ConfigError(f"AfDStudyConfig.ns must be sizes >= 1, got {self.ns}")
        if self.eval_episodes < 1:
            raise ConfigError(f"AfDStudyConfig.eval_episodes must be >= 1, got {self.eval_episodes}")


def _success(trajs: Sequence[Trajectory]) -> dict[str, float]:
    wins = sum(t.success for t in trajs)
    lo, hi = wilson_interval(wins, len(trajs))
    return {"episodes": float(len(trajs)), "success": wins / max(len(trajs), 1), "success_lo": lo, "success_hi": hi}


def reply_key(trajectory: Trajectory) -> tuple[str, ...]:
    """The agent's replies of an episode, the identity used to count equal answers."""
    return tuple(step.action.text for step in trajectory.steps)


def plurality_choice(group: Sequence[Trajectory]) -> int:
    """Index of the first episode with the most frequent replies (self-consistency; errored episodes skipped).

    A reference selector without a reward model: it uses the one signal that best-of-N with a critic throws
    away, how often the policy gives each answer.

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> ep = lambda text: Trajectory("d", 0, (Step("q", AgentTurn(text), 0.0, True),))
        >>> plurality_choice([ep("7"), ep("8"), ep("8"), ep("7")]), plurality_choice([ep("1"), ep("2")])
        (0, 0)
    """
    counts: dict[tuple[str, ...], int] = {}
    for t in group:
        if t.error is None:
            counts[reply_key(t)] = counts.get(reply_key(t), 0) + 1
    if not counts:
        return 0
    top = max(counts.values())
    return next(i for i, t in enumerate(group) if t.error is None and counts[reply_key(t)] == top)


def distinct_reply_success(group: Sequence[Trajectory]) -> float:
    """Expected success of a selector that picks one of the group's *distinct* replies uniformly at random.

    Duplicated replies get equal scores from any critic, so a critic that carries no information about the
    answer falls to this floor as N grows, below one sample whenever the right answer is the frequent one.

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> ep = lambda text, ok: Trajectory("d", 0, (Step("q", AgentTurn(text), 0.0, True, info={"success": ok}),))
        >>> distinct_reply_success([ep("7", True), ep("7", True), ep("7", True), ep("8", False)])
        0.5
    """
    success = {reply_key(t): t.success for t in group if t.error is None}
    return sum(success.values()) / len(success) if success else 0.0


def within_task_spearman(
    groups: Sequence[Sequence[Trajectory]], scores: Sequence[Sequence[float | None]]
) -> dict[str, float]:
    """How well a critic ranks the candidates of one task: Spearman's ρ of score and success, averaged over tasks.

    Only tasks whose candidates both succeed and fail (and whose scores are not all equal) say anything about
    ranking; errored candidates are left out. ``tasks`` is how many tasks the mean is over.

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> ep = lambda ok: Trajectory("d", 0, (Step("q", AgentTurn("a"), 0.0, True, info={"success": ok}),))
        >>> groups = [[ep(True), ep(False)], [ep(False), ep(True), ep(False)], [ep(True), ep(True)]]
        >>> r = within_task_spearman(groups, [[2.0, 1.0], [0.0, 0.0, 1.0], [5.0, 1.0]])  # the third: all succeed
        >>> round(r["spearman"], 6), r["tasks"]  # (ρ = 1 and ρ = −0.75 / 1.5 = −0.5) / 2
        (0.25, 2.0)
    """
    values = []
    for group, group_scores_ in zip(groups, scores, strict=True):
        pairs = [(s, float(t.success)) for t, s in zip(group, group_scores_, strict=True) if s is not None]
        if len(pairs) < 2 or len({ok for _, ok in pairs}) < 2 or len({s for s, _ in pairs}) < 2:
            continue
        values.append(spearman([s for s, _ in pairs], [ok for _, ok in pairs]))
    return {"spearman": sum(values) / len(values) if values else math.nan, "tasks": float(len(values))}


def compare_success(chosen: Sequence[Trajectory], baseline: Sequence[Trajectory]) -> dict[str, float]:
    """Success rate (Wilson 95% CI) of ``chosen`` and its win/tie/lose counts against ``baseline``, task by task.

    Example:
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> ep = lambda ok: Trajectory("d", 0, (Step("q", AgentTurn("a"), float(ok), True, info={"success": ok}),))
        >>> r = compare_success([ep(True), ep(True), ep(False)], [ep(False), ep(True), ep(True)])
        >>> r["success"], r["win"], r["tie"], r["lose"]
        (0.6666666666666666, 1.0, 1.0, 1.0)
    """
    if len(chosen) != len(baseline):
        raise ValueError(f"got {len(chosen)} chosen episodes but {len(baseline)} baseline episodes")
    n = len(chosen)
    wins = sum(c.success and not b.success for c, b in zip(chosen, baseline, strict=True))
    loses = sum(b.success and not c.success for c, b in zip(chosen, baseline, strict=True))
    successes = sum(c.success for c in chosen)
    lo, hi = wilson_interval(successes, n)
    return {
        "tasks": float(n),
        "success": successes / n if n else 0.0,
        "success_lo": lo,
        "success_hi": hi,
        "win": float(wins),
        "tie": float(n - wins - loses),
        "lose": float(loses),
        "win_rate": wins / n if n else 0.0,
        "lose_rate": loses / n if n else 0.0,
    }


def best_of_n_eval(
    policy: HFPolicy,
    critic: Critic,
    env_id: str,
    seeds: Sequence[int],
    n: int,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    split: str = "id",
    temperature: float = 1.0,
    max_turns: int | None = None,
    seed: int = 0,
    progress: bool = False,
) -> dict[str, float]:
    """Best-of-``n`` with ``critic`` over ``policy``'s samples, judged by the env's success.

    The baseline is one more sample per task at sampling seed ``seed + 1`` (independent of the candidates).

    Returns:
        :func:`compare_success` of the chosen episodes against the baseline, plus ``baseline_success`` and
        ``pass_at_n`` (share of tasks with any successful candidate: the ceiling of any selector).

    Example:
        >>> from turnkit.critics.rules import LengthPenalty
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(32, 1, 2)), tok, max_new_tokens=4)
        >>> critic = LengthPenalty(per_unit=1.0)
        >>> r = best_of_n_eval(policy, critic, "turnkit/MathEpisodes-v0", [0, 1, 2], 2, max_turns=1)
        >>> r["tasks"], r["win"] + r["tie"] + r["lose"]
        (3.0, 3.0)
    """
    kw: dict[str, Any] = {"env_kwargs": env_kwargs, "split": split, "temperature": temperature, "max_turns": max_turns}
    candidates = group_episodes(sample_episodes(policy, env_id, seeds, n=n, seed=seed, progress=progress, **kw), n)
    baseline = sample_episodes(policy, env_id, seeds, n=1, seed=seed + 1, **kw)
    report = compare_success(best_of_n(candidates, critic), baseline)
    report["baseline_success"] = sum(b.success for b in baseline) / len(baseline)
    report["pass_at_n"] = sum(any(t.success for t in g) for g in candidates) / len(candidates)
    return report


# ---------------------------------------------------------------------------------------------- the run


def run_afd(cfg: AfDStudyConfig, *, progress: bool = True) -> dict[str, Any]:
    """:func:`~turnkit.train.afd.train_afd`, then best-of-N with every reward model → ``summary.json``.

    Returns:
        The summary: ``config``; ``train_data`` (success of the init and SFT samples, demonstrations kept);
        ``rm`` (fit metrics per choice); ``baseline`` (one independent SFT sample per task); ``pass_at_n``;
        ``best_of_n[<critic>][<n>]`` (:func:`compare_success` against the baseline) for ``afd_<choice>`` and
        ``afd_closed_form``; ``reference``: the same for a plurality vote over the N candidates
        (:func:`plurality_choice`) and the success of a uniformly random distinct reply
        (:func:`distinct_reply_success`), the floor of an uninformative critic; ``ranking[<critic>]``: its
        :func:`within_task_spearman` over all N candidates; ``seconds``.
    """
    start = time.perf_counter()
    out = Path(cfg.out_dir)
    trained = train_afd(cfg, progress=progress)
    sft, summary = trained.sft, dict(trained.summary)
    summary.pop("seconds", None)
    common: dict[str, Any] = {
        "env_kwargs": cfg.env_kwargs,
        "split": cfg.split,
        "temperature": cfg.temperature,
        "max_turns": cfg.max_turns,
        "progress": progress,
    }
    critics: dict[str, Critic] = dict(trained.critics)
    if cfg.closed_form:
        critics["afd_closed_form"] = ClosedFormCritic(sft, trained.init)

    eval_seeds = list(range(cfg.eval_seed, cfg.eval_seed + cfg.eval_episodes))
    n_max = max(cfg.ns)
    candidates = group_episodes(
        sample_episodes(sft, cfg.env_id, eval_seeds, n=n_max, seed=cfg.seed, desc="candidates", **common), n_max
    )
    baseline = sample_episodes(sft, cfg.env_id, eval_seeds, seed=cfg.seed + 1, desc="baseline", **common)
    summary["baseline"] = _success(baseline)
    summary["pass_at_n"] = {
        str(n): sum(any(t.success for t in g[:n]) for g in candidates) / len(candidates) for n in cfg.ns
    }
    summary["reference"] = {
        "plurality_vote": {
            str(n): compare_success([g[plurality_choice(g[:n])] for g in candidates], baseline) for n in sorted(cfg.ns)
        },
        "distinct_reply_floor": {
            str(n): sum(distinct_reply_success(g[:n]) for g in candidates) / len(candidates) for n in sorted(cfg.ns)
        },
    }
    summary["best_of_n"], summary["ranking"] = {}, {}
    for name, scorer in critics.items():
        scores = group_scores(candidates, scorer)
        summary["ranking"][name] = within_task_spearman(candidates, scores)
        summary["best_of_n"][name] = {
            str(n): compare_success([g[select_best(s[:n])] for g, s in zip(candidates, scores, strict=True)], baseline)
            for n in sorted(cfg.ns)
        }
    summary["seconds"] = time.perf_counter() - start
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return summary


def summary_table(summary: Mapping[str, Any]) -> str:
    """The best-of-N results of a :func:`run_afd` summary as a plain-text table (one row per critic and N).

    Example:
        >>> row = {"success": 0.5, "success_lo": 0.3, "success_hi": 0.7, "win": 3.0, "tie": 5.0, "lose": 2.0}
        >>> print(summary_table({"baseline": {"success": 0.4}, "best_of_n": {"afd_init_sft": {"4": row}}}))
        critic             N  success  95% CI       win/tie/lose
        afd_init_sft       4  0.500    0.300-0.700  3/5/2
        (baseline: one SFT sample per task, success 0.400)
    """

    def row(name: str, n: str, r: Mapping[str, float]) -> str:
        return (
            f"{name:<16}  {n:>2}  {r['success']:<7.3f}  {r['success_lo']:.3f}-{r['success_hi']:.3f}  "
            f"{r['win']:.0f}/{r['tie']:.0f}/{r['lose']:.0f}"
        )

    reference = summary.get("reference", {})
    lines = [f"{'critic':<16}  {'N':>2}  {'success':<7}  {'95% CI':<11}  win/tie/lose"]
    lines += [row(name, n, r) for name, per_n in summary["best_of_n"].items() for n, r in per_n.items()]
    lines += [row("plurality_vote", n, r) for n, r in reference.get("plurality_vote", {}).items()]
    lines += [
        f"{'distinct_floor':<16}  {n:>2}  {floor:<7.3f}  (a random distinct reply)"
        for n, floor in reference.get("distinct_reply_floor", {}).items()
    ]
    lines.append(f"(baseline: one SFT sample per task, success {summary['baseline']['success']:.3f})")
    return "\n".join(lines)
