"""`TrainConfig`: every setting of a GRPO/RLOO run, validated, loadable from JSON/TOML, overridable by flags.

A run is fully described by its config (plus the code version): ``turnkit train --config run.toml --set
optim.lr=3e-4 --set env_kwargs.difficulty=2 --set grpo.kl_coef=0.05 --set critic.mrt.samples=4``. Keys are the
field names below; four are nested tables with their own classes: ``grpo`` (the loss, :class:`~turnkit.learners.
grpo.GRPOConfig`), ``optim`` and ``lora`` (the learner's, :class:`~turnkit.learners.learner.OptimConfig` and
:class:`~turnkit.learners.learner.LoraConfig`) and ``critic`` (``{name: {weight, ...the critic's own keys}}``,
see :mod:`turnkit.critics.registry`).
``--set`` values are parsed as JSON when they parse (``3``, ``0.5``, ``true``, ``null``, ``["q_proj"]``) and are
strings otherwise; ``a.b=v`` sets key ``b`` of table ``a`` (:mod:`turnkit.configs`).

Files written before the tables existed (flat ``group_size``, ``kl_coef``, ``lr``, ``lora_r``, ``critic_samples``,
``judge_url`` ...) still load: :meth:`TrainConfig.from_dict` moves each flat key into its table and warns once
(``FutureWarning``).

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
from turnkit.critics.registry import CriticTable, check_table
from turnkit.distributed.cluster import RayConfig
from turnkit.errors import ConfigError
from turnkit.learners.config import GRPOConfig, LoraConfig, OptimConfig

BACKENDS = ("hf", "openai", "vllm")
"""Generation backends :attr:`TrainConfig.backend` accepts (:mod:`turnkit.train.backends`)."""
KEY_ALIASES = {"async": "async_rollout"}
"""Config keys that are spelled otherwise in Python (``async`` is a keyword)."""
EVAL_SEED_START = 1_000_000_000
"""Default first held-out evaluation seed; training seeds never fall in the evaluation range."""
DEFAULT_LORA = LoraConfig(r=None)
"""Default :attr:`TrainConfig.lora`: the model's own rank (:meth:`TrainConfig.lora_rank`)."""
DEFAULT_OPTIM = OptimConfig(lr=2e-4)
"""Default :attr:`TrainConfig.optim`: AdamW at 2e-4, no warmup, constant, clipped at norm 1."""
MICRO_BATCH_TOKENS = 512
"""Default :attr:`TrainConfig.micro_batch_tokens`: padded tokens per forward + backward of the update."""


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
    temperature: float = 1.0
    """Sampling temperature during training (``> 0``; log-probs are recorded at this temperature)."""
    top_p: float = 1.0
    """Nucleus mass during training."""
    max_new_tokens: int = 24
    """Generation limit per turn."""
    backend: str = "hf"
    """Who generates the rollouts (see :mod:`turnkit.train.backends`): ``"hf"`` (the learner itself),
    ``"openai"`` (an OpenAI-compatible server, weights synced by LoRA adapter reload) or ``"vllm"`` (in-process
    vLLM with LoRA hot-swap; CUDA). The learner is always the HF model."""
    backend_url: str | None = None
    """``backend="openai"``: the server's API root (e.g. ``http://127.0.0.1:8000/v1``); ``None`` starts turnkit's
    own server on loopback over a copy of the learner."""
    ray: dict[str, Any] = field(default_factory=dict)
    """Play rollouts on Ray env workers (see ``docs/scaling.md``), with the keys of
    :class:`~turnkit.distributed.cluster.RayConfig`: ``address`` (``"local"`` starts a cluster in this process,
    ``"auto"`` joins the one ``ray start`` runs here, or ``"host:6379"``), ``workers``, ``envs_per_worker``,
    ``cpus_per_worker``, ``max_retries``. Empty (the default): rollouts play in this process."""
    async_rollout: bool = False
    """One-step-off training (``--set async=true``): the rollouts of the next ``max_staleness`` steps are generated
    by a copy of the policy while the learner updates (see :mod:`turnkit.train.rollouts`)."""
    max_staleness: int = 1
    """With ``async_rollout``: the most learner updates a batch's sampling policy may lag behind."""
    # --- the loss
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    """GRPO/RLOO settings (:class:`~turnkit.learners.grpo.GRPOConfig`: ``group_size``, ``estimator``, ``per_turn``,
    ``gamma``, ``clip_eps``, ``kl_coef`` ...); ``max_tokens`` defaults to ``max_new_tokens``."""
    groups_per_step: int = 16
    """Groups (distinct tasks) per step; a step samples ``grpo.group_size * groups_per_step`` episodes, batched."""
    batch_layout: str = "turns"
    """Training rows: ``"turns"`` (one per turn, always exact) or ``"episodes"`` (one per episode: the last turn's
    context with every turn's sampled ids in it; fewer, longer rows)."""
    skip_zero_advantage: bool = True
    """Leave out turns whose advantage is exactly 0 (tied groups); they carry no policy gradient."""
    # --- dense per-turn rewards from critics (see turnkit.critics.registry)
    critic: CriticTable = field(default_factory=dict)
    """Critics and their settings, ``{name: {"weight": w, ...the critic's keys}}`` (empty: env rewards only);
    ``"mrt"`` or ``{"mrt": 0.5}`` are shorthands. Each turn's reward is then the env reward plus the weighted
    critic rewards, with per-turn credit (``grpo.per_turn`` is implied). Built-ins: ``mrt``, ``pav``, ``prime``,
    ``sweet``, ``judge``, ``iqlearn``, ``afd`` (each module's ``Config`` lists its keys)."""
    # --- optimisation
    steps: int = 40
    """RL steps (each: one rollout batch, then ``ppo_epochs`` passes over it)."""
    optim: OptimConfig = field(default_factory=lambda: DEFAULT_OPTIM)
    """The learner's AdamW and schedule (:class:`~turnkit.learners.learner.OptimConfig`: ``lr``,
    ``weight_decay``, ``max_grad_norm``, ``warmup_steps`` counted in RL steps, ``schedule`` ...)."""
    ppo_epochs: int = 1
    """Passes over each rollout batch."""
    minibatches: int = 1
    """Optimizer steps per pass (the batch's rows are split into this many minibatches)."""
    micro_batch_rows: int = 0
    """Rows per forward + backward inside one optimizer step at most (``0``: no row cap). Gradients accumulate
    over the micro-batches, so the step is the same up to float rounding and the memory is the micro-batch's."""
    micro_batch_tokens: int = MICRO_BATCH_TOKENS
    """Padded tokens (rows × longest row) per forward + backward at most (``0``: no token cap; a longer row runs
    alone). The update's activation memory grows with these tokens, so the default bounds it for any batch
    size (BENCHMARKS.md, "Memory": SmolLM2-135M's per-phase peaks)."""
    seed: int = 0
    """Run seed: task seeds, sampling seeds and LoRA initialisation derive from it."""
    # --- evaluation, checkpoints, logging
    eval_every: int = 0
    """Evaluate on held-out seeds every this many steps and after the last step (``0``: never); the episodes are
    kept in ``out_dir/eval/step-NNNNNN/``."""
    eval_episodes: int = 200
    """Episodes per evaluation."""
    eval_seed: int = EVAL_SEED_START
    """First evaluation seed; training task seeds are drawn outside ``[eval_seed, eval_seed + eval_episodes)``."""
    eval_temperature: float = 0.0
    """Sampling temperature for evaluation (``0``: greedy)."""
    checkpoint_every: int = 10
    """Write a checkpoint every this many steps and after the last step (``0``: only after the last)."""
    rollouts_every: int = 10
    """Keep a step's training episodes as the learner saw them (each critic's credit per turn, the advantages, the
    trained tokens) in ``out_dir/rollouts/step-NNNNNN/`` every this many steps and after the last (``0``: never);
    ``turnkit view`` shows them (:mod:`turnkit.train.rollout_log`)."""
    out_dir: str = "runs/train"
    """Run directory: ``metrics.jsonl``, ``config.json``, ``checkpoints/``, ``curves.png``."""
    tensorboard: bool = False
    """Also write TensorBoard events to ``out_dir/tb`` (needs the ``tensorboard`` package)."""

    def __post_init__(self) -> None:
        configs.check_str(self, "env_id", "model", "split", "out_dir")
        if not isinstance(self.env_kwargs, dict):
            raise ConfigError(f"TrainConfig.env_kwargs must be a dict, got {self.env_kwargs!r}")
        configs.table_field(self, "lora", DEFAULT_LORA)  # TrainConfig(optim={"lr": 1e-3}) reads as a file does
        configs.table_field(self, "optim", DEFAULT_OPTIM)
        configs.check_int(self, "max_new_tokens", "groups_per_step", "steps", "ppo_epochs")
        configs.check_int(self, "minibatches", "eval_episodes", "max_staleness")
        configs.check_int(self, "seed", "eval_every", "checkpoint_every", "eval_seed", low=0)
        configs.check_int(self, "rollouts_every", "micro_batch_rows", "micro_batch_tokens", low=0)
        configs.check_int(self, "max_turns", optional=True)
        if self.device is not None and not _is_device_name(self.device):
            raise ConfigError(f"TrainConfig.device must be 'cpu', 'cuda' or 'cuda:N' (or null), got {self.device!r}")
        configs.check_float(self, "temperature", low=0.0, open_low=True)
        configs.check_float(self, "top_p", low=0.0, high=1.0, open_low=True)
        configs.check_float(self, "eval_temperature", low=0.0)
        configs.check_bool(self, "skip_zero_advantage", "tensorboard", "async_rollout")
        configs.check_choice(self, "backend", BACKENDS)
        configs.check_choice(self, "batch_layout", ("turns", "episodes"))
        if self.backend_url is not None and (self.backend != "openai" or not isinstance(self.backend_url, str)):
            raise ConfigError(f"TrainConfig.backend_url is for backend='openai' (a URL), got {self.backend_url!r}")
        self.ray_config()  # validates the table
        if (self.ray or self.async_rollout) and self.backend != "hf":
            raise ConfigError(
                f"TrainConfig.ray and async_rollout generate with copies of the HF learner; backend={self.backend!r} "
                "generates through its own server (use one or the other)"
            )
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
        """The :class:`~turnkit.distributed.cluster.RayConfig` of ``ray`` (``None``: no Ray).

        Example:
            >>> TrainConfig(ray={"address": "local", "workers": 3}).ray_config().workers
            3
            >>> TrainConfig().ray_config() is None
            True
        """
        if not isinstance(self.ray, dict):
            raise ConfigError(f"TrainConfig.ray must be a table of RayConfig keys, got {self.ray!r}")
        return RayConfig.from_dict(self.ray, source="TrainConfig.ray") if self.ray else None

    def loss_config(self) -> GRPOConfig:
        """The loss's settings as the loop uses them: ``grpo``, per-turn with critics, ``max_tokens`` filled in.

        ``max_tokens`` defaults to ``max_new_tokens``.

        Example:
            >>> cfg = TrainConfig(critic="mrt", max_new_tokens=12)
            >>> cfg.grpo.per_turn, cfg.loss_config().per_turn, cfg.loss_config().max_tokens
            (False, True, 12)
        """
        return dataclasses.replace(
            self.grpo,
            per_turn=self.grpo.per_turn or bool(self.critic),
            max_tokens=self.grpo.max_tokens if self.grpo.max_tokens is not None else self.max_new_tokens,
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

        Flat keys of files written before the ``grpo`` and ``critic`` tables are moved into them (with a
        ``FutureWarning`` that names them).

        Example:
            >>> TrainConfig.from_dict({"stepz": 3})
            Traceback (most recent call last):
            ...
            turnkit.errors.ConfigError: config: unknown TrainConfig key 'stepz' (did you mean 'steps'?)
            >>> import warnings
            >>> with warnings.catch_warnings():
            ...     warnings.simplefilter("ignore")
            ...     old = TrainConfig.from_dict({"group_size": 4, "critic": "mrt", "critic_samples": 2})
            >>> old.grpo.group_size, old.critic
            (4, {'mrt': {'weight': 1.0, 'samples': 2}})
        """
        return configs.from_dict(cls, migrate_flat_keys(data, source=source), source=source, aliases=KEY_ALIASES)


LEGACY_GRPO_KEYS = (
    "group_size", "estimator", "per_turn", "gamma", "adv_eps", "clip_eps", "clip_eps_high", "kl_coef",
    "kl_estimator", "loss_agg",
)  # fmt: skip
"""Flat keys of old configs that now live in the ``grpo`` table under the same name."""
LEGACY_LEARNER_KEYS = {
    "lr": ("optim", "lr"), "warmup_steps": ("optim", "warmup_steps"), "weight_decay": ("optim", "weight_decay"),
    "max_grad_norm": ("optim", "max_grad_norm"),
    "lora_r": ("lora", "r"), "lora_alpha": ("lora", "alpha"), "lora_targets": ("lora", "targets"),
}  # fmt: skip
"""Flat keys of old configs that now live in the ``optim`` and ``lora`` tables: ``{old: (table, key)}``."""
LEGACY_CRITIC_KEYS: dict[str, tuple[Any, dict[str, str]]] = {
    "critic_samples": (8, {"mrt": "samples", "pav": "samples"}),
    "critic_temperature": (0.6, {"mrt": "temperature", "pav": "temperature"}),
    "critic_budget": (None, {"mrt": "budget"}),
    "critic_force": (FORCE_ANSWER, {"mrt": "force"}),
    "critic_best_of": (4, {"pav": "best_of"}),
    "critic_lr": (1e-3, {"prime": "prm_lr", "sweet": "lr"}),
    "critic_fit_steps": (4, {"sweet": "steps"}),
    "critic_reference_key": ("answer", {"sweet": "reference_key", "judge": "reference_key"}),
    "judge_url": (None, {"judge": "url"}),
    "judge_model": ("judge", {"judge": "model"}),
    "critic_model": (None, {"iqlearn": "model", "afd": "model"}),
}
"""Flat critic keys of old configs: ``(old default, {critic: its key})``; a value that differs from the old
default moves into the table of every named critic that has the key."""


def migrate_flat_keys(data: Mapping[str, Any], *, source: str = "config") -> dict[str, Any]:
    """Move an old config's flat keys into the ``grpo``, ``optim``, ``lora`` and ``critic`` tables.

    One ``FutureWarning`` names every moved key and where it went.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as seen:
        ...     warnings.simplefilter("always")
        ...     new = migrate_flat_keys({"kl_coef": 0.1, "critic": {"prime": 0.5}, "critic_lr": 0.01, "lr": 0.1})
        >>> new
        {'critic': {'prime': {'weight': 0.5, 'prm_lr': 0.01}}, 'optim': {'lr': 0.1}, 'grpo': {'kl_coef': 0.1}}
        >>> len(seen), "critic.prime.prm_lr" in str(seen[0].message), "lr -> optim.lr" in str(seen[0].message)
        (1, True, True)
    """
    legacy = (*LEGACY_GRPO_KEYS, *LEGACY_CRITIC_KEYS, *LEGACY_LEARNER_KEYS, "critic_weight")
    old = [k for k in data if k in legacy]
    if not old:
        return dict(data)
    new = {k: v for k, v in data.items() if k not in old}
    grpo = dict(new.get("grpo") or {})
    grpo.update({k: data[k] for k in old if k in LEGACY_GRPO_KEYS})
    moved = [f"{k} -> grpo.{k}" for k in old if k in LEGACY_GRPO_KEYS]
    for key in (k for k in old if k in LEGACY_LEARNER_KEYS):
        table, option = LEGACY_LEARNER_KEYS[key]
        if not isinstance(new.get(table, {}), Mapping):
            raise ConfigError(f"{source}: TrainConfig.{table} must be a table, got {new[table]!r}")
        new[table] = {**new.get(table, {}), option: data[key]}
        moved.append(f"{key} -> {table}.{option}")
    critic = data.get("critic")
    if isinstance(critic, str) and "critic_weight" in data:
        critic = {critic: data["critic_weight"]}
    try:
        table = check_table(critic) if critic is not None else {}
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
                table[name][option] = value
                moved.append(f"{key} -> critic.{name}.{option}")
    if grpo:
        new["grpo"] = grpo
    if critic is not None or table:
        new["critic"] = table
    warnings.warn(
        f"{source}: flat keys moved into tables (write them this way): {', '.join(moved) or ', '.join(old)}",
        FutureWarning,
        stacklevel=3,
    )
    return new


def upgrade_config(saved: Mapping[str, Any]) -> dict[str, Any]:
    """A saved config (a checkpoint's, a ``config.json``) in the current shape, to compare with a live one.

    Flat keys move into their tables (quietly: this is a comparison, not the user's spelling), and the tables
    are written out in full.

    Example:
        >>> upgrade_config({"group_size": 2, "critic": None})["grpo"]["group_size"], upgrade_config({})
        (2, {})
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        data = migrate_flat_keys(saved)
    if isinstance(data.get("grpo"), Mapping):
        data["grpo"] = configs.to_dict(configs.from_dict(GRPOConfig, data["grpo"], source="TrainConfig.grpo"))
    for name, default in (("lora", DEFAULT_LORA), ("optim", DEFAULT_OPTIM)):
        if isinstance(data.get(name), Mapping):  # in full, as the live config writes it
            table = {**configs.to_dict(default), **data[name]}
            data[name] = configs.to_dict(configs.from_dict(type(default), table, source=f"TrainConfig.{name}"))
    if "critic" in data:
        data["critic"] = check_table(data["critic"])
    return data


def _is_device_name(value: object) -> bool:
    """Whether ``value`` names a torch device the learner can run on (``cpu``, ``cuda``, ``cuda:N``)."""
    if not isinstance(value, str):
        return False
    kind, colon, index = value.partition(":")
    return value == "cpu" or (kind == "cuda" and (not colon or index.isdigit()))
