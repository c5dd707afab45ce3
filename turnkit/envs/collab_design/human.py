"""Simulated humans of the design env: the rule-based default and a pluggable LLM simulator.

Like ColBench's vision-language human, the simulator compares the agent's render with the reference
render and describes the most visible differences in a few sentences; it never sees the conversation. The
rule-based :class:`RuleBasedHuman` reads them from :func:`~turnkit.envs.collab_design.differences.find_differences`.
:class:`LLMHuman` wraps any turnkit :class:`~turnkit.agents.base.Agent` (e.g. an HF or OpenAI-compatible
policy): it is prompted with the hidden design description and the rule-based differences, and its reply
is cut to ``max_chars`` (400 by default, as in ColBench's backend task).

Example:
    >>> from turnkit.agents.scripted import ScriptedAgent
    >>> h = LLMHuman(ScriptedAgent(["The header should be darker. " * 30]), max_chars=40)
    >>> len(h.reply(View(task=None, agent=None, reference=None, similarity=0.5, differences=())))
    40
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from turnkit.agents.base import Agent, Context, uses_privileged
from turnkit.browser import Render
from turnkit.envs.collab_design.differences import Difference
from turnkit.errors import AgentError
from turnkit.types import Message, Task

CLOSE_ENOUGH = "It looks very close to what I want."
"""The rule-based reply when no visible difference is left."""


@dataclass(frozen=True)
class View:
    """What a simulated human gets for one turn.

    Attributes:
        task: The task (privileged data included).
        agent: The agent's render.
        reference: The reference render.
        similarity: The score of the agent's render against the reference (the reward's value, see ``score.py``).
        differences: The rule-based differences, most visible first.
    """

    task: Task | None
    agent: Render | None
    reference: Render | None
    similarity: float
    differences: tuple[Difference, ...]


@runtime_checkable
class DesignHuman(Protocol):
    """Anything that turns a :class:`View` into the human's reply."""

    def reply(self, view: View) -> str:
        """The human's message to the agent."""
        ...


def compose(differences: Sequence[Difference], *, max_items: int = 3, max_chars: int = 400) -> str:
    """Join the first sentences (most visible first) while the reply stays within ``max_chars``.

    Example:
        >>> d = [Difference("x", 3.0, "First thing."), Difference("y", 2.0, "Second thing.")]
        >>> compose(d), compose(d, max_items=1), compose([])
        ('First thing. Second thing.', 'First thing.', 'It looks very close to what I want.')
    """
    out: list[str] = []
    for d in differences[:max_items]:
        candidate = " ".join([*out, d.sentence])
        if len(candidate) > max_chars:
            break
        out.append(d.sentence)
    if not out:
        return differences[0].sentence[:max_chars] if differences else CLOSE_ENOUGH
    return " ".join(out)


class RuleBasedHuman:
    """The default simulator: the ``max_items`` most visible differences, at most ``max_chars`` characters.

    Args:
        max_items: Most differences mentioned per reply.
        max_chars: Reply length cap.
    """

    def __init__(self, max_items: int = 3, max_chars: int = 400) -> None:
        if max_items < 1 or max_chars < 40:
            raise ValueError(f"need max_items >= 1 and max_chars >= 40, got {max_items} and {max_chars}")
        self.max_items = max_items
        self.max_chars = max_chars

    def reply(self, view: View) -> str:
        """Describe the most visible differences."""
        return compose(view.differences, max_items=self.max_items, max_chars=self.max_chars)


LLM_HUMAN_TEMPLATE = (
    "You are a person who asked an assistant to build a web page. You have this design in mind:\n"
    "{description}\n\n"
    "An automatic comparison of the assistant's latest page with your design found these differences, most "
    "visible first:\n{differences}\n\n"
    "Reply to the assistant as that person, in at most three short sentences: describe the most visible "
    "differences in plain words (layout, colours, text, sizes). Do not write code and do not paste the "
    "design description."
)
"""Prompt of :class:`LLMHuman`; fields ``{description}``, ``{differences}`` and ``{similarity}``."""


class LLMHuman:
    """A simulated human backed by any turnkit agent (an LLM policy).

    The agent gets one ``user`` message (the template filled in) and, if it declares
    ``uses_privileged``, the task. Its reply is cut to ``max_chars``.

    Args:
        agent: The model that plays the human.
        template: The prompt (see :data:`LLM_HUMAN_TEMPLATE`).
        max_chars: Reply length cap.
        max_differences: Rule-based differences listed in the prompt.
    """

    def __init__(
        self, agent: Agent, template: str = LLM_HUMAN_TEMPLATE, max_chars: int = 400, max_differences: int = 6
    ) -> None:
        if not hasattr(agent, "act"):
            raise AgentError(f"LLMHuman needs a turnkit Agent (with .act), got {type(agent).__name__}")
        self.agent = agent
        self.template = template
        self.max_chars = max_chars
        self.max_differences = max_differences

    def prompt(self, view: View) -> str:
        """The filled-in prompt for ``view``."""
        description = str(view.task.privileged.get("description", "")) if view.task is not None else ""
        lines = [f"- {d.sentence}" for d in view.differences[: self.max_differences]] or ["- none found"]
        fields: dict[str, Any] = {
            "description": description,
            "differences": "\n".join(lines),
            "similarity": f"{view.similarity:.3f}",
        }
        return self.template.format(**fields)

    def reply(self, view: View) -> str:
        """Ask the agent and cut its answer to ``max_chars``."""
        ctx = Context(
            messages=(Message("user", self.prompt(view)),),
            env_id="turnkit/CollabDesign-v0:human",
            task=view.task if uses_privileged(self.agent) else None,
        )
        turns = self.agent.act([ctx])
        if len(turns) != 1:
            raise AgentError(f"the human simulator returned {len(turns)} turns for 1 context")
        return turns[0].text.strip()[: self.max_chars]
