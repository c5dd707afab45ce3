"""The request side of :class:`~turnkit.agents.serve.AgentServer`: OpenAI's error shape and parameter checks.

Every refused request is answered as the OpenAI API answers one: an HTTP 4xx whose JSON body is
``{"error": {"message", "type", "param", "code"}}``, ``type`` ``"invalid_request_error"``, ``param`` the
request field at fault (``null`` for the body as a whole) and the message naming that field as the client
spelled it (``max_tokens``, never a turnkit setting). :class:`ApiError` carries these four; the checks below
turn a request body into the values the server passes on, or raise one.

Stop sequences (:func:`parse_stop`, :func:`find_stop`) follow OpenAI: ``stop`` is a string or a list of at
most 4 non-empty strings, and a reply ends just before the first of them that its text completes.

Example:
    >>> parse_sampling({"temperature": 0.5, "max_tokens": 16})
    {'temperature': 0.5, 'max_new_tokens': 16}
    >>> try:
    ...     parse_sampling({"max_tokens": -1})
    ... except BadRequest as exc:
    ...     error = exc.body()["error"]
    >>> error["message"], error["type"], error["param"]
    ('max_tokens must be an integer >= 1, got -1', 'invalid_request_error', 'max_tokens')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from turnkit.agents.tool_messages import message_from_wire
from turnkit.errors import TurnkitError
from turnkit.types import Message

MAX_N = 64
"""Most samples one request may ask for (``n``)."""
MAX_STOP = 4
"""Most stop sequences one request may give, as at OpenAI."""
MAX_LOGPROBS = 5
"""Most alternatives ``/v1/completions``' ``logprobs`` may ask for, as at OpenAI (only the sampled token's
log-prob is returned: agents report no alternatives)."""


class ApiError(TurnkitError):
    """A request the server refuses, answered as OpenAI answers one (see the module docstring).

    Args:
        message: What is wrong, naming the request field.
        param: The request field at fault, as the API spells it (``None``: the request as a whole).
        code: OpenAI's machine-readable code (e.g. ``"model_not_found"``), or ``None``.
    """

    status = 400
    kind = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param, self.code = param, code

    def body(self) -> dict[str, Any]:
        """The JSON body of the error reply."""
        return error_body(str(self), self.kind, param=self.param, code=self.code)


class BadRequest(ApiError):
    """A request the server cannot serve (HTTP 400)."""


class NotFound(ApiError):
    """A request naming a model or adapter the server does not have (HTTP 404)."""

    status = 404


def error_body(message: str, kind: str, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error body.

    Example:
        >>> error_body("boom", "server_error")
        {'error': {'message': 'boom', 'type': 'server_error', 'param': None, 'code': None}}
    """
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def check_object(body: Any) -> dict[str, Any]:
    """``body`` if it is a JSON object, else a :class:`BadRequest`."""
    if not isinstance(body, dict):
        raise BadRequest(f"request body must be a JSON object, got {type(body).__name__}")
    return body


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_sampling(body: dict[str, Any]) -> dict[str, Any]:
    """The request's ``temperature``, ``top_p`` and ``max_tokens`` as ``with_sampling`` overrides.

    ``max_completion_tokens`` (OpenAI's newer name) is read when ``max_tokens`` is absent. Ranges are
    OpenAI's: ``temperature`` in ``[0, 2]``, ``top_p`` in ``(0, 1]`` (as vLLM), ``max_tokens`` >= 1.

    Raises:
        BadRequest: A field of the wrong type or out of range, naming it.
    """
    overrides: dict[str, Any] = {}
    temperature, top_p = body.get("temperature"), body.get("top_p")
    if temperature is not None:
        if not _is_number(temperature) or not 0 <= temperature <= 2:
            raise BadRequest(f"temperature must be a number between 0 and 2, got {temperature!r}", param="temperature")
        overrides["temperature"] = temperature
    if top_p is not None:
        if not _is_number(top_p) or not 0 < top_p <= 1:
            raise BadRequest(f"top_p must be a number > 0 and <= 1, got {top_p!r}", param="top_p")
        overrides["top_p"] = top_p
    name = "max_tokens" if body.get("max_tokens") is not None else "max_completion_tokens"
    limit = body.get(name)
    if limit is not None:
        if not _is_int(limit) or limit < 1:
            raise BadRequest(f"{name} must be an integer >= 1, got {limit!r}", param=name)
        overrides["max_new_tokens"] = limit
    return overrides


def parse_n_and_seed(body: dict[str, Any]) -> tuple[int, int | None]:
    """The request's ``n`` (default 1) and ``seed`` (default ``None``), checked.

    Example:
        >>> parse_n_and_seed({"n": 3, "seed": 7}), parse_n_and_seed({})
        ((3, 7), (1, None))
    """
    n, seed = body.get("n"), body.get("seed")
    n = 1 if n is None else n
    if not _is_int(n) or not 1 <= n <= MAX_N:
        raise BadRequest(f"n must be an integer in [1, {MAX_N}], got {n!r}", param="n")
    if seed is not None and not _is_int(seed):
        raise BadRequest(f"seed must be an integer, got {seed!r}", param="seed")
    return n, seed


def parse_stop(raw: Any) -> tuple[str, ...]:
    """A request's ``stop``: ``None``, a string, or a list of at most 4 strings; every one non-empty.

    Example:
        >>> parse_stop(None), parse_stop("END"), parse_stop(["\\n\\n", "Q:"])
        ((), ('END',), ('\\n\\n', 'Q:'))
    """
    if raw is None:
        return ()
    stops = [raw] if isinstance(raw, str) else raw
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise BadRequest(f"stop must be a string or a list of strings, got {raw!r}", param="stop")
    if len(stops) > MAX_STOP:
        raise BadRequest(f"stop takes at most {MAX_STOP} sequences, got {len(stops)}", param="stop")
    if any(not s for s in stops):
        raise BadRequest("stop sequences must be non-empty strings", param="stop")
    return tuple(dict.fromkeys(stops))


def find_stop(text: str, stops: Sequence[str]) -> tuple[int, int] | None:
    """Where the reply ``text`` stops: ``(start, end)`` of the stop sequence that generation meets first.

    That is the occurrence that is complete first (the smallest ``end``; of two ending together, the one that
    starts first), as a server checking the text after each token finds it. The reply is ``text[:start]``.

    Example:
        >>> find_stop("a. b. END c", ["END", ". "]), find_stop("xabc", ["abc", "b"]), find_stop("abc", ["x"])
        ((1, 3), (2, 3), None)
    """
    best: tuple[int, int] | None = None
    for stop in stops:
        start = text.find(stop)
        if start >= 0 and (best is None or (start + len(stop), start) < (best[1], best[0])):
            best = (start, start + len(stop))
    return best


def parse_token_fields(body: dict[str, Any], *, chat: bool) -> tuple[bool, bool, bool]:
    """Whether the request asks for log-probs, token ids (``return_token_ids``) and ids as token names.

    Chat's ``logprobs`` is a boolean and ``top_logprobs`` must be 0 (the agents report no alternatives);
    completions' ``logprobs`` is how many alternatives, 0 to 5 (0 and up: the sampled tokens' log-probs).

    Raises:
        BadRequest: A field of the wrong type or out of range, naming it.
    """
    for name in ("return_token_ids", "return_tokens_as_token_ids"):
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise BadRequest(f"{name} must be a boolean, got {body[name]!r}", param=name)
    lps = body.get("logprobs")
    if chat:
        if lps is not None and not isinstance(lps, bool):
            raise BadRequest(f"logprobs must be a boolean, got {lps!r}", param="logprobs")
        top = body.get("top_logprobs")
        if top is not None and (not _is_int(top) or top != 0):
            raise BadRequest(
                f"top_logprobs must be 0 here, got {top!r}: this server returns the sampled tokens' log-probs only",
                param="top_logprobs",
            )
        want = bool(lps)
    else:
        if lps is not None and not isinstance(lps, bool) and (not _is_int(lps) or not 0 <= lps <= MAX_LOGPROBS):
            raise BadRequest(f"logprobs must be an integer in [0, {MAX_LOGPROBS}], got {lps!r}", param="logprobs")
        want = lps is not None and lps is not False
    return want, bool(body.get("return_token_ids")), bool(body.get("return_tokens_as_token_ids"))


def parse_messages(raw: Any) -> tuple[Message, ...]:
    """A chat request's ``messages`` as conversation messages (a :class:`BadRequest` naming ``messages``)."""
    if not isinstance(raw, list) or not raw:
        raise BadRequest("messages must be a non-empty list", param="messages")
    try:
        return tuple(message_from_wire(m, i) for i, m in enumerate(raw))
    except ValueError as exc:
        raise BadRequest(str(exc), param="messages") from exc


def check_stream_fields(body: dict[str, Any]) -> None:
    """Refuse malformed ``stream`` and ``stream_options`` fields (a :class:`BadRequest`)."""
    stream, options = body.get("stream"), body.get("stream_options")
    if stream is not None and not isinstance(stream, bool):
        raise BadRequest(f"stream must be a boolean, got {stream!r}", param="stream")
    if options is None:
        return
    if not stream:
        raise BadRequest("stream_options is only allowed when stream is true", param="stream_options")
    if not isinstance(options, dict) or not isinstance(options.get("include_usage", False), bool):
        raise BadRequest(
            f'stream_options must be an object like {{"include_usage": true}}, got {options!r}', param="stream_options"
        )


def context_length_error(prompt_tokens: int | None, window: int | None, *, chat: bool) -> BadRequest:
    """The 400 for a prompt that leaves no room for a reply (OpenAI's and vLLM's ``context_length_exceeded``).

    Example:
        >>> error = context_length_error(70, 64, chat=True).body()["error"]
        >>> error["message"][:80], error["param"], error["code"]
        ("This model's maximum context length is 64 tokens, but the messages take 70 token", 'messages', \
'context_length_exceeded')
    """
    field, verb = ("messages", "take") if chat else ("prompt", "takes")
    size = f"the {field} {verb} {prompt_tokens or 'too many'} tokens, leaving no room for a reply"
    if window:
        message = f"This model's maximum context length is {window} tokens, but {size}."
    else:
        message = f"In this model's context, {size}."
    return BadRequest(f"{message} Please shorten the {field}.", param=field, code="context_length_exceeded")


def model_not_found(name: str, served: Sequence[str], *, unloaded: bool = False) -> NotFound:
    """The 404 for a request naming a model this server does not serve; the message lists the served names.

    Example:
        >>> model_not_found("gpt-4o", ["tiny"]).body()["error"]["message"]
        "The model 'gpt-4o' does not exist. This server serves: 'tiny'."
    """
    why = " (its LoRA adapter was unloaded)" if unloaded else ""
    listed = ", ".join(repr(s) for s in served)
    return NotFound(
        f"The model {name!r} does not exist{why}. This server serves: {listed}.", param="model", code="model_not_found"
    )
