r"""Alignment from Demonstrations, end to end: sample, fit the IRL reward model, best-of-N with it.

The recipe of Sun & van der Schaar (2024; research/irl-and-physics.md §2) on the embedded tiny world:

1. **Policies.** The SFT policy is the embedded default (:func:`turnkit.models.embedded.tiny_policy`: SFT on
   2000 oracle demonstrations, 400 steps). The *initial* policy is the same recipe stopped early
   (:func:`init_recipe`, :data:`INIT_SFT_STEPS` steps): it already writes ``ANSWER: <n>`` most of the time but
   is right far less often (measured on 400 single-attempt episodes of ``turnkit/MathEpisodes-v0``,
   difficulty 1, T = 1: 40 steps 0.10, 400 steps 0.49).
2. **Data** (:func:`rm_training_data`, :data:`DATA_CHOICES`): the discriminator's (negatives, positives) are
   (init samples, SFT samples) for ``init_sft`` (the paper's best: both sides come from one model family),
   (init samples, demonstrations) for ``init_demo``, (SFT samples, demonstrations) for ``sft_demo``.
3. **Reward model**: :class:`~turnkit.critics.afd.AfDCritic` started from the SFT policy's weights, trained
   with the discriminator loss; its reward is the logit.
4. **Best-of-N** (:func:`best_of_n`, :func:`best_of_n_eval`): N SFT samples per held-out task, the one with
   the highest critic total is chosen, judged by the env's success (the gold reward), with a Wilson 95%
   interval and win/tie/lose counts against one independent SFT sample of the same task.

:func:`run_afd` does all of it for several data choices at once (one set of samples, one set of candidates,
scored by every reward model and by the closed-form baseline), and writes ``summary.json``.

Seeds: RM training prompts start at ``train_seed`` (2·10⁶), evaluation tasks at ``eval_seed`` (3·10⁶), both
disjoint from the SFT demonstrations (``0 .. 1999``) and from the quickstart's held-out seeds (10⁹ on).

Example:
    >>> from turnkit.critics.base import CriticResult
    >>> from turnkit.types import AgentTurn, Step, Trajectory
    >>> class Length:  # a critic that likes long answers
    ...     def score(self, t):
    ...         return CriticResult(tuple(float(len(s.action.text)) for s in t.steps))
    >>> episode = lambda text: Trajectory("d", 0, (Step("q", AgentTurn(text), 0.0, True),))
    >>> [t.steps[0].action.text for t in best_of_n([[episode("a"), episode("abc"), episode("ab")]], Length())]
    ['abc']
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium

from turnkit.agents.hf import HFPolicy
from turnkit.critics.afd import AfDConfig, AfDCritic, ClosedFormCritic
from turnkit.critics.base import Critic, score_all
from turnkit.errors import ConfigError, DataError
from turnkit.models.embedded import DEFAULT_RECIPE, MATH_ENV, TinyRecipe, tiny_policy
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect_batch
from turnkit.rollout.demos import collect_demos
from turnkit.stats import wilson_interval
from turnkit.text_metrics import spearman
from turnkit.types import Trajectory

DATA_CHOICES = ("init_sft", "init_demo", "sft_demo")
"""Which (negatives, positives) the reward model learns from: init vs SFT samples, init samples vs
demonstrations, SFT samples vs demonstrations."""

INIT_SFT_STEPS = 40
"""SFT steps of the initial policy (:func:`init_recipe`). Measured on 400 single-attempt episodes (difficulty 1,
T = 1): 20 steps 0.005 success (the format is mostly broken), 40 → 0.10, 80 → 0.11, 120 → 0.14, the default
400 → 0.49; from 40 steps on the policy writes the ``ANSWER: <n>`` format as often as the SFT policy."""


class RMData(NamedTuple):
    """The reward model's training sides (unpacks as ``negatives, positives``)."""

    negatives: list[Trajectory]
    positives: list[Trajectory]


def rm_training_data(
    choice: str,
    init_samples: Sequence[Trajectory],
    sft_samples: Sequence[Trajectory],
    demos: Sequence[Trajectory],
) -> RMData:
    """The (negatives, positives) of one of :data:`DATA_CHOICES`.

    Raises:
        ConfigError: An unknown choice.
        DataError: The side the choice needs is empty.

    Example:
        >>> from turnkit.types import Trajectory
        >>> init, sft, demo = [Trajectory("i", 0)], [Trajectory("s", 0)], [Trajectory("d", 0)]
        >>> negatives, positives = rm_training_data("sft_demo", init, sft, demo)
        >>> negatives[0].env_id, positives[0].env_id
        ('s', 'd')
    """
    sides = {
        "init_sft": (init_samples, sft_samples),
        "init_demo": (init_samples, demos),
        "sft_demo": (sft_samples, demos),
    }
    if choice not in sides:
        raise ConfigError(f"unknown AfD data choice {choice!r}; choose one of {', '.join(DATA_CHOICES)}")
    negatives, positives = sides[choice]
    names = dict(zip(DATA_CHOICES, (("init", "SFT"), ("init", "demonstration"), ("SFT", "demonstration")), strict=True))
    for side, name in zip((negatives, positives), names[choice], strict=True):
        if not side:
            raise DataError(f"data choice {choice!r} needs {name} trajectories, got none")
    return RMData(list(negatives), list(positives))


def init_recipe(sft_steps: int = INIT_SFT_STEPS, base: TinyRecipe = DEFAULT_RECIPE) -> TinyRecipe:
    """The initial policy's recipe: ``base`` (the embedded default) with far fewer SFT steps.

    Build it with ``tiny_policy(recipe=init_recipe())`` (cached like the default).

    Example:
        >>> init_recipe().sft_steps, init_recipe().demo_episodes == DEFAULT_RECIPE.demo_episodes
        (40, True)
    """
    return dataclasses.replace(base, sft_steps=sft_steps)


# ---------------------------------------------------------------------------------------------- sampling


def sample_episodes(
    policy: HFPolicy,
    env_id: str,
    seeds: Sequence[int],
    *,
    n: int = 1,
    env_kwargs: Mapping[str, Any] | None = None,
    split: str = "id",
    temperature: float = 1.0,
    max_turns: int | None = None,
    seed: int = 0,
    batch_size: int = 64,
    progress: bool = False,
    desc: str = "sample",
) -> list[Trajectory]:
    """``n`` sampled episodes per task seed, seed-major (``Trajectory.group`` = the seed's position).

    The ``n`` episodes of a task play in one batched collection, so the policy draws them as distinct samples
    (:func:`~turnkit.agents.sampling.context_seeds`); ``seed`` is the policy's sampling seed (use another one
    for an independent draw of the same tasks). One env per parallel episode, all closed at the end;
    multi-turn contexts are token-exact (:class:`~turnkit.rollout.chat.ChatDelta`) when the template allows.

    Args:
        policy: The sampling policy (its model is not changed).
        env_id: A registered env id.
        seeds: Task (reset) seeds.
        n: Episodes per seed.
        env_kwargs: Extra ``gymnasium.make`` arguments.
        split: Task split.
        temperature: Sampling temperature.
        max_turns: Cut episodes after this many turns (``None``: the env decides).
        seed: The policy's sampling seed.
        batch_size: Episodes played side by side (at least ``n``).
        progress: Show a progress bar.
        desc: The progress bar's label.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(32, 1, 2)), tok, max_new_tokens=4)
        >>> trajs = sample_episodes(policy, "turnkit/MathEpisodes-v0", [5, 6], n=2, max_turns=1)
        >>> [(t.seed, t.group) for t in trajs], trajs[0].steps[0].action != trajs[1].steps[0].action
        ([(5, 0), (5, 0), (6, 1), (6, 1)], True)
    """
    from tqdm.auto import tqdm

    if n < 1:
        raise ConfigError(f"sample_episodes needs n >= 1, got {n}")
    if not seeds:
        return []
    view = policy.with_sampling(temperature=temperature, seed=seed)
    per_chunk = max(1, batch_size // n)
    try:
        chat: ChatDelta | None = ChatDelta(policy.tokenizer)
    except ConfigError:
        chat = None
    envs = [
        gymnasium.make(env_id, split=split, **dict(env_kwargs or {})) for _ in range(min(per_chunk, len(seeds)) * n)
    ]
    out: list[Trajectory] = []
    try:
        with tqdm(total=len(seeds) * n, desc=desc, disable=not progress, unit="ep", leave=False) as bar:
            for start in range(0, len(seeds), per_chunk):
                chunk = list(seeds[start : start + per_chunk])
                episode_seeds = [s for s in chunk for _ in range(n)]
                groups = [start + g for g in range(len(chunk)) for _ in range(n)]
                out.extend(
                    collect_batch(
                        envs[: len(episode_seeds)], view, episode_seeds, groups=groups, max_turns=max_turns, chat=chat
                    )
                )
                bar.update(len(episode_seeds))
    finally:
        for env in envs:
            env.close()
    return out


def group_episodes(trajectories: Sequence[Trajectory], n: int) -> list[list[Trajectory]]:
    """Split a seed-major list from :func:`sample_episodes` into groups of ``n``.

    Example:
        >>> from turnkit.types import Trajectory
        >>> [[t.seed for t in g] for g in group_episodes([Trajectory("d", s) for s in (1, 1, 2, 2)], 2)]
        [[1, 1], [2, 2]]
    """
    if n < 1 or len(trajectories) % n:
        raise ValueError(f"{len(trajectories)} trajectories do not split into groups of {n}")
    return [list(trajectories[i : i + n]) for i in range(0, len(trajectories), n)]


# ---------------------------------------------------------------------------------------------- best-of-N


def select_best(scores: Sequence[float | None]) -> int:
    """Index of the highest score, the first one on ties.

    ``None`` scores (errored episodes) are never chosen unless all are ``None`` (then ``0``).

    Example:
        >>> select_best([0.5, 2.0, 2.0]), select_best([None, -1.0]), select_best([None, None])
        (1, 1, 0)
    """
    if not scores:
        raise ValueError("select_best needs at least one score")
    best, best_score = 0, None
    for i, s in enumerate(scores):
        if s is not None and (best_score is None or s > best_score):
            best, best_score = i, s
    return best


def group_scores(groups: Sequence[Sequence[Trajectory]], critic: Critic) -> list[list[float | None]]:
    """Every candidate's critic total (``None`` for an errored episode), through one :func:`score_all` call."""
    flat = [t for g in groups for t in g]
    clean = [t for t in flat if t.error is None]
    totals = iter(r.total for r in score_all(critic, clean)) if clean else iter(())
    return [[next(totals) if t.error is None else None for t in g] for g in groups]


def best_of_n(groups: Sequence[Sequence[Trajectory]], critic: Critic) -> list[Trajectory]:
    """The chosen trajectory of each group: highest critic total, ties to the lowest index (errored: skipped)."""
    if any(not g for g in groups):
        raise DataError("best_of_n got an empty group")
    return [g[select_best(s)] for g, s in zip(groups, group_scores(groups, critic), strict=True)]


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


@dataclass(frozen=True)
class AfDRunConfig:
    """Settings of :func:`run_afd` (``turnkit afd``).

    Example:
        >>> AfDRunConfig().data, AfDRunConfig().ns
        (('init_sft',), (1, 4, 16))
        >>> AfDRunConfig(data=("sft_init",))
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: unknown AfD data choice 'sft_init'; choose one of init_sft, init_demo, sft_demo
    """

    out_dir: str = "runs/afd"
    """Where ``rm/<choice>/`` (each reward model) and ``summary.json`` go."""
    data: tuple[str, ...] = ("init_sft",)
    """Reward models to train, one per data choice (:data:`DATA_CHOICES`)."""
    ns: tuple[int, ...] = (1, 4, 16)
    """Best-of-N sizes (the candidates of the smaller Ns are the first ones of the largest)."""
    closed_form: bool = True
    """Also rank the candidates with the closed-form baseline (:class:`~turnkit.critics.afd.ClosedFormCritic`)."""
    env_id: str = MATH_ENV
    """The env."""
    env_kwargs: dict[str, Any] = field(default_factory=lambda: {"difficulty": 1, "max_attempts": 1})
    """``gymnasium.make`` arguments (default: the SFT demonstrations' difficulty, one attempt: single-turn)."""
    split: str = "id"
    """Task split of training prompts and evaluation tasks."""
    max_turns: int | None = None
    """Cut episodes after this many turns (``None``: the env decides)."""
    train_episodes: int = 512
    """Prompts (task seeds) for the reward model: one init sample, one SFT sample and one demonstration each."""
    eval_episodes: int = 200
    """Held-out tasks for best-of-N."""
    train_seed: int = 2_000_000
    """First training task seed."""
    eval_seed: int = 3_000_000
    """First evaluation task seed."""
    recipe: TinyRecipe = DEFAULT_RECIPE
    """The SFT policy's recipe (:func:`~turnkit.models.embedded.tiny_policy`); the initial policy is its
    :func:`init_recipe`."""
    init_sft_steps: int = INIT_SFT_STEPS
    """SFT steps of the initial policy (:func:`init_recipe`); fewer than ``recipe.sft_steps``."""
    cache: str | None = None
    """Model cache root (``None``: ``$TURNKIT_CACHE`` or ``~/.cache/turnkit``)."""
    temperature: float = 1.0
    """Sampling temperature of every policy sample."""
    rm_steps: int = 300
    """Reward-model optimizer steps."""
    rm_batch_size: int = 64
    """Reward-model samples per step (half per side)."""
    rm_lr: float = 3e-4
    """Reward-model learning rate."""
    rm_lora_r: int = 0
    """``0``: full fine-tuning of the reward model; ``> 0``: LoRA rank."""
    seed: int = 0
    """Sampling seed of the candidates (the baseline uses ``seed + 1``, RM training samples ``seed + 2``) and
    the reward model's seed."""

    def __post_init__(self) -> None:
        if not self.data:
            raise ConfigError("AfDRunConfig.data needs at least one data choice")
        for choice in self.data:
            if choice not in DATA_CHOICES:
                raise ConfigError(f"unknown AfD data choice {choice!r}; choose one of {', '.join(DATA_CHOICES)}")
        if not self.ns or min(self.ns) < 1:
            raise ConfigError(f"AfDRunConfig.ns must be sizes >= 1, got {self.ns}")
        for name in ("train_episodes", "eval_episodes", "init_sft_steps"):
            if getattr(self, name) < 1:
                raise ConfigError(f"AfDRunConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.init_sft_steps >= self.recipe.sft_steps:
            raise ConfigError(
                f"AfDRunConfig.init_sft_steps={self.init_sft_steps} must be below the SFT recipe's "
                f"sft_steps={self.recipe.sft_steps}: the initial policy is the SFT policy stopped early"
            )
        self.afd_config()  # validates the reward-model settings

    def afd_config(self) -> AfDConfig:
        """The reward model's :class:`~turnkit.critics.afd.AfDConfig`."""
        return AfDConfig(
            steps=self.rm_steps, batch_size=self.rm_batch_size, lr=self.rm_lr, lora_r=self.rm_lora_r, seed=self.seed
        )


def _success(trajs: Sequence[Trajectory]) -> dict[str, float]:
    wins = sum(t.success for t in trajs)
    lo, hi = wilson_interval(wins, len(trajs))
    return {"episodes": float(len(trajs)), "success": wins / max(len(trajs), 1), "success_lo": lo, "success_hi": hi}


def run_afd(cfg: AfDRunConfig, *, progress: bool = True) -> dict[str, Any]:
    """Policies → samples and demonstrations → one reward model per data choice → best-of-N → ``summary.json``.

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
    out.mkdir(parents=True, exist_ok=True)
    sft = tiny_policy(recipe=cfg.recipe, cache=cfg.cache, progress=progress)
    init = tiny_policy(recipe=init_recipe(cfg.init_sft_steps, cfg.recipe), cache=cfg.cache, progress=progress)
    common: dict[str, Any] = {
        "env_kwargs": cfg.env_kwargs,
        "split": cfg.split,
        "temperature": cfg.temperature,
        "max_turns": cfg.max_turns,
        "progress": progress,
    }
    train_seeds = list(range(cfg.train_seed, cfg.train_seed + cfg.train_episodes))
    # both policies are sampled whatever the data choices: their success rates are the run's init-vs-SFT check
    init_samples = sample_episodes(init, cfg.env_id, train_seeds, seed=cfg.seed + 2, desc="init samples", **common)
    sft_samples = sample_episodes(sft, cfg.env_id, train_seeds, seed=cfg.seed + 2, desc="sft samples", **common)
    demos: list[Trajectory] = []
    if any(c.endswith("demo") for c in cfg.data):
        got = collect_demos(
            cfg.env_id, episodes=cfg.train_episodes, seed=cfg.train_seed, split=cfg.split, env_kwargs=cfg.env_kwargs
        )
        demos = list(got.trajectories)
    clean_init = [t for t in init_samples if t.error is None]
    clean_sft = [t for t in sft_samples if t.error is None]
    summary: dict[str, Any] = {
        "config": asdict(cfg),
        "train_data": {
            "init": _success(init_samples),
            "sft": _success(sft_samples),
            "demonstrations": float(len(demos)),
            "masked_errors": float(len(init_samples) - len(clean_init) + len(sft_samples) - len(clean_sft)),
        },
        "rm": {},
    }
    critics: dict[str, Critic] = {}
    for choice in cfg.data:
        negatives, positives = rm_training_data(choice, clean_init, clean_sft, demos)
        critic = AfDCritic.from_policy(sft, cfg.afd_config())
        summary["rm"][choice] = critic.fit(positives, negatives=negatives, progress=progress)
        critic.save(out / "rm" / choice)
        critics[f"afd_{choice}"] = critic
    if cfg.closed_form:
        critics["afd_closed_form"] = ClosedFormCritic(sft, init)

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
