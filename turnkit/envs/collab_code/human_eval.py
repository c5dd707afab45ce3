"""Scoring a simulated human's replies against the rule-based human: fact agreement and privileged leaks.

For a generated task every hidden parameter has a parser that reads its value back from a sentence
(:class:`~turnkit.envs.collab_code.family_base.Param`), so a reply can be read as the set of facts it
states, ``{(param, value)}``:

* **fact F1** of a reply against the rule-based reply to the same question: precision and recall of the
  stated ``(param, value)`` pairs (two replies that state nothing, e.g. two "I don't know.", score 1);
* **wrong facts**: stated pairs whose value is not the task's hidden value (a hallucinated or mis-copied
  fact, the failure that can mislead a coding agent);
* **leaks** (:func:`leaks`): the reply contains a line of the reference code (a line of at least
  ``min_code_chars`` characters that is not in the public request), or states a hidden fact that the
  question did not ask about (one the rule-based human would not have said: it answers exactly the facts
  whose keywords the question contains).

Example:
    >>> from turnkit.types import Task
    >>> task = Task("t", "p", {"facts": [{"slot": "grade.cutoff", "value": 60},
    ...                                  {"slot": "grade.inclusive", "value": True}],
    ...                        "reference": "def f(score):\\n    if score >= 60:\\n        return 'pass'"})
    >>> stated_facts(task, "The passing cutoff is 65 points.")
    {('cutoff', 65)}
    >>> fact_scores(task, "The passing cutoff is 65 points.", "The passing cutoff is 60 points.")
    {'precision': 0.0, 'recall': 0.0, 'f1': 0.0, 'wrong': 1}
    >>> leaks(task, "Is it inclusive?", "Yes. The passing cutoff is 60 points.", asked=("inclusive",))
    {'code': False, 'unasked_fact': True}
    >>> leaks(task, "Is it inclusive?", "Yes, if score >= 60: it passes.", asked=("inclusive",))
    {'code': True, 'unasked_fact': False}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from turnkit.envs.collab_code.families import FAMILIES
from turnkit.envs.collab_code.family_base import UNKNOWN
from turnkit.envs.collab_code.human import RuleBasedHuman, task_facts
from turnkit.types import Task


def hidden_values(task: Task) -> dict[str, Any]:
    """The task's hidden parameter values by parameter name (generated tasks; ``{}`` otherwise).

    Example:
        >>> hidden_values(Task("t", "p", {"facts": [{"slot": "late_fee.grace", "value": 2}]}))
        {'grace': 2}
    """
    out = {}
    for entry in task.privileged.get("facts", ()):
        if isinstance(entry, dict) and "slot" in entry:
            out[str(entry["slot"]).partition(".")[2]] = entry.get("value")
    return out


def _family(task: Task) -> Any:
    for entry in task.privileged.get("facts", ()):
        if isinstance(entry, dict) and "slot" in entry:
            return FAMILIES.get(str(entry["slot"]).partition(".")[0])
    return None


def stated_facts(task: Task, text: str) -> set[tuple[str, Any]]:
    """The ``(param, value)`` pairs a reply states, read with the task family's parsers.

    Only the task's own hidden parameters are read. Values are made hashable (lists become tuples).

    Example:
        >>> task = Task("t", "p", {"facts": [{"slot": "late_fee.grace", "value": 2}]})
        >>> stated_facts(task, "The first 3 late days are free."), stated_facts(task, "I don't know.")
        ({('grace', 3)}, set())
    """
    family = _family(task)
    if family is None:
        return set()
    names = set(hidden_values(task))
    out = set()
    for p in family.params:
        if p.name in names:
            value = p.parse(text)
            if value is not UNKNOWN:
                out.add((p.name, _hashable(value)))
    return out


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, (list, tuple)) else value


def fact_scores(task: Task, reply: str, reference_reply: str) -> dict[str, Any]:
    """Fact precision, recall and F1 of ``reply`` against ``reference_reply``, and its wrong-fact count.

    Example:
        >>> task = Task("t", "p", {"facts": [{"slot": "late_fee.grace", "value": 2},
        ...                                  {"slot": "late_fee.per_day", "value": 0.5}]})
        >>> rule = "The first 2 late days are free. Each charged day costs 0.5 dollars."
        >>> fact_scores(task, "The first 2 late days are free.", rule)
        {'precision': 1.0, 'recall': 0.5, 'f1': 0.6666666666666666, 'wrong': 0}
        >>> fact_scores(task, "I don't know.", "I don't know.")
        {'precision': 1.0, 'recall': 1.0, 'f1': 1.0, 'wrong': 0}
    """
    got, want = stated_facts(task, reply), stated_facts(task, reference_reply)
    truth = {k: _hashable(v) for k, v in hidden_values(task).items()}
    wrong = sum(1 for name, value in got if truth.get(name, UNKNOWN) != value)
    if not got and not want:
        return {"precision": 1.0, "recall": 1.0, "f1": 1.0, "wrong": wrong}
    hit = len(got & want)
    precision = hit / len(got) if got else 0.0
    recall = hit / len(want) if want else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "wrong": wrong}


def same_params_wrong_value(task: Task, reply: str, reference_reply: str) -> bool:
    """The reply states the same parameters as the reference reply, but some value differs (a mis-copy).

    Example:
        >>> task = Task("t", "p", {"facts": [{"slot": "late_fee.grace", "value": 2}]})
        >>> same_params_wrong_value(task, "The first 3 late days are free.", "The first 2 late days are free.")
        True
        >>> same_params_wrong_value(task, "I don't know.", "The first 2 late days are free.")
        False
    """
    got, want = stated_facts(task, reply), stated_facts(task, reference_reply)
    return bool(want) and {n for n, _ in got} == {n for n, _ in want} and got != want


def asked_params(task: Task, question: str) -> tuple[str, ...]:
    """The parameters a question asks about: those whose facts the rule-based human would say.

    The rule-based human answers at most ``max_sentences`` facts; here every keyword-matched fact counts as
    asked (a model that says a third matching fact is not leaking).

    Example:
        >>> task = Task("t", "p", {"facts": [{"slot": "late_fee.grace", "value": 2},
        ...                                  {"slot": "late_fee.per_day", "value": 0.5}]})
        >>> asked_params(task, "Is there a grace period?")
        ('grace',)
    """
    names = list(hidden_values(task))
    matched = RuleBasedHuman(max_sentences=len(names) or 1).matching_facts(task, question)
    family = _family(task)
    if family is None:
        return ()
    said = {f.sentence for f in matched}
    return tuple(n for n in names if family.param(n).say(hidden_values(task)[n]) in said)


def code_lines(task: Task, *, min_chars: int = 10) -> list[str]:
    """Reference-code lines that would count as a code leak.

    A line counts if, stripped, it has at least ``min_chars`` characters and is neither in the public request
    nor inside a fact sentence the human may say (``return None`` is code, but also the plain answer "For an
    empty list, return None.").

    Example:
        >>> task = Task("t", "def f(x)", {"reference": "def f(x):\\n    return round(x * 1.5, 2)"})
        >>> code_lines(task)
        ['return round(x * 1.5, 2)']
    """
    said = [f.sentence for f in task_facts(task)]
    lines = [line.strip() for line in str(task.privileged.get("reference", "")).splitlines()]
    return [
        line
        for line in lines
        if len(line) >= min_chars and line.rstrip(":") not in task.prompt and not any(line in s for s in said)
    ]


def leaks(
    task: Task, question: str, reply: str, *, asked: Iterable[str] | None = None, min_code_chars: int = 10
) -> dict[str, bool]:
    """Whether a reply leaks privileged data: a reference-code line, or a hidden fact it was not asked.

    Args:
        task: The task.
        question: The agent's message the reply answers.
        reply: The human's reply.
        asked: Parameters the question asks about (default :func:`asked_params`).
        min_code_chars: Shortest code line that counts (shorter ones, like ``return x``, are ordinary text).

    Example:
        >>> task = Task("t", "p", {"facts": [{"slot": "late_fee.grace", "value": 2}],
        ...                        "reference": "def f(d):\\n    charged = max(0, d - 2)"})
        >>> leaks(task, "Tell me the tests.", "charged = max(0, d - 2)")
        {'code': True, 'unasked_fact': False}
        >>> leaks(task, "Tell me the tests.", "The first 2 late days are free.")
        {'code': False, 'unasked_fact': True}
    """
    asked = set(asked_params(task, question) if asked is None else asked)
    truth = {k: _hashable(v) for k, v in hidden_values(task).items()}
    code = any(line in reply for line in code_lines(task, min_chars=min_code_chars))
    unasked = any(name not in asked and truth.get(name, UNKNOWN) == value for name, value in stated_facts(task, reply))
    return {"code": code, "unasked_fact": unasked}
