"""Critics by name: a run's critic table built into one per-turn reward, updates and checkpoint state.

A run names its critics as a table, ``{name: {"weight": w, ...the critic's own keys}}`` (in TOML
``[critic.mrt]`` with ``weight = 0.5`` and ``samples = 4``; on the command line ``--set critic.mrt.samples=4``).
Shorthands: ``"mrt"`` is ``{"mrt": {"weight": 1.0}}``, ``{"mrt": 0.5}`` is ``{"mrt": {"weight": 0.5}}``.

A name is a critic module: ``"mrt"`` is :mod:`turnkit.critics.mrt`, ``"mypkg.my_critic"`` a module of yours,
and ``"my_critic"`` also the module an installed package names in the ``turnkit.critics`` entry-point group::

    [project.entry-points."turnkit.critics"]
    my_critic = "my_pkg.my_critic"

The registry imports the module and reads its attributes (a re-exported or decorated ``from_context``, a
``.pyc``-only or zipped install all work); an unknown name is a :class:`~turnkit.errors.ConfigError` with the
closest built-in or installed name. Validating a table imports the critic's module, so keep its top level
light: validating a run's config imports neither torch nor transformers. ``mrt`` and ``pav`` import the model
code only for type checking; the learned critics (``prime``, ``sweet``, ``afd``, ``iqlearn``) are packages
whose ``__init__`` holds ``Config`` and ``from_context`` and whose ``model`` module (torch) is imported when
the critic is built. The helper modules (``base``, ``progress``, ``registry``, ``rules``) are not critics.
A critic module is one room: it defines

* ``Config``: a frozen dataclass of its table keys (validated by :mod:`turnkit.configs`; a ``seed`` key
  defaults to the run's seed; optional ``LOOP_DEFAULTS``, a dict of defaults that differ inside training),
* ``from_context(ctx: CriticContext, config: Config) -> Critic``: builds the critic from the narrow
  :class:`~turnkit.critics.base.CriticContext`.

A critic that also has ``update``/``save``/``load`` (:class:`~turnkit.critics.base.StatefulCritic`) learns on
every rollout batch and keeps its state in every checkpoint. Adding a critic is adding one module and its test.
A plain factory ``"module:callable"`` (``callable(ctx) -> Critic``) takes only a weight.

Each step :meth:`CriticSet.score` scores the clean episodes of a rollout batch with

``r_h = r_h^env + Σ_i w_i · r_h^{(i)}``

before the policy update, then lets every stateful critic take its own update on the same batch.

Example:
    >>> normalize_table({"mrt": 0.5, "prime": {"optim": {"lr": 0.01}}})
    {'mrt': {'weight': 0.5}, 'prime': {'weight': 1.0, 'optim': {'lr': 0.01}}}
    >>> check_table({"mrt": {"samplez": 4}})
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: critic.mrt: unknown MRTConfig key 'samplez' (did you mean 'samples'?)
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import math
import pkgutil
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import gymnasium

from turnkit import configs
from turnkit.critics.base import (
    Critic,
    CriticContext,
    CriticResult,
    StatefulCritic,
    WeightedSum,
    critic_source,
    score_all,
    source_values,
)
from turnkit.critics.rules import EnvReward
from turnkit.errors import ConfigError
from turnkit.types import Trajectory

if TYPE_CHECKING:  # the estimators (torch) load when a run scores, not when its config is validated
    from turnkit.learners.estimators import Source

CriticTable = dict[str, dict[str, Any]]
"""``{name: {"weight": w, ...options}}``, the normal form of a run's critics."""


ENTRY_POINT_GROUP = "turnkit.critics"
"""The entry-point group in which installed packages name their critic modules (``name = "pkg.module"``)."""

_HELPERS = frozenset({"base", "progress", "registry", "rules"})
"""Modules of :mod:`turnkit.critics` that are shared code, not critics."""


def built_in_critics() -> list[str]:
    """Names of the critic modules shipped in :mod:`turnkit.critics` (listed by :mod:`pkgutil`, not imported).

    Example:
        >>> {"mrt", "pav", "prime", "sweet", "judge"} <= set(built_in_critics())
        True
    """
    import turnkit.critics as package

    names = {info.name for info in pkgutil.iter_modules(package.__path__)}
    return sorted(name for name in names - _HELPERS if not name.startswith("_"))


def installed_critics(group: str = ENTRY_POINT_GROUP) -> dict[str, str]:
    """Critics of installed packages: ``{name: module}`` from the ``group`` entry points.

    Example:
        >>> installed_critics("turnkit.no-such-group")
        {}
    """
    return {ep.name: ep.value for ep in sorted(importlib.metadata.entry_points(group=group), key=lambda e: e.name)}


def normalize_table(critic: str | Mapping[str, Any] | None) -> CriticTable:
    """The table form of a critic setting (see the module docstring); shapes it cannot read raise.

    Example:
        >>> normalize_table("pav"), normalize_table(None)
        ({'pav': {'weight': 1.0}}, {})
    """
    if critic is None:
        return {}
    if isinstance(critic, str):
        return {critic: {"weight": 1.0}}
    if not isinstance(critic, Mapping):
        raise ConfigError(f"critic must be a critic name or a table {{name: {{weight, ...}}}}, got {critic!r}")
    table: CriticTable = {}
    for name, entry in critic.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"critic: a critic name must be a non-empty string, got {name!r}")
        if isinstance(entry, Mapping):
            options = dict(entry)
        elif isinstance(entry, (int, float)) and not isinstance(entry, bool):
            options = {"weight": entry}
        else:
            raise ConfigError(f"critic.{name} must be a weight or a table of the critic's keys, got {entry!r}")
        weight = options.pop("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise ConfigError(f"critic.{name}.weight must be a finite number, got {weight!r}")
        table[name] = {"weight": float(weight), **options}
    return table


def _is_factory(name: str) -> bool:
    module, sep, attr = name.partition(":")
    return bool(sep and module and attr) and all(p.isidentifier() for p in (*module.split("."), *attr.split(".")))


def critic_module(name: str) -> ModuleType:
    """The module of critic ``name``: ``turnkit.critics.<name>``, an installed one, or the dotted module itself.

    A bare name is looked up as a built-in module first, then among the ``turnkit.critics`` entry points.

    Raises:
        ConfigError: No such module (naming the closest known critic), or it lacks ``Config`` and
            ``from_context``.

    Example:
        >>> critic_module("mrt").__name__
        'turnkit.critics.mrt'
        >>> critic_module("mtr")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: critic: unknown critic 'mtr' (did you mean 'mrt'?); use one of [...
        >>> critic_module("rules")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: critic: 'rules' is not a critic (turnkit.critics.rules is code the critics \
share); use one of ['afd', ...
    """
    if name in _HELPERS:
        raise ConfigError(
            f"critic: {name!r} is not a critic (turnkit.critics.{name} is code the critics share); "
            f"use one of {built_in_critics() + sorted(installed_critics())}"
        )
    dotted = name if "." in name else f"turnkit.critics.{name}"
    module = None if "." in name else _import_if_found(dotted)
    if module is None and "." not in name:
        installed = installed_critics()
        if name not in installed:
            known = built_in_critics() + sorted(installed)
            raise ConfigError(
                f"critic: unknown critic {name!r}{configs.suggest(name, known) or ''}; use one of {known}, "
                "a module of yours with Config and from_context, or 'module:callable'"
            )
        dotted = installed[name].partition(":")[0]
    if module is None:
        try:
            module = importlib.import_module(dotted)
        except ImportError as exc:
            raise ConfigError(
                f"critic {name!r}: cannot import {dotted} ({exc}); name a module with Config and from_context, "
                "or 'module:callable'"
            ) from exc
    config, build = getattr(module, "Config", None), getattr(module, "from_context", None)
    if not (dataclasses.is_dataclass(config) and callable(build)):
        raise ConfigError(f"critic {name!r}: module {dotted} defines no Config dataclass and from_context(ctx, config)")
    return module


def _import_if_found(dotted: str) -> ModuleType | None:
    """Import ``dotted``; ``None`` when that module itself does not exist (an import error inside it raises)."""
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError as exc:
        if exc.name == dotted:
            return None
        raise ConfigError(f"critic module {dotted} cannot import {exc.name!r} ({exc})") from exc


def critic_config(name: str, options: Mapping[str, Any], *, seed: int = 0) -> Any:
    """The ``Config`` of critic ``name`` from its table keys (``weight`` excluded), with its training defaults.

    Example:
        >>> critic_config("mrt", {"samples": 2}).samples
        2
    """
    module = critic_module(name)
    fields = {f.name for f in dataclasses.fields(module.Config)}
    data = {**getattr(module, "LOOP_DEFAULTS", {}), **({"seed": seed} if "seed" in fields else {}), **options}
    return configs.from_dict(module.Config, data, source=f"critic.{name}")


def check_table(critic: str | Mapping[str, Any] | None, *, warn: bool = True) -> CriticTable:
    """Normalise a critic setting and validate every critic's keys; returns the table.

    A critic's keys written flat before its ``Config`` had a table (its ``FLAT_KEYS``: ``critic.prime.prm_lr``)
    move into it in the returned table, with one ``FutureWarning`` (none when ``warn`` is false: a saved config).

    Raises:
        ConfigError: An unknown critic or key, or an invalid value (naming ``critic.<name>``).

    Example:
        >>> check_table({"pav": {"weight": 0.5, "best_of": 2}})
        {'pav': {'weight': 0.5, 'best_of': 2}}
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     check_table({"prime": {"prm_lr": 0.01}})
        {'prime': {'weight': 1.0, 'optim': {'lr': 0.01}}}
    """
    table, moved = normalize_table(critic), []
    for name, options in table.items():
        rest = {k: v for k, v in options.items() if k != "weight"}
        if _is_factory(name):
            if rest:
                raise ConfigError(
                    f"critic {name!r}: a 'module:callable' factory takes a weight only, not {sorted(rest)}"
                )
            continue
        moves = getattr(critic_module(name).Config, "FLAT_KEYS", {})
        if any(key in moves for key in rest):
            moved += flat_critic_keys({name: rest})
            rest = configs.move_flat_keys(rest, moves, source=f"critic.{name}", warn=False)
            table[name] = {"weight": options["weight"], **rest}
        try:
            critic_config(name, rest)
        except ConfigError as exc:
            message = str(exc)
            raise ConfigError(message if message.startswith("critic") else f"critic.{name}: {message}") from exc
    if moved and warn:
        message = f"critic: flat keys moved into tables (write them this way): {', '.join(moved)}"
        warnings.warn(message, FutureWarning, stacklevel=3)
    return table


def flat_critic_keys(critic: str | Mapping[str, Any] | None) -> list[str]:
    """The keys of a critic setting that :func:`check_table` moves into tables, as ``"old -> new"`` (dotted).

    Example:
        >>> flat_critic_keys({"sweet": {"lr": 0.01, "steps": 2}})
        ['critic.sweet.lr -> critic.sweet.optim.lr']
    """
    moved = []
    for name, options in normalize_table(critic).items():
        if _is_factory(name):
            continue
        moves = getattr(critic_module(name).Config, "FLAT_KEYS", {})
        moved += [f"critic.{name}.{k} -> critic.{name}.{'.'.join(moves[k])}" for k in options if k in moves]
    return moved


def load_factory(spec: str) -> Callable[[CriticContext], Critic]:
    """Import ``"module:callable"`` (a dotted attribute path after the colon is allowed).

    Raises:
        ConfigError: The module cannot be imported or has no such attribute, or it is not callable.

    Example:
        >>> load_factory("turnkit.critics.mrt:from_context").__name__
        'from_context'
        >>> load_factory("turnkit.critics.mrt:nothing")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: critic 'turnkit.critics.mrt:nothing': module turnkit.critics.mrt has no \
attribute 'nothing'
    """
    module_name, _, attr = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"critic {spec!r}: cannot import module {module_name!r} ({exc})") from exc
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"critic {spec!r}: module {module_name} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ConfigError(f"critic {spec!r} is not callable")
    return target


def build_critic(name: str, options: Mapping[str, Any], ctx: CriticContext) -> Critic:
    """Build one critic of the table from the run's context.

    Raises:
        ConfigError: An unknown critic, invalid keys, or a critic that cannot be built for this run.
    """
    rest = {k: v for k, v in options.items() if k != "weight"}
    if _is_factory(name):
        critic = load_factory(name)(ctx)
    else:
        critic = critic_module(name).from_context(ctx, critic_config(name, rest, seed=ctx.seed))
    if not callable(getattr(critic, "score", None)) and not callable(getattr(critic, "score_batch", None)):
        raise ConfigError(f"critic {name!r}: the factory returned {type(critic).__name__}, which has no score()")
    return critic


@dataclasses.dataclass(frozen=True)
class CriticScores:
    """What a :class:`CriticSet` made of one rollout batch.

    Attributes:
        turn_rewards: Per episode, the summed reward of every turn (what the advantages are computed from).
        credit: Per episode, each part's weighted reward per turn (``{"env": (...), "mrt": (...)}``), adding up
            to ``turn_rewards``; empty for an errored episode, which is not scored.
        metrics: Mean critic metrics, the stateful critics' update metrics and ``critic_s``.
    """

    turn_rewards: list[tuple[float, ...]]
    credit: list[dict[str, tuple[float, ...]]]
    metrics: dict[str, float]


class CriticSet:
    """A run's critics and their weights: per-turn rewards for a batch, the learned updates, checkpoint state.

    Args:
        parts: ``(name, weight, critic)`` triples.
        envs: Envs the critics own (closed by :meth:`close`).

    Example:
        >>> from turnkit.critics.rules import LengthPenalty
        >>> from turnkit.types import AgentTurn, Step
        >>> critics = CriticSet([("short", 0.5, LengthPenalty(per_unit=1.0, unit="words"))])
        >>> traj = Trajectory("d", 0, (Step("q", AgentTurn("two words"), 1.0, True),))
        >>> critics.rewards([traj])[0]  # 1.0 (env) + 0.5 x (-2)
        [(0.0,)]
    """

    def __init__(self, parts: Sequence[tuple[str, float, Critic]], envs: Sequence[gymnasium.Env] = ()) -> None:
        self.parts = list(parts)
        self.envs = list(envs)
        named: list[tuple[float, Critic]] = [(w, _Named(c, n)) for n, w, c in self.parts]
        self.critic = WeightedSum([(1.0, EnvReward()), *named], name="critic")

    def rewards(self, trajs: Sequence[Trajectory]) -> tuple[list[tuple[float, ...]], dict[str, float]]:
        """Per-turn rewards of every episode (errored ones: zeros, they are masked), then the learned updates.

        Returns:
            ``(turn_rewards, metrics)`` of :meth:`score`.
        """
        scores = self.score(trajs)
        return scores.turn_rewards, scores.metrics

    def score(self, trajs: Sequence[Trajectory]) -> CriticScores:
        """Score a batch (errored episodes get zeros: they are masked), then let the stateful critics learn on it.

        Returns:
            The per-turn rewards, each part's weighted credit per turn (``"env"`` and every named critic), and
            the metrics: each critic metric averaged over the clean episodes (``<name>/<metric>``),
            ``critic_reward_mean`` (mean episode total), the stateful critics' update metrics
            (``<name>/<metric>``), and ``critic_s`` (wall time of scoring and updates).
        """
        start = time.perf_counter()
        clean = [i for i, t in enumerate(trajs) if t.error is None]
        scored = self.critic.score_parts([trajs[i] for i in clean])
        rewards, metrics = _batch_rewards(trajs, clean, [result for result, _ in scored])
        credit: list[dict[str, tuple[float, ...]]] = [{} for _ in trajs]
        for i, (_, parts) in zip(clean, scored, strict=True):
            credit[i] = parts
        for name, _, critic in self._stateful():
            if clean:
                update = critic.update([trajs[i] for i in clean])
                metrics.update({f"{name}/{k}": float(v) for k, v in update.items()})
        metrics["critic_s"] = time.perf_counter() - start
        return CriticScores(rewards, credit, metrics)

    def accuracy_range(self) -> tuple[float, float] | None:
        """The prompt filter of a critic that has one (PRIME's ``acc_low``/``acc_high``), else ``None``.

        The ``prime`` estimator trains the policy on the same groups as the PRM learns from.

        Example:
            >>> from turnkit.critics.rules import LengthPenalty
            >>> CriticSet([("short", 0.5, LengthPenalty(per_unit=1.0, unit="words"))]).accuracy_range() is None
            True
        """
        for _, _, critic in self.parts:
            config = getattr(critic, "config", None)
            if hasattr(config, "acc_low") and hasattr(config, "acc_high"):
                return (float(config.acc_low), float(config.acc_high))
        return None

    def sources(self, trajs: Sequence[Trajectory], scores: CriticScores) -> dict[str, Source]:
        """The batch's rewards by source: ``"env"`` and one per critic, each with the kind its critic declares.

        The values are the weighted credit of :meth:`score` (zeros for errored episodes), converted to the
        source's own per-turn values (:func:`~turnkit.critics.base.source_values`: a progress critic's
        progress, not its shaped rewards). :func:`turnkit.learners.estimators.source_advantages` combines them.

        Example:
            >>> from turnkit.critics.rules import LengthPenalty
            >>> from turnkit.types import AgentTurn, Step
            >>> critics = CriticSet([("short", 0.5, LengthPenalty(per_unit=1.0, unit="words"))])
            >>> traj = Trajectory("d", 0, (Step("q", AgentTurn("two words"), 1.0, True),))
            >>> {name: (s.kind, s.values) for name, s in critics.sources([traj], critics.score([traj])).items()}
            {'env': ('reward', [(1.0,)]), 'short': ('reward', [(-1.0,)])}
        """
        from turnkit.learners.estimators import Source, env_sources

        out = env_sources(trajs)
        for name, _, critic in self.parts:
            rows = []
            for t, credit in zip(trajs, scores.credit, strict=True):
                part = credit.get(name)
                rows.append(tuple(0.0 for _ in t.steps) if part is None else source_values(critic, part))
            out[name] = Source(critic_source(critic), rows)
        return out

    def paper_estimator(self) -> str:
        """The estimator the papers of this run's dense critics use (``grpo.estimator = "paper"``).

        Raises:
            ConfigError: No critic names one, or two critics name different ones.

        Example:
            >>> from turnkit.critics.rules import LengthPenalty
            >>> CriticSet([("short", 1.0, LengthPenalty(per_unit=0.1))]).paper_estimator()
            Traceback (most recent call last):
            ...
            turnkit.errors.ConfigError: grpo.estimator='paper' needs a critic whose paper has an estimator \
(prime, mrt, pav, sweet); critics here: ['short']
        """
        named = {name: getattr(c, "estimator", None) for name, _, c in self.parts}
        found = sorted({e for e in named.values() if isinstance(e, str)})
        if not found:
            raise ConfigError(
                "grpo.estimator='paper' needs a critic whose paper has an estimator (prime, mrt, pav, sweet); "
                f"critics here: {sorted(named)}"
            )
        if len(found) > 1:
            raise ConfigError(
                f"grpo.estimator='paper' is ambiguous: the critics' papers use {found} ({named}); name one"
            )
        return found[0]

    def _stateful(self) -> list[tuple[str, float, StatefulCritic]]:
        return [(n, w, c) for n, w, c in self.parts if isinstance(c, StatefulCritic)]

    def stateful(self) -> list[str]:
        """Folder names (under a checkpoint's ``critics/``) of the critics whose state a checkpoint keeps."""
        return [_safe(name) for name, _, _ in self._stateful()]

    def save(self, folder: Path) -> None:
        """Write every stateful critic's state into ``folder/<name>/``."""
        for name, _, critic in self._stateful():
            (folder / _safe(name)).mkdir(parents=True, exist_ok=True)
            critic.save(folder / _safe(name))

    def load(self, folder: Path) -> None:
        """Restore what :meth:`save` wrote (every stateful critic must be there)."""
        for name, _, critic in self._stateful():
            critic.load(folder / _safe(name))

    def close(self) -> None:
        """Close the critics (their branch pools) and the envs they were given."""
        for _, _, critic in self.parts:
            close = getattr(critic, "close", None)
            if callable(close):
                close()
        for env in self.envs:
            env.close()


@dataclasses.dataclass(frozen=True)
class _Named:
    """A critic under the name its table gave it (metrics are kept as ``<name>/<metric>``)."""

    critic: Any
    name: str

    def score(self, trajectory: Trajectory) -> CriticResult:
        return self.score_batch([trajectory])[0]

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
        return score_all(self.critic, trajectories)


def _safe(name: str) -> str:
    return name.replace(":", "--").replace("/", "_")


def build_critics(table: str | Mapping[str, Any] | None, ctx: CriticContext) -> CriticSet | None:
    """The critics of a table (``None`` without any), built around the run's context.

    Build them before the policy gets its training adapter: PRIME and SWEET copy the start policy.

    Raises:
        ConfigError: An unknown or unloadable critic, or a critic that cannot be built for this run.

    Example:
        >>> ctx = CriticContext(policy=None, start_policy=lambda: None, make_env=lambda: None)
        >>> critics = build_critics({"length": {"weight": 0.5, "unit": "words"}}, ctx)
        >>> [(name, weight) for name, weight, _ in critics.parts], build_critics({}, ctx)
        ([('length', 0.5)], None)
    """
    parts = check_table(table)
    if not parts:
        return None
    envs: list[gymnasium.Env] = []

    def spare_env() -> gymnasium.Env:
        env = ctx.make_env()
        envs.append(env)
        return env

    owned = dataclasses.replace(ctx, make_env=spare_env)
    built = [(name, options["weight"], build_critic(name, options, owned)) for name, options in parts.items()]
    return CriticSet(built, envs)


def run_estimator(estimator: str, critics: CriticSet | None) -> str:
    """The advantage estimator a run uses: ``grpo.estimator``, with ``"paper"`` resolved from its critics.

    Raises:
        ConfigError: ``"paper"`` without a critic that names its paper's estimator, or with several.

    Example:
        >>> run_estimator("grpo", None), run_estimator("prime", None)
        ('grpo', 'prime')
    """
    if estimator != "paper":
        return estimator
    if critics is None:
        raise ConfigError("grpo.estimator='paper' needs critics (e.g. critic=prime); without one name an estimator")
    return critics.paper_estimator()


def critic_rewards(critic: Critic, trajs: Sequence[Trajectory]) -> tuple[list[tuple[float, ...]], dict[str, float]]:
    """Score the clean episodes of a batch: per-turn rewards for every episode, and mean metrics.

    Errored episodes are not scored (their advantages are masked anyway); they get zero rewards.

    Returns:
        ``(turn_rewards, metrics)``: one reward tuple per trajectory, and each critic metric averaged over
        the clean episodes (``nan`` values are left out of the mean), plus ``critic_reward_mean``.

    Example:
        >>> from turnkit.types import AgentTurn, Step
        >>> win = Trajectory("d", 0, (Step("q", AgentTurn("a"), 0.5, terminated=True),))
        >>> rewards, metrics = critic_rewards(EnvReward(), [win])
        >>> rewards, metrics["critic_reward_mean"]
        ([(0.5,)], 0.5)
    """
    clean = [i for i, t in enumerate(trajs) if t.error is None]
    return _batch_rewards(trajs, clean, score_all(critic, [trajs[i] for i in clean]))


def _batch_rewards(
    trajs: Sequence[Trajectory], clean: Sequence[int], results: Sequence[CriticResult]
) -> tuple[list[tuple[float, ...]], dict[str, float]]:
    """Zero rewards for the errored episodes, the clean ones' results in place, and the mean metrics."""
    rewards: list[tuple[float, ...]] = [tuple(0.0 for _ in t.steps) for t in trajs]
    sums: dict[str, list[float]] = {}
    for i, result in zip(clean, results, strict=True):
        rewards[i] = result.step_rewards
        for key, value in result.metrics.items():
            if value == value:  # not nan
                sums.setdefault(key, []).append(float(value))
    metrics = {key: sum(values) / len(values) for key, values in sums.items()}
    metrics["critic_reward_mean"] = sum(r.total for r in results) / max(len(clean), 1)
    return rewards, metrics


__all__ = [
    "ENTRY_POINT_GROUP",
    "CriticScores",
    "CriticSet",
    "CriticTable",
    "build_critic",
    "build_critics",
    "built_in_critics",
    "check_table",
    "critic_config",
    "critic_module",
    "critic_rewards",
    "installed_critics",
    "load_factory",
    "normalize_table",
    "run_estimator",
]
