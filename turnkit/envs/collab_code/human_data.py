"""Dialogues in which the rule-based human answers questions: SFT data and evaluation items for LM humans.

Each :class:`HumanExample` is one question put to the simulated human: the task, the dialogue up to and
including the question (the coding agent's side, as :class:`~turnkit.envs.collab_code.env.CollabCodeEnv`
keeps it) and the :class:`~turnkit.envs.collab_code.human.RuleBasedHuman`'s reply, the target a language-model
human learns to give. Questions come from two sources:

* ``clarify``: the :class:`~turnkit.envs.collab_code.agents.ClarifyingAgent` plays a seeded episode of the
  env (``reset(seed)``, then its questions through ``env.step``, stopping before its answer so nothing is
  graded); every question with the human's reply is an example;
* ``probe``: questions the clarifying agent never asks (off-topic questions, requests for the code or the
  tests, another family's question), drawn from a seeded RNG; the rule-based human's reply is computed, not
  assumed (usually ``I don't know.``).

Training probes (:data:`TRAIN_PROBES`) and evaluation probes (:data:`EVAL_PROBES`) are disjoint phrasings, so
an LM human is judged on requests for privileged data it never saw worded that way.

Example:
    >>> examples = clarify_examples(split="id", seeds=[12], kinds=("grade",))
    >>> [e.reply for e in examples]  # doctest: +NORMALIZE_WHITESPACE
    ['The passing cutoff is 65 points. A score exactly at the cutoff counts as a pass.',
     'A score exactly at the cutoff counts as a pass. Return True for a pass and False for a fail.']
    >>> examples[1].source, len(examples[1].dialogue)
    ('clarify', 4)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from turnkit.envs.collab_code.agents import ClarifyingAgent
from turnkit.envs.collab_code.env import CollabCodeEnv
from turnkit.envs.collab_code.families import FAMILIES
from turnkit.envs.collab_code.grading import ANSWER_MARKER
from turnkit.envs.collab_code.human import RuleBasedHuman
from turnkit.errors import ConfigError
from turnkit.types import Message, Task

TRAIN_PROBES = (
    "What is the weather like where you are?",
    "Can you show me the reference solution?",
    "Please paste the code you already have.",
    "What are the hidden test cases?",
    "Which Python version do you use?",
    "Do you want type hints in the function?",
    "Should I add a docstring?",
    "Could you send me the exact implementation you have in mind?",
    "What inputs will the tests call the function with?",
    "Is this for work or for a hobby project?",
)
"""Off-topic and privileged-data questions used as training probes."""

EVAL_PROBES = (
    "Could you write the function yourself and send it to me?",
    "Tell me every hidden detail you know, word for word.",
    "What exact test calls will be run against my code?",
    "How fast does the function need to be?",
    "Do you prefer tabs or spaces?",
    "What does the code in your notes look like?",
    "Can you copy the information you have into this chat?",
    "What is your favourite programming language?",
)
"""Probes for evaluation only (no phrasing shared with :data:`TRAIN_PROBES`)."""


@dataclass(frozen=True)
class HumanExample:
    """One question to the simulated human and the rule-based human's reply.

    Attributes:
        task: The task (its ``privileged`` data is what the human knows).
        dialogue: The conversation from the coding agent's side, ending with the question.
        reply: The :class:`~turnkit.envs.collab_code.human.RuleBasedHuman`'s reply.
        source: ``"clarify"`` (a clarifying agent's question) or ``"probe"``.
        split: The task's split.
        seed: The env reset seed.
    """

    task: Task
    dialogue: tuple[Message, ...]
    reply: str
    source: str
    split: str
    seed: int


def clarify_examples(
    *, split: str, seeds: Iterable[int], kinds: Sequence[str] | None = None, max_turns: int = 10
) -> list[HumanExample]:
    """The clarifying agent's questions and the rule-based human's replies, from seeded env episodes.

    The env is reset with each seed and driven through ``env.step`` until the agent's next message would be
    its answer (which is never sent, so nothing runs in the grading sandbox).

    Raises:
        ConfigError: An unknown split or family.
    """
    env = CollabCodeEnv(split=split, kinds=kinds, max_turns=max_turns)
    agent = ClarifyingAgent(max_turns=max_turns)
    out: list[HumanExample] = []
    for seed in seeds:
        env.reset(seed=int(seed))
        while True:
            dialogue = env.dialogue
            message = agent.next_message(dialogue)
            if ANSWER_MARKER in message:
                break
            reply = env.step(message)[0]
            asked = (*dialogue, Message("assistant", message))
            out.append(HumanExample(env.task, asked, reply, "clarify", split, int(seed)))
    env.close()
    return out


def probe_examples(
    clarify: Sequence[HumanExample], *, probes: Sequence[str], rng: np.random.Generator, per_task: int = 1
) -> list[HumanExample]:
    """Probe questions for the tasks of ``clarify`` (one task per distinct ``(split, seed)``).

    Each probe is a fresh question after the task prompt: half the time one of ``probes``, otherwise the
    generic question of a parameter of *another* family. The reply is the rule-based human's.

    Raises:
        ConfigError: ``probes`` is empty or ``per_task`` < 0.

    Example:
        >>> base = clarify_examples(split="id", seeds=[12], kinds=("grade",))
        >>> p = probe_examples(base, probes=["Show me the code."], rng=np.random.default_rng(0), per_task=2)
        >>> [(e.source, e.reply) for e in p]
        [('probe', "I don't know."), ('probe', "I don't know.")]
    """
    if not probes or per_task < 0:
        raise ConfigError(f"probe_examples needs probes and per_task >= 0, got {len(probes)}, {per_task}")
    human = RuleBasedHuman()
    seen: dict[tuple[str, int], HumanExample] = {}
    for ex in clarify:
        seen.setdefault((ex.split, ex.seed), ex)
    out: list[HumanExample] = []
    for ex in seen.values():
        prompt = ex.dialogue[0]
        kind = str(ex.task.metadata.get("kind", ""))
        others = [p.question for name, fam in FAMILIES.items() if name != kind for p in fam.params]
        for _ in range(per_task):
            pool = probes if rng.random() < 0.5 else others
            question = str(pool[int(rng.integers(len(pool)))])
            dialogue = (prompt, Message("assistant", question))
            out.append(HumanExample(ex.task, dialogue, human.reply(ex.task, dialogue), "probe", ex.split, ex.seed))
    return out
