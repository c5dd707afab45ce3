"""`VLLMPolicy`: batched generation with an offline ``vllm.LLM`` engine (extra ``turnkit[vllm]``, CUDA).

The policy renders prompts with the same chat template code as :class:`~turnkit.agents.hf.HFPolicy`, passes
them to vLLM as token ids, and returns vLLM's generated ids (including the stop token when the turn ended on
one), their log-probs and the exact prompt ids. Each context gets its own ``SamplingParams.seed`` from
:func:`~turnkit.agents.sampling.context_seeds`, so the same episode seed gives the same text.

Log-probs: vLLM reports the log-prob of each sampled token under the *raw* model distribution by default
(temperature 1, before top-p), which equals :class:`~turnkit.agents.hf.HFPolicy`'s log-probs at temperature
1, the PPO/GRPO setting. At other temperatures they differ from ``HFPolicy``'s temperature-scaled values;
vLLM versions with a ``logprobs_mode`` engine argument can change this (pass it through ``engine_kwargs``).

Weight sync during training: save the learner's LoRA adapter (:meth:`HFPolicy.save_adapter
<turnkit.agents.hf.HFPolicy.save_adapter>`) and call :meth:`VLLMPolicy.load_adapter`; each call makes a new
``LoRARequest`` with a fresh integer id, so vLLM loads the new weights instead of its cached adapter.

vLLM is imported lazily: importing this module never needs it, constructing a policy does.

Example:
    >>> INSTALL_HINT
    "pip install 'turnkit[vllm]' (needs a CUDA GPU)"
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from turnkit.agents.base import Context
from turnkit.agents.hf import chat_prompt_ids
from turnkit.agents.sampling import SamplingConfig, context_seeds
from turnkit.errors import AgentError, ConfigError
from turnkit.types import AgentTurn

INSTALL_HINT = "pip install 'turnkit[vllm]' (needs a CUDA GPU)"


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise AgentError(f"VLLMPolicy needs vLLM: {INSTALL_HINT}; importing it failed with: {exc}") from exc
    return vllm


class VLLMPolicy:
    """A policy served by an in-process ``vllm.LLM`` engine.

    Args:
        model: A local HF model folder (or anything ``vllm.LLM(model=...)`` accepts).
        temperature: See :class:`~turnkit.agents.sampling.SamplingConfig`.
        top_p: See :class:`~turnkit.agents.sampling.SamplingConfig`.
        max_new_tokens: See :class:`~turnkit.agents.sampling.SamplingConfig`.
        seed: Base sampling seed (also the engine seed).
        enable_lora: Start the engine with LoRA support (needed for :meth:`load_adapter`).
        max_lora_rank: Largest adapter rank the engine accepts.
        stop_token_ids: Extra ids that end a turn (the tokenizer's EOS always does).
        **engine_kwargs: More ``vllm.LLM`` arguments (``gpu_memory_utilization``, ``dtype``, ...).

    Raises:
        AgentError: vLLM is not installed (the message names the ``turnkit[vllm]`` extra).

    Example:
        >>> import importlib.util
        >>> if importlib.util.find_spec("vllm") is None:  # on machines without the extra
        ...     try:
        ...         VLLMPolicy("/models/tiny")
        ...     except AgentError as exc:
        ...         print(str(exc).split(";")[0])
        ... else:
        ...     print("VLLMPolicy needs vLLM: pip install 'turnkit[vllm]' (needs a CUDA GPU)")
        VLLMPolicy needs vLLM: pip install 'turnkit[vllm]' (needs a CUDA GPU)
    """

    def __init__(
        self,
        model: str | Path,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 256,
        seed: int = 0,
        enable_lora: bool = False,
        max_lora_rank: int = 16,
        stop_token_ids: Sequence[int] = (),
        **engine_kwargs: Any,
    ) -> None:
        self.sampling = SamplingConfig(temperature, top_p, max_new_tokens, seed)
        self._vllm = _import_vllm()
        from vllm.lora.request import LoRARequest

        self._lora_request_cls = LoRARequest
        if enable_lora:
            engine_kwargs = {"enable_lora": True, "max_lora_rank": max_lora_rank, **engine_kwargs}
        self.llm = self._vllm.LLM(model=str(model), seed=seed, **engine_kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.enable_lora = enable_lora
        self.stop_token_ids = sorted(set(stop_token_ids))
        self._lora: Any = None
        self._lora_id = 0
        self._rng = np.random.default_rng(seed)

    def with_sampling(self, **changes: Any) -> VLLMPolicy:
        """A view of this policy with other sampling settings, sharing the engine (no copy).

        Like :meth:`HFPolicy.with_sampling <turnkit.agents.hf.HFPolicy.with_sampling>`: the view keeps the
        adapter current at the time of the call (make views after :meth:`load_adapter`).
        """
        view = copy.copy(self)
        view.sampling = dataclasses.replace(self.sampling, **changes)
        if "seed" in changes:
            view._rng = np.random.default_rng(view.sampling.seed)
        return view

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """Generate one turn per context in a single ``llm.generate`` call (vLLM batches internally)."""
        if not contexts:
            return []
        prompts = [
            list(ctx.prompt_token_ids) or chat_prompt_ids(self.tokenizer, ctx.messages, tools=ctx.tools)
            for ctx in contexts
        ]
        seeds = context_seeds(contexts, seed=self.sampling.seed, rng=self._rng)
        params = [self._params(s) for s in seeds]
        outputs = self.llm.generate(
            [{"prompt_token_ids": p} for p in prompts], params, lora_request=self._lora, use_tqdm=False
        )
        return [self._turn(prompt, out) for prompt, out in zip(prompts, outputs, strict=True)]

    def _params(self, seed: int) -> Any:
        return self._vllm.SamplingParams(
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            max_tokens=self.sampling.max_new_tokens,
            seed=seed,
            logprobs=0,  # only the sampled token's log-prob
            stop_token_ids=self.stop_token_ids or None,
            skip_special_tokens=True,
        )

    @staticmethod
    def _turn(prompt: list[int], output: Any) -> AgentTurn:
        completion = output.outputs[0]
        ids = tuple(int(t) for t in completion.token_ids)
        logprobs: tuple[float, ...] = ()
        if completion.logprobs is not None:
            try:
                logprobs = tuple(float(step[t].logprob) for step, t in zip(completion.logprobs, ids, strict=True))
            except (KeyError, ValueError) as exc:
                raise AgentError(f"vLLM returned log-probs that do not match its token ids: {exc}") from exc
        return AgentTurn(
            text=str(completion.text),
            token_ids=ids,
            logprobs=logprobs,
            prompt_token_ids=tuple(prompt),
            finish_reason=str(completion.finish_reason) if completion.finish_reason is not None else None,
        )

    def load_adapter(self, path: str | Path) -> None:
        """Generate with the LoRA adapter saved at ``path`` from now on (hot swap, no engine restart).

        Each call bumps the adapter's integer id so vLLM reloads the weights; the previous adapter is
        removed from the engine where the vLLM version allows it.
        """
        if not self.enable_lora:
            raise ConfigError("VLLMPolicy was created without enable_lora=True; cannot load an adapter")
        path = Path(path)
        if not (path / "adapter_config.json").is_file():
            raise ConfigError(f"no peft adapter at {path}: expected {path / 'adapter_config.json'}")
        previous = self._lora
        self._lora_id += 1
        self._lora = self._lora_request_cls(f"turnkit-adapter-{self._lora_id}", self._lora_id, str(path))
        remove = getattr(self.llm.llm_engine, "remove_lora", None)
        if previous is not None and remove is not None:
            remove(previous.lora_int_id)

    @property
    def adapter_id(self) -> int:
        """Integer id of the current adapter (``0`` = none)."""
        return self._lora_id if self._lora is not None else 0

    @contextlib.contextmanager
    def reference(self) -> Iterator[VLLMPolicy]:
        """Inside the block, generate with the base model (adapter off), as ``HFPolicy.reference`` does."""
        if self._lora is None:
            raise ConfigError("reference() needs a loaded adapter: without one the policy *is* the reference")
        saved, self._lora = self._lora, None
        try:
            yield self
        finally:
            self._lora = saved
