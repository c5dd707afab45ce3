"""A small OpenAI-compatible HTTP server over any turnkit :class:`~turnkit.agents.base.Agent`.

For tests and demos: serve the tiny model (or any agent) on loopback and talk to it with
:class:`~turnkit.agents.openai.OpenAIAgent` or any OpenAI client. Standard library only
(``http.server.ThreadingHTTPServer``), bound to ``127.0.0.1`` on an ephemeral port by default.

Endpoints: ``GET /v1/models``, ``POST /v1/chat/completions`` (tools and streaming below), ``POST
/v1/completions`` with token-id prompts only (``"prompt": [ids]``, the exact prompt, for token-in clients)
and vLLM's runtime LoRA routes ``POST /v1/load_lora_adapter`` / ``/v1/unload_lora_adapter`` (below).
Requests that arrive together are batched into one ``agent.act`` call (one worker thread owns the agent, so
the agent never runs concurrently). ``temperature``, ``top_p`` and ``max_tokens`` apply when the agent offers
``with_sampling`` (as :class:`~turnkit.agents.hf.HFPolicy` does); ``n`` > 1 returns ``n`` samples of the
same prompt. Like vLLM, the reply carries ``token_ids`` and ``prompt_token_ids`` when the request sets
``return_token_ids``, and log-probs when it sets ``logprobs`` (chat: ``logprobs.content``; completions:
``logprobs.tokens``/``token_logprobs``; tokens spelled ``"token_id:N"`` with ``return_tokens_as_token_ids``).

Models. The server serves ``model_name`` (``turnkit serve SPEC``: the spec's name, e.g. ``tiny``) and the LoRA
adapters loaded at runtime (below); ``/v1/models`` lists them. A request names one of them in ``model`` (left
out: ``model_name``, as vLLM does); any other name is an HTTP 404 with OpenAI's error
``{"message", "type": "invalid_request_error", "param": "model", "code": "model_not_found"}`` whose message
lists the served names.

Stop sequences. ``stop`` (a string or a list of at most 4 non-empty strings, as at OpenAI) ends each reply just
before the first stop sequence that the text completes, with ``finish_reason: "stop"``; the sequence itself is
not returned. Agents that honour ``Context.stop`` (``supports_prefix``: ``HFPolicy``) also stop generating
there; the others' replies are cut after the fact. ``token_ids`` and ``logprobs`` (and ``usage``) stay with
the tokens generated up to and including the one that completes the stop sequence, as vLLM's do: they spell
the content, then the stop sequence (and whatever else that last token holds); for an agent without a
``tokenizer`` the ids are not cut. A streamed reply is the cut reply in pieces, so no chunk holds text past
the stop, even where a stop sequence spans two tokens.

Errors have OpenAI's shape everywhere: ``{"error": {"message", "type", "param", "code"}}``. A 400
(``invalid_request_error``) names the request field at fault in ``param`` and in the message, spelled as the
API spells it (``max_tokens``, ``temperature`` in [0, 2], ``top_p`` in (0, 1], ``n``, ``seed``, ``stop``,
``logprobs``, ``top_logprobs`` (only 0: agents return no alternatives), ``messages``, ``tools``, ...). A
prompt that leaves no room for a reply in the model's context is a 400 with ``code:
"context_length_exceeded"`` and ``param: "messages"`` (``"prompt"`` on ``/v1/completions``), as at OpenAI
and vLLM; a prompt that fits but leaves less room than ``max_tokens`` gets the reply that fits
(``finish_reason: "length"``). Unknown routes are 404s; an agent fault is a 500 (``server_error``).

Tools, like vLLM with ``--enable-auto-tool-choice --tool-call-parser hermes``. A chat request's ``tools``
(OpenAI function schemas; a malformed list is a 400) reach the agent as ``Context.tools``, which
:class:`~turnkit.agents.hf.HFPolicy` renders with a chat template that takes tools. A reply whose text holds a
well-formed call to an offered tool (:func:`~turnkit.tools.parse_tool_call`: ``<tool_call>`` JSON, or a tag
such as ``<python>...</python>``) is returned as ``message.tool_calls`` (one call; ``content`` is the text
before it, or ``null``) with ``finish_reason: "tool_calls"``; any other text (a malformed call, a tool not
offered) is plain content. ``tool_choice`` may be ``"auto"`` (the default) or ``"none"`` (tools are rendered,
calls are not parsed). Request messages may carry ``tool_calls`` and ``tool`` replies: a call is rendered back
as the content, a newline and :func:`~turnkit.tools.format_tool_call`, the text
:class:`~turnkit.agents.openai.OpenAIAgent` makes of a ``tool_calls`` reply, so a conversation reads the same
on both sides of the wire (:mod:`turnkit.agents.tool_messages`).

Streaming. With ``"stream": true`` both completion routes answer Server-Sent Events as OpenAI sends them
(``Content-Type: text/event-stream``): lines ``data: {json}``, each followed by a blank line, then ``data:
[DONE]``. Every chunk (object ``chat.completion.chunk``; ``text_completion`` on ``/v1/completions``) has the
same ``id``, ``created`` and ``model``. Per choice (``n`` > 1 streams each choice in turn, told apart by
``index``): a first delta ``{"role": "assistant", "content": ""}`` (chat only), the content deltas, a
``tool_calls`` delta when the reply calls a tool, and a last chunk with an empty delta (``"text": ""``) and the
``finish_reason``. With ``"stream_options": {"include_usage": true}`` every chunk has ``"usage": null`` and one
more chunk before ``[DONE]`` has no choices and the usage of the non-streamed reply. The agent makes the whole
turn at once, so the stream is that reply cut into pieces: at token boundaries when the turn has token ids and
the agent a ``tokenizer`` (a piece ends only where the ids decode to whole characters, so a multi-byte
character is never split), else after each word. The pieces join to exactly the non-streamed content. The
extensions travel with the pieces, as in vLLM: each chunk's choice has the ``logprobs`` of its own tokens and,
with ``return_token_ids``, their ``token_ids``; joined over a choice's chunks they are the reply's
``token_ids`` and log-probs (ids past the content, such as a stop token's, come with the last content piece; a
tool call's with the ``tool_calls`` chunk). The first chunk has the ``prompt_token_ids`` (chat: at the top
level; completions: on each choice's first chunk). The stream starts only once the turn is made, so every
error is a JSON reply (400, 404, 500) as without ``stream``; ``stream_options`` without ``stream`` is a 400,
as at OpenAI.

Seeds. As in vLLM, a request's ``seed`` seeds its sample's random stream directly (sample ``i > 0`` of
``n`` gets a seed derived from it), for the seeded agents (``HFPolicy``, ``VLLMPolicy``, ``OpenAIAgent``:
those that draw per-context seeds with :func:`~turnkit.agents.sampling.context_seeds`). So
:class:`~turnkit.agents.openai.OpenAIAgent`, which sends each context's ``context_seeds`` seed, gets from a
served ``HFPolicy`` exactly the turns the policy gives in process. Other agents see the seed as the context's
``episode_seed``.

Runtime LoRA adapters (vLLM's API shape, for weight sync while training). ``load_lora_adapter`` with
``{"lora_name": NAME, "lora_path": DIR}`` loads a ``peft`` adapter through the agent's ``load_adapter``
(``HFPolicy`` and ``VLLMPolicy`` offer it), on the worker thread between batches; requests with
``model=NAME`` are then served with it. The agent holds one adapter's weights at a time: a request for
another loaded adapter reloads that one first. Once an adapter has been loaded, requests for ``model_name``
get the base model with the adapter disabled (the agent's ``reference()``), as vLLM serves the base model
beside its LoRAs. A name already loaded (or ``model_name``) is refused (400; unload it first), as is a folder
without ``adapter_config.json`` or an adapter the agent cannot take (rank or targets differ).
``unload_lora_adapter`` with ``{"lora_name": NAME}`` forgets it (404 for an unknown name); completions naming
it are then 404 ``model_not_found`` too.
Both reply with vLLM's plain-text ``Success: ...`` line.

Run one from a shell: ``turnkit serve AGENT`` (:mod:`turnkit.cli.serve`), or ``python -m turnkit.agents.serve
MODEL_DIR --port 8000`` for a model folder (served under the folder's name; ``--name`` picks another).

Example:
    >>> import json, urllib.request
    >>> from turnkit.agents.scripted import ScriptedAgent
    >>> with AgentServer(ScriptedAgent(["hello"]), model_name="demo") as server:
    ...     models = json.load(urllib.request.urlopen(server.base_url + "/models"))
    >>> [m["id"] for m in models["data"]]
    ['demo']
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import logging
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from turnkit.agents.base import Agent, Context
from turnkit.agents.serve_api import (
    ApiError,
    BadRequest,
    NotFound,
    check_object,
    check_stream_fields,
    context_length_error,
    error_body,
    model_not_found,
    parse_messages,
    parse_n_and_seed,
    parse_sampling,
    parse_stop,
    parse_token_fields,
)
from turnkit.agents.serve_cuts import cut_at_stop, logprobs_span, stream_pieces
from turnkit.agents.tool_messages import check_tool_schemas, reply_tool_call
from turnkit.errors import ConfigError, TurnkitError
from turnkit.types import AgentTurn

logger = logging.getLogger(__name__)

_MASK63 = (1 << 63) - 1
_FINISH_REASONS = {"stop_string": "stop"}
"""Agent finish reasons that OpenAI spells otherwise (a turn cut by a stop sequence finished with ``stop``)."""


@dataclass
class _Job:
    overrides: tuple[tuple[str, Any], ...]
    contexts: list[Context]
    model: str = ""
    future: Future[list[AgentTurn]] = field(default_factory=Future)


@dataclass
class _Call:
    """Adapter bookkeeping run by the worker between batches (the worker owns the agent)."""

    fn: Any
    future: Future[str] = field(default_factory=Future)


@dataclass
class _Stream:
    """A reply to stream: the chunks sent as ``data:`` events, in order (the handler adds ``data: [DONE]``)."""

    chunks: list[dict[str, Any]]


class _HTTPServer(ThreadingHTTPServer):
    request_queue_size = 128
    """Listen backlog. socketserver's default (5) overflows when a client opens more connections at once (an
    ``OpenAIAgent`` batch sends 8), and each dropped connect waits a 1 s SYN retransmit."""


class AgentServer:
    """Serve ``agent`` over the OpenAI chat-completions protocol, in background threads.

    Args:
        agent: Any turnkit agent.
        model_name: The served model's name: ``/v1/models`` lists it (then any loaded LoRA adapters), and a
            request must name it or a loaded adapter (a request without ``model`` gets it); any other name is
            an HTTP 404 ``model_not_found`` whose message lists the served names.
        host: Bind address (loopback by default; nothing here authenticates callers).
        port: Port; ``0`` picks a free one (read it from :attr:`base_url`).
        max_batch: Most contexts per ``agent.act`` call.
        batch_window_s: How long the worker waits for more requests before acting on a partial batch.

    Example:
        >>> from turnkit.agents.scripted import ScriptedAgent
        >>> server = AgentServer(ScriptedAgent(["x"])).start()
        >>> server.base_url.startswith("http://127.0.0.1:")
        True
        >>> server.close()
    """

    def __init__(
        self,
        agent: Agent,
        *,
        model_name: str = "turnkit",
        host: str = "127.0.0.1",
        port: int = 0,
        max_batch: int = 32,
        batch_window_s: float = 0.005,
    ) -> None:
        if max_batch < 1:
            raise ConfigError(f"AgentServer.max_batch must be >= 1, got {max_batch}")
        self.agent = agent
        self.model_name = model_name
        self.max_batch = max_batch
        self.batch_window_s = batch_window_s
        self._jobs: queue.Queue[_Job | _Call | None] = queue.Queue()
        self._ids = itertools.count()
        self._adapters: dict[str, Path] = {}  # runtime LoRA adapters by name; changed by the worker only
        self._unloaded: set[str] = set()
        self._active: str | None = None  # the adapter whose weights the agent holds now
        self._swapped = False  # an adapter was loaded at runtime: the served base is the adapter-disabled model
        self._httpd = _HTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._threads: list[threading.Thread] = []

    def served_names(self) -> list[str]:
        """The model names requests may use: :attr:`model_name`, then the loaded LoRA adapters."""
        return [self.model_name, *list(self._adapters)]

    @property
    def base_url(self) -> str:
        """The API root, e.g. ``http://127.0.0.1:54321/v1``."""
        host, port = self._httpd.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}/v1"

    def start(self) -> AgentServer:
        """Start serving (idempotent); returns ``self``."""
        if not self._threads:
            self._threads = [
                threading.Thread(
                    target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="turnkit-http", daemon=True
                ),
                threading.Thread(target=self._work, name="turnkit-agent", daemon=True),
            ]
            for t in self._threads:
                t.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port (idempotent)."""
        if self._threads:
            self._httpd.shutdown()
            self._jobs.put(None)
            for t in self._threads:
                t.join(timeout=10)
            self._threads = []
        self._httpd.server_close()

    def __enter__(self) -> AgentServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ agent side

    def submit(self, contexts: list[Context], overrides: dict[str, Any], model: str = "") -> list[AgentTurn]:
        """Queue contexts for the worker and wait for their turns (called by request threads).

        ``model`` is the requested model name: a loaded adapter's name selects that adapter.
        """
        job = _Job(tuple(sorted(overrides.items())), contexts, model)
        self._jobs.put(job)
        return job.future.result()

    def _work(self) -> None:
        while (first := self._jobs.get()) is not None:
            if isinstance(first, _Call):
                self._call(first)
                continue
            jobs, stop, call = [first], False, None
            deadline = time.monotonic() + self.batch_window_s
            while sum(len(j.contexts) for j in jobs) < self.max_batch:
                try:
                    nxt = self._jobs.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                if isinstance(nxt, _Call):  # adapter changes wait for the requests queued before them
                    call = nxt
                    break
                jobs.append(nxt)
            groups: dict[tuple[Any, str | None], list[_Job]] = {}
            for j in jobs:
                if j.model and j.model != self.model_name and j.model not in self._adapters:  # unloaded meanwhile
                    j.future.set_exception(model_not_found(j.model, self.served_names(), unloaded=True))
                    continue
                adapter = j.model if j.model in self._adapters else None
                groups.setdefault((j.overrides, adapter), []).append(j)
            for (overrides, adapter), group in groups.items():
                self._run(group, dict(overrides), adapter)
            if call is not None:
                self._call(call)
            if stop:
                return

    def _call(self, call: _Call) -> None:
        try:
            call.future.set_result(call.fn())
        except Exception as exc:  # handed to the waiting request (400, 404 or 500 by type)
            call.future.set_exception(exc)

    def _run(self, jobs: list[_Job], overrides: dict[str, Any], adapter: str | None = None) -> None:
        contexts = [c for j in jobs for c in j.contexts]
        try:
            if adapter is not None and self._active != adapter:
                self._activate(adapter, self._adapters[adapter])
            agent: Any = self.agent
            with_sampling = getattr(agent, "with_sampling", None)
            if with_sampling is not None:
                agent = with_sampling(**overrides)
                if agent is not self.agent:  # a view of its own: its generator may be replaced
                    agent, contexts = _exact_seeds(agent, contexts)
            base = adapter is None and self._swapped and hasattr(agent, "reference")
            with agent.reference() if base else contextlib.nullcontext(agent) as acting:
                turns = acting.act(contexts)
            if len(turns) != len(contexts):
                raise TurnkitError(f"agent returned {len(turns)} turns for {len(contexts)} contexts")
        except Exception as exc:  # handed to each waiting request, which answers HTTP 500
            for j in jobs:
                j.future.set_exception(exc)
            return
        start = 0
        for j in jobs:
            j.future.set_result(turns[start : start + len(j.contexts)])
            start += len(j.contexts)

    # ------------------------------------------------------------------ runtime LoRA adapters

    def load_lora_adapter(self, body: Any) -> str:
        """Answer one ``/v1/load_lora_adapter`` body: load the adapter through the worker (see module docstring).

        Raises:
            BadRequest: A missing field, a name already loaded, a folder without ``adapter_config.json``, an
                agent without ``load_adapter``, or an adapter the agent refuses (its ``ConfigError``).
        """
        name, path = _adapter_fields(body, need_path=True)
        assert path is not None
        if not (path / "adapter_config.json").is_file():
            raise BadRequest(
                f"lora_path '{path}' is not a peft adapter folder: no adapter_config.json there", param="lora_path"
            )
        if not callable(getattr(self.agent, "load_adapter", None)):
            raise BadRequest(f"the served agent ({type(self.agent).__name__}) cannot load adapters: no load_adapter")
        if name == self.model_name:
            raise BadRequest(f"lora_name '{name}' is the served model's name; pick another", param="lora_name")

        def load() -> str:
            if name in self._adapters:
                raise BadRequest(f"The lora adapter '{name}' has already been loaded.", param="lora_name")
            self._activate(name, path)
            self._adapters[name] = path
            self._unloaded.discard(name)
            return f"Success: LoRA adapter '{name}' added successfully."

        return self._submit_call(load)

    def unload_lora_adapter(self, body: Any) -> str:
        """Answer one ``/v1/unload_lora_adapter`` body (raises :class:`NotFound` for an unknown name)."""
        name, _ = _adapter_fields(body, need_path=False)

        def unload() -> str:
            if self._adapters.pop(name, None) is None:
                raise NotFound(f"The lora adapter '{name}' cannot be found.", param="lora_name")
            self._unloaded.add(name)
            return f"Success: LoRA adapter '{name}' removed successfully."

        return self._submit_call(unload)

    def _submit_call(self, fn: Any) -> str:
        call = _Call(fn)
        self._jobs.put(call)
        return call.future.result()

    def _activate(self, name: str, path: Path) -> None:
        """Load adapter ``name``'s weights into the agent (worker thread only)."""
        self._active, self._swapped = None, True
        try:
            self.agent.load_adapter(path)  # type: ignore[attr-defined]
        except ConfigError as exc:
            raise BadRequest(f"cannot load adapter '{name}' from {path}: {exc}", param="lora_path") from exc
        self._active = name

    # ------------------------------------------------------------------ protocol

    def complete(self, body: Any) -> dict[str, Any] | _Stream:
        """Answer one parsed ``/v1/chat/completions`` request body (raises :class:`~.serve_api.ApiError`).

        With ``stream`` set, the answer is the reply's chunks (see the module docstring).
        """
        body = check_object(body)
        try:
            tools = check_tool_schemas(body.get("tools"))
        except ValueError as exc:
            raise BadRequest(str(exc), param="tools") from exc
        choice = body.get("tool_choice")
        if choice not in (None, "auto", "none"):
            raise BadRequest(f'tool_choice must be "auto" or "none" here, got {choice!r}', param="tool_choice")
        messages = parse_messages(body.get("messages"))
        turns = self._sample(body, Context(messages=messages, tools=tools), chat=True)
        reply = self._reply(body, turns, chat=True, tools=() if choice == "none" else tools)
        return self._stream(body, reply, turns, chat=True) if body.get("stream") else reply

    def complete_prompt(self, body: Any) -> dict[str, Any] | _Stream:
        """Answer one ``/v1/completions`` body whose ``prompt`` is token ids (raises :class:`~.serve_api.ApiError`).

        The ids are the exact prompt (``Context.prompt_token_ids``; honoured by the token-level agents), as in
        vLLM's token-id prompts; text prompts are refused (send text through ``/v1/chat/completions``).
        """
        body = check_object(body)
        ids = body.get("prompt")
        if isinstance(ids, list) and len(ids) == 1 and isinstance(ids[0], list):
            ids = ids[0]  # a batch of one prompt
        if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and i >= 0 for i in ids):
            raise BadRequest(
                "prompt must be a non-empty list of token ids (this server takes no text prompts: "
                "send text through /v1/chat/completions)",
                param="prompt",
            )
        turns = self._sample(body, Context(messages=(), prompt_token_ids=tuple(ids)), chat=False)
        reply = self._reply(body, turns, chat=False)
        return self._stream(body, reply, turns, chat=False) if body.get("stream") else reply

    def _model(self, body: dict[str, Any]) -> str:
        """The served name a request asks for (:attr:`model_name` without ``model``); a 404 for any other."""
        name = body.get("model")
        if name is None:
            return self.model_name
        if not isinstance(name, str) or not name:
            raise BadRequest(f"model must be a non-empty string, got {name!r}", param="model")
        if name != self.model_name and name not in self._adapters:
            raise model_not_found(name, self.served_names(), unloaded=name in self._unloaded)
        return name

    def _sample(self, body: dict[str, Any], context: Context, *, chat: bool) -> list[AgentTurn]:
        """Check a request's fields and have the worker sample its ``n`` turns, cut at its stop sequences.

        Raises:
            ApiError: A malformed field, an unknown model, or a prompt that leaves no room for a reply.
        """
        check_stream_fields(body)
        n, seed = parse_n_and_seed(body)
        overrides = parse_sampling(body)
        stops = parse_stop(body.get("stop"))
        parse_token_fields(body, chat=chat)
        model = self._model(body)
        with_sampling = getattr(self.agent, "with_sampling", None)
        if overrides and with_sampling is not None:
            try:
                with_sampling(**overrides)  # an agent's own limits: still the caller's 400
            except ConfigError as exc:
                raise BadRequest(f"the served agent refuses these sampling settings: {exc}") from exc
        if stops and getattr(self.agent, "supports_prefix", False):
            context = dataclasses.replace(context, stop=stops)  # the agent stops generating there too
        contexts = [dataclasses.replace(context, episode_seed=s) for s in _sample_seeds(seed, n)]
        turns = self.submit(contexts, overrides, model)
        if any(t.finish_reason == "prompt_too_long" for t in turns):
            prompt = len(turns[0].prompt_token_ids) or len(context.prompt_token_ids) or None
            raise context_length_error(prompt, _context_window(self.agent), chat=chat)
        tokenizer = getattr(self.agent, "tokenizer", None)
        return [cut_at_stop(t, stops, tokenizer) for t in turns] if stops else turns

    def _reply(
        self, body: dict[str, Any], turns: list[AgentTurn], *, chat: bool, tools: tuple[Any, ...] = ()
    ) -> dict[str, Any]:
        """The chat-completions (``chat``) or completions reply for ``turns``, with the asked-for token data.

        With ``tools``, a turn that calls one of them is a ``tool_calls`` message (see the module docstring).
        """
        want_lps, want_ids, as_ids = parse_token_fields(body, chat=chat)
        tokenizer = getattr(self.agent, "tokenizer", None)
        prompt = list(turns[0].prompt_token_ids) if turns else []
        choices = []
        for i, turn in enumerate(turns):
            finish = _FINISH_REASONS.get(turn.finish_reason or "stop", turn.finish_reason or "stop")
            choice: dict[str, Any] = {"index": i, "finish_reason": finish, "logprobs": None}
            choice.update({"message": {"role": "assistant", "content": turn.text}} if chat else {"text": turn.text})
            call = reply_tool_call(turn.text, tools) if tools else None
            if call is not None:
                choice["message"] = {"role": "assistant", "content": call[0], "tool_calls": [call[1]]}
                choice["finish_reason"] = "tool_calls"
            tokens = [_token_text(t, tokenizer, as_ids) for t in turn.token_ids]
            if want_lps and turn.logprobs and chat:
                choice["logprobs"] = {
                    "content": [
                        {"token": t, "logprob": lp, "bytes": None, "top_logprobs": []}
                        for t, lp in zip(tokens, turn.logprobs, strict=True)
                    ]
                }
            elif want_lps and turn.logprobs:
                choice["logprobs"] = {"tokens": tokens, "token_logprobs": list(turn.logprobs), "top_logprobs": None}
            if want_ids:
                choice["token_ids"] = list(turn.token_ids) if turn.token_ids else None
                if not chat:
                    choice["prompt_token_ids"] = list(turn.prompt_token_ids) or None
            choices.append(choice)
        reply: dict[str, Any] = {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{next(self._ids)}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model_name,  # checked by _sample
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": sum(len(t.token_ids) for t in turns),
                "total_tokens": len(prompt) + sum(len(t.token_ids) for t in turns),
            },
        }
        if want_ids and chat:
            reply["prompt_token_ids"] = prompt or None
        return reply

    def _stream(self, body: dict[str, Any], reply: dict[str, Any], turns: list[AgentTurn], *, chat: bool) -> _Stream:
        """Cut the non-streamed ``reply`` for ``turns`` into OpenAI's stream chunks (see the module docstring)."""
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        head: dict[str, Any] = {
            "id": reply["id"],
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": reply["created"],
            "model": reply["model"],
        }
        tokenizer = getattr(self.agent, "tokenizer", None)
        chunks: list[dict[str, Any]] = []
        for choice, turn in zip(reply["choices"], turns, strict=True):
            ids = list(turn.token_ids)
            message = choice.get("message", {})
            calls = message.get("tool_calls") or []
            pieces, used = stream_pieces((message.get("content") if chat else choice["text"]) or "", ids, tokenizer)
            if pieces and not calls:  # ids past the content (e.g. a stop token's) go with its last piece
                pieces[-1] = (pieces[-1][0], range(pieces[-1][1].start, len(ids)))
                used = len(ids)
            parts: list[tuple[dict[str, Any], range]] = [
                ({"delta": {"content": text}} if chat else {"text": text}, span) for text, span in pieces
            ]
            if chat:
                parts.insert(0, ({"delta": {"role": "assistant", "content": ""}}, range(0)))
            if calls:
                parts.append(({"delta": {"tool_calls": [{"index": j, **c} for j, c in enumerate(calls)]}}, range(0)))
            parts.append(({"delta": {}} if chat else {"text": ""}, range(0)))
            rest = -2 if calls else -1  # ids past the content: on the tool_calls chunk, or the final one
            parts[rest] = (parts[rest][0], range(used, len(ids)))
            for k, (part, span) in enumerate(parts):
                out: dict[str, Any] = {"index": choice["index"], **part}
                out["logprobs"] = logprobs_span(choice["logprobs"], span, chat)
                out["finish_reason"] = choice["finish_reason"] if k == len(parts) - 1 else None
                if "token_ids" in choice:
                    out["token_ids"] = ids[span.start : span.stop] if choice["token_ids"] is not None else None
                if k == 0 and "prompt_token_ids" in choice:  # completions: on each choice's first chunk
                    out["prompt_token_ids"] = choice["prompt_token_ids"]
                chunk: dict[str, Any] = {**head, "choices": [out]}
                if k == 0 and choice["index"] == 0 and "prompt_token_ids" in reply:  # chat: on the first chunk
                    chunk["prompt_token_ids"] = reply["prompt_token_ids"]
                chunks.append({**chunk, "usage": None} if usage else chunk)
        if usage:
            chunks.append({**head, "choices": [], "usage": reply["usage"]})
        return _Stream(chunks)

    def models(self) -> dict[str, Any]:
        """The ``/v1/models`` listing: the served model, then the loaded adapters (``parent``: the served model)."""
        data = [{"id": self.model_name, "object": "model", "owned_by": "turnkit"}]
        data += [
            {"id": name, "object": "model", "owned_by": "turnkit", "root": str(path), "parent": self.model_name}
            for name, path in list(self._adapters.items())
        ]
        return {"object": "list", "data": data}


class _SeedStream:
    """Stands in for a seeded agent's ``_rng``: yields the given seeds in order (``None``: one from ``fallback``).

    :func:`~turnkit.agents.sampling.context_seeds` draws one seed per context without ``episode_seed`` from the
    agent's generator, in batch order; replaying the requests' seeds there makes each the sample's seed.
    """

    def __init__(self, seeds: Sequence[int | None], fallback: Any) -> None:
        self._seeds, self._fallback = iter(seeds), fallback

    def integers(self, low: int, high: int, dtype: Any = np.int64) -> int:
        seed = next(self._seeds)
        return int(self._fallback.integers(low, high, dtype=dtype)) if seed is None else seed


def _exact_seeds(agent: Any, contexts: list[Context]) -> tuple[Any, list[Context]]:
    """A seeded agent's view (from ``with_sampling``) that samples each context with its request seed exactly.

    Seeded agents draw per-context seeds with :func:`~turnkit.agents.sampling.context_seeds` from ``_rng``;
    other agents are returned as they are, with the seed left as ``episode_seed``.
    """
    if not isinstance(getattr(agent, "_rng", None), np.random.Generator):
        return agent, contexts
    agent._rng = _SeedStream([c.episode_seed for c in contexts], agent._rng)
    return agent, [dataclasses.replace(c, episode_seed=None) for c in contexts]


def _sample_seeds(seed: int | None, n: int) -> list[int | None]:
    """Per-sample seeds of a request: the seed itself for sample 0, seeds derived from it for the others.

    Example:
        >>> _sample_seeds(7, 3)[0], len(set(_sample_seeds(7, 3))), _sample_seeds(None, 2)
        (7, 3, [None, None])
    """
    if seed is None:
        return [None] * n
    seed &= _MASK63
    derived = [np.random.SeedSequence([seed, i]).generate_state(2, dtype=np.uint32) for i in range(1, n)]
    return [seed, *((int(a) << 31 ^ int(b)) & _MASK63 for a, b in derived)]


def _adapter_fields(body: Any, *, need_path: bool) -> tuple[str, Path | None]:
    body = check_object(body)
    name, path = body.get("lora_name"), body.get("lora_path")
    if not isinstance(name, str) or not name:
        raise BadRequest("lora_name must be a non-empty string", param="lora_name")
    if not need_path:
        return name, None
    if not isinstance(path, str) or not path:
        raise BadRequest("lora_path must be a non-empty string (an adapter folder on the server)", param="lora_path")
    return name, Path(path)


def _context_window(agent: Any) -> int | None:
    """The longest sequence the agent's model takes (its config's ``max_position_embeddings``), if it says."""
    window = getattr(getattr(getattr(agent, "model", None), "config", None), "max_position_embeddings", None)
    return window if isinstance(window, int) else None


def _token_text(token_id: int, tokenizer: Any, as_ids: bool) -> str:
    if as_ids or tokenizer is None:
        return f"token_id:{token_id}"
    return str(tokenizer.decode([token_id]))


def _handler_for(server: AgentServer) -> type[BaseHTTPRequestHandler]:
    routes: dict[str, Any] = {
        "/v1/chat/completions": server.complete,
        "/v1/completions": server.complete_prompt,
        "/v1/load_lora_adapter": server.load_lora_adapter,
        "/v1/unload_lora_adapter": server.unload_lora_adapter,
    }

    class Handler(BaseHTTPRequestHandler):
        server_version = "turnkit-serve/0.1"

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, server.models())
            else:
                self._send(404, _no_route("GET", self.path))

        def do_POST(self) -> None:
            route = routes.get(self.path.rstrip("/"))
            if route is None:
                self._send(404, _no_route("POST", self.path))
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
            except ValueError as exc:
                self._send(400, error_body(f"request body is not JSON: {exc}", "invalid_request_error"))
                return
            try:
                answer = route(body)
                self._send_stream(answer) if isinstance(answer, _Stream) else self._send(200, answer)
            except ApiError as exc:
                self._send(exc.status, exc.body())
            except Exception as exc:  # an agent fault: the client sees a 5xx and may retry
                logger.exception("agent failed on a request")
                self._send(500, error_body(f"{type(exc).__name__}: {exc}", "server_error"))

        def _send(self, status: int, payload: dict[str, Any] | str) -> None:
            text = isinstance(payload, str)  # the adapter routes answer plain text, as vLLM's do
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8" if text else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except ConnectionError:  # the client gave up (e.g. its timeout): nobody is left to answer
                logger.debug("%s went away before its HTTP %d reply", self.address_string(), status)

        def _send_stream(self, stream: _Stream) -> None:
            """Send ``stream`` as Server-Sent Events; the connection closes after ``data: [DONE]``."""
            self.close_connection = True  # no Content-Length: the end of the body is the end of the connection
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in stream.chunks:
                    self.wfile.write(b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except ConnectionError:
                logger.debug("%s went away during its streamed reply", self.address_string())

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s " + format, self.address_string(), *args)

    return Handler


def _no_route(method: str, path: str) -> dict[str, Any]:
    """OpenAI's 404 body for a route that does not exist."""
    return error_body(f"Invalid URL ({method} {path}): this server has no such route", "invalid_request_error")


def main(argv: Sequence[str] | None = None) -> None:
    """Serve a local HF model folder until interrupted: ``python -m turnkit.agents.serve MODEL_DIR``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("model_dir", help="a local HF model folder (e.g. written by turnkit.models.tiny.save_tiny)")
    parser.add_argument("--adapter", default=None, help="a peft LoRA adapter folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--name", default=None, help="the served model name (default: the folder's name)")
    args = parser.parse_args(argv)
    from turnkit.agents.hf import HFPolicy

    policy = HFPolicy.from_pretrained(args.model_dir, adapter=args.adapter)
    name = args.name or Path(args.model_dir).resolve().name
    with AgentServer(policy, model_name=name, host=args.host, port=args.port) as server:
        print(f"serving {args.model_dir} at {server.base_url} as model {name!r}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("stopping", flush=True)


if __name__ == "__main__":
    main()
