"""Generation backends for the training loop: who samples the rollouts, and how it gets the learner's weights.

The learner is always an :class:`~turnkit.agents.hf.HFPolicy` (it computes the gradients). A backend picks
the *generator* (``--set rollout.backend=hf|openai|vllm``):

* ``"hf"`` (:class:`HFBackend`): the learner itself; there is nothing to sync.
* ``"openai"`` (:class:`OpenAIBackend`): an OpenAI-compatible server (``vllm serve --enable-lora`` with
  ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``, or turnkit's own :class:`~turnkit.agents.serve.AgentServer`,
  started here on loopback over a separate copy of the learner when no URL is given). Weight sync by adapter
  reload: after each update the learner's LoRA adapter is saved under the run directory and the server loads
  it under a new name (vLLM's ``/v1/load_lora_adapter``); requests then name that adapter as their ``model``.
* ``"vllm"`` (:class:`VLLMBackend`): an in-process ``vllm.LLM`` engine (CUDA only) that hot-swaps the saved
  adapter after each update, with a new adapter id each time.

Every backend returns turns with ``token_ids``, ``logprobs`` and ``prompt_token_ids``, so the same batch
builder (:func:`~turnkit.rollout.batch.build_turn_batch`) trains on them. Through ``AgentServer`` they are
exactly the learner's own turns for the same contexts and sampling seed (the server honours each request's
seed exactly). vLLM samples with its own kernels: same distribution, other draws; its log-probs are raw
(temperature 1) unless the engine is told otherwise (see :mod:`turnkit.agents.vllm`).

The seam in a training loop (:mod:`turnkit.train.loop`)::

    rollout = cfg.rollout
    backend = build_backend(rollout.backend, policy, run_dir=run_dir, url=rollout.backend_url, start_step=start_step)
    for step in steps:
        agent = backend.agent(seed=step_sampling_seed(cfg.seed, step))  # the learner's sampling, this step's seed
        trajs = collect_batch(envs, agent, ...)
        update(policy, ...)                                    # the learner changes ...
        record.update(backend.sync(policy, step))              # ... and the generator follows: {"sync_s": ...}
        evaluate(..., backend.agent(temperature=cfg.eval.temperature))
    backend.close()

Adapter sync needs an adapter: full fine-tuning (``lora.r = 0``) works only with ``rollout.backend="hf"``.

Example:
    >>> import tempfile
    >>> from turnkit.agents.base import Context
    >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    >>> from turnkit.types import Message
    >>> tok = build_tiny_tokenizer()
    >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2,
    ...                                                         intermediate_size=64)), tok, max_new_tokens=6)
    >>> policy.attach_lora(r=4)
    >>> ctx = [Context(messages=(Message("user", "2+2?"),), episode_seed=1)]
    >>> with build_backend("openai", policy, run_dir=tempfile.mkdtemp()) as backend:  # a loopback AgentServer
    ...     backend.agent().act(ctx) == policy.act(ctx)
    True
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import importlib.util
import re
import shutil
import time
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

from turnkit.agents.base import Agent
from turnkit.agents.hf import HFPolicy
from turnkit.agents.openai import OpenAIAgent
from turnkit.agents.serve import AgentServer
from turnkit.agents.vllm import INSTALL_HINT
from turnkit.errors import ConfigError
from turnkit.train.tables import BACKENDS

_VLLM_RANKS = (8, 16, 32, 64, 128, 256)


@runtime_checkable
class GenerationBackend(Protocol):
    """What the training loop generates with, and how the generator follows the learner.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
        >>> isinstance(HFBackend(policy), GenerationBackend)
        True
    """

    name: str

    def agent(self, **changes: Any) -> Agent:
        """The agent to generate with now.

        It samples with the learner's current ``policy.sampling`` (per-step seed, temperature, top-p, token
        limit) with ``changes`` applied (``SamplingConfig`` field names, e.g. an evaluation temperature).
        """
        ...

    def sync(self, policy: HFPolicy, step: int) -> dict[str, float]:
        """Push the learner's current weights to the generator (after an update); returns ``{"sync_s": ...}``."""
        ...

    def close(self) -> None:
        """Release the generator (servers, engines); idempotent."""
        ...


class _Backend:
    """Context-manager support shared by the backends."""

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HFBackend(_Backend):
    """Generate with the learner itself (the default): ``agent()`` is the policy, ``sync`` has nothing to do.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
        >>> backend = HFBackend(policy)
        >>> backend.agent() is policy, backend.agent(temperature=0.0).sampling.temperature, backend.sync(policy, 1)
        (True, 0.0, {'sync_s': 0.0})
    """

    name = "hf"

    def __init__(self, policy: HFPolicy) -> None:
        self.policy = policy

    def agent(self, **changes: Any) -> Agent:
        """The policy itself, or a :meth:`~turnkit.agents.hf.HFPolicy.with_sampling` view for ``changes``."""
        return self.policy.with_sampling(**changes) if changes else self.policy

    def sync(self, policy: HFPolicy, step: int) -> dict[str, float]:
        """Nothing to push: the generator is the learner."""
        return {"sync_s": 0.0}


class OpenAIBackend(_Backend):
    """Generate through an OpenAI-compatible server; sync by LoRA adapter reload (see the module docstring).

    Each sync writes the learner's adapter to ``run_dir/generator/adapter-step-NNNNNN`` (older ones are
    removed), asks the server to load it as ``<prefix>-step-N``, sends later requests with that model name and
    unloads the previous adapter. A remote server must be able to read that folder (a shared file system).

    Args:
        policy: The learner; it must carry a LoRA adapter.
        run_dir: The run directory (adapters are written under it).
        url: The server's API root (e.g. ``http://127.0.0.1:8000/v1``); ``None`` starts an
            :class:`~turnkit.agents.serve.AgentServer` on loopback over a separate copy of the learner.
        start_step: The learner's step now (names the first adapter; after a resume, the resumed step).
        adapter_prefix: Adapter name prefix; default ``turnkit-<run dir name>``.
        timeout: Seconds per socket operation of each request.
        retries: Extra attempts after a transient failure (connection refused, 5xx).
        max_workers: Concurrent requests per batch.
        api_key_env: Environment variable with the server's API key.

    Raises:
        ConfigError: The learner has no LoRA adapter.
        AgentError: The server cannot be reached or refuses the adapter (the first sync happens here).

    Example:
        >>> import tempfile
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
        >>> policy.attach_lora(r=4)
        >>> with OpenAIBackend(policy, run_dir=tempfile.mkdtemp(prefix="demo")) as backend:
        ...     first = backend.adapter_name
        ...     metrics = backend.sync(policy, 1)  # after an update: the server loads the new adapter
        ...     first.endswith("-step-0"), backend.adapter_name.endswith("-step-1"), metrics["sync_s"] >= 0
        (True, True, True)
    """

    name = "openai"

    def __init__(
        self,
        policy: HFPolicy,
        *,
        run_dir: str | Path,
        url: str | None = None,
        start_step: int = 0,
        adapter_prefix: str | None = None,
        timeout: float = 600.0,
        retries: int = 2,
        max_workers: int = 64,
        api_key_env: str = "OPENAI_API_KEY",
    ) -> None:
        _require_adapter(policy, "openai", "syncs weights by LoRA adapter reload")
        self.policy = policy
        self.adapters = _AdapterDir(run_dir)
        self.prefix = adapter_prefix or _default_prefix(run_dir)
        self.server = AgentServer(generator_copy(policy), model_name="turnkit-base") if url is None else None
        if self.server is not None:
            url = self.server.start().base_url
        assert url is not None
        s = policy.sampling
        self.client = OpenAIAgent(
            url,
            model="",
            api_key_env=api_key_env,
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=s.max_new_tokens,
            seed=s.seed,
            timeout=timeout,
            retries=retries,
            max_workers=max_workers,
            token_ids=True,  # the learner needs the ids and log-probs: a server without them is an error
        )
        try:
            self.sync(policy, start_step)
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        """The server's API root."""
        return self.client.base_url

    @property
    def adapter_name(self) -> str:
        """The model name requests use now (the newest synced adapter)."""
        return self.client.model

    def agent(self, **changes: Any) -> OpenAIAgent:
        """An :class:`~turnkit.agents.openai.OpenAIAgent` for the newest adapter at the learner's sampling."""
        sampling = dataclasses.replace(self.policy.sampling, **changes)
        return self.client.with_sampling(**dataclasses.asdict(sampling))

    def sync(self, policy: HFPolicy, step: int) -> dict[str, float]:
        """Save the learner's adapter, have the server load it under a new name, unload the previous one.

        Raises:
            AgentError: The server could not be reached or refused the adapter.
        """
        start = time.perf_counter()
        path = self.adapters.save(policy, step)
        name, previous = f"{self.prefix}-step-{step}", self.client.model
        self.client.load_lora_adapter(name, path, replace=True)
        self.client.model = name
        if previous and previous != name:
            self.client.unload_lora_adapter(previous)
        self.adapters.prune(keep=path)
        return {"sync_s": time.perf_counter() - start}

    def close(self) -> None:
        """Stop the loopback server, if this backend started one (idempotent)."""
        if self.server is not None:
            self.server.close()


class VLLMBackend(_Backend):
    """Generate with an in-process ``vllm.LLM`` engine, hot-swapping the learner's LoRA adapter at each sync.

    Args:
        policy: The learner; it must carry a LoRA adapter.
        run_dir: The run directory (adapters, and the base model when ``model_path`` is not given).
        model_path: The learner's base model folder; default: exported by :func:`export_base_model`.
        start_step: The learner's step now (see :class:`OpenAIBackend`).
        **engine_kwargs: More ``vllm.LLM`` arguments (``gpu_memory_utilization``, ``dtype``, ...).

    Raises:
        ConfigError: The learner has no LoRA adapter, or vLLM or CUDA is missing (the message says which).

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
        >>> try:
        ...     VLLMBackend(policy, run_dir=".")
        ... except ConfigError as exc:
        ...     print(str(exc).split(";")[1])
         set lora.r > 0 (full fine-tuning can only use rollout.backend=hf)
    """

    name = "vllm"

    def __init__(
        self,
        policy: HFPolicy,
        *,
        run_dir: str | Path,
        model_path: str | Path | None = None,
        start_step: int = 0,
        **engine_kwargs: Any,
    ) -> None:
        _require_adapter(policy, "vllm", "hot-swaps the learner's LoRA adapter")
        problem = vllm_unavailable()
        if problem is not None:
            raise ConfigError(f"backend=vllm cannot run here: {problem}")
        from turnkit.agents.vllm import VLLMPolicy

        self.policy = policy
        self.adapters = _AdapterDir(run_dir)
        if model_path is None:
            model_path = export_base_model(policy, self.adapters.root / "base")
        rank = int(policy.model.peft_config["default"].r)
        s = policy.sampling
        self.engine: Any = VLLMPolicy(
            model_path,
            temperature=s.temperature,
            top_p=s.top_p,
            max_new_tokens=s.max_new_tokens,
            seed=s.seed,
            enable_lora=True,
            max_lora_rank=next((r for r in _VLLM_RANKS if r >= rank), rank),
            stop_token_ids=sorted(policy.stop_token_ids),
            **engine_kwargs,
        )
        self.sync(policy, start_step)

    def agent(self, **changes: Any) -> Agent:
        """A view of the engine (current adapter) at the learner's sampling with ``changes``."""
        sampling = dataclasses.replace(self.policy.sampling, **changes)
        return self.engine.with_sampling(**dataclasses.asdict(sampling))

    def sync(self, policy: HFPolicy, step: int) -> dict[str, float]:
        """Save the learner's adapter and hot-swap it into the engine (a new adapter id)."""
        start = time.perf_counter()
        path = self.adapters.save(policy, step)
        self.engine.load_adapter(path)
        self.adapters.prune(keep=path)
        return {"sync_s": time.perf_counter() - start}

    def close(self) -> None:
        """Drop the engine and free its GPU memory (idempotent)."""
        if self.engine is not None:
            self.engine = None
            gc.collect()
            torch.cuda.empty_cache()


def build_backend(
    name: str,
    policy: HFPolicy,
    *,
    run_dir: str | Path,
    url: str | None = None,
    start_step: int = 0,
    **options: Any,
) -> GenerationBackend:
    """The generation backend ``name`` for the learner ``policy``, already synced to its current weights.

    Args:
        name: ``"hf"``, ``"openai"`` or ``"vllm"`` (see the module docstring).
        policy: The learner (prepared: adapter attached, checkpoint loaded).
        run_dir: The run directory.
        url: The server of ``backend="openai"`` (``None``: a loopback ``AgentServer``); only for ``"openai"``.
        start_step: The learner's step now (the resumed step after a resume).
        **options: More arguments of :class:`OpenAIBackend` or :class:`VLLMBackend`.

    Raises:
        ConfigError: An unknown name, a URL for another backend, options for ``"hf"``, or a backend that
            cannot sync this learner (no adapter) or cannot run here (vLLM without CUDA).
        AgentError: The ``"openai"`` server cannot be reached or refuses the adapter.

    Example:
        >>> build_backend("tgi", None, run_dir=".")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: unknown generation backend 'tgi'; choose one of: hf, openai, vllm
    """
    if name not in BACKENDS:
        raise ConfigError(f"unknown generation backend {name!r}; choose one of: {', '.join(BACKENDS)}")
    if url is not None and name != "openai":
        raise ConfigError(f"a backend URL is used only by backend=openai, got backend={name!r} and url={url!r}")
    if name == "hf":
        if options:
            raise ConfigError(f"backend=hf takes no options, got {sorted(options)}")
        return HFBackend(policy)
    if name == "openai":
        return OpenAIBackend(policy, run_dir=run_dir, url=url, start_step=start_step, **options)
    return VLLMBackend(policy, run_dir=run_dir, start_step=start_step, **options)


def generator_copy(policy: HFPolicy) -> HFPolicy:
    """A separate, frozen copy of the learner (model weights, adapter, tokenizer settings, sampling) to serve.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
        >>> twin = generator_copy(policy)
        >>> twin.model is policy.model, any(p.requires_grad for p in twin.model.parameters())
        (False, False)
    """
    model = copy.deepcopy(policy.model).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return HFPolicy(
        model,
        policy.tokenizer,
        max_batch_size=policy.max_batch_size,
        stop_token_ids=sorted(policy.stop_token_ids),
        reuse_kv=policy.kv is not None,
        share_prefill=policy.share_prefill,
        **dataclasses.asdict(policy.sampling),
    )


def export_base_model(policy: HFPolicy, path: str | Path) -> Path:
    """Write the learner's base model (adapter left out) and tokenizer as a plain HF model folder.

    An engine that loads the base model from disk (vLLM) then takes the learner's adapters on top of it.

    Example:
        >>> import tempfile
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
        >>> policy.attach_lora(r=4)
        >>> folder = export_base_model(policy, tempfile.mkdtemp())
        >>> HFPolicy.from_pretrained(folder).has_adapter
        False
    """
    path = Path(path)
    base = policy.model.get_base_model() if policy.has_adapter else policy.model
    state = {k.replace(".base_layer.", "."): v for k, v in base.state_dict().items() if "lora_" not in k}
    base.save_pretrained(path, state_dict=state)
    policy.tokenizer.save_pretrained(path)
    return path


def vllm_unavailable() -> str | None:
    """Why the vLLM backend cannot run in this process, or ``None`` when vLLM and a CUDA device are there.

    Example:
        >>> vllm_unavailable() is None or "vLLM" in vllm_unavailable()
        True
    """
    if importlib.util.find_spec("vllm") is None:
        return f"vLLM is not installed ({INSTALL_HINT})"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device, and vLLM's engine needs a CUDA GPU"
    return None


class _AdapterDir:
    """The learner's adapter as synced: ``<run_dir>/generator/adapter-step-NNNNNN`` (absolute), newest kept."""

    def __init__(self, run_dir: str | Path) -> None:
        self.root = Path(run_dir).resolve() / "generator"

    def save(self, policy: HFPolicy, step: int) -> Path:
        path = self.root / f"adapter-step-{step:06d}"
        if path.exists():  # a resumed run re-syncing its step
            shutil.rmtree(path)
        return policy.save_adapter(path)

    def prune(self, keep: Path) -> None:
        for old in self.root.glob("adapter-step-*"):
            if old != keep:
                shutil.rmtree(old, ignore_errors=True)


def _require_adapter(policy: HFPolicy, name: str, how: str) -> None:
    if not policy.has_adapter:
        raise ConfigError(f"backend={name} {how}; set lora.r > 0 (full fine-tuning can only use rollout.backend=hf)")


def _default_prefix(run_dir: str | Path) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(run_dir).resolve().name).strip("-")
    return f"turnkit-{slug}" if slug else "turnkit"
