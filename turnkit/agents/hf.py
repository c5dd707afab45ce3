"""`HFPolicy`: a batched, seeded ``transformers`` policy with exact token ids, log-probs and LoRA.

Generation is a small KV-cached sampling loop rather than ``model.generate`` so that every number a
learner needs comes from the very logits the token was drawn from:

* ``AgentTurn.prompt_token_ids`` is the chat-template prompt (unpadded) and ``token_ids`` the sampled ids,
  *including* the closing stop token (``<|end|>`` for the tiny tokenizer) when the turn ended on one, so a
  learner trains the policy to stop. ``text`` is the decoded ids without the stop token.
* ``AgentTurn.logprobs[i]`` is ``log_softmax(logits / T)[token_i]`` with ``T`` the sampling temperature,
  before top-p truncation; with ``T = 1`` (the PPO/GRPO setting) these are the raw model log-probs. Greedy
  decoding (``T = 0``) reports ``T = 1`` log-probs. :meth:`HFPolicy.sequence_logprobs` recomputes the same
  quantity (with gradients if asked), so ``old_logprobs`` and ``new_logprobs`` are comparable.
* Each context samples from its own ``torch.Generator`` seeded by :func:`~turnkit.agents.sampling.context_seeds`
  (episode seed, turn, conversation, policy seed), so the same seed gives the same text, and a batch gives
  the same tokens as running its contexts one at a time. Prompts are left-padded and position ids follow the
  attention mask, so padding does not change the result.

**Tools**: a context's ``tools`` are rendered by the chat template when it takes tools
(:func:`chat_prompt_ids`).

**Token-exact contexts**: a context with ``prompt_token_ids`` is prompted with exactly those ids instead of
its messages (and tools) rendered by the chat template (the messages still seed the sampling), e.g. a
multi-turn context built from the ids the policy generated in earlier turns (:mod:`turnkit.integrations.trl`).

**Continuing a partial turn** (``supports_prefix``; used by step-level search): a context with
``prefix_token_ids`` (or only ``prefix_text``, then tokenised) is prompted with the chat-template generation
prompt followed by those ids, so the continuation is conditioned exactly as if the model had generated the
prefix itself; ``prompt_token_ids`` includes the prefix and ``max_new_tokens`` bounds the whole turn
(prefix + continuation). With ``stop`` strings, generation ends at the first token whose decoded
continuation contains one (``finish_reason="stop_string"``); ``token_ids``/``logprobs`` end with that token
and ``text`` is their decoding (it runs past the stop string only when one token straddles it). Under greedy
decoding, a turn generated step by step has the same ids and log-probs as the same turn generated at once.

LoRA adapters use ``peft`` in its standard on-disk format; the reference policy for KL terms is the same
model with the adapter disabled (:meth:`HFPolicy.reference`), never a second copy.

Example:
    >>> from turnkit.agents.base import Context
    >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    >>> from turnkit.types import Message
    >>> tok = build_tiny_tokenizer()
    >>> model = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2,
    ...                                               intermediate_size=64), seed=0)
    >>> policy = HFPolicy(model, tok, max_new_tokens=8)
    >>> ctx = Context(messages=(Message("user", "2+2?"),), episode_seed=3)
    >>> turn = policy.act([ctx])[0]
    >>> len(turn.token_ids) == len(turn.logprobs) <= 8, turn.finish_reason in ("stop", "length")
    (True, True)
    >>> turn == policy.act([ctx])[0]  # same seed, same turn
    True
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

from turnkit.agents.base import Context
from turnkit.agents.kv_reuse import (
    PrefixKV,
    batch_cache,
    cache_layers,
    row_layers,
    shared_prompts,
    weights_fingerprint,
)
from turnkit.agents.sampling import SamplingConfig, context_seeds
from turnkit.errors import ConfigError
from turnkit.types import AgentTurn, Message


def template_takes_tools(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether the tokenizer's chat template renders tools (its source mentions ``tools``, as Qwen's does).

    Example:
        >>> from turnkit.models.tiny import build_tiny_tokenizer
        >>> template_takes_tools(build_tiny_tokenizer())
        False
    """
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # named templates: transformers picks "tool_use" when tools are given
        return "tool_use" in template or any("tools" in str(t) for t in template.values())
    return isinstance(template, str) and "tools" in template


def chat_prompt_ids(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Message],
    tools: Sequence[Mapping[str, Any]] = (),
) -> list[int]:
    """Token ids of ``messages`` rendered by the tokenizer's chat template, ending with the assistant prompt.

    The template string is tokenised without adding special tokens (the template writes its own). ``tools``
    (OpenAI schemas, ``Context.tools``) go to the template when it renders tools
    (:func:`template_takes_tools`); other templates render the messages alone, as an env with tools also
    describes them in its first observation. Tool calls stay the text the model wrote; ``tool`` messages keep
    their role.

    Raises:
        ConfigError: The tokenizer has no chat template.

    Example:
        >>> from turnkit.models.tiny import build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> ids = chat_prompt_ids(tok, [Message("user", "hi")])
        >>> tok.convert_ids_to_tokens(ids)
        ['<|bos|>', '<|user|>', 'h', 'i', '<|end|>', '<|assistant|>']
        >>> from turnkit.tools import PYTHON_SPEC
        >>> chat_prompt_ids(tok, [Message("user", "hi")], [PYTHON_SPEC.openai_schema()]) == ids  # takes no tools
        True
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"tokenizer {type(tokenizer).__name__} has no chat_template; set tokenizer.chat_template")
    extra: dict[str, Any] = {"tools": [dict(t) for t in tools]} if tools and template_takes_tools(tokenizer) else {}
    text = tokenizer.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in messages],
        add_generation_prompt=True,
        tokenize=False,
        **extra,
    )
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def sample_tokens(
    logits: torch.Tensor, generators: Sequence[torch.Generator], *, temperature: float, top_p: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row, each row from its own generator, and return the tokens and their log-probs.

    Sampling is exponential-race (``argmax p / E`` with ``E ~ Exp(1)``), equivalent to ``multinomial``;
    top-p keeps the smallest prefix of tokens (by probability) whose mass reaches ``top_p``.

    Args:
        logits: ``[B, V]`` next-token logits.
        generators: One generator per row (on the logits' device).
        temperature: ``0`` for greedy.
        top_p: Nucleus mass.

    Returns:
        ``(tokens [B], logprobs [B])`` with logprobs under ``log_softmax(logits / T)`` (``T = 1`` if greedy).

    Example:
        >>> logits = torch.tensor([[0.0, 5.0, 0.0], [3.0, 0.0, 0.0]])
        >>> gens = [torch.Generator().manual_seed(i) for i in range(2)]
        >>> tokens, lps = sample_tokens(logits, gens, temperature=0.0, top_p=1.0)
        >>> tokens.tolist(), [round(x, 4) for x in lps.tolist()]
        ([1, 0], [-0.0134, -0.0949])
    """
    logits = logits.float()
    if temperature == 0:
        logp = torch.log_softmax(logits, dim=-1)
        tokens = logits.argmax(dim=-1)
        return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)
    logp = torch.log_softmax(logits / temperature, dim=-1)
    probs = logp.exp()
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # the top token always stays
        drop = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, mass_before >= top_p)
        probs = probs.masked_fill(drop, 0.0)
    race = torch.stack([torch.empty_like(probs[0]).exponential_(generator=g) for g in generators])
    tokens = (probs / race).argmax(dim=-1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


def cache_argument(model: Any) -> str:
    """The keyword under which ``model.forward`` takes the KV cache (PEFT wrappers are looked through).

    transformers 5.24 renamed ``past_key_values`` to ``cache`` (the forward argument and the output field) and
    warns on the old name; earlier versions know only ``past_key_values``. Passing and reading the name the
    model declares keeps generation warning-free on both.

    Example:
        >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
        >>> model = build_tiny_model(build_tiny_tokenizer(), TinyModelConfig(hidden_size=16, num_layers=1,
        ...                                                                 num_heads=2, intermediate_size=32))
        >>> cache_argument(model) in ("cache", "past_key_values")
        True
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


@contextlib.contextmanager
def _peft_deprecations_silenced() -> Iterator[None]:
    """Silence the one deprecated transformers call peft makes when it wraps a model.

    peft (0.21) asks transformers (5.2x) for ``is_gradient_checkpointing``, deprecated for
    ``is_activation_checkpointing``: peft's call, not ours, harmless until transformers 6. Only that message is
    filtered, only around the wrapping, so a deprecation in our own calls still shows.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`is_gradient_checkpointing` is deprecated", FutureWarning)
        yield


class HFPolicy:
    """A policy over any local HF causal LM (or an in-memory model and tokenizer).

    Args:
        model: A causal LM (``PreTrainedModel`` or a ``peft`` model around one).
        tokenizer: Its tokenizer; must have a chat template and a pad (or EOS) token.
        temperature: See :class:`~turnkit.agents.sampling.SamplingConfig`.
        top_p: See :class:`~turnkit.agents.sampling.SamplingConfig`.
        max_new_tokens: See :class:`~turnkit.agents.sampling.SamplingConfig`.
        seed: Base sampling seed (set ``policy.sampling`` to a new config to change it between iterations).
        max_batch_size: Contexts per forward pass; larger batches are split (similar lengths together).
        stop_token_ids: Extra ids that end a turn, besides the tokenizer's and generation config's EOS.
        reuse_kv: Keep each generated sequence's KV cache and feed the next turn only what follows it
            (:mod:`turnkit.agents.kv_reuse`): multi-turn episodes stop encoding their whole conversation every
            turn. Same maths, other float rounding than without it.
        share_prefill: Prefill a prompt that several rows of a batch repeat once and copy its keys and values to
            the repeats (:func:`~turnkit.agents.kv_reuse.shared_prompts`): a GRPO group's first turn, an MRT or
            PAV prover's branches. Same maths, other float rounding (the prefill's batch has other rows).

    Attributes:
        model: The model (a ``peft.PeftModel`` after :meth:`attach_lora`); learners optimise its parameters.
        tokenizer: The tokenizer.
        sampling: The current :class:`~turnkit.agents.sampling.SamplingConfig`.
        stop_token_ids: Ids that end a turn.
        kv: The kept KV caches (:class:`~turnkit.agents.kv_reuse.PrefixKV`) with ``reuse_kv``, else ``None``.
        share_prefill: Whether repeated prompts of a batch are prefilled once (see ``share_prefill`` above).
    """

    supports_prefix = True
    """Honours ``Context.prefix_text``, ``prefix_token_ids`` and ``stop`` (see the module docstring)."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 256,
        seed: int = 0,
        max_batch_size: int = 32,
        stop_token_ids: Sequence[int] = (),
        reuse_kv: bool = False,
        share_prefill: bool = False,
    ) -> None:
        if max_batch_size < 1:
            raise ConfigError(f"HFPolicy.max_batch_size must be >= 1, got {max_batch_size}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.sampling = SamplingConfig(temperature, top_p, max_new_tokens, seed)
        self.max_batch_size = max_batch_size
        self.stop_token_ids = frozenset(_stop_ids(model, tokenizer) | set(stop_token_ids))
        if not self.stop_token_ids:
            raise ConfigError("HFPolicy needs a stop token: the tokenizer has no eos_token and none was given")
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if pad is None:
            raise ConfigError("HFPolicy needs tokenizer.pad_token_id or tokenizer.eos_token_id for padding")
        self.pad_token_id: int = int(pad)
        self._rng = np.random.default_rng(seed)
        self.kv: PrefixKV | None = PrefixKV() if reuse_kv else None
        self.share_prefill = share_prefill

    @classmethod
    def from_pretrained(cls, path: str | Path, *, adapter: str | Path | None = None, **kwargs: Any) -> HFPolicy:
        """Load a local HF model folder (never the hub), optionally with a saved LoRA adapter.

        Args:
            path: A folder with ``config.json``, weights and tokenizer files.
            adapter: A folder written by :meth:`save_adapter`.
            **kwargs: Passed to :class:`HFPolicy`.

        Example:
            >>> import tempfile
            >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer, save_tiny
            >>> tok = build_tiny_tokenizer()
            >>> cfg = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
            >>> with tempfile.TemporaryDirectory() as d:
            ...     policy = HFPolicy.from_pretrained(save_tiny(build_tiny_model(tok, cfg), tok, d), temperature=0)
            >>> policy.sampling.temperature
            0
        """
        path = Path(path)
        if not (path / "config.json").is_file():
            raise ConfigError(f"no HF model at {path}: expected {path / 'config.json'}")
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        policy = cls(model, tokenizer, **kwargs)
        if adapter is not None:
            policy.load_adapter(adapter)
        return policy

    @property
    def device(self) -> torch.device:
        """The device of the model's parameters."""
        return next(self.model.parameters()).device

    def with_sampling(self, **changes: Any) -> HFPolicy:
        """A view of this policy with other sampling settings, sharing the model (no copy).

        The view keeps the model object current at the time of the call (make views after
        :meth:`attach_lora`).

        Example:
            >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
            >>> tok = build_tiny_tokenizer()
            >>> p = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
            >>> greedy = p.with_sampling(temperature=0.0)
            >>> greedy.model is p.model, greedy.sampling.temperature, p.sampling.temperature
            (True, 0.0, 1.0)
        """
        view = object.__new__(HFPolicy)
        view.__dict__.update(self.__dict__)
        view.sampling = dataclasses.replace(self.sampling, **changes)
        if "seed" in changes:
            view._rng = np.random.default_rng(view.sampling.seed)
        return view

    def rng_state(self) -> dict[str, Any]:
        """The state (JSON-ready) of the generator that seeds contexts without an episode seed, for checkpoints.

        Example:
            >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
            >>> tok = build_tiny_tokenizer()
            >>> p = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok, max_new_tokens=4)
            >>> ctx = Context(messages=(Message("user", "2+2?"),))  # no episode seed: drawn from this generator
            >>> state = p.rng_state()
            >>> first = p.act([ctx])[0].token_ids
            >>> p.set_rng_state(state)
            >>> p.act([ctx])[0].token_ids == first
            True
        """
        return self._rng.bit_generator.state

    def set_rng_state(self, state: dict[str, Any]) -> None:
        """Restore a state :meth:`rng_state` returned (the next unseeded contexts then sample as they did)."""
        self._rng.bit_generator.state = state

    # ------------------------------------------------------------------ generation

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """Sample one assistant turn per context (see the module docstring for what is returned).

        A prompt that leaves no room in the model's context window gives an empty turn with
        ``finish_reason="prompt_too_long"`` instead of an exception, so one long episode does not end the
        others in its batch.
        """
        if not contexts:
            return []
        prefixes = [self._prefix_ids(ctx) for ctx in contexts]
        prompts = [
            (list(ctx.prompt_token_ids) or chat_prompt_ids(self.tokenizer, ctx.messages, ctx.tools)) + p
            for ctx, p in zip(contexts, prefixes, strict=True)
        ]
        seeds = context_seeds([_seed_view(ctx) for ctx in contexts], seed=self.sampling.seed, rng=self._rng)
        budgets = [self._budget(len(p), len(f)) for p, f in zip(prompts, prefixes, strict=True)]
        turns: list[AgentTurn] = [
            AgentTurn(
                text="",
                prompt_token_ids=tuple(p),
                finish_reason="length" if f and len(f) >= self.sampling.max_new_tokens else "prompt_too_long",
            )
            for p, f in zip(prompts, prefixes, strict=True)
        ]
        order = sorted((i for i, b in enumerate(budgets) if b > 0), key=lambda i: len(prompts[i]))
        if self.kv is not None:
            self.kv.check_weights(weights_fingerprint(self.model))
        with _eval_mode(self.model), torch.inference_mode():
            for start in range(0, len(order), self.max_batch_size):
                chunk = order[start : start + self.max_batch_size]
                results = self._generate(
                    [prompts[i] for i in chunk],
                    [seeds[i] for i in chunk],
                    [budgets[i] for i in chunk],
                    [(prefixes[i], tuple(contexts[i].stop)) for i in chunk],
                )
                for i, turn in zip(chunk, results, strict=True):
                    turns[i] = turn
        return turns

    def _prefix_ids(self, ctx: Context) -> list[int]:
        if ctx.prefix_token_ids:
            return [int(t) for t in ctx.prefix_token_ids]
        if ctx.prefix_text:
            return list(self.tokenizer(ctx.prefix_text, add_special_tokens=False)["input_ids"])
        return []

    def _budget(self, prompt_len: int, prefix_len: int = 0) -> int:
        limit = getattr(self.model.config, "max_position_embeddings", None)
        room = self.sampling.max_new_tokens if limit is None else int(limit) - prompt_len
        return max(0, min(self.sampling.max_new_tokens - prefix_len, room))

    def _generate(
        self,
        prompts: list[list[int]],
        seeds: list[int],
        budgets: list[int],
        steps: list[tuple[list[int], tuple[str, ...]]] | None = None,
    ) -> list[AgentTurn]:
        """Sample for one left-padded batch; every budget is >= 1; ``steps``: per row (prefix ids, stop strings)."""
        steps = steps or [([], ())] * len(prompts)
        device, n = self.device, len(prompts)
        firsts, prompt_of = shared_prompts(prompts) if self.share_prefill else (list(range(n)), list(range(n)))
        distinct = [prompts[i] for i in firsts]  # the prefill's rows
        kept = [self.kv.take(p) for p in distinct] if self.kv is not None else [(0, None)] * len(distinct)
        feeds = [p[used:] for p, (used, _) in zip(distinct, kept, strict=True)]
        width = max(len(f) for f in feeds)
        input_ids = torch.full((len(distinct), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(distinct), width), dtype=torch.long)
        for i, f in enumerate(feeds):
            input_ids[i, width - len(f) :] = torch.tensor(f)
            attention[i, width - len(f) :] = 1
        cache_arg = cache_argument(self.model)  # the KV cache goes in and comes out under this name
        past: dict[str, Any] = {}
        if any(used for used, _ in kept):
            layers, kept_mask = batch_cache([rows for _, rows in kept], [used for used, _ in kept])
            past = {cache_arg: DynamicCache()}
            for index, (keys, values) in enumerate(layers):
                past[cache_arg].update(keys.to(device), values.to(device), index)
            attention = torch.cat([kept_mask, attention], dim=-1)
        input_ids, attention = input_ids.to(device), attention.to(device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)[:, -width:]
        generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]
        tokens: list[list[int]] = [[] for _ in range(n)]
        logprobs: list[list[float]] = [[] for _ in range(n)]
        finish: list[str | None] = [None] * n

        out = self.model(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **past,
        )
        past, logits = {cache_arg: getattr(out, cache_arg)}, out.logits[:, -1, :]
        if len(distinct) < n:  # every row from its prompt's prefill
            repeat = torch.tensor(prompt_of, device=device)
            past[cache_arg].reorder_cache(repeat)
            logits, attention, positions = logits[repeat], attention[repeat], positions[repeat]
        prefilled = attention.shape[1]
        next_pos = positions[:, -1:] + 1
        while any(f is None for f in finish):
            new, lps = sample_tokens(
                logits, generators, temperature=self.sampling.temperature, top_p=self.sampling.top_p
            )
            for i, (tok, lp) in enumerate(zip(new.tolist(), lps.tolist(), strict=True)):
                if finish[i] is not None:
                    continue
                tokens[i].append(tok)
                logprobs[i].append(lp)
                if tok in self.stop_token_ids:
                    finish[i] = "stop"
                # the prefix's last tokens are enough context to decode the continuation's first characters
                elif steps[i][1] and any(s in self._decode(tokens[i], steps[i][0][-16:]) for s in steps[i][1]):
                    finish[i] = "stop_string"
                elif len(tokens[i]) >= budgets[i]:
                    finish[i] = "length"
            if all(f is not None for f in finish):
                break
            attention = torch.cat([attention, attention.new_ones((n, 1))], dim=-1)
            out = self.model(
                input_ids=new[:, None],
                attention_mask=attention,
                position_ids=next_pos,
                use_cache=True,
                **past,
            )
            past, logits = {cache_arg: getattr(out, cache_arg)}, out.logits[:, -1, :]
            next_pos = next_pos + 1
        if self.kv is not None:
            self._keep(past[cache_arg], attention, prompts, tokens, fed=attention.shape[1] - prefilled)
        return [
            AgentTurn(
                text=self._decode(tokens[i], steps[i][0]),
                token_ids=tuple(tokens[i]),
                logprobs=tuple(logprobs[i]),
                prompt_token_ids=tuple(prompts[i]),
                finish_reason=finish[i],
            )
            for i in range(n)
        ]

    def _keep(
        self, cache: Any, attention: torch.Tensor, prompts: list[list[int]], tokens: list[list[int]], *, fed: int
    ) -> None:
        """Keep each row's keys and values of its prompt and the generated tokens the model was fed."""
        layers = cache_layers(cache)
        if layers is None or self.kv is None:
            return
        for i, (prompt, generated) in enumerate(zip(prompts, tokens, strict=True)):
            ids = [*prompt, *generated[:fed]]
            positions = attention[i].nonzero().squeeze(-1)[: len(ids)]
            self.kv.put(ids, row_layers(layers, i, positions))

    def _decode(self, ids: list[int], prefix: Sequence[int] = ()) -> str:
        """The text of ``ids`` (closing stop token dropped); after a prefix, as it reads following the prefix.

        Decoding ``prefix + ids`` and cutting off the decoded prefix keeps tokenizers whose pieces decode
        differently at the start of a text (e.g. a leading-space marker) consistent: the step texts of a turn
        concatenate to the text of the whole turn.
        """
        if ids and ids[-1] in self.stop_token_ids:
            ids = ids[:-1]
        if not prefix:
            return str(self.tokenizer.decode(ids, skip_special_tokens=True))
        head = str(self.tokenizer.decode(list(prefix), skip_special_tokens=True))
        full = str(self.tokenizer.decode([*prefix, *ids], skip_special_tokens=True))
        if full.startswith(head):
            return full[len(head) :]
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    # ------------------------------------------------------------------ scoring

    def sequence_logprobs(
        self,
        prompt_ids: Sequence[Sequence[int]],
        completion_ids: Sequence[Sequence[int]],
        *,
        temperature: float | None = None,
        grad: bool = False,
    ) -> torch.Tensor:
        """Per-token log-probs of given completions after given prompts, batched in one forward pass.

        Uses the model in whatever mode it is in (call ``model.eval()`` for dropout-free values).

        Args:
            prompt_ids: One prompt per row (non-empty), e.g. ``AgentTurn.prompt_token_ids``.
            completion_ids: One completion per row, e.g. ``AgentTurn.token_ids``.
            temperature: Divide logits by this first; defaults to the sampling temperature (``1`` if greedy),
                matching ``AgentTurn.logprobs``.
            grad: Keep the autograd graph (for losses); otherwise run under ``no_grad``.

        Returns:
            ``[B, max_completion_len]`` float32 log-probs; positions past a row's completion are ``0``.

        Example:
            >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
            >>> tok = build_tiny_tokenizer()
            >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
            >>> lp = policy.sequence_logprobs([[1, 4, 50], [1, 4]], [[60, 61], [62]])
            >>> lp.shape, bool(lp[1, 1] == 0), bool((lp[0] < 0).all())
            (torch.Size([2, 2]), True, True)
        """
        if len(prompt_ids) != len(completion_ids):
            raise ValueError(f"got {len(prompt_ids)} prompts but {len(completion_ids)} completions")
        if any(len(p) == 0 for p in prompt_ids):
            raise ValueError("every prompt needs at least one token")
        if temperature is None:
            temperature = self.sampling.temperature or 1.0
        n, device = len(prompt_ids), self.device
        p_width = max(len(p) for p in prompt_ids)
        c_width = max((len(c) for c in completion_ids), default=0)
        if c_width == 0:
            return torch.zeros((n, 0), device=device)
        # Layout per row: [left pad | prompt | completion[:-1] | right pad]; the logits at columns
        # p_width - 1 ... p_width + c_width - 2 then predict completion tokens 0 ... c_width - 1 for every row.
        width = p_width + c_width - 1
        input_ids = torch.full((n, width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((n, width), dtype=torch.long)
        targets = torch.zeros((n, c_width), dtype=torch.long)
        mask = torch.zeros((n, c_width), dtype=torch.bool)
        for i, (p, c) in enumerate(zip(prompt_ids, completion_ids, strict=True)):
            row = [*p, *c[:-1]]
            input_ids[i, p_width - len(p) : p_width - len(p) + len(row)] = torch.tensor(row)
            attention[i, p_width - len(p) : p_width - len(p) + len(row)] = 1
            targets[i, : len(c)] = torch.tensor(c, dtype=torch.long)
            mask[i, : len(c)] = True
        input_ids, attention = input_ids.to(device), attention.to(device)
        targets, mask = targets.to(device), mask.to(device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        with contextlib.nullcontext() if grad else torch.no_grad():
            out = self.model(
                input_ids=input_ids, attention_mask=attention, position_ids=positions, logits_to_keep=c_width
            )
            logp = torch.log_softmax(out.logits.float() / temperature, dim=-1)
            picked = logp.gather(-1, targets[..., None]).squeeze(-1)
        return picked.masked_fill(~mask, 0.0)

    # ------------------------------------------------------------------ LoRA

    @property
    def has_adapter(self) -> bool:
        """Whether a LoRA adapter is attached."""
        return hasattr(self.model, "peft_config")

    def attach_lora(
        self,
        r: int = 8,
        alpha: int = 16,
        target_modules: Sequence[str] = ("q_proj", "k_proj", "v_proj", "o_proj"),
        dropout: float = 0.0,
        *,
        seed: int = 0,
    ) -> None:
        """Wrap the model in a fresh trainable LoRA adapter (``peft``); base weights are frozen.

        The adapter starts as the identity (``B = 0``), so outputs are unchanged until training. The
        ``A`` matrices are drawn from a forked torch RNG seeded with ``seed``.

        Example:
            >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
            >>> tok = build_tiny_tokenizer()
            >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
            >>> policy.attach_lora(r=4)
            >>> policy.has_adapter, all("lora_" in n for n, p in policy.model.named_parameters() if p.requires_grad)
            (True, True)
        """
        from peft import LoraConfig, get_peft_model

        if self.has_adapter:
            raise ConfigError("a LoRA adapter is already attached; use load_adapter to replace its weights")
        config = LoraConfig(
            r=r, lora_alpha=alpha, target_modules=list(target_modules), lora_dropout=dropout, task_type="CAUSAL_LM"
        )
        with torch.random.fork_rng(devices=[]), _peft_deprecations_silenced():
            torch.manual_seed(seed)
            self.model = get_peft_model(self.model, config).eval()

    def save_adapter(self, path: str | Path) -> Path:
        """Write the adapter in the standard ``peft`` format (``adapter_config.json`` + safetensors).

        Example:
            >>> import tempfile
            >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
            >>> tok = build_tiny_tokenizer()
            >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
            >>> policy.attach_lora(r=4)
            >>> with tempfile.TemporaryDirectory() as d:
            ...     sorted(p.name for p in policy.save_adapter(d).iterdir())
            ['README.md', 'adapter_config.json', 'adapter_model.safetensors']
        """
        if not self.has_adapter:
            raise ConfigError("no LoRA adapter to save: call attach_lora or load_adapter first")
        path = Path(path)
        self.model.save_pretrained(path)
        return path

    def load_adapter(self, path: str | Path) -> None:
        """Load adapter weights written by :meth:`save_adapter` (or any ``peft`` LoRA of this base model).

        With an adapter already attached, the weights are copied *in place* (same parameter objects, so an
        optimizer holding them keeps working); its config (rank, targets) must match. Otherwise the saved
        adapter is attached, trainable.

        Example:
            >>> import tempfile
            >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
            >>> tok = build_tiny_tokenizer()
            >>> cfg = TinyModelConfig(hidden_size=32, num_heads=2)
            >>> a, b = HFPolicy(build_tiny_model(tok, cfg), tok), HFPolicy(build_tiny_model(tok, cfg), tok)
            >>> a.attach_lora(r=4)
            >>> with tempfile.TemporaryDirectory() as d:
            ...     b.load_adapter(a.save_adapter(d))
            >>> b.has_adapter
            True
        """
        from peft import PeftConfig, PeftModel, load_peft_weights, set_peft_model_state_dict

        path = Path(path)
        if not (path / "adapter_config.json").is_file():
            raise ConfigError(f"no peft adapter at {path}: expected {path / 'adapter_config.json'}")
        if not self.has_adapter:
            with _peft_deprecations_silenced():
                self.model = PeftModel.from_pretrained(self.model, path, is_trainable=True).eval()
            return
        saved, current = PeftConfig.from_pretrained(str(path)), self.model.peft_config["default"]
        for field in ("r", "lora_alpha", "target_modules"):
            if getattr(saved, field, None) != getattr(current, field, None):
                raise ConfigError(
                    f"adapter at {path} has {field}={getattr(saved, field, None)!r}, the attached adapter has "
                    f"{getattr(current, field, None)!r}"
                )
        result = set_peft_model_state_dict(self.model, load_peft_weights(str(path), device=str(self.device)))
        missing = [k for k in getattr(result, "missing_keys", ()) if "lora_" in k]
        if missing:
            raise ConfigError(f"adapter at {path} lacks weights for {missing[:3]}")

    @contextlib.contextmanager
    def reference(self) -> Iterator[HFPolicy]:
        """Inside the block the policy acts and scores as the base model (adapter disabled, no copy).

        Example:
            >>> from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
            >>> tok = build_tiny_tokenizer()
            >>> policy = HFPolicy(build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_heads=2)), tok)
            >>> policy.attach_lora(r=4)
            >>> with policy.reference() as ref:
            ...     ref_lp = ref.sequence_logprobs([[1, 4]], [[60, 61]])
            >>> ref_lp.shape
            torch.Size([1, 2])
        """
        if not self.has_adapter:
            raise ConfigError("reference() needs a LoRA adapter: without one the policy *is* the reference")
        if self.kv is not None:
            self.kv.clear()  # the kept caches belong to the adapter's weights, and the reference's to none
        try:
            with self.model.disable_adapter():
                yield self
        finally:
            if self.kv is not None:
                self.kv.clear()


def _seed_view(ctx: Context) -> Context:
    """The context as seen by :func:`context_seeds`: a prefix counts as part of the conversation."""
    if not (ctx.prefix_text or ctx.prefix_token_ids):
        return ctx
    text = ctx.prefix_text or " ".join(str(t) for t in ctx.prefix_token_ids)
    return dataclasses.replace(ctx, messages=(*ctx.messages, Message("assistant", text)))


def _stop_ids(model: Any, tokenizer: PreTrainedTokenizerBase) -> set[int]:
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen = getattr(model, "generation_config", None)
    eos = getattr(gen, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    elif isinstance(eos, (list, tuple)):
        ids.update(int(e) for e in eos)
    return ids


@contextlib.contextmanager
def _eval_mode(model: torch.nn.Module) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
