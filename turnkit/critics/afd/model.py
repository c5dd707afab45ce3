r"""Alignment from Demonstrations (AfD): an IRL reward model trained as a discriminator, and its closed form.

Sun & van der Schaar (2024, arXiv 2405.15624) read SFT as forward-KL trajectory matching and
recover a reward for the reverse KL with a discriminator ``D = σ(f(x, y))`` that separates positives
(demonstrations, or samples of the SFT policy) from negatives (samples of the initial policy):

``max_f  E_pos[log D] + E_neg[log(1 − D)]``,  reward ``r(y|x) = log D − log(1 − D) = f(x, y)``.

* :class:`RewardModel`: ``f`` is a one-label ``AutoModelForSequenceClassification`` (e.g.
  ``LlamaForSequenceClassification``) with a policy's config and backbone weights and a fresh, seeded linear
  head, read at the last completion token of ``(prompt ids, completion ids)``; padding never changes a score.
  Full fine-tuning by default (the tiny model has about 0.5M parameters), or a LoRA plus the head.
* :class:`AfDCritic` (``"afd"``): one reward per agent turn, ``discriminator_reward(f)``
  (:func:`turnkit.learners.irl.discriminator_reward`), trained by :meth:`AfDCritic.fit` with
  :func:`~turnkit.learners.irl.discriminator_loss` on balanced minibatches.
* :class:`ClosedFormCritic` (``"afd_closed_form"``): the training-free baseline
  ``log π_SFT(y|x) − log π_init(y|x)`` (:func:`~turnkit.learners.irl.closed_form_reward`) per turn.

**Samples** (:func:`turn_samples`): one per agent turn. A policy's turn is scored on its exact ids
(``AgentTurn.prompt_token_ids`` + ``token_ids``, token-in/token-out); a turn without ids (an oracle
demonstration) on the chat-template prompt of the conversation so far and the text's ids + EOS, exactly as
SFT trains on it (:func:`turnkit.rollout.demos.demo_rows`). Policy turns cut by the token limit have no EOS,
demonstrations always do: with demonstrations as positives (Init-Demo, SFT-Demo) the discriminator may learn
such surface differences, which is the paper's point about heterogeneous data.

Example:
    >>> from turnkit.agents.hf import HFPolicy
    >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    >>> from turnkit.types import AgentTurn, Step, Trajectory
    >>> tok = build_tiny_tokenizer()
    >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2)), tok)
    >>> critic = AfDCritic.from_policy(policy)
    >>> good = Trajectory("d", 0, (Step("2+2?", AgentTurn("ANSWER: 4"), 1.0, True),))
    >>> bad = Trajectory("d", 0, (Step("2+2?", AgentTurn("zzzz"), 0.0, True),))
    >>> m = critic.fit([good], negatives=[bad], steps=30, batch_size=2, lr=1e-2)
    >>> m["accuracy"], critic.score(good).total > 0 > critic.score(bad).total
    (1.0, True)
"""

from __future__ import annotations

import copy
import json
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from torch import Tensor
from transformers import AutoModelForSequenceClassification, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from turnkit import configs
from turnkit.agents.hf import HFPolicy
from turnkit.critics.base import CriticResult
from turnkit.errors import ConfigError, DataError
from turnkit.learners.config import check_rank, flat_keys
from turnkit.learners.irl import closed_form_reward, discriminator_loss, discriminator_reward
from turnkit.learners.learner import Learner, LoraConfig, OptimConfig
from turnkit.rollout.demos import turn_token_ids
from turnkit.types import Trajectory

Sample = tuple[tuple[int, ...], tuple[int, ...]]
"""One scored agent turn: ``(prompt_ids, completion_ids)``."""

CONFIG_FILE = "afd_critic.json"
"""The file next to a saved reward model that records its :class:`AfDConfig`."""


# ---------------------------------------------------------------------------------------------- samples


def turn_samples(trajectory: Trajectory, tokenizer: PreTrainedTokenizerBase, *, index: int = 0) -> list[Sample]:
    """One ``(prompt ids, completion ids)`` sample per agent turn of ``trajectory``.

    Args:
        trajectory: A finished episode (a policy's, with token ids, or a demonstration's, text only).
        tokenizer: The tokenizer of the policy whose ids are scored (used for text-only turns).
        index: The trajectory's position in its list, for error messages.

    Raises:
        DataError: The trajectory ended with an infrastructure error (naming ``index``).

    Example:
        >>> from turnkit.models.tiny import build_tiny_tokenizer
        >>> from turnkit.types import AgentTurn, Step
        >>> tok = build_tiny_tokenizer()
        >>> ids = (*tok("hi")["input_ids"], tok.eos_token_id)
        >>> sampled = AgentTurn("hi", token_ids=ids, prompt_token_ids=(1, 4, 60))
        >>> demo = AgentTurn("ok")
        >>> traj = Trajectory("d", 0, (Step("q", sampled, 0.0), Step("again", demo, 1.0, True)))
        >>> [(len(p), tok.convert_ids_to_tokens(list(c))) for p, c in turn_samples(traj, tok)]
        [(3, ['h', 'i', '<|end|>']), (16, ['o', 'k', '<|end|>'])]
    """
    if trajectory.error is not None:
        raise DataError(f"trajectory {index} (seed {trajectory.seed}) has an error: {trajectory.error.message}")
    return turn_token_ids(trajectory, tokenizer)


def trajectory_samples(trajectories: Sequence[Trajectory], tokenizer: PreTrainedTokenizerBase) -> list[list[Sample]]:
    """:func:`turn_samples` of every trajectory (a :class:`DataError` names the first errored one)."""
    return [turn_samples(t, tokenizer, index=i) for i, t in enumerate(trajectories)]


def collate_samples(
    samples: Sequence[Sample],
    *,
    pad_id: int,
    padding_side: Literal["left", "right"] = "left",
    max_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Pad samples (prompt + completion) into ``input_ids`` and ``attention_mask``, both ``[B, T]`` long.

    A sample longer than ``max_length`` keeps its last ``max_length`` tokens (the prompt is cut first).

    Raises:
        DataError: A sample without tokens.

    Example:
        >>> ids, mask = collate_samples([((5, 6), (7,)), ((5,), (8,))], pad_id=0, padding_side="right")
        >>> ids.tolist(), mask.tolist()
        ([[5, 6, 7], [5, 8, 0]], [[1, 1, 1], [1, 1, 0]])
    """
    if padding_side not in ("left", "right"):
        raise ConfigError(f"padding_side must be 'left' or 'right', got {padding_side!r}")
    rows = [[*p, *c] for p, c in samples]
    if max_length is not None:
        rows = [r[-max_length:] for r in rows]
    if any(not r for r in rows):
        raise DataError("a reward-model sample has no tokens (empty prompt and completion)")
    width = max((len(r) for r in rows), default=0)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        start = width - len(r) if padding_side == "left" else 0
        input_ids[i, start : start + len(r)] = torch.tensor(r, dtype=torch.long)
        attention[i, start : start + len(r)] = 1
    return input_ids, attention


# ---------------------------------------------------------------------------------------------- the reward model


class RewardModel(torch.nn.Module):
    """A scalar reward model ``f(x, y)``: a one-label sequence-classification transformer.

    Args:
        model: An ``AutoModelForSequenceClassification`` model with ``num_labels=1`` and a linear ``score`` head
            (Llama, Qwen, Mistral, ...), or a ``peft`` model around one.
        pad_token_id: Id used for padding (it never reaches the score: the attention mask decides).

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> lm = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2))
        >>> rm = RewardModel.from_causal_lm(lm, seed=0)
        >>> bool(torch.equal(rm.classifier.model.embed_tokens.weight, lm.model.embed_tokens.weight))
        True
        >>> rm.score_samples([((1, 4), (60, 2)), ((1,), (61,))]).shape
        torch.Size([2])
    """

    def __init__(self, model: PreTrainedModel, *, pad_token_id: int) -> None:
        super().__init__()
        wrapped: Any = model
        self.model = wrapped
        self.pad_token_id = int(pad_token_id)
        inner = wrapped.get_base_model() if hasattr(wrapped, "peft_config") else wrapped
        self.classifier: Any = inner
        """The sequence-classification model itself (under any ``peft`` wrapper)."""
        if getattr(inner.config, "num_labels", None) != 1 or not hasattr(inner, "score"):
            raise ConfigError("RewardModel needs a sequence-classification model with num_labels=1 and a score head")

    @classmethod
    def from_causal_lm(
        cls,
        causal_lm: PreTrainedModel,
        *,
        seed: int = 0,
        lora_r: int = 0,
        lora_alpha: int = 16,
        lora_targets: Sequence[str] = ("q_proj", "k_proj", "v_proj", "o_proj"),
    ) -> RewardModel:
        """A reward model with ``causal_lm``'s config and backbone weights (copied) and a seeded fresh head.

        Args:
            causal_lm: A causal LM without a LoRA adapter (merge one first); it is left untouched.
            seed: Seeds the head's initialisation (and the LoRA ``A`` matrices); the global RNG is untouched.
            lora_r: ``0``: train every parameter; ``> 0``: a LoRA of this rank on ``lora_targets`` plus the head.
            lora_alpha: LoRA alpha.
            lora_targets: Modules of the backbone that get LoRA.

        Raises:
            ConfigError: ``causal_lm`` carries a LoRA adapter, or ``lora_r < 0``.
        """
        if hasattr(causal_lm, "peft_config"):
            raise ConfigError("RewardModel.from_causal_lm needs a model without a LoRA adapter; merge it first")
        if lora_r < 0:
            raise ConfigError(f"lora_r must be >= 0, got {lora_r}")
        config = copy.deepcopy(causal_lm.config)
        config.num_labels = 1
        config.problem_type = "regression"
        pad = config.pad_token_id if config.pad_token_id is not None else config.eos_token_id
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AutoModelForSequenceClassification.from_config(config)
        prefix = model.base_model_prefix
        getattr(model, prefix).load_state_dict(getattr(causal_lm, prefix).state_dict())
        model = model.to(device=next(causal_lm.parameters()).device, dtype=next(causal_lm.parameters()).dtype)
        if lora_r > 0:
            from peft import LoraConfig, get_peft_model

            lora = LoraConfig(
                r=lora_r,
                lora_alpha=lora_alpha,
                target_modules=list(lora_targets),
                modules_to_save=["score"],
                task_type="SEQ_CLS",
            )
            with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
                # peft asks transformers for a deprecated attribute while wrapping: its call, not ours
                warnings.filterwarnings("ignore", "`is_gradient_checkpointing` is deprecated", FutureWarning)
                torch.manual_seed(seed)
                model = get_peft_model(model, lora)
        return cls(model.eval(), pad_token_id=int(pad if pad is not None else 0))

    @classmethod
    def from_pretrained(cls, path: str | Path) -> RewardModel:
        """Load a folder written by :meth:`save_pretrained` (local files only)."""
        path = Path(path)
        if not (path / "config.json").is_file():
            raise ConfigError(f"no reward model at {path}: expected {path / 'config.json'}")
        model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True)
        pad = model.config.pad_token_id if model.config.pad_token_id is not None else model.config.eos_token_id
        return cls(model.eval(), pad_token_id=int(pad if pad is not None else 0))

    @property
    def has_adapter(self) -> bool:
        """Whether the backbone trains through a LoRA adapter."""
        return hasattr(self.model, "peft_config")

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """``[B]`` logits at each row's last attended token (left or right padding, positions from the mask)."""
        positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        backbone = getattr(self.classifier, self.classifier.base_model_prefix)
        hidden = backbone(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions).last_hidden_state
        width = attention_mask.shape[-1]
        last = width - 1 - attention_mask.flip(-1).argmax(-1)  # index of the last 1 in each row
        picked = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        return self.classifier.score(picked).squeeze(-1).float()

    def score_samples(
        self,
        samples: Sequence[Sample],
        *,
        batch_size: int = 64,
        padding_side: Literal["left", "right"] = "left",
        grad: bool = False,
    ) -> Tensor:
        """``[N]`` logits of ``samples``, in batches of ``batch_size`` (with gradients if ``grad``).

        Raises:
            DataError: A sample has a token id outside the model's vocabulary (another tokenizer's ids).
        """
        config, device = self.classifier.config, next(self.parameters()).device
        vocab = int(getattr(config, "vocab_size", 0) or 0)
        if vocab and any(not 0 <= t < vocab for p, c in samples for t in (*p, *c)):
            raise DataError(f"a sample has token ids outside the reward model's vocabulary of {vocab}")
        out = []
        for start in range(0, len(samples), batch_size):
            ids, mask = collate_samples(
                samples[start : start + batch_size],
                pad_id=self.pad_token_id,
                padding_side=padding_side,
                max_length=getattr(config, "max_position_embeddings", None),  # longer samples lose their start
            )
            with torch.enable_grad() if grad else torch.no_grad():
                out.append(self(ids.to(device), mask.to(device)))
        return torch.cat(out) if out else torch.zeros(0, device=device)

    def save_pretrained(self, path: str | Path) -> Path:
        """Write a standard HF sequence-classification folder (a LoRA is merged into a copy first)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        model = copy.deepcopy(self.model).merge_and_unload() if self.has_adapter else self.model
        model.save_pretrained(path)
        return path


# ---------------------------------------------------------------------------------------------- the critics


AFD_OPTIM = OptimConfig(lr=3e-4)
"""Default :attr:`AfDConfig.optim`: AdamW at a constant 3e-4, no weight decay, clipped at norm 1."""
AFD_LORA = LoraConfig(r=0)
"""Default :attr:`AfDConfig.lora`: rank 0, every parameter of the reward model trains."""


@dataclass(frozen=True)
class AfDConfig:
    """Settings of :class:`AfDCritic` (training defaults of :meth:`AfDCritic.fit`). Validated on construction.

    Example:
        >>> AfDConfig().lora.r, AfDConfig().optim.lr
        (0, 0.0003)
        >>> AfDConfig(steps=0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: AfDConfig.steps must be an int >= 1, got 0
    """

    FLAT_KEYS: ClassVar[dict[str, tuple[str, str]]] = flat_keys(
        "lr", "weight_decay", "max_grad_norm", "lora_r", "lora_alpha"
    )
    """Keys written flat before the ``optim`` and ``lora`` tables (older saved reward models); they move into
    them with a ``FutureWarning``."""

    steps: int = 300
    """Optimizer steps of one :meth:`AfDCritic.fit`."""
    batch_size: int = 64
    """Samples per step, half positives and half negatives."""
    score_batch_size: int = 64
    """Samples per forward pass when scoring."""
    seed: int = 0
    """Head initialisation and minibatch order."""
    optim: OptimConfig = field(default_factory=lambda: AFD_OPTIM)
    """AdamW (:class:`~turnkit.learners.learner.OptimConfig`): ``lr`` 3e-4, ``weight_decay`` 0, gradient norm
    clipped at ``max_grad_norm`` 1."""
    lora: LoraConfig = field(default_factory=lambda: AFD_LORA)
    """The backbone's adapter (:class:`~turnkit.learners.learner.LoraConfig`): ``r`` ``0`` trains every parameter,
    ``> 0`` a LoRA of that rank and ``alpha`` on the backbone (the head always trains)."""

    def __post_init__(self) -> None:
        configs.check_int(self, "steps", "batch_size", "score_batch_size")
        configs.check_int(self, "seed", low=0)
        configs.table_field(self, "optim", AFD_OPTIM)
        configs.table_field(self, "lora", AFD_LORA)
        check_rank(self, low=0)


class AfDCritic:
    """AfD's IRL reward model as a critic: each turn's reward is ``log D − log(1 − D)``, the RM's logit.

    Args:
        reward_model: The discriminator ``f``.
        tokenizer: The tokenizer of the policies whose turns it scores (and of the reward model).
        config: Settings.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> tok = build_tiny_tokenizer()
        >>> lm = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2))
        >>> critic = AfDCritic(RewardModel.from_causal_lm(lm), tok)
        >>> turn = AgentTurn("x", token_ids=(60, 2), prompt_token_ids=(1, 4))
        >>> result = critic.score(Trajectory("d", 0, (Step("q", turn, 1.0, True),)))
        >>> logit = critic.reward_model.score_samples([((1, 4), (60, 2))])
        >>> abs(result.total - logit.item()) < 1e-5
        True
    """

    name = "afd"

    def __init__(
        self, reward_model: RewardModel, tokenizer: PreTrainedTokenizerBase, config: AfDConfig | None = None
    ) -> None:
        self.reward_model = reward_model
        self.tokenizer = tokenizer
        self.config = config or AfDConfig()

    @classmethod
    def from_policy(cls, policy: HFPolicy, config: AfDConfig | None = None) -> AfDCritic:
        """A critic whose reward model starts from ``policy``'s model (copied; the policy is untouched)."""
        cfg = config or AfDConfig()
        if policy.has_adapter:
            raise ConfigError("AfDCritic.from_policy needs a policy without a LoRA adapter; merge it first")
        rm = RewardModel.from_causal_lm(policy.model, seed=cfg.seed, lora_r=cfg.lora.r, lora_alpha=cfg.lora.alpha)
        return cls(rm, policy.tokenizer, cfg)

    @classmethod
    def load(cls, path: str | Path) -> AfDCritic:
        """Load a critic written by :meth:`save` (reward model, tokenizer and config)."""
        path = Path(path)
        rm = RewardModel.from_pretrained(path)
        info = path / CONFIG_FILE
        cfg = AfDConfig()
        if info.is_file():  # written flat (lr, lora_r ...) before the tables: upgraded quietly
            saved = json.loads(info.read_text(encoding="utf-8"))["config"]
            cfg = configs.from_dict(AfDConfig, configs.upgrade_tables(AfDConfig, saved), source=str(info))
        merged = replace(cfg, lora=replace(cfg.lora, r=0))
        return cls(rm, AutoTokenizer.from_pretrained(path, local_files_only=True), merged)

    def save(self, path: str | Path) -> Path:
        """Write the reward model (``save_pretrained``), the tokenizer and the config into folder ``path``.

        A LoRA reward model is saved merged, so it loads as a plain model (``lora.r = 0``).

        Example:
            >>> import tempfile
            >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
            >>> tok = build_tiny_tokenizer()
            >>> lm = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2))
            >>> critic = AfDCritic(RewardModel.from_causal_lm(lm, seed=3), tok)
            >>> with tempfile.TemporaryDirectory() as d:
            ...     again = AfDCritic.load(critic.save(d))
            >>> sample = [((1, 4), (60, 2))]
            >>> abs(again.reward_model.score_samples(sample) - critic.reward_model.score_samples(sample)).item() < 1e-6
            True
        """
        path = self.reward_model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        record = {"config": configs.to_dict(self.config), "trained_with_lora": self.reward_model.has_adapter}
        (path / CONFIG_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return path

    # ------------------------------------------------------------------ scoring

    def logits(self, samples: Sequence[Sample]) -> Tensor:
        """``[N]`` reward-model logits of samples (eval mode, no gradients)."""
        was_training = self.reward_model.training
        self.reward_model.eval()
        try:
            return self.reward_model.score_samples(samples, batch_size=self.config.score_batch_size)
        finally:
            self.reward_model.train(was_training)

    def score(self, trajectory: Trajectory) -> CriticResult:
        """One reward per turn: ``discriminator_reward`` of the turn's logit."""
        return self.score_batch([trajectory])[0]

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
        """Per-turn rewards of many trajectories, batched over all their turns."""
        per_traj = trajectory_samples(trajectories, self.tokenizer)
        return _results(per_traj, discriminator_reward(self.logits([s for ss in per_traj for s in ss])))

    # ------------------------------------------------------------------ training

    def fit(
        self,
        trajectories: Sequence[Trajectory],
        *,
        negatives: Sequence[Trajectory],
        steps: int | None = None,
        batch_size: int | None = None,
        lr: float | None = None,
        seed: int | None = None,
        progress: bool = False,
    ) -> dict[str, float]:
        """Train the discriminator: positives ``trajectories`` (label 1) against ``negatives`` (label 0).

        Every step draws ``batch_size // 2`` turns of each side (sides cycle through seeded permutations, so
        the classes stay balanced whatever their sizes) and takes one AdamW step on
        :func:`~turnkit.learners.irl.discriminator_loss`. Each call starts a fresh optimizer.

        Args:
            trajectories: The positives (demonstrations, or SFT-policy samples).
            negatives: The negatives (initial-policy samples).
            steps: Optimizer steps (default ``config.steps``).
            batch_size: Samples per step (default ``config.batch_size``; at least 2).
            lr: Learning rate (default ``config.optim.lr``).
            seed: Minibatch order (default ``config.seed``).
            progress: Show a progress bar.

        Returns:
            ``loss``, ``accuracy``, ``d_pos``, ``d_neg``, ``margin`` of the trained model over *all* training
            turns (eval mode), ``train_loss`` (mean of the last 10% of steps), ``positives`` / ``negatives``
            (turn counts), ``steps`` and ``seconds``.

        Raises:
            DataError: No positive or no negative turn, or an errored trajectory (named by side and index).
        """
        from tqdm.auto import tqdm

        cfg = self.config
        steps = cfg.steps if steps is None else int(steps)
        batch_size = cfg.batch_size if batch_size is None else int(batch_size)
        if steps < 1 or batch_size < 2:
            raise ConfigError(f"fit needs steps >= 1 and batch_size >= 2, got {steps}, {batch_size}")
        pos = self._side(trajectories, "positive")
        neg = self._side(negatives, "negative")
        rng = np.random.default_rng(cfg.seed if seed is None else seed)
        optim = cfg.optim if lr is None else replace(cfg.optim, lr=lr)
        learner = Learner(self.reward_model, optim)
        half = batch_size // 2
        orders: dict[str, list[int]] = {"pos": [], "neg": []}

        def draw(side: str, pool: list[Sample]) -> list[Sample]:
            while len(orders[side]) < half:
                orders[side].extend(rng.permutation(len(pool)).tolist())
            picked, orders[side] = orders[side][:half], orders[side][half:]
            return [pool[k] for k in picked]

        losses: list[float] = []
        t0 = time.perf_counter()
        self.reward_model.train()
        for _ in tqdm(range(steps), desc="afd reward model", disable=not progress, leave=False):
            batch = draw("pos", pos) + draw("neg", neg)
            logits = self.reward_model.score_samples(batch, batch_size=len(batch), grad=True)
            loss, _ = discriminator_loss(logits[:half], logits[half:])
            learner.minimize(loss)
            losses.append(loss.item())
        self.reward_model.eval()
        final_loss, metrics = discriminator_loss(self.logits(pos), self.logits(neg))
        tail = losses[-max(1, steps // 10) :]
        return {
            "loss": float(final_loss),
            **metrics,
            "train_loss": sum(tail) / len(tail),
            "positives": float(len(pos)),
            "negatives": float(len(neg)),
            "steps": float(steps),
            "seconds": time.perf_counter() - t0,
        }

    def _side(self, trajectories: Sequence[Trajectory], side: str) -> list[Sample]:
        try:
            samples = [s for ss in trajectory_samples(trajectories, self.tokenizer) for s in ss]
        except DataError as exc:
            raise DataError(f"{side}s: {exc}") from exc
        if not samples:
            raise DataError(f"AfDCritic.fit got no {side} turns ({len(trajectories)} {side} trajectories)")
        return samples


class ClosedFormCritic:
    """AfD's training-free reward per turn: ``log π_SFT(y|x) − log π_init(y|x)`` (summed token log-probs, T = 1).

    Args:
        sft: The SFT policy.
        init: The initial policy (same tokenizer).
        score_batch_size: Turns per forward pass.

    Raises:
        ConfigError: The two policies' vocabularies differ.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> from turnkit.types import AgentTurn, Step, Trajectory
        >>> tok = build_tiny_tokenizer()
        >>> cfg = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2)
        >>> sft, init = (HFPolicy(build_tiny_model(tok, cfg, seed=s), tok) for s in (0, 1))
        >>> turn = AgentTurn("x", token_ids=(60, 2), prompt_token_ids=(1, 4))
        >>> reward = ClosedFormCritic(sft, init).score(Trajectory("d", 0, (Step("q", turn, 1.0, True),))).total
        >>> sums = [p.sequence_logprobs([[1, 4]], [[60, 2]]).sum() for p in (sft, init)]
        >>> hand = sums[0] - sums[1]
        >>> abs(reward - hand.item()) < 1e-4
        True
    """

    name = "afd_closed_form"

    def __init__(self, sft: HFPolicy, init: HFPolicy, *, score_batch_size: int = 64) -> None:
        if sft.tokenizer.get_vocab() != init.tokenizer.get_vocab():
            raise ConfigError("ClosedFormCritic needs the SFT and initial policies to share one tokenizer")
        if score_batch_size < 1:
            raise ConfigError(f"score_batch_size must be >= 1, got {score_batch_size}")
        self.sft, self.init = sft, init
        self.score_batch_size = score_batch_size

    def _sums(self, policy: HFPolicy, samples: Sequence[Sample]) -> Tensor:
        out = []
        for start in range(0, len(samples), self.score_batch_size):
            chunk = samples[start : start + self.score_batch_size]
            logp = policy.sequence_logprobs([s[0] for s in chunk], [s[1] for s in chunk], temperature=1.0)
            out.append(logp.sum(dim=-1).cpu())  # positions past a completion are 0
        return torch.cat(out) if out else torch.zeros(0)

    def score(self, trajectory: Trajectory) -> CriticResult:
        """One reward per turn: the SFT-vs-initial log-likelihood ratio of the turn."""
        return self.score_batch([trajectory])[0]

    def score_batch(self, trajectories: Sequence[Trajectory]) -> list[CriticResult]:
        """Per-turn log-ratios of many trajectories, batched over all their turns."""
        per_traj = trajectory_samples(trajectories, self.sft.tokenizer)
        flat = [s for ss in per_traj for s in ss]
        return _results(per_traj, closed_form_reward(self._sums(self.sft, flat), self._sums(self.init, flat)))


def _results(per_traj: Sequence[Sequence[Sample]], rewards: Tensor) -> list[CriticResult]:
    """Split the flat per-turn ``rewards`` back into one :class:`CriticResult` per trajectory."""
    flat, out, start = rewards.tolist(), [], 0
    for ss in per_traj:
        r = tuple(float(x) for x in flat[start : start + len(ss)])
        start += len(ss)
        out.append(CriticResult(r, {"reward_mean": sum(r) / len(r) if r else 0.0}))
    return out


__all__ = [
    "CONFIG_FILE",
    "AfDConfig",
    "AfDCritic",
    "ClosedFormCritic",
    "RewardModel",
    "Sample",
    "collate_samples",
    "trajectory_samples",
    "turn_samples",
]
