"""`TrainConfig`: every setting of a GRPO/RLOO run, validated, loadable from JSON/TOML, overridable by flags.

A run is fully described by its config (plus the code version): ``turnkit train --config run.toml --set
lr=3e-4 --set env_kwargs.difficulty=2``. Keys are the field names below; ``--set`` values are parsed as JSON
when they parse (``3``, ``0.5``, ``true``, ``null``, ``["q_proj"]``, ``{"difficulty": 2}``) and are strings
otherwise; ``a.b=v`` sets key ``b`` of a dict field ``a``.

Example:
    >>> cfg = apply_overrides(TrainConfig(), ["lr=0.01", "env_kwargs.difficulty=2", "kl_coef=0.05"])
    >>> cfg.lr, cfg.env_kwargs["difficulty"], cfg.grpo_config().kl_coef
    (0.01, 2, 0.05)
    >>> apply_overrides(TrainConfig(), ["group_size=1"])
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: TrainConfig.group_size must be an int >= 2 (a lone sample has no baseline), got 1
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnkit.critics.progress import FORCE_ANSWER
from turnkit.distributed.cluster import RayConfig
from turnkit.errors import ConfigError
from turnkit.learners.grpo import GRPOConfig

BACKENDS = ("hf", "openai", "vllm")
"""Generation backends :attr:`TrainConfig.backend` accepts (:mod:`turnkit.train.backends`)."""
CRITICS = ("mrt", "pav", "prime", "sweet", "judge", "iqlearn", "afd")
"""Built-in critic names :attr:`TrainConfig.critic` accepts (besides ``"module:callable"`` factories)."""
KEY_ALIASES = {"async": "async_rollout"}
"""Config keys that are spelled otherwise in Python (``async`` is a keyword)."""
EVAL_SEED_START = 1_000_000_000
"""Default first held-out evaluation seed; training seeds never fall in the evaluation range."""


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one RL run (see :mod:`turnkit.train.loop`). Validated on construction.

    Example:
        >>> TrainConfig(steps=5).steps
        5
        >>> TrainConfig(lr=-1.0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: TrainConfig.lr must be a finite number > 0, got -1.0
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
    """``"tiny"`` (the embedded SFT policy, :func:`turnkit.models.embedded.tiny_policy`) or a local HF model folder."""
    device: str | None = None
    """Where the learner runs: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` (``None``: where the start policy already is,
    the CPU for ``model="tiny"`` and local folders). The reference model and critics copied from the start policy
    follow it; critics loaded from ``critic_model`` stay on the CPU."""
    lora_r: int = 0
    """LoRA rank; ``0`` fine-tunes every weight (fine for the ~0.5M-parameter tiny model)."""
    lora_alpha: int = 16
    """LoRA scaling numerator (``alpha / r`` scales the update)."""
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    """Module names that get LoRA adapters."""
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
    # --- GRPO / RLOO (see turnkit.learners.grpo.GRPOConfig)
    group_size: int = 8
    """Episodes per group (same task and seed)."""
    groups_per_step: int = 16
    """Groups (distinct tasks) per step; a step samples ``group_size * groups_per_step`` episodes, batched."""
    estimator: str = "grpo"
    """Group baseline: ``"grpo"``, ``"dr_grpo"`` or ``"rloo"``."""
    per_turn: bool = False
    """Per-turn returns-to-go instead of one episode advantage for every turn."""
    gamma: float = 1.0
    """Turn discount for ``per_turn``."""
    adv_eps: float = 1e-6
    """Std epsilon of the ``"grpo"`` estimator."""
    clip_eps: float = 0.2
    """PPO ratio clip (lower, and upper unless ``clip_eps_high`` is set)."""
    clip_eps_high: float | None = None
    """Upper ratio clip (DAPO clip-higher)."""
    kl_coef: float = 0.0
    """Weight of the per-token KL to the reference policy (the start policy)."""
    kl_estimator: str = "k3"
    """Per-token KL estimator: ``"k1"``, ``"k2"`` or ``"k3"``."""
    loss_agg: str = "token_mean"
    """Token-loss reduction: ``"token_mean"``, ``"seq_mean"`` or ``"seq_sum_norm"``."""
    batch_layout: str = "turns"
    """Training rows: ``"turns"`` (one per turn, always exact) or ``"episodes"`` (one per episode: the last turn's
    context with every turn's sampled ids in it; fewer, longer rows)."""
    skip_zero_advantage: bool = True
    """Leave out turns whose advantage is exactly 0 (tied groups); they carry no policy gradient."""
    # --- dense per-turn rewards from critics (see turnkit.train.critic_hook)
    critic: str | dict[str, float] | None = None
    """``None``: env rewards only. A critic name (``"mrt"``, ``"pav"``, ``"prime"``, ``"sweet"``, ``"judge"`` or a
    ``"module:callable"`` factory) weighted by ``critic_weight``, or ``{name: weight, ...}`` for a weighted sum.
    Each turn's reward is then the env reward plus the weighted critic rewards, with per-turn credit
    (``per_turn`` is implied)."""
    critic_weight: float = 1.0
    """``α``, the weight of a single named critic's rewards."""
    critic_samples: int = 8
    """``K``: continuations per turn boundary that estimate a prover's value (MRT: forced answers; PAV: rollouts)."""
    critic_temperature: float = 0.6
    """Sampling temperature of the prover (MRT's forced answers use 0.6)."""
    critic_budget: float | None = None
    """Token budget ``C0`` of the logged normalised regret (``None``: ``max_new_tokens x (max_turns or 1)``)."""
    critic_force: str = FORCE_ANSWER
    """Instruction appended to the MRT prover's last prompt ("answer now"); ``""`` appends nothing."""
    critic_best_of: int = 4
    """PAV: ``K`` of the Best-of-K prover built from the frozen start policy (``1``: the start policy itself)."""
    critic_lr: float = 1e-3
    """AdamW learning rate of the learned critics' LoRA adapters (PRIME's PRM, SWEET's critic)."""
    critic_fit_steps: int = 4
    """SWEET: critic optimizer steps on each rollout batch (PRIME: one pass, as in the paper)."""
    critic_reference_key: str = "answer"
    """Key of ``Task.privileged`` shown to the SWEET critic and the judge (``""``: none)."""
    judge_url: str | None = None
    """OpenAI-compatible API root of the judge model (``critic=judge``), e.g. ``http://127.0.0.1:8000/v1``."""
    judge_model: str = "judge"
    """The judge's served model name."""
    critic_model: str | None = None
    """The learned reward of ``critic=iqlearn`` (an IQLearn run folder, its newest checkpoint is used) or
    ``critic=afd`` (a reward-model folder written by ``turnkit afd``)."""
    # --- optimisation
    steps: int = 40
    """RL steps (each: one rollout batch, then ``ppo_epochs`` passes over it)."""
    lr: float = 2e-4
    """AdamW learning rate (constant after ``warmup_steps``)."""
    warmup_steps: int = 0
    """Linear learning-rate warmup, in RL steps."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip (``0`` disables it)."""
    ppo_epochs: int = 1
    """Passes over each rollout batch."""
    minibatches: int = 1
    """Optimizer steps per pass (the batch's rows are split into this many minibatches)."""
    seed: int = 0
    """Run seed: task seeds, sampling seeds and LoRA initialisation derive from it."""
    # --- evaluation, checkpoints, logging
    eval_every: int = 0
    """Evaluate on held-out seeds every this many steps and after the last step (``0``: never)."""
    eval_episodes: int = 200
    """Episodes per evaluation."""
    eval_seed: int = EVAL_SEED_START
    """First evaluation seed; training task seeds are drawn outside ``[eval_seed, eval_seed + eval_episodes)``."""
    eval_temperature: float = 0.0
    """Sampling temperature for evaluation (``0``: greedy)."""
    checkpoint_every: int = 10
    """Write a checkpoint every this many steps and after the last step (``0``: only after the last)."""
    out_dir: str = "runs/train"
    """Run directory: ``metrics.jsonl``, ``config.json``, ``checkpoints/``, ``curves.png``."""
    tensorboard: bool = False
    """Also write TensorBoard events to ``out_dir/tb`` (needs the ``tensorboard`` package)."""

    def __post_init__(self) -> None:
        _check_str(self, "env_id", "model", "split", "out_dir")
        if not isinstance(self.env_kwargs, dict):
            raise ConfigError(f"TrainConfig.env_kwargs must be a dict, got {self.env_kwargs!r}")
        object.__setattr__(self, "lora_targets", tuple(self.lora_targets))
        if not self.lora_targets or not all(isinstance(t, str) and t for t in self.lora_targets):
            raise ConfigError(f"TrainConfig.lora_targets must be non-empty module names, got {self.lora_targets!r}")
        _check_int(self, "lora_alpha", "max_new_tokens", "groups_per_step", "steps", "ppo_epochs", "minibatches")
        _check_int(self, "eval_episodes", low=1)
        _check_int(self, "lora_r", "warmup_steps", "seed", "eval_every", "checkpoint_every", "eval_seed", low=0)
        if self.max_turns is not None:
            _check_int(self, "max_turns")
        if self.device is not None and not _is_device_name(self.device):
            raise ConfigError(f"TrainConfig.device must be 'cpu', 'cuda' or 'cuda:N' (or null), got {self.device!r}")
        _check_float(self, "lr", low=0.0, open_low=True)
        _check_float(self, "temperature", low=0.0, open_low=True)
        _check_float(self, "top_p", low=0.0, high=1.0, open_low=True)
        _check_float(self, "weight_decay", "max_grad_norm", "eval_temperature", low=0.0)
        for name in ("per_turn", "skip_zero_advantage", "tensorboard", "async_rollout"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"TrainConfig.{name} must be true or false, got {getattr(self, name)!r}")
        if self.backend not in BACKENDS:
            raise ConfigError(f"TrainConfig.backend must be one of {list(BACKENDS)}, got {self.backend!r}")
        if self.backend_url is not None and (self.backend != "openai" or not isinstance(self.backend_url, str)):
            raise ConfigError(f"TrainConfig.backend_url is for backend='openai' (a URL), got {self.backend_url!r}")
        _check_int(self, "max_staleness")
        self.ray_config()  # validates the table
        if (self.ray or self.async_rollout) and self.backend != "hf":
            raise ConfigError(
                f"TrainConfig.ray and async_rollout generate with copies of the HF learner; backend={self.backend!r} "
                "generates through its own server (use one or the other)"
            )
        if self.batch_layout not in ("turns", "episodes"):
            raise ConfigError(f"TrainConfig.batch_layout must be 'turns' or 'episodes', got {self.batch_layout!r}")
        self._check_critic()
        try:
            self.grpo_config()
        except ConfigError as exc:
            raise ConfigError(str(exc).replace("GRPOConfig.", "TrainConfig.")) from exc

    def _check_critic(self) -> None:
        weight = self.critic_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise ConfigError(f"TrainConfig.critic_weight must be a finite number, got {weight!r}")
        self.critic_parts()  # validates the names and weights
        _check_int(self, "critic_samples", "critic_best_of", "critic_fit_steps")
        _check_float(self, "critic_lr", low=0.0, open_low=True)
        for name in ("critic_reference_key", "judge_model"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"TrainConfig.{name} must be a string, got {getattr(self, name)!r}")
        if self.judge_url is not None and not isinstance(self.judge_url, str):
            raise ConfigError(f"TrainConfig.judge_url must be null or a URL string, got {self.judge_url!r}")
        if self.critic_model is not None and not (isinstance(self.critic_model, str) and self.critic_model):
            raise ConfigError(f"TrainConfig.critic_model must be null or a folder path, got {self.critic_model!r}")
        _check_float(self, "critic_temperature", low=0.0, open_low=True)
        if self.critic_budget is not None:
            _check_float(self, "critic_budget", low=0.0, open_low=True)
        if not isinstance(self.critic_force, str):
            raise ConfigError(f"TrainConfig.critic_force must be a string, got {self.critic_force!r}")

    def critic_parts(self) -> list[tuple[str, float]]:
        """``(name, weight)`` of every critic of the run (empty without one), in config order.

        Example:
            >>> TrainConfig(critic="mrt", critic_weight=0.5).critic_parts()
            [('mrt', 0.5)]
            >>> TrainConfig(critic={"prime": 1.0, "mrt": 0.25}).critic_parts()
            [('prime', 1.0), ('mrt', 0.25)]
            >>> TrainConfig(critic="prm")
            Traceback (most recent call last):
            ...
            turnkit.errors.ConfigError: TrainConfig.critic: unknown critic 'prm'; use one of ['mrt', 'pav', 'prime', \
'sweet', 'judge', 'iqlearn', 'afd'] or 'module:callable'
        """
        if self.critic is None:
            return []
        if isinstance(self.critic, str):
            parts = [(self.critic, self.critic_weight)]
        elif isinstance(self.critic, dict) and self.critic:
            parts = list(self.critic.items())
        else:
            raise ConfigError(
                "TrainConfig.critic must be null, a critic name or a non-empty {name: weight} table, "
                f"got {self.critic!r}"
            )
        for name, weight in parts:
            if not isinstance(name, str) or not (name in CRITICS or _is_factory(name)):
                raise ConfigError(
                    f"TrainConfig.critic: unknown critic {name!r}; use one of {list(CRITICS)} or 'module:callable'"
                )
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
                raise ConfigError(f"TrainConfig.critic: the weight of {name!r} must be a finite number, got {weight!r}")
        return [(name, float(weight)) for name, weight in parts]

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

    @property
    def regret_budget(self) -> float:
        """``C0`` of the logged regret: ``critic_budget``, else ``max_new_tokens x (max_turns or 1)``.

        Example:
            >>> TrainConfig(max_new_tokens=12, max_turns=3).regret_budget
            36.0
        """
        if self.critic_budget is not None:
            return float(self.critic_budget)
        return float(self.max_new_tokens * (self.max_turns or 1))

    def grpo_config(self) -> GRPOConfig:
        """The :class:`~turnkit.learners.grpo.GRPOConfig` of the loss (``max_tokens`` = ``max_new_tokens``)."""
        return GRPOConfig(
            group_size=self.group_size,
            estimator=self.estimator,  # type: ignore[arg-type]
            per_turn=self.per_turn or self.critic is not None,
            gamma=self.gamma,
            adv_eps=self.adv_eps,
            clip_eps=self.clip_eps,
            clip_eps_high=self.clip_eps_high,
            kl_coef=self.kl_coef,
            kl_estimator=self.kl_estimator,  # type: ignore[arg-type]
            loss_agg=self.loss_agg,  # type: ignore[arg-type]
            max_tokens=self.max_new_tokens,
        )

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-ready data (tuples become lists).

        Example:
            >>> TrainConfig().to_dict()["lora_targets"]
            ['q_proj', 'k_proj', 'v_proj', 'o_proj']
        """
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "config") -> TrainConfig:
        """Build a config from a mapping; unknown keys raise :class:`ConfigError` naming them and ``source``.

        Example:
            >>> TrainConfig.from_dict({"stepz": 3})
            Traceback (most recent call last):
            ...
            turnkit.errors.ConfigError: config: unknown TrainConfig key 'stepz' (did you mean 'steps'?)
        """
        return dataclass_from_dict(cls, data, source=source)


def dataclass_from_dict(cls: Any, data: Mapping[str, Any], *, source: str = "config") -> Any:
    """``cls(**data)`` for a config dataclass; an unknown key raises :class:`ConfigError` naming it and ``source``.

    Example:
        >>> dataclass_from_dict(TrainConfig, {"steps": 3}).steps
        3
    """
    names = {f.name for f in dataclasses.fields(cls)}
    data = {KEY_ALIASES.get(k, k) if KEY_ALIASES.get(k) in names else k: v for k, v in data.items()}
    for key in data:
        if key not in names:
            raise ConfigError(f"{source}: unknown {cls.__name__} key {key!r}{_suggest(key, names)}")
    return cls(**dict(data))


def _is_factory(name: str) -> bool:
    module, sep, attr = name.partition(":")
    return bool(sep and module and attr) and all(p.isidentifier() for p in (*module.split("."), *attr.split(".")))


def _suggest(key: str, names: set[str]) -> str:
    import difflib

    close = difflib.get_close_matches(key, sorted(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_str(cfg: TrainConfig, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        if not isinstance(value, str) or not value:
            raise ConfigError(f"TrainConfig.{name} must be a non-empty string, got {value!r}")


def _check_int(cfg: TrainConfig, *names: str, low: int = 1) -> None:
    for name in names:
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"TrainConfig.{name} must be an int >= {low}, got {value!r}")


def _check_float(cfg: TrainConfig, *names: str, low: float, high: float = math.inf, open_low: bool = False) -> None:
    for name in names:
        value = getattr(cfg, name)
        ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
        ok = ok and (value > low if open_low else value >= low) and value <= high
        if not ok:
            bound = f"> {low:g}" if open_low else f">= {low:g}"
            if high != math.inf:
                bound += f" and <= {high:g}"
            raise ConfigError(f"TrainConfig.{name} must be a finite number {bound}, got {value!r}")


def load_config(path: str | Path, cls: Any = None) -> Any:
    """Read a config from a ``.json`` or ``.toml`` file (keys as in :class:`TrainConfig`, or as in ``cls``).

    ``cls`` is any config dataclass with ``from_dict(data, source=...)`` (default :class:`TrainConfig`).

    Raises:
        ConfigError: Missing file, unknown suffix, malformed content or invalid values (naming the file).

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.toml"
        >>> _ = path.write_text('steps = 3\\nenv_kwargs = { difficulty = 2 }\\n')
        >>> cfg = load_config(path)
        >>> cfg.steps, cfg.env_kwargs
        (3, {'difficulty': 2})
    """
    cls = TrainConfig if cls is None else cls
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        elif path.suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            raise ConfigError(f"config file {path} must end in .json or .toml")
    except (json.JSONDecodeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{path}: cannot parse ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a table/object of {cls.__name__} keys")
    try:
        return cls.from_dict(data, source=str(path))
    except ConfigError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise ConfigError(f"{path}: {exc}") from exc


def parse_value(raw: str) -> Any:
    """A ``--set`` value: JSON if it parses, else the raw string.

    Example:
        >>> parse_value("3"), parse_value("true"), parse_value("runs/x"), parse_value('["a", "b"]')
        (3, True, 'runs/x', ['a', 'b'])
    """
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def apply_overrides(cfg: Any, overrides: Sequence[str]) -> Any:
    """Apply ``KEY=VALUE`` overrides (``KEY`` may be ``field.subkey`` for dict fields) and re-validate.

    ``cfg`` is a :class:`TrainConfig` or any config dataclass with ``to_dict()`` and ``from_dict(data, source=...)``.

    Raises:
        ConfigError: A malformed override, an unknown key, or an invalid resulting value.
    """
    data = cfg.to_dict()
    names, kind = set(data), type(cfg).__name__
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        top, dot, sub = key.partition(".")
        top = KEY_ALIASES.get(top, top) if KEY_ALIASES.get(top) in names else top
        if top not in names:
            raise ConfigError(f"--set {item!r}: unknown {kind} key {top!r}{_suggest(top, names)}")
        if not dot and isinstance(data[top], str):
            data[top] = raw  # string fields take the text as it is (``out_dir=123`` is a folder name)
        elif dot:
            if not isinstance(data[top], dict):
                raise ConfigError(f"--set {item!r}: {kind}.{top} is not a dict field")
            data[top] = {**data[top], sub: parse_value(raw)}
        else:
            data[top] = parse_value(raw)
    return type(cfg).from_dict(data, source="--set")


def _is_device_name(value: object) -> bool:
    """Whether ``value`` names a torch device the learner can run on (``cpu``, ``cuda``, ``cuda:N``)."""
    if not isinstance(value, str):
        return False
    kind, colon, index = value.partition(":")
    return value == "cpu" or (kind == "cuda" and (not colon or index.isdigit()))
