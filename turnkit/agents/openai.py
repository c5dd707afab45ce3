"""`OpenAIAgent`: a policy served by any OpenAI-compatible chat-completions endpoint (stdlib HTTP only).

A batch is sent as concurrent requests (a small thread pool), one per context. Every failure becomes a
:class:`~turnkit.errors.AgentError` with the URL and the cause, which the rollout layer records as
``Trajectory.error`` with cause ``AGENT``:

* connection errors, timeouts, HTTP 5xx and 429 are retried ``retries`` times with exponential backoff
  (``backoff * 2**attempt`` seconds), then raised;
* other HTTP errors (4xx) and malformed replies (invalid JSON, no ``choices``, no message text) are raised at
  once: retrying would not change them;
* except a 400 with OpenAI's ``code: "context_length_exceeded"`` (:mod:`turnkit.agents.serve` answers it to a
  prompt that leaves no room for a reply): that context gets an empty turn with
  ``finish_reason="prompt_too_long"``, as :class:`~turnkit.agents.hf.HFPolicy` gives in process, so one long
  episode does not end the others in its batch.

``timeout`` bounds each socket operation (connect, each read), not the whole request.

Token-level data. With ``token_ids=None`` (auto) the agent asks for ``logprobs`` and the vLLM extensions
``return_token_ids``/``return_tokens_as_token_ids``; servers that support them (vLLM,
:mod:`turnkit.agents.serve`) reply with the generated ids, their log-probs and the prompt ids, which fill
``AgentTurn.token_ids``, ``logprobs`` and ``prompt_token_ids`` (token-in/token-out training through a
server). If a server rejects these fields (HTTP 400 naming one of them), the agent drops them for the rest
of its life and returns text-only turns. ``token_ids=True`` requires them (a non-empty reply without ids is
an error); ``token_ids=False`` never asks.

Token-in. A context with ``prompt_token_ids`` (token-exact multi-turn contexts,
:func:`~turnkit.rollout.collect.collect_batch` with ``chat``) is sent to ``/completions`` with those ids as
the ``prompt`` (vLLM and :mod:`turnkit.agents.serve` take token-id prompts), so the server conditions on
exactly the ids a local policy would, never on a re-rendering of earlier turns. With ``token_ids=None``, a
server that refuses token-id prompts gets rendered messages from then on.

Tools. A context with ``tools`` (an env built with ``tools=...``, :mod:`turnkit.tools`) is sent with
``tools`` (its schemas as given) and ``parallel_tool_calls: false``, and its conversation with structured
calls (:func:`~turnkit.agents.tool_messages.messages_to_wire`): an assistant message that calls a tool becomes
``content`` + ``tool_calls`` and the ``tool`` message answering it gets its ``tool_call_id``. A reply's first
``tool_calls`` entry comes back as text the env parses: the content, a newline, then
:func:`~turnkit.tools.format_tool_call` (a malformed call stays a ``<tool_call>`` block the env answers as a bad
call); ``finish_reason`` is the server's (``"tool_calls"``). With ``send_tools=None`` (auto), a server that
refuses tools (HTTP 400 naming them, e.g. vLLM without ``--enable-auto-tool-choice``) gets the conversation as
text from then on (calls stay text, tool replies become user messages; the env describes its tools in its
first observation); ``send_tools=True`` requires them, ``False`` never sends them. Token-id prompts (below)
are unaffected: the server sees the ids and the model's calls stay text.

Each request carries a ``seed`` from :func:`~turnkit.agents.sampling.context_seeds`, so servers that honour
seeds (vLLM, :mod:`turnkit.agents.serve`) give the same text for the same episode seed and turn.

The API key is read from the environment variable named by ``api_key_env`` at request time (no header when
it is unset, as for local servers); it is never stored on the agent.

Runtime LoRA adapters (weight sync while training): :meth:`OpenAIAgent.load_lora_adapter` and
:meth:`~OpenAIAgent.unload_lora_adapter` call vLLM's runtime LoRA API (``POST /v1/load_lora_adapter`` with
``{"lora_name", "lora_path"}``, ``POST /v1/unload_lora_adapter``; ``vllm serve --enable-lora`` with
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``), which :mod:`turnkit.agents.serve` offers too; requests naming
``model=<lora_name>`` then generate with the adapter.

Example:
    >>> from turnkit.agents.base import Context
    >>> from turnkit.agents.scripted import ScriptedAgent
    >>> from turnkit.agents.serve import AgentServer
    >>> from turnkit.types import Message
    >>> with AgentServer(ScriptedAgent(["ANSWER: 4"])) as server:
    ...     agent = OpenAIAgent(server.base_url, "turnkit")
    ...     agent.act([Context(messages=(Message("user", "2+2?"),), episode_seed=0)])[0].text
    'ANSWER: 4'
"""

from __future__ import annotations

import copy
import dataclasses
import http.client
import ipaddress
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from turnkit.agents.base import Context
from turnkit.agents.sampling import SamplingConfig, context_seeds
from turnkit.agents.tool_messages import messages_to_wire, reply_text, text_messages
from turnkit.errors import AgentError, ConfigError
from turnkit.types import AgentTurn

TOKEN_FIELDS = {"logprobs": True, "return_token_ids": True, "return_tokens_as_token_ids": True}
"""Request fields that ask an OpenAI-compatible server for token-level data (vLLM's names)."""

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_TRANSIENT = (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException)


class OpenAIAgent:
    """A batched policy over an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        base_url: The API root, e.g. ``"http://127.0.0.1:8000/v1"`` (``/chat/completions`` is appended).
        model: The served model name.
        api_key_env: Environment variable holding the API key (sent as ``Authorization: Bearer``).
        temperature: Sampling temperature.
        top_p: Nucleus mass.
        max_tokens: Most tokens per reply.
        seed: Base seed mixed into each request's ``seed``.
        timeout: Seconds allowed for each socket operation.
        retries: Extra attempts after a transient failure.
        backoff: First retry delay in seconds (doubles each time).
        max_workers: Concurrent requests per batch.
        token_ids: Ask for token ids and log-probs: ``None`` = when supported, ``True`` = required,
            ``False`` = never.
        extra_body: More request fields (e.g. ``{"stop": ["END"]}``), sent as given.
        send_tools: Send a context's tools as ``tools``: ``None`` = while the server takes them, ``True`` =
            always (a refusal is an error), ``False`` = never (the conversation goes as text).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tokens: int = 256,
        seed: int = 0,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_workers: int = 8,
        token_ids: bool | None = None,
        extra_body: Mapping[str, Any] | None = None,
        send_tools: bool | None = None,
    ) -> None:
        parsed = urllib.parse.urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigError(f"OpenAIAgent.base_url must be an http(s) URL, got {base_url!r}")
        for name, value, low in (("timeout", timeout, 0), ("backoff", backoff, 0)):
            if not value >= low:
                raise ConfigError(f"OpenAIAgent.{name} must be >= {low}, got {value}")
        if retries < 0 or max_workers < 1:
            raise ConfigError(f"OpenAIAgent needs retries >= 0 and max_workers >= 1, got {retries}, {max_workers}")
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.sampling = SamplingConfig(temperature, top_p, max_tokens, seed)
        self.timeout, self.retries, self.backoff, self.max_workers = timeout, retries, backoff, max_workers
        self.token_ids = token_ids
        self.extra_body = dict(extra_body or {})
        self._ask_tokens = token_ids is not False
        self._token_prompts = True  # send prompt_token_ids to /completions (until a server refuses them)
        self.send_tools = send_tools
        self._tools = send_tools is not False  # send Context.tools (until a server refuses them)
        self._rng = np.random.default_rng(seed)
        self._opener = _opener_for(parsed.hostname or "")

    def with_sampling(self, **changes: Any) -> OpenAIAgent:
        """A copy of this agent with other sampling settings (``SamplingConfig`` field names).

        Example:
            >>> agent = OpenAIAgent("http://127.0.0.1:8000/v1", "m", temperature=1.0)
            >>> greedy = agent.with_sampling(temperature=0.0, seed=3)
            >>> greedy.sampling.temperature, greedy.sampling.seed, agent.sampling.temperature
            (0.0, 3, 1.0)
        """
        view = copy.copy(self)
        view.sampling = dataclasses.replace(self.sampling, **changes)
        view.extra_body = dict(self.extra_body)
        if "seed" in changes:
            view._rng = np.random.default_rng(view.sampling.seed)
        return view

    def load_lora_adapter(self, name: str, path: str | Path, *, replace: bool = False) -> str:
        """Ask the server to load the LoRA adapter at ``path`` (on the server's file system) as model ``name``.

        vLLM's runtime LoRA API: ``POST {base_url}/load_lora_adapter`` with ``{"lora_name", "lora_path"}``.
        Later requests with ``model=name`` generate with the adapter.

        Args:
            name: The adapter's model name.
            path: A ``peft`` adapter folder the *server* can read.
            replace: If the server already has an adapter called ``name`` (a resumed run re-syncing its
                step), unload it and load this one instead of failing.

        Returns:
            The server's reply text.

        Raises:
            AgentError: The server refused (the message has its HTTP status and reason, e.g. a bad path or a
                server started without runtime LoRA updating) or could not be reached.

        Example:
            >>> from turnkit.agents.scripted import ScriptedAgent
            >>> from turnkit.agents.serve import AgentServer
            >>> with AgentServer(ScriptedAgent(["x"])) as server:
            ...     try:
            ...         OpenAIAgent(server.base_url, "m", retries=0).load_lora_adapter("a", "/nonexistent")
            ...     except AgentError as exc:
            ...         print("HTTP 400" in str(exc), "no adapter_config.json" in str(exc))
            True True
        """
        body = {"lora_name": name, "lora_path": str(path)}
        try:
            return self._admin("load_lora_adapter", body)
        except _Rejected as exc:
            if not (replace and exc.status == 400 and "already been loaded" in exc.detail):
                raise
        self.unload_lora_adapter(name)
        return self._admin("load_lora_adapter", body)

    def unload_lora_adapter(self, name: str) -> str:
        """Ask the server to drop the runtime LoRA adapter ``name`` (``POST {base_url}/unload_lora_adapter``).

        Returns:
            The server's reply text.

        Raises:
            AgentError: The server refused (HTTP 404: no adapter of that name) or could not be reached.
        """
        return self._admin("unload_lora_adapter", {"lora_name": name})

    def _admin(self, route: str, body: dict[str, Any]) -> str:
        url = f"{self.base_url}/{route}"
        return self._request(url, body).decode("utf-8", "replace")

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One reply per context, requested concurrently.

        Raises:
            AgentError: A request failed after its retries or got a malformed reply (the first in batch
                order is raised, after every request has finished).
        """
        if not contexts:
            return []
        seeds = context_seeds(contexts, seed=self.sampling.seed, rng=self._rng)
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(contexts))) as pool:
            futures = [pool.submit(self._complete, ctx, s) for ctx, s in zip(contexts, seeds, strict=True)]
        return [f.result() for f in futures]

    def _complete(self, ctx: Context, seed: int) -> AgentTurn:
        try:
            return self._complete_turn(ctx, seed)
        except _Rejected as exc:
            if not _context_full(exc):
                raise
            return AgentTurn("", prompt_token_ids=tuple(ctx.prompt_token_ids), finish_reason="prompt_too_long")

    def _complete_turn(self, ctx: Context, seed: int) -> AgentTurn:
        if ctx.prompt_token_ids and self._ask_tokens and self._token_prompts:
            try:
                return self._complete_ids(ctx.prompt_token_ids, seed)
            except _Rejected as exc:
                if self.token_ids or _context_full(exc):
                    raise
                self._token_prompts = False  # no token-id prompts here: render the messages from now on
        while True:  # each retry below turns a flag off, so this asks at most three times
            tools = bool(ctx.tools) and self._tools
            body = self._chat_body(ctx, seed, tools)
            ask = self._ask_tokens
            try:
                reply = self._post({**body, **TOKEN_FIELDS} if ask else body)
                break
            except _Rejected as exc:
                if _context_full(exc):
                    raise
                if ask and not self.token_ids and any(name in exc.detail for name in TOKEN_FIELDS):
                    self._ask_tokens = False  # the server does not know the token-level fields: stop asking
                elif tools and self.send_tools is None and exc.status == 400 and "tool" in exc.detail.lower():
                    self._tools = False  # the server takes no tools: send the conversation as text from now on
                else:
                    raise
        return self._checked(parse_chat_completion(reply, url=self.url), self.url)

    def _chat_body(self, ctx: Context, seed: int, tools: bool) -> dict[str, Any]:
        """A chat-completions request body; with ``tools``, the context's schemas and structured calls."""
        if tools:
            messages = messages_to_wire(ctx.messages, ctx.tools)
        elif ctx.tools:
            messages = text_messages(ctx.messages)
        else:
            messages = [{"role": m.role, "content": m.content} for m in ctx.messages]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.sampling.temperature,
            "top_p": self.sampling.top_p,
            "max_tokens": self.sampling.max_new_tokens,
            "seed": seed,
        }
        if tools:
            body.update(tools=[dict(t) for t in ctx.tools], parallel_tool_calls=False)
        return {**body, **self.extra_body}

    def _complete_ids(self, prompt: Sequence[int], seed: int) -> AgentTurn:
        """Token-in: ``POST /completions`` with the exact prompt ids (vLLM's token-id prompt and token fields)."""
        url = self.base_url + "/completions"
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": [int(i) for i in prompt],
            "temperature": self.sampling.temperature,
            "top_p": self.sampling.top_p,
            "max_tokens": self.sampling.max_new_tokens,
            "seed": seed,
            **self.extra_body,
            **TOKEN_FIELDS,
            "logprobs": 0,  # the completions API counts alternatives: 0 = the sampled tokens' log-probs only
        }
        return self._checked(parse_completion(self._post(body, url), url=url, prompt_ids=prompt), url)

    def _checked(self, turn: AgentTurn, url: str) -> AgentTurn:
        if self.token_ids and turn.text and not turn.token_ids:
            raise AgentError(f"{url}: reply has no token ids, but token_ids=True requires them")
        return turn

    def _post(self, body: dict[str, Any], url: str | None = None) -> Any:
        url = url or self.url
        raw = self._request(url, body)
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise AgentError(f"{url}: malformed reply (invalid JSON: {exc}): {raw[:200]!r}") from exc

    def _request(self, url: str, body: dict[str, Any]) -> bytes:
        """POST ``body`` as JSON with the retry policy of the module docstring; the raw reply body."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode()
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    return bytes(response.read())
            except urllib.error.HTTPError as exc:
                detail = _read_error(exc)
                if exc.code not in _RETRY_STATUS:
                    raise _Rejected(f"{url}: HTTP {exc.code}: {detail}", detail, exc.code) from exc
                last = f"HTTP {exc.code}: {detail}"
            except _TRANSIENT as exc:
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
        raise AgentError(f"{url}: no reply after {self.retries + 1} attempts; last error: {last}")


class _Rejected(AgentError):
    """A non-retryable HTTP status; ``detail`` is the server's error text."""

    def __init__(self, message: str, detail: str, status: int) -> None:
        super().__init__(message)
        self.detail = detail
        self.status = status


def parse_chat_completion(reply: Any, *, url: str = "server") -> AgentTurn:
    """Turn a chat-completions reply (parsed JSON) into an :class:`~turnkit.types.AgentTurn`.

    Reads ``choices[0].message.content`` and ``finish_reason``; a message with ``tool_calls`` reads as its
    content, a newline and the first call's text (:func:`~turnkit.agents.tool_messages.reply_text`; token ids,
    if any, are still the generated ones). Token ids from ``choices[0].token_ids`` (vLLM ``return_token_ids``)
    or from ``"token_id:N"`` logprob tokens (``return_tokens_as_token_ids``); log-probs from
    ``choices[0].logprobs.content``; prompt ids from ``prompt_token_ids``. Log-probs without token ids are
    dropped (an ``AgentTurn`` keeps them only aligned to ids).

    Raises:
        AgentError: The reply lacks ``choices`` or a text message, or its token data is inconsistent.

    Example:
        >>> reply = {"choices": [{"message": {"role": "assistant", "content": "4"}, "finish_reason": "stop",
        ...                       "token_ids": [52, 2],
        ...                       "logprobs": {"content": [{"token": "4", "logprob": -0.5},
        ...                                                {"token": "<|end|>", "logprob": -0.1}]}}],
        ...          "prompt_token_ids": [1, 4, 57, 2, 5]}
        >>> turn = parse_chat_completion(reply)
        >>> turn.text, turn.token_ids, turn.logprobs, turn.prompt_token_ids, turn.finish_reason
        ('4', (52, 2), (-0.5, -0.1), (1, 4, 57, 2, 5), 'stop')
        >>> parse_chat_completion({"error": "overloaded"})
        Traceback (most recent call last):
        ...
        turnkit.errors.AgentError: server: malformed reply (no 'choices'): {'error': 'overloaded'}
        >>> call = {"id": "call_0", "type": "function", "function": {"name": "python", "arguments": '{"code": "2+2"}'}}
        >>> message = {"role": "assistant", "content": None, "tool_calls": [call]}
        >>> turn = parse_chat_completion({"choices": [{"message": message, "finish_reason": "tool_calls"}]})
        >>> turn.finish_reason
        'tool_calls'
        >>> print(turn.text)
        <tool_call>
        {"name": "python", "arguments": {"code": "2+2"}}
        </tool_call>
    """
    choice = _first_choice(reply, url)
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    tool_calls = message.get("tool_calls") if isinstance(message, dict) else None
    if tool_calls:
        content = reply_text(content, tool_calls)
    if not isinstance(content, str):
        raise AgentError(f"{url}: malformed reply (choices[0].message.content is not text): {str(choice)[:200]}")

    def entries(lp: Any) -> tuple[list[str], list[float]]:
        content = lp.get("content") or []
        return [str(e.get("token", "")) for e in content], [float(e["logprob"]) for e in content]

    return _token_turn(content, choice, reply.get("prompt_token_ids") or (), entries, url)


def parse_completion(reply: Any, *, url: str = "server", prompt_ids: Sequence[int] = ()) -> AgentTurn:
    """Turn a ``/completions`` reply (parsed JSON) into an :class:`~turnkit.types.AgentTurn`.

    Reads ``choices[0].text`` and ``finish_reason``; token ids from ``choices[0].token_ids`` or from
    ``"token_id:N"`` entries of ``logprobs.tokens``; log-probs from ``logprobs.token_logprobs``; prompt ids
    from ``choices[0].prompt_token_ids`` (vLLM), the reply's ``prompt_token_ids``, else ``prompt_ids`` (the
    ids sent).

    Raises:
        AgentError: The reply lacks ``choices`` or a text, or its token data is inconsistent.

    Example:
        >>> reply = {"choices": [{"text": "4", "finish_reason": "stop", "token_ids": [52, 2],
        ...                       "logprobs": {"tokens": ["4", "<|end|>"], "token_logprobs": [-0.5, -0.1]}}]}
        >>> turn = parse_completion(reply, prompt_ids=[1, 4, 57, 2, 5])
        >>> turn.text, turn.token_ids, turn.logprobs, turn.prompt_token_ids, turn.finish_reason
        ('4', (52, 2), (-0.5, -0.1), (1, 4, 57, 2, 5), 'stop')
    """
    choice = _first_choice(reply, url)
    text = choice.get("text")
    if not isinstance(text, str):
        raise AgentError(f"{url}: malformed reply (choices[0].text is not text): {str(choice)[:200]}")

    def entries(lp: Any) -> tuple[list[str], list[float]]:
        return [str(t) for t in lp.get("tokens") or []], [float(x) for x in lp.get("token_logprobs") or []]

    prompt = choice.get("prompt_token_ids") or reply.get("prompt_token_ids") or prompt_ids
    return _token_turn(text, choice, prompt, entries, url)


def _first_choice(reply: Any, url: str) -> dict[str, Any]:
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AgentError(f"{url}: malformed reply (no 'choices'): {str(reply)[:200]}")
    return choices[0]


def _token_turn(text: str, choice: dict[str, Any], prompt: Any, entries: Any, url: str) -> AgentTurn:
    """The turn of a reply choice: ``entries(choice.logprobs)`` gives its logprob tokens and values."""
    try:
        tokens, values = entries(choice.get("logprobs") or {})
        logprobs = tuple(values)
        ids = choice.get("token_ids")
        if ids is None and tokens and all(t.startswith("token_id:") for t in tokens):
            ids = [int(t.removeprefix("token_id:")) for t in tokens]
        token_ids = tuple(int(i) for i in ids or ())
        prompt_ids = tuple(int(i) for i in prompt)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AgentError(f"{url}: malformed token data in reply: {type(exc).__name__}: {exc}") from exc
    if not token_ids:
        logprobs = ()
    elif logprobs and len(logprobs) != len(token_ids):
        raise AgentError(f"{url}: reply has {len(token_ids)} token ids but {len(logprobs)} logprobs")
    finish = choice.get("finish_reason")
    return AgentTurn(
        text=text,
        token_ids=token_ids,
        logprobs=logprobs,
        prompt_token_ids=prompt_ids,
        finish_reason=str(finish) if finish is not None else None,
    )


def _context_full(exc: _Rejected) -> bool:
    """Whether a refusal is OpenAI's ``context_length_exceeded`` (the prompt leaves no room for a reply)."""
    return exc.status == 400 and '"context_length_exceeded"' in exc.detail


def _read_error(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read(500).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as read_exc:
        return f"(error body unreadable: {read_exc})"


def _opener_for(host: str) -> urllib.request.OpenerDirector:
    """Loopback servers are reached directly; other hosts honour the usual proxy variables."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    return urllib.request.build_opener(urllib.request.ProxyHandler({})) if loopback else urllib.request.build_opener()
