"""The rule-based simulated human: answers only from the task's hidden facts, by keyword matching.

The human knows the facts in ``task.privileged["facts"]``, each either

* ``{"slot": "<family>.<param>", "value": v}`` (generated tasks): the family's parameter phrases the value as
  one sentence and supplies the question keywords (:mod:`turnkit.envs.collab_code.families`), or
* ``{"keywords": [...], "text": "..."}`` (hand-written or loaded tasks): the sentence and keywords as given.

For the agent's latest message (fenced code blocks removed) it finds the facts whose keywords occur in it
(whole words, case-insensitive, plurals included), answers with the best matches (most keywords matched,
then fact order), and says it does not know otherwise. Replies keep ColBench's caps: at most two sentences
and 400 characters. The human never reveals the reference code or the tests, whatever is asked.

Example:
    >>> from turnkit.types import Message, Task
    >>> task = Task("t", "Write f.", {"facts": [{"keywords": ["cutoff"], "text": "The cutoff is 7."}]})
    >>> human = RuleBasedHuman()
    >>> human.reply(task, [Message("user", "Write f."), Message("assistant", "What cutoff do you use?")])
    'The cutoff is 7.'
    >>> human.reply(task, [Message("user", "Write f."), Message("assistant", "Show me the tests.")])
    "I don't know."
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from turnkit.envs.collab_code.families import FAMILIES
from turnkit.errors import EnvError
from turnkit.types import Message, Task

MAX_REPLY_CHARS = 400
"""ColBench's cut of a simulated human reply, in characters."""
MAX_REPLY_SENTENCES = 2
"""ColBench's instruction to the simulated human: reply in two sentences."""
DONT_KNOW = "I don't know."

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_NON_WORD = re.compile(r"[^a-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@runtime_checkable
class Human(Protocol):
    """A simulated human: replies to the agent's latest message of a dialogue.

    ``dialogue`` is the conversation from the agent's point of view: ``user`` messages are the env's (the
    task prompt first, then the human's replies), ``assistant`` messages are the agent's; the last one is
    the message to answer.
    """

    def reply(self, task: Task, dialogue: Sequence[Message]) -> str:
        """The human's reply to ``dialogue[-1]``."""
        ...


@dataclass(frozen=True)
class Fact:
    """One thing the human knows.

    Attributes:
        keywords: Lower-case words or phrases that make the human say it.
        sentence: What the human says.
    """

    keywords: tuple[str, ...]
    sentence: str


def task_facts(task: Task) -> list[Fact]:
    """The facts of a task (see the module docstring for the two accepted forms).

    Raises:
        EnvError: A fact entry is malformed or names an unknown slot.

    Example:
        >>> task = Task("t", "p", {"facts": [{"slot": "grade.cutoff", "value": 60}]})
        >>> task_facts(task)[0].sentence
        'The passing cutoff is 60 points.'
    """
    out = []
    for i, entry in enumerate(task.privileged.get("facts", ())):
        if not isinstance(entry, Mapping):
            raise EnvError(f"task {task.task_id!r}: fact {i} is not a mapping")
        if "slot" in entry:
            family, _, name = str(entry["slot"]).partition(".")
            try:
                param = FAMILIES[family].param(name)
            except KeyError as exc:
                raise EnvError(f"task {task.task_id!r}: fact {i} names an unknown slot {entry['slot']!r}") from exc
            out.append(Fact(param.keywords, param.say(entry.get("value"))))
        elif isinstance(entry.get("text"), str) and isinstance(entry.get("keywords"), (list, tuple)):
            out.append(Fact(tuple(str(k).lower() for k in entry["keywords"]), entry["text"]))
        else:
            raise EnvError(f"task {task.task_id!r}: fact {i} needs 'slot' and 'value', or 'keywords' and 'text'")
    return out


def _normalise(text: str) -> str:
    return " " + _NON_WORD.sub(" ", text.lower()).strip() + " "


def keyword_hits(keywords: Sequence[str], text: str) -> int:
    """How many of ``keywords`` occur in ``text`` as whole words or phrases (plurals count).

    Example:
        >>> keyword_hits(["tie", "same score"], "What about ties, or the same scores?")
        2
        >>> keyword_hits(["cap"], "capital letters")
        0
    """
    padded = _normalise(text)
    hits = 0
    for kw in keywords:
        core = _normalise(kw).strip()
        if core and any(f" {core}{suffix} " in padded for suffix in ("", "s", "es")):
            hits += 1
    return hits


def cap_reply(text: str, *, max_chars: int = MAX_REPLY_CHARS, max_sentences: int | None = None) -> str:
    """Cut a reply to at most ``max_sentences`` sentences (if given) and ``max_chars`` characters.

    Example:
        >>> cap_reply("One. Two! Three?", max_sentences=2)
        'One. Two!'
        >>> cap_reply("x" * 500, max_chars=4)
        'xxxx'
    """
    text = text.strip()
    if max_sentences is not None:
        text = " ".join(_SENTENCE_END.split(text)[:max_sentences])
    return text[:max_chars]


def last_agent_message(dialogue: Sequence[Message]) -> str:
    """The text of the last ``assistant`` message (``""`` if none).

    Example:
        >>> last_agent_message([Message("user", "hi"), Message("assistant", "Q?")])
        'Q?'
    """
    return next((m.content for m in reversed(dialogue) if m.role == "assistant"), "")


class RuleBasedHuman:
    """Answers from hidden facts by keyword matching (see the module docstring).

    Args:
        max_sentences: Most facts (one sentence each) in one reply.
        max_chars: Reply length cap.
        dont_know: The reply when no fact matches.
    """

    def __init__(
        self, *, max_sentences: int = MAX_REPLY_SENTENCES, max_chars: int = MAX_REPLY_CHARS, dont_know: str = DONT_KNOW
    ) -> None:
        if max_sentences < 1 or max_chars < 1:
            raise EnvError(f"max_sentences and max_chars must be >= 1, got {max_sentences}, {max_chars}")
        self.max_sentences = max_sentences
        self.max_chars = max_chars
        self.dont_know = dont_know

    def matching_facts(self, task: Task, message: str) -> list[Fact]:
        """The facts a message asks about, best first (at most ``max_sentences``).

        Example:
            >>> from turnkit.envs.collab_code.families import FAMILIES
            >>> task = Task("t", "p", {"facts": [{"slot": "grade.cutoff", "value": 60},
            ...                                  {"slot": "grade.inclusive", "value": False}]})
            >>> q = FAMILIES["grade"].param("cutoff").question
            >>> [f.sentence for f in RuleBasedHuman().matching_facts(task, q)]  # doctest: +NORMALIZE_WHITESPACE
            ['The passing cutoff is 60 points.',
             'A score exactly at the cutoff does not pass; it has to be higher.']
        """
        text = _FENCE.sub(" ", message)
        scored = [(keyword_hits(f.keywords, text), i, f) for i, f in enumerate(task_facts(task))]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        return [f for _, _, f in ranked[: self.max_sentences]]

    def reply(self, task: Task, dialogue: Sequence[Message]) -> str:
        """Answer the agent's latest message from the task's facts, or say so when they do not cover it."""
        facts = self.matching_facts(task, last_agent_message(dialogue))
        if not facts:
            return self.dont_know
        text = " ".join(f.sentence for f in facts)
        return cap_reply(text, max_chars=self.max_chars, max_sentences=self.max_sentences)


def revealable_values(task: Task) -> set[str]:
    """The renderings of fact values a human may reveal on request, for ``check_env(leak_ignore=...)``.

    Run :func:`turnkit.check_env` with a policy that *asks questions* and the leak heuristic flags the
    hidden values the human reveals: that is the env's purpose, not a leak. Pass these renderings (and only
    these: the reference code and tests stay searched) as ``leak_ignore``.

    Example:
        >>> task = Task("t", "p", {"facts": [{"slot": "late_fee.per_day", "value": 0.25}]})
        >>> sorted(revealable_values(task))
        ['0.25']
    """
    out: set[str] = set()
    for entry in task.privileged.get("facts", ()):
        if isinstance(entry, Mapping):
            out |= _renderings(entry.get("value"))
            if isinstance(entry.get("text"), str):
                out.add(entry["text"].strip())
                out |= {str(k).strip() for k in entry.get("keywords", ())}
    return out


def _renderings(value: Any) -> set[str]:
    if value is None or isinstance(value, bool):
        return set()
    if isinstance(value, float):
        return {repr(value)} | ({str(int(value))} if value.is_integer() else set())
    return {str(value)}
