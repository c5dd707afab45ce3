"""`OpenAIAgent`: a policy served by any OpenAI-compatible chat-completions endpoint (stdlib HTTP only).

A batch is sent as concurrent requests (a small thread pool), one per context. Every failure becomes a
:class:`~turnkit.errors.AgentError` with the URL and the cause, which the rollout layer records as
``Trajectory.error`` with cause ``AGENT``:

* connection errors, timeouts, HTTP 5xx and 429 are retried ``retries`` times with exponential backoff
  (``backoff * 2**attempt`` seconds), then raised;
* other HTTP errors (4xx) and malformed replies (invalid JSON, no ``choices``, no message text) are raised at
  once: retrying would not change them.

``timeout`` bounds each socket operation (connect, each read), not the whole request.

Token-level data. With ``token_ids=None`` (auto) the agent asks for ``logprobs`` and the vLLM extensions
``return_token_ids``/``return_tokens_as_token_ids``; servers that support them (vLLM,
:mod:`turnkit.agents.serve`) reply with the generated ids, their log-probs and the prompt ids, which fill
``AgentTurn.token_ids``, ``logprobs`` and ``prompt_token_ids`` (token-in/token-out training through a
server). If a server rejects these fields (HTTP 400 naming one of them), the agent drops them for the rest
of its life and returns text-only turns. ``token_ids=True`` requires them (a reply without ids is an
error); ``token_ids=False`` never asks.

Each request carries a ``seed`` from :func:`~turnkit.agents.sampling.context_seeds`, so servers that honour
seeds (vLLM, :mod:`turnkit.agents.serve`) give the same text for the same episode seed and turn.

The API key is read from the environment variable named by ``api_key_env`` at request time (no header when
it is unset, as for local servers); it is never stored on the agent.

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
from typing import Any

import numpy as np

from turnkit.agents.base import Context
from turnkit.agents.sampling import SamplingConfig, context_seeds
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
    ) -> None:
        parsed = urllib.parse.urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigError(f"OpenAIAgent.base_url must be an http(s) URL, got {base_url!r}")
        for name, value, low in (("timeout", timeout, 0), ("backoff", backoff, 0)):
            if not value >= low:
                raise ConfigError(f"OpenAIAgent.{name} must be >= {low}, got {value}")
        if retries < 0 or max_workers < 1:
            raise ConfigError(f"OpenAIAgent needs retries >= 0 and max_workers >= 1, got {retries}, {max_workers}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.sampling = SamplingConfig(temperature, top_p, max_tokens, seed)
        self.timeout, self.retries, self.backoff, self.max_workers = timeout, retries, backoff, max_workers
        self.token_ids = token_ids
        self.extra_body = dict(extra_body or {})
        self._ask_tokens = token_ids is not False
        self._rng = np.random.default_rng(seed)
        self._opener = _opener_for(parsed.hostname or "")

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
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in ctx.messages],
            "temperature": self.sampling.temperature,
            "top_p": self.sampling.top_p,
            "max_tokens": self.sampling.max_new_tokens,
            "seed": seed,
            **self.extra_body,
        }
        ask = self._ask_tokens
        try:
            reply = self._post({**body, **TOKEN_FIELDS} if ask else body)
        except _Rejected as exc:
            if not ask or self.token_ids or not any(name in exc.detail for name in TOKEN_FIELDS):
                raise
            self._ask_tokens = False  # the server does not know the token-level fields: stop asking
            reply = self._post(body)
        turn = parse_chat_completion(reply, url=self.url)
        if self.token_ids and not turn.token_ids:
            raise AgentError(f"{self.url}: reply has no token ids, but token_ids=True requires them")
        return turn

    def _post(self, body: dict[str, Any]) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode()
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    raw = response.read()
            except urllib.error.HTTPError as exc:
                detail = _read_error(exc)
                if exc.code not in _RETRY_STATUS:
                    raise _Rejected(f"{self.url}: HTTP {exc.code}: {detail}", detail) from exc
                last = f"HTTP {exc.code}: {detail}"
                continue
            except _TRANSIENT as exc:
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
                continue
            try:
                return json.loads(raw)
            except ValueError as exc:
                raise AgentError(f"{self.url}: malformed reply (invalid JSON: {exc}): {raw[:200]!r}") from exc
        raise AgentError(f"{self.url}: no reply after {self.retries + 1} attempts; last error: {last}")


class _Rejected(AgentError):
    """A non-retryable HTTP status; ``detail`` is the server's error text."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


def parse_chat_completion(reply: Any, *, url: str = "server") -> AgentTurn:
    """Turn a chat-completions reply (parsed JSON) into an :class:`~turnkit.types.AgentTurn`.

    Reads ``choices[0].message.content`` and ``finish_reason``; token ids from ``choices[0].token_ids``
    (vLLM ``return_token_ids``) or from ``"token_id:N"`` logprob tokens (``return_tokens_as_token_ids``);
    log-probs from ``choices[0].logprobs.content``; prompt ids from ``prompt_token_ids``. Log-probs without
    token ids are dropped (an ``AgentTurn`` keeps them only aligned to ids).

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
    """
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AgentError(f"{url}: malformed reply (no 'choices'): {str(reply)[:200]}")
    choice = choices[0]
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise AgentError(f"{url}: malformed reply (choices[0].message.content is not text): {str(choice)[:200]}")
    entries = (choice.get("logprobs") or {}).get("content") or []
    try:
        logprobs = tuple(float(e["logprob"]) for e in entries)
        ids = choice.get("token_ids")
        if ids is None and entries and all(str(e.get("token", "")).startswith("token_id:") for e in entries):
            ids = [int(str(e["token"]).removeprefix("token_id:")) for e in entries]
        token_ids = tuple(int(i) for i in ids or ())
        prompt_ids = tuple(int(i) for i in reply.get("prompt_token_ids") or ())
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AgentError(f"{url}: malformed token data in reply: {type(exc).__name__}: {exc}") from exc
    if not token_ids:
        logprobs = ()
    elif logprobs and len(logprobs) != len(token_ids):
        raise AgentError(f"{url}: reply has {len(token_ids)} token ids but {len(logprobs)} logprobs")
    finish = choice.get("finish_reason")
    return AgentTurn(
        text=content,
        token_ids=token_ids,
        logprobs=logprobs,
        prompt_token_ids=prompt_ids,
        finish_reason=str(finish) if finish is not None else None,
    )


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
