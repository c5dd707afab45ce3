r"""Alignment from Demonstrations: fit IRL reward models on the embedded tiny world (``turnkit afd``).

The recipe of Sun & van der Schaar (2024), "Inverse-RL-ignited Distributional Reward Modeling" (AfD: a
discriminator between two samplers is a reward model), on the embedded tiny world:

1. **Policies.** The SFT policy is the embedded default (:func:`turnkit.models.embedded.tiny_policy`). The
   *initial* policy is the same recipe stopped early (:func:`init_recipe`, :data:`INIT_SFT_STEPS` steps): it
   already writes ``ANSWER: <n>`` but is right far less often.
2. **Data** (:func:`rm_training_data`, :data:`DATA_CHOICES`): the discriminator's (negatives, positives) are
   (init samples, SFT samples) for ``init_sft`` (the paper's best: both sides come from one model family),
   (init samples, demonstrations) for ``init_demo``, (SFT samples, demonstrations) for ``sft_demo``.
3. **Reward model**: :class:`~turnkit.critics.afd.model.AfDCritic` started from the SFT policy's weights, trained
   with the discriminator loss; its reward is the logit. :func:`train_afd` saves one per data choice to
   ``<out_dir>/rm/<choice>/``; ``critic.afd.model=<that folder>`` loads it into training, and
   :func:`best_of_n` ranks sampled episodes with it.

How well the reward models select (best-of-N against one sample, a plurality vote, the floor of an uninformative
critic) is a study, not part of the package: ``python studies/irl_afd.py`` (its pipeline lives in
``studies/common/afd.py``; results in docs/studies/irl_afd.md).

Seeds: RM training prompts start at ``train_seed`` (2·10⁶), disjoint from the SFT demonstrations
(``0 .. 1999``) and from the quickstart's held-out seeds (10⁹ on).

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
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium

from turnkit.agents.hf import HFPolicy
from turnkit.configs import check_int
from turnkit.critics.afd import AfDConfig, AfDCritic
from turnkit.critics.base import Critic, score_all
from turnkit.errors import ConfigError, DataError
from turnkit.models.embedded import DEFAULT_RECIPE, MATH_ENV, TinyRecipe, tiny_policy
from turnkit.rollout.chat import ChatDelta
from turnkit.rollout.collect import collect_batch
from turnkit.rollout.demos import collect_demos
from turnkit.stats import wilson_interval
from turnkit.types import Trajectory

DATA_CHOICES = ("init_sft", "init_demo", "sft_demo")
"""Which (negatives, positives) the reward model learns from: init vs SFT samples, init samples vs
demonstrations, SFT samples vs demonstrations."""

INIT_SFT_STEPS = 40
"""SFT steps of the initial policy (:func:`init_recipe`): the fewest at which it writes the ``ANSWER: <n>``
format as often as the SFT policy while succeeding far less often (the sweep: docs/learners/irl.md)."""


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
        >>> init_recipe().sft.steps, init_recipe().demo_episodes == DEFAULT_RECIPE.demo_episodes
        (40, True)
    """
    return dataclasses.replace(base, sft=dataclasses.replace(base.sft, steps=sft_steps))


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


# ---------------------------------------------------------------------------------------------- training


@dataclass(frozen=True)
class AfDRunConfig:
    """Settings of :func:`train_afd` (``turnkit afd``).

    Example:
        >>> AfDRunConfig().data, AfDRunConfig().train_episodes
        (('init_sft',), 512)
        >>> AfDRunConfig(data=("sft_init",))
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: unknown AfD data choice 'sft_init'; choose one of init_sft, init_demo, sft_demo
    """

    out_dir: str = "runs/afd"
    """Where ``rm/<choice>/`` (each reward model) and ``summary.json`` (the fit) go."""
    data: tuple[str, ...] = ("init_sft",)
    """Reward models to train, one per data choice (:data:`DATA_CHOICES`)."""
    env_id: str = MATH_ENV
    """The env."""
    env_kwargs: dict[str, Any] = field(default_factory=lambda: {"difficulty": 1, "max_attempts": 1})
    """``gymnasium.make`` arguments (default: the SFT demonstrations' difficulty, one attempt: single-turn)."""
    split: str = "id"
    """Task split of the training prompts."""
    max_turns: int | None = None
    """Cut episodes after this many turns (``None``: the env decides)."""
    train_episodes: int = 512
    """Prompts (task seeds) for the reward model: one init sample, one SFT sample and one demonstration each."""
    train_seed: int = 2_000_000
    """First training task seed."""
    recipe: TinyRecipe = DEFAULT_RECIPE
    """The SFT policy's recipe (:func:`~turnkit.models.embedded.tiny_policy`); the initial policy is its
    :func:`init_recipe`."""
    init_sft_steps: int = INIT_SFT_STEPS
    """SFT steps of the initial policy (:func:`init_recipe`); fewer than ``recipe.sft.steps``."""
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
    """The reward model's seed; the training samples use sampling seed ``seed + 2`` (``seed`` and ``seed + 1``
    are left to an evaluation's candidates and baseline, as in ``studies/irl_afd.py``)."""

    def __post_init__(self) -> None:
        if not self.data:
            raise ConfigError("AfDRunConfig.data needs at least one data choice")
        for choice in self.data:
            if choice not in DATA_CHOICES:
                raise ConfigError(f"unknown AfD data choice {choice!r}; choose one of {', '.join(DATA_CHOICES)}")
        check_int(self, "train_episodes", "init_sft_steps")
        if self.init_sft_steps >= self.recipe.sft.steps:
            raise ConfigError(
                f"AfDRunConfig.init_sft_steps={self.init_sft_steps} must be below the SFT recipe's "
                f"sft.steps={self.recipe.sft.steps}: the initial policy is the SFT policy stopped early"
            )
        self.afd_config()  # validates the reward-model settings

    def afd_config(self) -> AfDConfig:
        """The reward model's :class:`~turnkit.critics.afd.model.AfDConfig`."""
        return AfDConfig(
            steps=self.rm_steps,
            batch_size=self.rm_batch_size,
            optim={"lr": self.rm_lr},
            lora={"r": self.rm_lora_r},
            seed=self.seed,
        )


def _success(trajs: Sequence[Trajectory]) -> dict[str, float]:
    wins = sum(t.success for t in trajs)
    lo, hi = wilson_interval(wins, len(trajs))
    return {"episodes": float(len(trajs)), "success": wins / max(len(trajs), 1), "success_lo": lo, "success_hi": hi}


class AfDTraining(NamedTuple):
    """What :func:`train_afd` built: both policies, the fitted reward models (``afd_<choice>``), the summary."""

    sft: HFPolicy
    init: HFPolicy
    critics: dict[str, AfDCritic]
    summary: dict[str, Any]


def train_afd(cfg: AfDRunConfig, *, progress: bool = True) -> AfDTraining:
    """Policies → samples and demonstrations → one reward model per data choice, saved to ``rm/<choice>/``.

    Writes ``<out_dir>/summary.json``: ``config``; ``train_data`` (success of the init and SFT samples,
    demonstrations kept, errored samples masked); ``rm`` (fit metrics per choice); ``seconds``.
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
    critics: dict[str, AfDCritic] = {}
    for choice in cfg.data:
        negatives, positives = rm_training_data(choice, clean_init, clean_sft, demos)
        critic = AfDCritic.from_policy(sft, cfg.afd_config())
        summary["rm"][choice] = critic.fit(positives, negatives=negatives, progress=progress)
        critic.save(out / "rm" / choice)
        critics[f"afd_{choice}"] = critic
    summary["seconds"] = time.perf_counter() - start
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return AfDTraining(sft, init, critics, summary)
