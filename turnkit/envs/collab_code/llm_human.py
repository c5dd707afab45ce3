"""A pluggable LLM simulated human: any turnkit :class:`~turnkit.agents.base.Agent` playing the user.

ColBench's simulator is an LLM that sees the problem, the hidden information and the dialogue, is told to
answer like a person who needs help using only the hidden facts (two sentences, "I don't know" otherwise),
runs at temperature 0, and has its reply cut to 400 characters. :class:`LLMHuman` does the same with any
agent (an :class:`~turnkit.agents.hf.HFPolicy`, an OpenAI-compatible client, a scripted stand-in in tests):

* the hidden information reaches the simulator **through the prompt** (``template`` filled with
  ``{problem}`` and ``{hidden}``), so plain chat models work; agents with ``uses_privileged = True`` also
  get the :class:`~turnkit.types.Task` in ``Context.task``;
* the dialogue is shown from the simulator's side: the coding agent's messages become ``user`` messages and
  the simulator's own earlier replies ``assistant`` messages; the first message is the system prompt;
* the reply is stripped and cut to ``max_chars`` (and ``max_sentences`` if set); an empty reply becomes
  ``empty_reply``.

The class is generic (template, hidden-text renderer, caps, whether the dialogue is shown), so other
collaborative envs (e.g. a design env whose human describes differences) reuse it with their own template.
Sampling simulators are reproducible per task: ``Context.episode_seed`` is a stable hash of the task id.

Example:
    >>> from turnkit.agents.scripted import ScriptedAgent
    >>> from turnkit.types import Message, Task
    >>> task = Task("t", "Write f.", {"reference": "def f():\\n    return 7", "facts": []})
    >>> echo = ScriptedAgent(lambda ctx: "Hidden info says: " + ctx.messages[0].content.split("return ")[1][:1])
    >>> LLMHuman(echo).reply(task, [Message("user", "Write f."), Message("assistant", "What should f return?")])
    'Hidden info says: 7'
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from turnkit.agents.base import Agent, Context, uses_privileged
from turnkit.envs.collab_code.human import DONT_KNOW, MAX_REPLY_CHARS, cap_reply, task_facts
from turnkit.errors import AgentError, ConfigError
from turnkit.types import Message, Task

DEFAULT_TEMPLATE = """\
You are a person who asked an AI assistant to write a Python function for you. You are not a programmer.
Your request was:
{problem}

Information only you know (the assistant cannot see it):
{hidden}

Reply to the assistant's latest message as this person, in at most two sentences. Use only facts from the \
information above; if it does not contain the answer, say that you don't know. Never write code and never \
copy the information or the code verbatim."""
"""The collaborative-coding simulator prompt (ColBench's instructions, re-worded)."""


def hidden_text(task: Task) -> str:
    """The hidden information of a collaborative-coding task, as the simulator reads it.

    ``privileged["hidden_information"]`` if the task has one (ColBench JSONL), otherwise the fact sentences
    followed by the reference code (ColBench gives its simulator the reference solution).

    Example:
        >>> task = Task("t", "p", {"reference": "def f(x):\\n    return x", "facts": [
        ...     {"keywords": ["x"], "text": "Return x unchanged."}]})
        >>> print(hidden_text(task))
        - Return x unchanged.
        Reference solution:
        def f(x):
            return x
    """
    given = task.privileged.get("hidden_information")
    if isinstance(given, str) and given.strip():
        return given.strip()
    lines = [f"- {fact.sentence}" for fact in task_facts(task)]
    reference = str(task.privileged.get("reference", "")).strip()
    if reference:
        lines += ["Reference solution:", reference]
    return "\n".join(lines)


def episode_seed_for(task: Task) -> int:
    """A stable per-task seed for sampling simulators (same task -> same seed, in any process).

    Example:
        >>> episode_seed_for(Task("abc", "p")) == episode_seed_for(Task("abc", "q"))
        True
    """
    return int.from_bytes(hashlib.sha256(task.task_id.encode()).digest()[:4], "big")


class LLMHuman:
    """A simulated human backed by any :class:`~turnkit.agents.base.Agent` (see the module docstring).

    Args:
        agent: The model playing the human.
        template: System prompt with ``{problem}`` and ``{hidden}`` fields.
        render_hidden: ``Task -> str`` filling ``{hidden}``.
        max_chars: Reply cut (ColBench: 400 for code, 1000 for design).
        max_sentences: Optional sentence cut (ColBench only instructs two sentences; ``None`` keeps all).
        include_dialogue: Show the dialogue (``False``: only the system prompt and the latest message).
        empty_reply: What an empty model reply becomes.
        env_id: Put in ``Context.env_id`` so that a shared policy can tell this role apart.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        template: str = DEFAULT_TEMPLATE,
        render_hidden: Callable[[Task], str] = hidden_text,
        max_chars: int = MAX_REPLY_CHARS,
        max_sentences: int | None = None,
        include_dialogue: bool = True,
        empty_reply: str = DONT_KNOW,
        env_id: str = "turnkit/CollabCode-v0:human",
    ) -> None:
        if not callable(getattr(agent, "act", None)):
            raise ConfigError(f"LLMHuman needs a turnkit Agent (with act), got {type(agent).__name__}")
        try:
            template.format(problem="", hidden="")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(f"template may only use the fields {{problem}} and {{hidden}}: {exc!r}") from exc
        if max_chars < 1:
            raise ConfigError(f"max_chars must be >= 1, got {max_chars}")
        self.agent = agent
        self.template = template
        self.render_hidden = render_hidden
        self.max_chars = max_chars
        self.max_sentences = max_sentences
        self.include_dialogue = include_dialogue
        self.empty_reply = empty_reply
        self.env_id = env_id

    def system_prompt(self, task: Task) -> str:
        """The simulator's system prompt for ``task``."""
        return self.template.format(problem=task.prompt, hidden=self.render_hidden(task))

    def context(self, task: Task, dialogue: Sequence[Message]) -> Context:
        """The simulator's :class:`~turnkit.agents.base.Context`: roles flipped, system prompt first.

        Example:
            >>> from turnkit.agents.scripted import ScriptedAgent
            >>> human = LLMHuman(ScriptedAgent(["ok"]))
            >>> ctx = human.context(Task("t", "Write f."), [Message("user", "Write f."), Message("assistant", "Q1"),
            ...                     Message("user", "A1"), Message("assistant", "Q2")])
            >>> [(m.role, m.content) for m in ctx.messages[1:]], ctx.turn
            ([('user', 'Q1'), ('assistant', 'A1'), ('user', 'Q2')], 1)
        """
        turns = [m for m in dialogue[1:] if m.role in ("user", "assistant")]  # dialogue[0] is the task prompt
        if not self.include_dialogue:
            turns = turns[-1:]
        flipped = tuple(Message("user" if m.role == "assistant" else "assistant", m.content) for m in turns)
        return Context(
            messages=(Message("system", self.system_prompt(task)), *flipped),
            env_id=self.env_id,
            turn=max(0, sum(1 for m in dialogue if m.role == "assistant") - 1),
            episode_seed=episode_seed_for(task),
            task=task if uses_privileged(self.agent) else None,
        )

    def reply(self, task: Task, dialogue: Sequence[Message]) -> str:
        """Ask the model for the human's reply, then apply the caps.

        Raises:
            AgentError: The model failed or returned no turn.
        """
        return self.replies([(task, dialogue)])[0]

    def replies(self, items: Sequence[tuple[Task, Sequence[Message]]]) -> list[str]:
        """Replies to many ``(task, dialogue)`` pairs in one ``agent.act`` call (for evaluation and data).

        Each reply is the one :meth:`reply` would give, up to the agent's own batching (a greedy
        :class:`~turnkit.agents.hf.HFPolicy` pads a batch; its numerics may differ in the last bits).

        Raises:
            AgentError: The model failed or returned the wrong number of turns.

        Example:
            >>> from turnkit.agents.scripted import ScriptedAgent
            >>> human = LLMHuman(ScriptedAgent(lambda ctx: "  " + ctx.messages[-1].content.upper()))
            >>> t = Task("t", "Write f.")
            >>> human.replies([(t, [Message("user", "p"), Message("assistant", "a?")]),
            ...                (t, [Message("user", "p"), Message("assistant", "")])])
            ['A?', "I don't know."]
        """
        if not items:
            return []
        turns = self.agent.act([self.context(task, dialogue) for task, dialogue in items])
        if len(turns) != len(items):
            raise AgentError(f"the simulated human's agent returned {len(turns)} turns for {len(items)} contexts")
        out = []
        for turn in turns:
            text = cap_reply(turn.text, max_chars=self.max_chars, max_sentences=self.max_sentences)
            out.append(text or self.empty_reply)
        return out
