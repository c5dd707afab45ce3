"""`TrainConfig`: every setting of a GRPO/RLOO run, validated, loadable from JSON/TOML, overridable by flags.

A run is fully described by its config (plus the code version): ``turnkit train --config run.toml --set
optim.lr=3e-4 --set env_kwargs.difficulty=2 --set grpo.kl_coef=0.05 --set eval.every=10``. Keys are the field
names below (19 at the top level). Each part of a step is a table with its own class: ``sampling``, ``rollout``,
``update``, ``eval`` and ``log`` (:mod:`turnkit.train.tables`), ``grpo`` (the loss,
:class:`~turnkit.learners.grpo.GRPOConfig`), ``optim`` and ``lora`` (the learner's,
:class:`~turnkit.learners.learner.OptimConfig` and :class:`~turnkit.learners.learner.LoraConfig`) and ``critic``
(``{name: {weight, ...the critic's own keys}}``, see :mod:`turnkit.critics.registry`).
``--set`` values are parsed as JSON when they parse (``3``, ``0.5``, ``true``, ``null``, ``["q_proj"]``) and are
strings otherwise; ``a.b=v`` sets key ``b`` of table ``a`` (:mod:`turnkit.configs`).

Files and flags written before the tables existed (flat ``group_size``, ``lr``, ``lora_r``, ``temperature``,
``eval_every``, ``micro_batch_rows``, ``async``, ``critic_samples`` ...) still load: :meth:`TrainConfig.from_dict`
moves each flat key into its table and warns once (``FutureWarning``), and :func:`upgrade_config` does the same
quietly for a saved run's config, so old runs resume.

Example:
    >>> from turnkit.configs import apply_overrides
    >>> cfg = apply_overrides(TrainConfig(), ["optim.lr=0.01", "env_kwargs.difficulty=2", "grpo.kl_coef=0.05"])
    >>> cfg.optim.lr, cfg.env_kwargs["difficulty"], cfg.grpo.kl_coef
    (0.01, 2, 0.05)
    >>> apply_overrides(TrainConfig(), ["grpo.group_size=1"])
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: --set: TrainConfig.grpo: GRPOConfig.group_size must be an int >= 2 (a lone sample \
has no baseline), got 1
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from turnkit import configs
from turnkit.critics.progress import FORCE_ANSWER
from turnkit.critics.registry import CriticTable, check_table, flat_critic_keys
from turnkit.distributed.cluster import RayConfig
from turnkit.errors import ConfigError
from turnkit.learners.config import GRPOConfig, LoraConfig, OptimConfig, flat_keys
from turnkit.train.tables import (  # noqa: F401  (the constants are still importable from here)
    BACKENDS,
    EVAL_SEED_START,
    MICRO_BATCH_TOKENS,
    EvalConfig,
    LogConfig,
    RolloutConfig,
    TrainSampling,
    UpdateConfig,
)

DEFAULT_LORA = LoraConfig(r=None)
"""Default :attr:`TrainConfig.lora`: the model's own rank (:meth:`TrainConfig.lora_rank`)."""
DEFAULT_OPTIM = OptimConfig(lr=2e-4)
"""Default :attr:`TrainConfig.optim`: AdamW at 2e-4, no warmup, constant, clipped at norm 1."""
TABLES: dict[str, Any] = {
    "lora": DEFAULT_LORA,
    "optim": DEFAULT_OPTIM,
    "sampling": TrainSampling(),
    "rollout": RolloutConfig(),
    "update": UpdateConfig(),
    "eval": EvalConfig(),
    "log": LogConfig(),
}
"""The tables of :class:`TrainConfig` with one settings class each (besides ``grpo``), and their defaults."""


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one RL run (see :mod:`turnkit.train.loop`). Validated on construction.

    Example:
        >>> cfg = TrainConfig(steps=5, grpo={"group_size": 4}, critic={"mrt": {"weight": 0.5, "samples": 2}})
        >>> cfg.steps, cfg.grpo.group_size, cfg.critic["mrt"]
        (5, 4, {'weight': 0.5, 'samples': 2})
        >>> TrainConfig(optim={"lr": -1.0})
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: TrainConfig.optim: OptimConfig.lr must be a finite number > 0, got -1.0
    """

    # --- environment
    env_id: str = "turnkit/MathEpisodes-v0"
    """Registered env id to train on."""
    env_kwargs: dict[str, Any] = field(default_factory=lambda: {"difficulty": 1})
    """Extra ``gymnasium.make`` arguments (also used for evaluation)."""
    split: str = "id"
    """Task split for training and evaluation."""
    max_turns: int | None = None
    """Cut episodes after this many turns (``None``: the env's own time limit)."""
    # --- policy
    model: str = "tiny"
    """A built-in model's name (``"tiny"``: the embedded SFT policy; ``"smollm2"``: SmolLM2-135M-Instruct; see
    :mod:`turnkit.models.names`) or a local HF model folder."""
    device: str | None = None
    """Where the learner runs: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` (``None``: where the start policy already is,
    the CPU for ``model="tiny"`` and local folders). The reference model and critics copied from the start policy
    follow it; critics loaded from a folder (``critic.iqlearn.model``, ``critic.afd.model``) stay on the CPU."""
    lora: LoraConfig = field(default_factory=lambda: DEFAULT_LORA)
    """The LoRA adapter (:class:`~turnkit.learners.learner.LoraConfig`: ``r``, ``alpha``, ``dropout``,
    ``targets``). ``r = 0`` fine-tunes every weight (fine for the ~0.5M-parameter tiny model); ``r = null`` (the
    default): the model's own default (:meth:`lora_rank`): 8 for ``smollm2``, 0 for the tiny models and local
    folders."""
    sampling: TrainSampling = field(default_factory=TrainSampling)
    """How the policy samples its training rollouts (:class:`~turnkit.train.tables.TrainSampling`:
    ``temperature``, ``top_p``, ``max_new_tokens``)."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Who plays the rollouts and where (:class:`~turnkit.train.tables.RolloutConfig`: ``backend``,
    ``backend_url``, ``ray``, ``async``, ``max_staleness``)."""
    # --- the loss
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    """GRPO/RLOO settings (:class:`~turnkit.learners.grpo.GRPOConfig`: ``group_size``, ``estimator``, ``per_turn``,
    ``gamma``, ``clip_eps``, ``kl_coef`` ...); ``max_tokens`` defaults to ``sampling.max_new_tokens``."""
    groups_per_step: int = 16
    """Groups (distinct tasks) per step; a step samples ``grpo.group_size * groups_per_step`` episodes, batched."""
    # --- dense per-turn rewards from critics (see turnkit.critics.registry)
    critic: CriticTable = field(default_factory=dict)
    """Critics and their settings, ``{name: {"weight": w, ...the critic's keys}}`` (empty: env rewards only);
    ``"mrt"`` or ``{"mrt": 0.5}`` are shorthands. Each turn's reward is then the env reward plus the weighted
    critic rewards, with per-turn credit (``grpo.per_turn`` is implied). Built-ins: ``mrt``, ``pav``, ``prime``,
    ``sweet``, ``judge``, ``iqlearn``, ``afd`` (each module's ``Config`` lists its keys)."""
    # --- optimisation
    steps: int = 40
    """RL steps (each: one rollout batch, then ``update.ppo_epochs`` passes over it)."""
    optim: OptimConfig = field(default_factory=lambda: DEFAULT_OPTIM)
    """The learner's AdamW and schedule (:class:`~turnkit.learners.learner.OptimConfig`: ``lr``,
    ``weight_decay``, ``max_grad_norm``, ``warmup_steps`` counted in RL steps, ``schedule`` ...)."""
    update: UpdateConfig = field(default_factory=UpdateConfig)
    """How the learner passes over each rollout batch (:class:`~turnkit.train.tables.UpdateConfig`:
    ``ppo_epochs``, ``minibatches``, ``micro_batch_rows``, ``micro_batch_tokens``, ``batch_layout``,
    ``skip_zero_advantage``)."""
    seed: int = 0
    """Run seed: task seeds, sampling seeds and LoRA initialisation derive from it."""
    # --- evaluation, checkpoints, logging
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Held-out evaluation (:class:`~turnkit.train.tables.EvalConfig`: ``every``, ``episodes``, ``seed``,
    ``temperature``)."""
    log: LogConfig = field(default_factory=LogConfig)
    """What the run writes besides its metrics (:class:`~turnkit.train.tables.LogConfig`: ``checkpoint_every``,
    ``rollouts_every``, ``tensorboard``)."""
    out_dir: str = "runs/train"
    """Run directory: ``metrics.jsonl``, ``config.json``, ``checkpoints/``, ``curves.png``."""

    def __post_init__(self) -> None:
        configs.check_str(self, "env_id", "model", "split", "out_dir")
        if not isinstance(self.env_kwargs, dict):
            raise ConfigError(f"TrainConfig.env_kwargs must be a dict, got {self.env_kwargs!r}")
        for name, default in TABLES.items():  # TrainConfig(optim={"lr": 1e-3}) reads as a file does
            configs.table_field(self, name, default)
        configs.check_int(self, "groups_per_step", "steps")
        configs.check_int(self, "seed", low=0)
        configs.check_int(self, "max_turns", optional=True)
        if self.device is not None and not _is_device_name(self.device):
            raise ConfigError(f"TrainConfig.device must be 'cpu', 'cuda' or 'cuda:N' (or null), got {self.device!r}")
        if isinstance(self.grpo, Mapping):  # TrainConfig(grpo={"group_size": 4}) reads as well as a file does
            object.__setattr__(self, "grpo", configs.from_dict(GRPOConfig, self.grpo, source="TrainConfig.grpo"))
        if not isinstance(self.grpo, GRPOConfig):
            raise ConfigError(f"TrainConfig.grpo must be a table of GRPOConfig keys, got {self.grpo!r}")
        try:
            object.__setattr__(self, "critic", check_table(self.critic))
        except ConfigError as exc:
            raise ConfigError(f"TrainConfig.{exc}") from exc
        self.loss_config()  # validates the loss as the loop builds it

    def lora_rank(self) -> int:
        """The run's LoRA rank (``0``: full fine-tuning): ``lora.r``, or the model's default when it is ``None``.

        The default comes from :func:`turnkit.models.names.default_lora_rank`.

        Example:
            >>> TrainConfig().lora_rank(), TrainConfig(model="smollm2").lora_rank()
            (0, 8)
            >>> TrainConfig(model="smollm2", lora={"r": 0}).lora_rank(), TrainConfig(lora={"r": 4}).lora_rank()
            (0, 4)
        """
        if self.lora.r is not None:
            return self.lora.r
        from turnkit.models.names import default_lora_rank

        return default_lora_rank(self.model)

    def lora_config(self) -> LoraConfig | None:
        """The learner's LoRA adapter (``None``: full fine-tuning, :meth:`lora_rank` 0).

        Example:
            >>> TrainConfig(lora={"r": 4}).lora_config().r, TrainConfig(lora={"r": 0}).lora_config()
            (4, None)
            >>> TrainConfig(model="smollm2").lora_config().r  # the model's default rank, resolved
            8
        """
        rank = self.lora_rank()
        return dataclasses.replace(self.lora, r=rank) if rank > 0 else None

    def ray_config(self) -> RayConfig | None:
        """The :class:`~turnkit.distributed.cluster.RayConfig` of ``rollout.ray`` (``None``: no Ray).

        Example:
            >>> TrainConfig(rollout={"ray": {"address": "local", "workers": 3}}).ray_config().workers
            3
            >>> TrainConfig().ray_config() is None
            True
        """
        return self.rollout.ray_config()

    def loss_config(self) -> GRPOConfig:
        """The loss's settings as the loop uses them: ``grpo``, per-turn with critics, ``max_tokens`` filled in.

        ``max_tokens`` defaults to ``sampling.max_new_tokens``.

        Example:
            >>> cfg = TrainConfig(critic="mrt", sampling={"max_new_tokens": 12})
            >>> cfg.grpo.per_turn, cfg.loss_config().per_turn, cfg.loss_config().max_tokens
            (False, True, 12)
        """
        return dataclasses.replace(
            self.grpo,
            per_turn=self.grpo.per_turn or bool(self.critic),
            max_tokens=self.grpo.max_tokens if self.grpo.max_tokens is not None else self.sampling.max_new_tokens,
        )

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-ready data (tuples become lists, tables dicts).

        Example:
            >>> TrainConfig().to_dict()["lora"]["targets"], TrainConfig().to_dict()["grpo"]["group_size"]
            (['q_proj', 'k_proj', 'v_proj', 'o_proj'], 8)
        """
        return configs.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "config") -> TrainConfig:
        """Build a config from a mapping; unknown keys raise :class:`ConfigError` naming them and ``source``.

        Flat keys of files written before the tables existed are moved into them (with a ``FutureWarning``
        that names them); a key written in the wrong table names the table it belongs in.

        Example:
            >>> TrainConfig.from_dict({"stepz": 3})
            Traceback (most recent call last):
            ...
            turnkit.errors.ConfigError: config: unknown TrainConfig key 'stepz' (did you mean 'steps'?)
            >>> try:
            ...     TrainConfig.from_dict({"grpo": {"lr": 0.1}})
            ... except ConfigError as exc:
            ...     print(exc)
            TrainConfig.grpo: unknown GRPOConfig key 'lr' (did you mean TrainConfig's 'optim.lr'?)
            >>> import warnings
            >>> flat = {"group_size": 4, "critic": "mrt", "critic_samples": 2, "eval_every": 2}
            >>> with warnings.catch_warnings():
            ...     warnings.simplefilter("ignore")
            ...     old = TrainConfig.from_dict(flat)
            >>> old.grpo.group_size, old.critic, old.eval.every
            (4, {'mrt': {'weight': 1.0, 'samples': 2}}, 2)
        """
        data = migrate_flat_keys(data, source=source)
        _check_placement(data, source)
        return configs.from_dict(cls, data, source=source)


LEGACY_GRPO_KEYS = (
    "group_size", "estimator", "per_turn", "gamma", "adv_eps", "clip_eps", "clip_eps_high", "kl_coef",
    "kl_estimator", "loss_agg",
)  # fmt: skip
"""Flat keys of old configs that now live in the ``grpo`` table under the same name."""
LEGACY_LEARNER_KEYS = flat_keys(
    "lr", "warmup_steps", "weight_decay", "max_grad_norm", "lora_r", "lora_alpha", "lora_targets"
)
"""Flat keys of old configs that now live in the ``optim`` and ``lora`` tables: ``{old: (table, key)}``."""
LEGACY_TABLE_KEYS = {
    "temperature": ("sampling", "temperature"), "top_p": ("sampling", "top_p"),
    "max_new_tokens": ("sampling", "max_new_tokens"),
    "backend": ("rollout", "backend"), "backend_url": ("rollout", "backend_url"), "ray": ("rollout", "ray"),
    "async_rollout": ("rollout", "async_rollout"), "async": ("rollout", "async_rollout"),
    "max_staleness": ("rollout", "max_staleness"),
    "ppo_epochs": ("update", "ppo_epochs"), "minibatches": ("update", "minibatches"),
    "micro_batch_rows": ("update", "micro_batch_rows"), "micro_batch_tokens": ("update", "micro_batch_tokens"),
    "batch_layout": ("update", "batch_layout"), "skip_zero_advantage": ("update", "skip_zero_advantage"),
    "eval_every": ("eval", "every"), "eval_episodes": ("eval", "episodes"), "eval_seed": ("eval", "seed"),
    "eval_temperature": ("eval", "temperature"),
    "checkpoint_every": ("log", "checkpoint_every"), "rollouts_every": ("log", "rollouts_every"),
    "tensorboard": ("log", "tensorboard"),
}  # fmt: skip
"""Flat keys of old configs that now live in the ``sampling``, ``rollout``, ``update``, ``eval`` and ``log``
tables: ``{old: (table, key)}`` (``async`` was the file spelling of ``async_rollout``)."""
FLAT_KEYS: dict[str, tuple[str, str]] = {
    **{key: ("grpo", key) for key in LEGACY_GRPO_KEYS},
    **LEGACY_LEARNER_KEYS,
    **LEGACY_TABLE_KEYS,
}
"""Every flat key of an old config that moved into a table under one name: ``{old: (table, key)}``."""
KEY_ALIASES = {"async": "rollout.async_rollout"}
"""Config keys spelled otherwise in files and ``--set`` than in Python (``async`` is a keyword), dotted."""
LEGACY_CRITIC_KEYS: dict[str, tuple[Any, dict[str, str]]] = {
    "critic_samples": (8, {"mrt": "samples", "pav": "samples"}),
    "critic_temperature": (0.6, {"mrt": "temperature", "pav": "temperature"}),
    "critic_budget": (None, {"mrt": "budget"}),
    "critic_force": (FORCE_ANSWER, {"mrt": "force"}),
    "critic_best_of": (4, {"pav": "best_of"}),
    "critic_lr": (1e-3, {"prime": "optim.lr", "sweet": "optim.lr"}),
    "critic_fit_steps": (4, {"sweet": "steps"}),
    "critic_reference_key": ("answer", {"sweet": "reference_key", "judge": "reference_key"}),
    "judge_url": (None, {"judge": "url"}),
    "judge_model": ("judge", {"judge": "model"}),
    "critic_model": (None, {"iqlearn": "model", "afd": "model"}),
}
"""Flat critic keys of old configs: ``(old default, {critic: its key})``; a value that differs from the old
default moves into the table of every named critic that has the key (a dotted key: into the critic's table)."""


def canonical_key(key: str) -> str:
    """A dotted config key as :class:`TrainConfig` stores it: old flat keys and aliases in their tables.

    Example:
        >>> canonical_key("eval_every"), canonical_key("async"), canonical_key("rollout.async"), canonical_key("steps")
        ('eval.every', 'rollout.async_rollout', 'rollout.async_rollout', 'steps')
    """
    head, dot, rest = key.partition(".")
    if not dot:
        return ".".join(FLAT_KEYS[key]) if key in FLAT_KEYS else key
    kind = type(TABLES.get(head))
    first, dot2, tail = rest.partition(".")
    first = getattr(kind, "KEY_ALIASES", {}).get(first, first)
    return f"{head}.{first}{dot2}{tail}"


def migrate_flat_keys(data: Mapping[str, Any], *, source: str = "config") -> dict[str, Any]:
    """Move an old config's flat keys into their tables (``grpo``, ``optim``, ``update``, ``eval``, ``critic`` ...).

    One ``FutureWarning`` names every moved key and where it went. A flat key wins over the same key in its
    table.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as seen:
        ...     warnings.simplefilter("always")
        ...     new = migrate_flat_keys({"kl_coef": 0.1, "critic": {"prime": 0.5}, "critic_lr": 0.01, "lr": 0.1})
        >>> new
        {'critic': {'prime': {'weight': 0.5, 'optim': {'lr': 0.01}}}, 'grpo': {'kl_coef': 0.1}, 'optim': {'lr': 0.1}}
        >>> len(seen), "critic.prime.optim.lr" in str(seen[0].message), "lr -> optim.lr" in str(seen[0].message)
        (1, True, True)
        >>> with warnings.catch_warnings(record=True) as seen:
        ...     warnings.simplefilter("always")
        ...     migrate_flat_keys({"eval_episodes": 20, "async": True, "micro_batch_rows": 4})
        {'eval': {'episodes': 20}, 'rollout': {'async_rollout': True}, 'update': {'micro_batch_rows': 4}}
        >>> str(seen[0].message)  # doctest: +ELLIPSIS
        'config: flat keys moved into tables (write them this way): eval_episodes -> eval.episodes, async -> ...'
    """
    legacy = (*FLAT_KEYS, *LEGACY_CRITIC_KEYS, "critic_weight")
    old = [k for k in data if k in legacy]
    if not old:
        return dict(data)
    new = {k: v for k, v in data.items() if k not in old}
    moved = []
    for key in (k for k in old if k in FLAT_KEYS):
        table, option = FLAT_KEYS[key]
        if not isinstance(new.get(table) or {}, Mapping):
            raise ConfigError(f"{source}: TrainConfig.{table} must be a table, got {new[table]!r}")
        new[table] = {**(new.get(table) or {}), option: data[key]}
        moved.append(f"{key} -> {table}.{option}")
    critic = data.get("critic")
    if isinstance(critic, str) and "critic_weight" in data:
        critic = {critic: data["critic_weight"]}
    try:
        moved += flat_critic_keys(critic)
        table = check_table(critic, warn=False) if critic is not None else {}
    except ConfigError as exc:
        raise ConfigError(f"{source}: TrainConfig.{exc}") from exc
    for key in old:
        if key not in LEGACY_CRITIC_KEYS:
            continue
        default, targets = LEGACY_CRITIC_KEYS[key]
        value = data[key]
        if value == default:
            continue
        if key == "critic_reference_key" and value == "":
            value = None
        for name, option in targets.items():
            if name in table:
                inner, _, leaf = option.rpartition(".")
                entry = table[name]
                if inner:  # a copy: the caller's nested table stays as it was
                    entry[inner] = dict(entry.get(inner) or {})
                    entry = entry[inner]
                entry[leaf] = value
                moved.append(f"{key} -> critic.{name}.{option}")
    if critic is not None or table:
        new["critic"] = table
    warnings.warn(
        f"{source}: flat keys moved into tables (write them this way): {', '.join(moved) or ', '.join(old)}",
        FutureWarning,
        stacklevel=3,
    )
    return new


def _check_placement(data: Mapping[str, Any], source: str) -> None:
    """Name the right table for a key written in the wrong one (``grpo.lr``, or a flat ``every``)."""
    kinds = {"grpo": GRPOConfig, **{name: type(default) for name, default in TABLES.items()}}
    fields = {name: {f.name for f in dataclasses.fields(kind)} for name, kind in kinds.items()}
    top = {f.name for f in dataclasses.fields(TrainConfig)}

    def home(key: str, outside: str | None) -> str | None:
        if key in FLAT_KEYS:
            return ".".join(FLAT_KEYS[key])
        owners = [name for name, names in fields.items() if key in names and name != outside]
        if outside is not None and key in top:
            return key
        return f"{owners[0]}.{key}" if len(owners) == 1 else None

    for name, value in data.items():
        if name not in top and (where := home(name, None)) is not None:
            raise ConfigError(f"{source}: unknown TrainConfig key {name!r} (did you mean {where!r}?)")
        if name not in kinds or not isinstance(value, Mapping):
            continue
        aliases = getattr(kinds[name], "KEY_ALIASES", {})
        for key in value:
            if key in fields[name] or key in aliases or (where := home(key, name)) is None:
                continue
            hint = f"did you mean TrainConfig's {where!r}?"  # a path from the top, not from ``name``
            message = f"TrainConfig.{name}: unknown {kinds[name].__name__} key {key!r} ({hint})"
            raise ConfigError(message if source == "config" else f"{source}: {message}")


def upgrade_config(saved: Mapping[str, Any]) -> dict[str, Any]:
    """A saved config (a checkpoint's, a ``config.json``) in the current shape, to compare with a live one.

    Flat keys move into their tables (quietly: this is a comparison, not the user's spelling), and the tables
    are written out in full.

    Example:
        >>> upgrade_config({"group_size": 2, "critic": None})["grpo"]["group_size"], upgrade_config({})
        (2, {})
        >>> upgrade_config({"eval_every": 5, "eval_episodes": 20})["eval"]
        {'every': 5, 'episodes': 20, 'seed': 1000000000, 'temperature': 0.0}
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        data = migrate_flat_keys(saved)
    for name, default in (("grpo", GRPOConfig()), *TABLES.items()):
        if isinstance(data.get(name), Mapping):  # in full, as the live config writes it
            table = {**configs.to_dict(default), **data[name]}
            data[name] = configs.to_dict(configs.from_dict(type(default), table, source=f"TrainConfig.{name}"))
    if "critic" in data:
        data["critic"] = check_table(data["critic"], warn=False)
    return data


def _is_device_name(value: object) -> bool:
    """Whether ``value`` names a torch device the learner can run on (``cpu``, ``cuda``, ``cuda:N``)."""
    if not isinstance(value, str):
        return False
    kind, colon, index = value.partition(":")
    return value == "cpu" or (kind == "cuda" and (not colon or index.isdigit()))
