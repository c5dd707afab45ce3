"""Scripted baseline agents for the collaborative-coding env; neither reads privileged data.

Both read the request to recognise the family (by the function name of the signature line) and write code
with the family's own renderer, so they differ only in what they know about the hidden parameters:

* :class:`AnswerAtOnceAgent` answers on the first turn with every parameter at its default guess;
* :class:`ClarifyingAgent` first asks the family's generic question for every parameter it has not yet
  learned (a reply may answer several), parses the human's replies, and then answers with what it learned
  (defaults for the rest). It answers at the latest on the last allowed turn.

The gap between the two measures how much asking is worth (see ``docs/envs/collab_code.md``). For tasks of
an unknown family (e.g. loaded ColBench tasks) both answer with a stub that returns ``None``.

:class:`PartialClarifier` sits between them, with a random share of questions per episode: a scripted mixture
of rollouts of varying quality, for critic studies (``studies/sweet_collab.py``) and SFT demonstrations.

Example:
    >>> import turnkit
    >>> from turnkit.envs.collab_code.env import CollabCodeEnv
    >>> env = CollabCodeEnv(kinds=("late_fee",))
    >>> asked = turnkit.collect(env, ClarifyingAgent(), seed=2)
    >>> guessed = turnkit.collect(env, AnswerAtOnceAgent(), seed=2)
    >>> len(asked.steps), asked.total_reward, len(guessed.steps), guessed.total_reward
    (4, 1.0, 1, 0.1)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from turnkit.agents.base import Context
from turnkit.envs.collab_code.families import FAMILY_OF_FUNCTION, UNKNOWN, Family
from turnkit.envs.collab_code.grading import ANSWER_MARKER
from turnkit.types import AgentTurn, Message

_SIGNATURE = re.compile(r"The signature of the function is:\s*def\s+([A-Za-z_]\w*)\s*\(([^)\n]*)\)")
_ANY_DEF = re.compile(r"def\s+([A-Za-z_]\w*)\s*\(([^)\n]*)\)")


def read_signature(prompt: str) -> tuple[str, str] | None:
    """The function name and argument list of the request's signature line (any ``def`` as a fallback).

    Example:
        >>> read_signature("Do it.\\nThe signature of the function is: def f(a, b=2)")
        ('f', 'a, b=2')
    """
    match = _SIGNATURE.search(prompt) or _ANY_DEF.search(prompt)
    return (match.group(1), match.group(2).strip()) if match else None


def parse_replies(family: Family, replies: Sequence[str]) -> dict[str, Any]:
    """The parameter values stated in the human's replies (later replies win).

    Example:
        >>> from turnkit.envs.collab_code.families import FAMILIES
        >>> parse_replies(FAMILIES["grade"], ["I don't know.", "The passing cutoff is 65 points."])
        {'cutoff': 65}
    """
    known: dict[str, Any] = {}
    for reply in replies:
        for p in family.params:
            value = p.parse(reply)
            if value is not UNKNOWN:
                known[p.name] = value
    return known


def answer_message(code: str) -> str:
    """Wrap code as the final answer.

    Example:
        >>> answer_message("x = 1").splitlines()[0]
        'I WANT TO ANSWER:'
    """
    return f"{ANSWER_MARKER}\n```python\n{code}\n```"


def write_code(prompt: str, known: dict[str, Any] | None = None) -> str:
    """Code for the request: the family's renderer with ``known`` values and defaults for the rest.

    Example:
        >>> print(write_code("The signature of the function is: def late_fee(days_late)", {"grace": 2}))
        def late_fee(days_late):
            charged = max(0, days_late - 2)
            fee = charged * 1.0
            return round(fee, 2)
        >>> write_code("The signature of the function is: def mystery(x)")
        'def mystery(x):\\n    return None'
    """
    signature = read_signature(prompt)
    if signature is None:
        return "def solution(*args, **kwargs):\n    return None"
    fn, args = signature
    family = FAMILY_OF_FUNCTION.get(fn)
    if family is None:
        return f"def {fn}({args}):\n    return None"
    return family.render(fn, {**family.defaults(), **(known or {})})


def _prompt(ctx: Context) -> str:
    return next((m.content for m in ctx.messages if m.role == "user"), "")


class AnswerAtOnceAgent:
    """Answers on the first turn with the default guess for every hidden parameter."""

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One answer per context."""
        return [AgentTurn(text=answer_message(write_code(_prompt(ctx)))) for ctx in contexts]


class ClarifyingAgent:
    """Asks one generic question per unknown hidden parameter, then answers (see the module docstring).

    Args:
        max_turns: The env's message limit; the agent answers on turn ``max_turns`` at the latest.
    """

    def __init__(self, max_turns: int = 10) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.max_turns = max_turns

    def next_message(self, messages: Sequence[Message]) -> str:
        """The next message for a conversation (the env's messages are ``user``, ours ``assistant``).

        Example:
            >>> prompt = Message("user", "The signature of the function is: def exam_result(score)")
            >>> ClarifyingAgent().next_message([prompt])
            'What is the cutoff score for passing, and does a score exactly at the cutoff pass?'
        """
        prompt = next((m.content for m in messages if m.role == "user"), "")
        asked = [m.content for m in messages if m.role == "assistant"]
        signature = read_signature(prompt)
        family = FAMILY_OF_FUNCTION.get(signature[0]) if signature else None
        known: dict[str, Any] = {}
        if family is not None:
            replies = [m.content for m in messages[1:] if m.role == "user"]
            known = parse_replies(family, replies)
            if len(asked) < self.max_turns - 1:
                for p in family.params:
                    if p.name not in known and p.question not in asked:
                        return p.question
        return answer_message(write_code(prompt, known))

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One message per context."""
        return [AgentTurn(text=self.next_message(ctx.messages)) for ctx in contexts]


class PartialClarifier:
    """Asks a random subset of the needed questions, then answers: one member of a scripted mixture.

    Per episode, from ``Context.episode_seed`` and ``variant``: an ask-probability ``q ~ U(0, 1)``; each hidden
    parameter's question is asked with probability ``q``; each learned value is forgotten with probability
    ``slip``. A parameter it never learned (or forgot) is set to the family's default (``unasked="default"``)
    or to a value drawn from the parameter's ``id_values`` (``unasked="guess"``: right by luck, so only
    someone who knows the hidden facts can tell a lucky answer from an unlucky one). Every decision is drawn
    once per episode, so the same plan holds on every turn.

    Args:
        variant: Which member of the mixture (rollout ``r`` of a task uses ``variant=r``).
        slip: Probability of forgetting a learned value.
        unasked: What to write for a parameter it does not know: ``"default"`` or ``"guess"``.

    Example:
        >>> import turnkit
        >>> from turnkit.envs.collab_code.env import CollabCodeEnv
        >>> env = CollabCodeEnv(kinds=("late_fee",))
        >>> [len(turnkit.collect(env, PartialClarifier(v), seed=2).steps) for v in range(4)]
        [2, 3, 4, 2]
        >>> PartialClarifier(0, unasked="guess").plan(7, FAMILY_OF_FUNCTION["late_fee"])[2]
        {'grace': 1, 'per_day': 1.0, 'cap': None}
    """

    def __init__(self, variant: int, slip: float = 0.2, unasked: Literal["default", "guess"] = "default") -> None:
        if not 0.0 <= slip <= 1.0:
            raise ValueError(f"slip must be in [0, 1], got {slip}")
        if unasked not in ("default", "guess"):
            raise ValueError(f"unasked must be 'default' or 'guess', got {unasked!r}")
        self.variant = variant
        self.slip = slip
        self.unasked = unasked

    def plan(self, episode_seed: int, family: Family) -> tuple[list[bool], list[bool], dict[str, Any]]:
        """``(ask, forget, fallback)`` for one episode: flags per hidden parameter and the value used unlearned."""
        rng = np.random.default_rng([episode_seed, self.variant])
        n = len(family.params)
        q = rng.uniform()
        ask, forget = (rng.random(n) < q).tolist(), (rng.random(n) < self.slip).tolist()
        fallback = family.defaults()
        if self.unasked == "guess":
            fallback = {p.name: p.id_values[int(rng.integers(len(p.id_values)))] for p in family.params}
        return ask, forget, fallback

    def next_message(self, messages: Sequence[Message], episode_seed: int) -> str:
        """The next message of the conversation."""
        prompt = next((m.content for m in messages if m.role == "user"), "")
        signature = read_signature(prompt)
        family = FAMILY_OF_FUNCTION.get(signature[0]) if signature else None
        if family is None or signature is None:
            return answer_message(write_code(prompt))
        ask, forget, values = self.plan(episode_seed, family)
        asked = {m.content for m in messages if m.role == "assistant"}
        known = parse_replies(family, [m.content for m in messages[1:] if m.role == "user"])
        for p, a in zip(family.params, ask, strict=True):
            if a and p.name not in known and p.question not in asked:
                return p.question
        values.update(
            {p.name: known[p.name] for p, f in zip(family.params, forget, strict=True) if p.name in known and not f}
        )
        return answer_message(family.render(signature[0], values))

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One message per context."""
        return [AgentTurn(text=self.next_message(c.messages, c.episode_seed or 0)) for c in contexts]
