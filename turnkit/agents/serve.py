"""A small OpenAI-compatible HTTP server over any turnkit :class:`~turnkit.agents.base.Agent`.

For tests and demos: serve the tiny model (or any agent) on loopback and talk to it with
:class:`~turnkit.agents.openai.OpenAIAgent` or any OpenAI client. Standard library only
(``http.server.ThreadingHTTPServer``), bound to ``127.0.0.1`` on an ephemeral port by default.

Endpoints: ``GET /v1/models`` and ``POST /v1/chat/completions`` (no streaming, no tools). Requests that
arrive together are batched into one ``agent.act`` call (one worker thread owns the agent, so the agent
never runs concurrently). ``temperature``, ``top_p`` and ``max_tokens`` apply when the agent offers
``with_sampling`` (as :class:`~turnkit.agents.hf.HFPolicy` does); ``seed`` becomes the context's
``episode_seed``; ``n`` > 1 returns ``n`` samples of the same prompt. Like vLLM, the reply carries
``choices[i].token_ids`` and ``prompt_token_ids`` when the request sets ``return_token_ids``, and
``logprobs.content`` when it sets ``logprobs`` (tokens spelled ``"token_id:N"`` with
``return_tokens_as_token_ids``).

Run one from a shell: ``python -m turnkit.agents.serve MODEL_DIR --port 8000``.

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
from typing import Any

from turnkit.agents.base import Agent, Context
from turnkit.errors import ConfigError, TurnkitError
from turnkit.types import AgentTurn, Message

logger = logging.getLogger(__name__)

_ROLES = ("system", "user", "assistant", "tool")
_SAMPLING_FIELDS = {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max_new_tokens"}
_MAX_N = 64


class BadRequest(TurnkitError):
    """A request the server cannot serve (answered with HTTP 400 and this message)."""


@dataclass
class _Job:
    overrides: tuple[tuple[str, Any], ...]
    contexts: list[Context]
    future: Future[list[AgentTurn]] = field(default_factory=Future)


class AgentServer:
    """Serve ``agent`` over the OpenAI chat-completions protocol, in background threads.

    Args:
        agent: Any turnkit agent.
        model_name: The name listed by ``/v1/models`` (requests may name any model; it is echoed back).
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
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._ids = itertools.count()
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._threads: list[threading.Thread] = []

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

    def submit(self, contexts: list[Context], overrides: dict[str, Any]) -> list[AgentTurn]:
        """Queue contexts for the worker and wait for their turns (called by request threads)."""
        job = _Job(tuple(sorted(overrides.items())), contexts)
        self._jobs.put(job)
        return job.future.result()

    def _work(self) -> None:
        while (first := self._jobs.get()) is not None:
            jobs, stop = [first], False
            deadline = time.monotonic() + self.batch_window_s
            while sum(len(j.contexts) for j in jobs) < self.max_batch:
                try:
                    nxt = self._jobs.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                jobs.append(nxt)
            for overrides in dict.fromkeys(j.overrides for j in jobs):
                self._run([j for j in jobs if j.overrides == overrides], dict(overrides))
            if stop:
                return

    def _run(self, jobs: list[_Job], overrides: dict[str, Any]) -> None:
        contexts = [c for j in jobs for c in j.contexts]
        try:
            agent = self.agent
            if overrides:
                with_sampling = getattr(agent, "with_sampling", None)
                agent = with_sampling(**overrides) if with_sampling is not None else agent
            turns = agent.act(contexts)
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

    # ------------------------------------------------------------------ protocol

    def complete(self, body: Any) -> dict[str, Any]:
        """Answer one parsed ``/v1/chat/completions`` request body (raises :class:`BadRequest`)."""
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        if body.get("stream"):
            raise BadRequest("stream=true is not supported by this server")
        messages = _parse_messages(body.get("messages"))
        n = body.get("n", 1)
        if not isinstance(n, int) or not 1 <= n <= _MAX_N:
            raise BadRequest(f"n must be an integer in [1, {_MAX_N}], got {n!r}")
        seed = body.get("seed")
        if seed is not None and not isinstance(seed, int):
            raise BadRequest(f"seed must be an integer, got {seed!r}")
        overrides = _parse_sampling(body)
        with_sampling = getattr(self.agent, "with_sampling", None)
        if overrides and with_sampling is not None:
            try:
                with_sampling(**overrides)  # validate here, so that bad values are the caller's 400
            except ConfigError as exc:
                raise BadRequest(str(exc)) from exc
        turns = self.submit([Context(messages=messages, episode_seed=seed)] * n, overrides)
        return self._reply(body, turns)

    def _reply(self, body: dict[str, Any], turns: list[AgentTurn]) -> dict[str, Any]:
        want_ids, want_lps = bool(body.get("return_token_ids")), bool(body.get("logprobs"))
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        tokenizer = getattr(self.agent, "tokenizer", None)
        choices = []
        for i, turn in enumerate(turns):
            choice: dict[str, Any] = {
                "index": i,
                "message": {"role": "assistant", "content": turn.text},
                "finish_reason": turn.finish_reason or "stop",
                "logprobs": None,
            }
            if want_lps and turn.logprobs:
                choice["logprobs"] = {
                    "content": [
                        {"token": _token_text(t, tokenizer, as_ids), "logprob": lp, "bytes": None, "top_logprobs": []}
                        for t, lp in zip(turn.token_ids, turn.logprobs, strict=True)
                    ]
                }
            if want_ids:
                choice["token_ids"] = list(turn.token_ids) if turn.token_ids else None
            choices.append(choice)
        prompt = list(turns[0].prompt_token_ids) if turns else []
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model", self.model_name)),
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": sum(len(t.token_ids) for t in turns),
                "total_tokens": len(prompt) + sum(len(t.token_ids) for t in turns),
            },
        }
        if want_ids:
            reply["prompt_token_ids"] = prompt or None
        return reply

    def models(self) -> dict[str, Any]:
        """The ``/v1/models`` listing."""
        return {"object": "list", "data": [{"id": self.model_name, "object": "model", "owned_by": "turnkit"}]}


def _parse_sampling(body: dict[str, Any]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for name, target in _SAMPLING_FIELDS.items():
        value = body.get(name, body.get("max_completion_tokens") if name == "max_tokens" else None)
        if value is None:
            continue
        kinds: tuple[type, ...] = (int,) if name == "max_tokens" else (int, float)
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise BadRequest(f"{name} must be {'an integer' if name == 'max_tokens' else 'a number'}, got {value!r}")
        overrides[target] = value
    return overrides


def _parse_messages(raw: Any) -> tuple[Message, ...]:
    if not isinstance(raw, list) or not raw:
        raise BadRequest("messages must be a non-empty list")
    out = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or m.get("role") not in _ROLES:
            raise BadRequest(f"messages[{i}] needs a role in {list(_ROLES)}")
        content = m.get("content")
        if isinstance(content, list):  # OpenAI content parts: keep the text parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        if not isinstance(content, str):
            raise BadRequest(f"messages[{i}].content must be a string or a list of text parts")
        out.append(Message(m["role"], content))
    return tuple(out)


def _token_text(token_id: int, tokenizer: Any, as_ids: bool) -> str:
    if as_ids or tokenizer is None:
        return f"token_id:{token_id}"
    return str(tokenizer.decode([token_id]))


def _handler_for(server: AgentServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "turnkit-serve/0.1"

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, server.models())
            else:
                self._send(404, _error(f"no route GET {self.path}", "not_found"))

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, _error(f"no route POST {self.path}", "not_found"))
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
            except ValueError as exc:
                self._send(400, _error(f"request body is not JSON: {exc}", "invalid_request_error"))
                return
            try:
                self._send(200, server.complete(body))
            except BadRequest as exc:
                self._send(400, _error(str(exc), "invalid_request_error"))
            except Exception as exc:  # an agent fault: the client sees a 5xx and may retry
                logger.exception("agent failed on a request")
                self._send(500, _error(f"{type(exc).__name__}: {exc}", "server_error"))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s " + format, self.address_string(), *args)

    return Handler


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind}}


def main(argv: Sequence[str] | None = None) -> None:
    """Serve a local HF model folder until interrupted: ``python -m turnkit.agents.serve MODEL_DIR``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("model_dir", help="a local HF model folder (e.g. written by turnkit.models.tiny.save_tiny)")
    parser.add_argument("--adapter", default=None, help="a peft LoRA adapter folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--name", default="turnkit")
    args = parser.parse_args(argv)
    from turnkit.agents.hf import HFPolicy

    policy = HFPolicy.from_pretrained(args.model_dir, adapter=args.adapter)
    with AgentServer(policy, model_name=args.name, host=args.host, port=args.port) as server:
        print(f"serving {args.model_dir} at {server.base_url}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("stopping", flush=True)


if __name__ == "__main__":
    main()
