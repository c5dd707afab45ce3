"""Token-exact multi-turn contexts: the ids a chat template puts between one turn and the next.

A multi-turn context must extend the previous turn's context token for token (the ids the policy generated,
then the template tokens around the env's reply); re-rendering the whole conversation from text and
tokenising it again can change ids with a BPE tokenizer. :class:`ChatDelta` computes those in-between ids
once per reply, for any chat template that renders a conversation as an extension of its shorter prefixes.
Used by :func:`turnkit.rollout.collect.collect_batch` (``chat=``) and :mod:`turnkit.integrations.trl`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from turnkit.errors import ConfigError
from turnkit.types import Message, Role

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

_USER, _ASSISTANT = "turnkit-sentinel-user", "turnkit-sentinel-assistant"


class ChatDelta:
    """The ids a chat template puts between turns, for contexts that extend the previous one token for token.

    Args:
        tokenizer: A tokenizer with a chat template that renders each conversation as an extension of the
            conversation one message shorter.

    Raises:
        ConfigError: No chat template, or one that rewrites earlier turns.

    Example:
        >>> from turnkit.models.tiny import build_tiny_tokenizer
        >>> tok = build_tiny_tokenizer()
        >>> delta = ChatDelta(tok)
        >>> tok.decode(delta.between_turns((tok.eos_token_id,), "Correct."))
        '<|user|>Correct.<|end|><|assistant|>'
        >>> tok.decode(delta.between_turns((104, 105), "Go on."))  # a turn cut by the budget gets its end token
        '<|end|><|user|>Go on.<|end|><|assistant|>'
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(
                f"tokenizer {type(tokenizer).__name__} has no chat_template; token-exact contexts render env "
                "messages with it"
            )
        self.tokenizer = tokenizer
        self._head = self._render([Message("user", _USER), Message("assistant", _ASSISTANT)], generation=False)
        prompt = self._render([Message("user", _USER)], generation=True)
        if not self._head.startswith(prompt + _ASSISTANT):
            raise ConfigError(
                "the chat template does not render an assistant message as the generation prompt followed by its "
                f"text ({prompt + _ASSISTANT!r} is not a prefix of {self._head!r}); token-exact multi-turn "
                "contexts need a prefix-preserving template"
            )
        self.close_text = self._head[len(prompt) + len(_ASSISTANT) :]
        """What the template writes after an assistant message's text (e.g. ``<|end|>``)."""
        self._reply_around: dict[Role, tuple[str, str] | None] = {}
        self._reply_around["user"] = self._verbatim_reply("user")
        self._special = {int(i) for i in getattr(tokenizer, "all_special_ids", ())}
        self._spelled: dict[int, str] = {}  # special id -> its text

    def _reply_text(self, observation: str, role: Role = "user") -> str:
        """The template's text for the env's reply (a ``user`` or ``tool`` message), generation prompt included."""
        if role not in self._reply_around:
            self._reply_around[role] = self._verbatim_reply(role)
        around = self._reply_around[role]
        if around is not None:
            return around[0] + observation + around[1]
        full = self._render(
            [Message("user", _USER), Message("assistant", _ASSISTANT), Message(role, observation)], generation=True
        )
        if not full.startswith(self._head):
            raise ConfigError(
                "the chat template changes earlier turns when a message is added; token-exact multi-turn contexts "
                "need a prefix-preserving template"
            )
        return full[len(self._head) :]

    def _verbatim_reply(self, role: Role) -> tuple[str, str] | None:
        """``(before, after)`` when the template writes a ``role`` message's text verbatim between fixed strings.

        Then a reply renders as ``before + text + after`` without running the template (most templates; one
        that trims or escapes content, or branches on it, gets ``None`` and is rendered every time).
        """
        self._reply_around[role] = None
        probes = [_USER, f" \n{_USER} {{x}}\n\n", f"<{_USER}>\t"]
        tails = [self._reply_text(p, role) for p in probes]  # also checks that earlier turns stay as they were
        before, sep, after = tails[0].partition(_USER)
        if not sep or any(t != before + p + after for t, p in zip(tails, probes, strict=True)):
            return None
        return before, after

    def _render(self, messages: Sequence[Message], *, generation: bool) -> str:
        return str(
            self.tokenizer.apply_chat_template(
                [{"role": m.role, "content": m.content} for m in messages],
                add_generation_prompt=generation,
                tokenize=False,
            )
        )

    def between_turns(self, generated: Sequence[int], observation: str, role: Role = "user") -> list[int]:
        """The ids after a turn's sampled ids and before the next turn's: close the turn, add the env's reply.

        Args:
            generated: The ids sampled this turn (their last id decides whether the turn still needs closing).
            observation: The env's reply, sent as the next message.
            role: The reply's role: ``"user"``, or ``"tool"`` for a tool's output.

        Returns:
            Ids to append to ``context + generated`` to get the next turn's context.

        Raises:
            ConfigError: The template rewrites the conversation when a message is added.
        """
        return self.between_turns_batch([(generated, observation, role)])[0]

    def between_turns_batch(
        self, items: Sequence[tuple[Sequence[int], str] | tuple[Sequence[int], str, Role]]
    ) -> list[list[int]]:
        """:meth:`between_turns` of many ``(generated, observation[, role])`` items, tokenised in one call.

        Example:
            >>> from turnkit.models.tiny import build_tiny_tokenizer
            >>> delta = ChatDelta(build_tiny_tokenizer())
            >>> delta.between_turns_batch([((5,), "a"), ((6,), "b")]) == [delta.between_turns((5,), "a"),
            ...                                                           delta.between_turns((6,), "b")]
            True
            >>> build_tiny_tokenizer().decode(delta.between_turns((5,), "42", "tool"))
            '<|end|><|tool|>42<|end|><|assistant|>'
        """
        texts = [self._close_after(item[0]) + self._reply_text(*item[1:]) for item in items]
        if not texts:
            return []
        return [list(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def _close_after(self, generated: Sequence[int]) -> str:
        """What still closes a turn that ended with ``generated[-1]`` (nothing if it was the end token)."""
        close = self.close_text
        if generated and int(generated[-1]) in self._special:  # the turn ended on a stop token, e.g. <|end|>
            last = self._spelled.get(int(generated[-1]))
            if last is None:
                last = self._spelled[int(generated[-1])] = str(
                    self.tokenizer.decode([int(generated[-1])], skip_special_tokens=False)
                )
            if last and close.startswith(last):
                close = close[len(last) :]
        return close
