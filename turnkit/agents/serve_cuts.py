"""Cutting an :class:`~turnkit.agents.serve.AgentServer` reply: at its stop sequence, and into stream pieces.

Both cuts follow the tokens when the turn has token ids and the agent a tokenizer, so the text and the ids
(and log-probs) that go with it stay consistent: a reply cut at a stop sequence keeps the ids that spell it
(through the token that completes the stop sequence), and each stream piece carries the ids behind it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from turnkit.agents.serve_api import find_stop
from turnkit.types import AgentTurn


def cut_at_stop(turn: AgentTurn, stops: Sequence[str], tokenizer: Any) -> AgentTurn:
    """``turn`` ended before its first stop sequence (:func:`~.serve_api.find_stop`), ``finish_reason`` ``stop``.

    Its ``token_ids``/``logprobs`` then end with the token that completes the stop sequence (the tokens a
    generator checking for it would have made; with a ``supports_prefix`` agent, exactly those it made), as
    vLLM's do: they spell the text, the stop sequence, and at most the rest of that last token. Without a
    tokenizer the ids are kept whole.

    Example:
        >>> from turnkit.models.tiny import build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> ids = tuple(tok.encode("4. Q: 5", add_special_tokens=False))
        >>> turn = cut_at_stop(AgentTurn("4. Q: 5", ids, (-0.5,) * len(ids)), ["Q:"], tok)
        >>> turn.text, tok.decode(turn.token_ids), len(turn.logprobs) == len(turn.token_ids), turn.finish_reason
        ('4. ', '4. Q:', True, 'stop')
    """
    where = find_stop(turn.text, stops)
    if where is None:
        return turn
    start, end = where
    keep = ids_spelling(turn.text[:end], turn.token_ids, tokenizer)
    return dataclasses.replace(
        turn,
        text=turn.text[:start],
        token_ids=turn.token_ids[:keep],
        logprobs=turn.logprobs[:keep],
        finish_reason="stop",
    )


def ids_spelling(text: str, ids: Sequence[int], tokenizer: Any) -> int:
    """How many of ``ids`` it takes to spell ``text``: the fewest that decode to it and maybe more (else all)."""
    if tokenizer is None:
        return len(ids)
    for k in range(1, len(ids) + 1):
        if str(tokenizer.decode(list(ids[:k]), skip_special_tokens=True)).startswith(text):
            return k
    return len(ids)


def stream_pieces(text: str, ids: list[int], tokenizer: Any) -> tuple[list[tuple[str, range]], int]:
    """Cut ``text`` into stream pieces, each with the span of ``ids`` behind it; also the count of ids used.

    With ids and a tokenizer, a piece ends after each token where the ids so far decode to a prefix of
    ``text`` that ends in a whole character (a partly decoded multi-byte character decodes to U+FFFD), so the
    pieces follow the tokens. Text that the ids do not spell (any left at the end) is one more piece; text
    without ids is cut after each word. The pieces always join to ``text``.

    Example:
        >>> stream_pieces("hi  there ", [], None)
        ([('hi  ', range(0, 0)), ('there ', range(0, 0))], 0)
    """
    pieces: list[tuple[str, range]] = []
    pos = used = 0
    if ids and tokenizer is not None:
        for end in range(1, len(ids) + 1):
            decoded = str(tokenizer.decode(ids[:end], skip_special_tokens=True))
            if not text.startswith(decoded.rstrip("\ufffd")):
                break  # the ids go on past the text (e.g. into a tool call): the rest is not content
            if len(decoded) > pos and not decoded.endswith("\ufffd") and text.startswith(decoded):
                pieces.append((decoded[pos:], range(used, end)))
                pos, used = len(decoded), end
            if pos == len(text):
                break
    if pos < len(text) and pieces:
        pieces.append((text[pos:], range(used, used)))
    elif pos < len(text):
        pieces = [(word, range(0, 0)) for word in re.findall(r"\S+\s*|\s+", text)]
    return pieces, used


def logprobs_span(logprobs: dict[str, Any] | None, span: range, chat: bool) -> dict[str, Any] | None:
    """The part of a choice's ``logprobs`` for the tokens in ``span`` (``None`` without log-probs or tokens)."""
    if logprobs is None or not span:
        return None
    lo, hi = span.start, span.stop
    if chat:
        return {"content": logprobs["content"][lo:hi]}
    return {
        "tokens": logprobs["tokens"][lo:hi],
        "token_logprobs": logprobs["token_logprobs"][lo:hi],
        "top_logprobs": None,
    }
