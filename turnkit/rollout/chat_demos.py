"""Demonstrations from a JSONL file of conversations in the OpenAI chat format, as token rows.

Each line of the file is one conversation; extra keys (``"id"``, ``"source"``, ...) are ignored and blank lines
are skipped::

    {"id": 7, "messages": [{"role": "system", "content": "Be brief."},
                           {"role": "user", "content": "2+2?"},
                           {"role": "assistant", "content": "ANSWER: 4"}]}

Every ``assistant`` message is one demonstrated turn and becomes one row, built exactly like the env
demonstrations of :func:`turnkit.rollout.demos.demo_rows`: the prompt is the conversation *before* that message
rendered by the policy's chat template (:func:`turnkit.agents.hf.chat_prompt_ids`, the ids the policy samples
with), the completion is the message's text plus the end-of-turn id (:func:`turnkit.rollout.demos.completion_ids`).
The loss therefore covers exactly the agent's tokens; ``system``, ``user`` and ``tool`` messages are context
only. Messages after the last assistant message are ignored (there is nothing to learn from them).

A malformed line is a :class:`~turnkit.errors.DataError` naming the file and the 1-based line (``file:line:
message``); reading stops there, so no conversation is dropped silently. Structured ``tool_calls`` are
refused: turnkit agents write tool calls as text in ``content`` (see :mod:`turnkit.tools`), and training on the
text alone would lose the call.

Example:
    >>> import json, pathlib, tempfile
    >>> from turnkit.models.tiny import build_tiny_tokenizer
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "chats.jsonl"
    >>> chat = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
    ...         {"role": "user", "content": "and 3+3?"}, {"role": "assistant", "content": "6"}]
    >>> _ = path.write_text(json.dumps({"id": "a", "messages": chat}) + "\\n")
    >>> tok = build_tiny_tokenizer()
    >>> rows = chat_demo_rows(path, tok)
    >>> [tok.decode([i for i, m in zip(r.input_ids, r.loss_mask) if m]) for r in rows]
    ['4<|end|>', '6<|end|>']
    >>> [(r.traj_index, r.turn_index) for r in rows]
    [(0, 0), (0, 1)]
    >>> _ = path.write_text(json.dumps({"messages": chat}) + "\\n" + json.dumps({"messages": chat[:1]}) + "\\n")
    >>> read_chat_demos(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    turnkit.errors.DataError: .../chats.jsonl:2: the conversation has no assistant message (nothing to learn)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from jinja2.exceptions import TemplateError
from transformers import PreTrainedTokenizerBase

from turnkit.agents.hf import chat_prompt_ids
from turnkit.errors import DataError
from turnkit.jsonl import json_lines
from turnkit.rollout.batch import TokenRow
from turnkit.rollout.demos import completion_ids
from turnkit.types import Message, Role

ROLES = ("system", "user", "assistant", "tool")
"""The chat roles a demonstration may use (those of :class:`turnkit.types.Message`)."""


@dataclass(frozen=True)
class ChatDemo:
    """One demonstrated conversation.

    Attributes:
        messages: The conversation, in order.
        path: The file it was read from, if any.
        line: Its 1-based line in that file (or 1-based position among in-memory records).
    """

    messages: tuple[Message, ...]
    path: str | None = None
    line: int | None = None

    @property
    def num_turns(self) -> int:
        """Number of assistant messages (demonstrated turns)."""
        return sum(m.role == "assistant" for m in self.messages)

    def error(self, message: str) -> DataError:
        """A :class:`~turnkit.errors.DataError` located at this conversation's file and line."""
        if self.path is None and self.line is not None:
            return DataError(f"record {self.line}: {message}")
        return DataError(message, path=self.path, line=self.line)


def parse_chat_record(record: Any, *, path: str | Path | None = None, line: int | None = None) -> ChatDemo:
    """Validate one decoded JSON value as a conversation ``{"messages": [{"role", "content"}, ...], ...}``.

    Args:
        record: The decoded line (any JSON value; it must be an object).
        path: The source file, for error messages.
        line: The 1-based line (or record number), for error messages.

    Returns:
        The conversation.

    Raises:
        DataError: Not an object; ``messages`` missing, not a list or empty; a message that is not an object,
            lacks a string ``role`` or ``content``, has an unknown role or structured ``tool_calls``; an empty
            assistant message; no assistant message; an assistant message first (no context).

    Example:
        >>> demo = parse_chat_record({"messages": [{"role": "user", "content": "hi"},
        ...                                        {"role": "assistant", "content": "hello", "name": "bot"}]})
        >>> [(m.role, m.content) for m in demo.messages], demo.num_turns
        ([('user', 'hi'), ('assistant', 'hello')], 1)
        >>> parse_chat_record({"messages": [{"role": "robot", "content": "x"}]}, path="d.jsonl", line=4)
        Traceback (most recent call last):
        turnkit.errors.DataError: d.jsonl:4: message 1: unknown role 'robot' (use system, user, assistant or tool)
    """
    where = ChatDemo((), path=None if path is None else str(path), line=line)
    if not isinstance(record, dict):
        raise where.error(f"expected a JSON object with a 'messages' list, got {_json_type(record)}")
    if "messages" not in record:
        raise where.error(f"missing field 'messages' (keys: {', '.join(map(repr, record)) or 'none'})")
    raw = record["messages"]
    if not isinstance(raw, list):
        raise where.error(f"field 'messages' must be a list of messages, got {_json_type(raw)}")
    if not raw:
        raise where.error("field 'messages' is empty")
    messages = tuple(_message(m, k, where) for k, m in enumerate(raw, start=1))
    if not any(m.role == "assistant" for m in messages):
        raise where.error("the conversation has no assistant message (nothing to learn)")
    if messages[0].role == "assistant":
        raise where.error("the conversation starts with an assistant message: a demonstrated turn needs context")
    return ChatDemo(messages, path=where.path, line=line)


def read_chat_demos(path: str | Path) -> list[ChatDemo]:
    """Read every conversation of a chat-format JSONL file.

    Args:
        path: The file: one JSON object per line, blank lines allowed.

    Returns:
        The conversations in file order, each with its line number.

    Raises:
        DataError: The file cannot be read (e.g. it does not exist), holds no conversation, or has a bad line
            (invalid UTF-8 or JSON, or see :func:`parse_chat_record`); the first bad line is reported.

    Example:
        >>> read_chat_demos("no/such/chats.jsonl")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        turnkit.errors.DataError: no/such/chats.jsonl: cannot read the demonstrations file: No such file...
    """
    path = Path(path)
    demos = [
        parse_chat_record(record, path=path, line=number)
        for number, record in json_lines(path, what="the demonstrations file")
    ]
    if not demos:
        raise DataError("the file holds no conversations (no demonstrations)", path=path)
    return demos


def chat_demo_rows(
    demos: str | Path | Sequence[ChatDemo | Mapping[str, Any]], tokenizer: PreTrainedTokenizerBase
) -> list[TokenRow]:
    """One SFT/IQLearn row per assistant message: chat-template prompt ids, loss on its text + EOS.

    Args:
        demos: A chat JSONL path (:func:`read_chat_demos`), or conversations: :class:`ChatDemo` values or
            records ``{"messages": [...]}`` (validated like a file's lines; errors name the 1-based record).
        tokenizer: The policy's tokenizer (with a chat template).

    Returns:
        Rows ordered by conversation then turn; ``traj_index`` is the conversation's 0-based index,
        ``turn_index`` the assistant message's 0-based index within it, ``reward`` is 0.

    Raises:
        DataError: A bad file or record, or a conversation the tokenizer's chat template rejects (each named
            by file and line).
        ConfigError: The tokenizer has no chat template or no EOS token.

    Example:
        >>> from turnkit.models.tiny import build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"},
        ...         {"role": "assistant", "content": "2"}]
        >>> [row] = chat_demo_rows([{"messages": chat}], tok)
        >>> tok.decode([i for i, m in zip(row.input_ids, row.loss_mask) if not m])
        '<|bos|><|system|>Be brief.<|end|><|user|>1+1?<|end|><|assistant|>'
        >>> chat_demo_rows([{"messages": chat[2:]}], tok)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        turnkit.errors.DataError: record 1: the conversation starts with an assistant message: a demonstrated turn...
    """
    if isinstance(demos, (str, Path)):
        conversations = read_chat_demos(demos)
    else:
        conversations = [
            d if isinstance(d, ChatDemo) else parse_chat_record(d, line=number) for number, d in enumerate(demos, 1)
        ]
    rows: list[TokenRow] = []
    for i, demo in enumerate(conversations):
        turn = 0
        for k, message in enumerate(demo.messages):
            if message.role != "assistant":
                continue
            try:
                prompt = chat_prompt_ids(tokenizer, demo.messages[:k])
            except TemplateError as exc:
                raise demo.error(f"the tokenizer's chat template rejects messages 1-{k}: {exc}") from exc
            rows.append(
                TokenRow.from_prompt_completion(
                    prompt, completion_ids(tokenizer, message.content), traj_index=i, turn_index=turn
                )
            )
            turn += 1
    return rows


def _message(raw: Any, k: int, where: ChatDemo) -> Message:
    if not isinstance(raw, dict):
        raise where.error(f"message {k} must be an object with 'role' and 'content', got {_json_type(raw)}")
    role, content = raw.get("role"), raw.get("content")
    if not isinstance(role, str):
        raise where.error(f"message {k} needs a string 'role', got {_json_type(role)}")
    if role not in ROLES:
        raise where.error(f"message {k}: unknown role {role!r} (use system, user, assistant or tool)")
    if raw.get("tool_calls") or raw.get("function_call"):
        raise where.error(
            f"message {k} ({role}) has structured tool_calls, which turnkit does not train on: write the call as "
            "text in 'content', as turnkit agents do"
        )
    if not isinstance(content, str):
        raise where.error(f"message {k} ({role}) needs a string 'content', got {_json_type(content)}")
    if role == "assistant" and not content.strip():
        raise where.error(f"message {k} is an empty assistant message (it would teach only the end-of-turn token)")
    return Message(cast(Role, role), content)  # role checked against ROLES above


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type (``null``, ``string``, ``array``, ...)."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


_JSON_TYPES = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
}
