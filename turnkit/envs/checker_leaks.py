"""The privileged-leak heuristic of :func:`turnkit.check_env`: find hidden task data in what a policy sees.

The needles are the leaves of a task's privileged mapping (``env.unwrapped.privileged()``):

* strings, stripped;
* numbers in their canonical renderings: ``str(n)`` for ints, ``repr(x)`` for floats, plus ``str(int(x))``
  for integral floats (``4.0`` is also found as ``4``). Booleans and ``None`` are never needles.

A needle shorter than ``min_chars`` (default 4) is dropped: ``"42"`` or ``"yes"`` turn up in ordinary text
by chance. Matching respects word boundaries (``"cats"`` is not found in ``"scatsy"``); a number (or a
numeral string) also refuses a neighbouring decimal point (``1234`` is not found in ``12345``, ``0.1234`` or
``1234.5``).

Limits: short values (a one-digit math answer) are not searched at the default ``min_chars``; lowering it
finds them but also finds them in unrelated counters (``"turn": 1``). Transformed leaks (the answer spelled
out, reversed, or as a differently formatted number) are not found.

Not leaks: needles that occur in the task's public prompt (the generator put them there on purpose), and
needles the agent itself already sent in an action (envs may quote the agent). Observations are searched
until the episode terminates (a terminal message may reveal the answer); ``info`` dicts are searched at
every step, keys and values alike.

Example:
    >>> needles = privileged_needles({"answer": 4821, "unit": "m"})
    >>> [(n.path, n.text) for n in needles]
    [("['answer']", '4821')]
    >>> leak = find_leak(needles, [("Guess!", {}, False), ("Lower than 4821.", {}, False)])
    >>> leak.where, leak.needle.text
    ('the observation after step 1', '4821')
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

_DEFAULT_REPR = re.compile(r"<.* at 0x[0-9a-fA-F]+>", re.DOTALL)
_NUMERAL = re.compile(r"[-+]?\d+(\.\d+)?([eE][-+]?\d+)?")
_NUMBER_BOUNDS = r"(?<![\w.]){}(?!\w|\.\d)"  # no neighbouring digit, letter or decimal point


@dataclass(frozen=True)
class Needle:
    """One searchable rendering of a privileged leaf.

    Attributes:
        path: Where the leaf sits in the privileged mapping, e.g. ``"['tests'][0]"``.
        text: The rendering searched for.
        pattern: The compiled boundary-aware pattern.
    """

    path: str
    text: str
    pattern: re.Pattern[str]

    def search(self, text: str) -> re.Match[str] | None:
        """The first match of this needle in ``text``.

        Example:
            >>> n = privileged_needles({"word": "cats"})[0]
            >>> bool(n.search("two cats")), bool(n.search("scatsy"))
            (True, False)
        """
        return self.pattern.search(text)


@dataclass(frozen=True)
class Leak:
    """A privileged value found in policy-visible data.

    Attributes:
        where: ``"the reset observation"``, ``"the observation after step 3"``, ``"info at step 2"``...
        needle: The privileged value found.
        context: The text around the match.
    """

    where: str
    needle: Needle
    context: str

    def __str__(self) -> str:
        return (
            f"{self.where} contains privileged value {self.needle.path} = {self.needle.text!r}: ...{self.context!r}..."
        )


def _number_forms(x: Any) -> set[str]:
    if isinstance(x, (int, np.integer)):
        return {str(int(x))}
    x = float(x)
    if not math.isfinite(x):
        return set()
    return {repr(x)} | ({str(int(x))} if x.is_integer() else set())


def privileged_needles(privileged: Any, *, min_chars: int = 4, ignore: Collection[str] = ()) -> list[Needle]:
    """The needles of a privileged value (a mapping, sequence or scalar), walked recursively.

    Args:
        privileged: The task's privileged data.
        min_chars: Shortest rendering kept.
        ignore: Renderings never used as needles.

    Example:
        >>> [n.text for n in privileged_needles({"x": [7.0, 0.4375, True, "  secret  "]})]
        ['0.4375', 'secret']
        >>> [n.text for n in privileged_needles({"x": 12.0}, min_chars=2)]
        ['12', '12.0']
    """
    out: list[Needle] = []
    _walk(privileged, "", min_chars, frozenset(ignore), out)
    return out


def _walk(x: Any, path: str, min_chars: int, ignore: frozenset[str], out: list[Needle]) -> None:
    if isinstance(x, Mapping):
        for k, v in x.items():
            _walk(v, f"{path}[{k!r}]", min_chars, ignore, out)
        return
    if isinstance(x, np.ndarray):
        x = x.tolist()
    if isinstance(x, (list, tuple, set, frozenset)):
        for i, v in enumerate(x):
            _walk(v, f"{path}[{i}]", min_chars, ignore, out)
        return
    if x is None or isinstance(x, (bool, np.bool_)):
        return
    if isinstance(x, (int, float, np.integer, np.floating)):
        patterns = {f: _NUMBER_BOUNDS.format(re.escape(f)) for f in sorted(_number_forms(x))}
    else:
        text = str(x).strip()
        if _DEFAULT_REPR.fullmatch(text):
            return
        if _NUMERAL.fullmatch(text):  # "12" as a string is still a number: not found in "1.0" or "312"
            patterns = {text: _NUMBER_BOUNDS.format(re.escape(text))}
        else:
            left = r"(?<!\w)" if re.match(r"\w", text) else ""
            right = r"(?!\w)" if re.search(r"\w\Z", text) else ""
            patterns = {text: left + re.escape(text) + right}
    for text, pattern in patterns.items():
        if len(text) >= min_chars and text not in ignore:
            out.append(Needle(path or "privileged", text, re.compile(pattern)))


def info_leaves(info: Any) -> list[str]:
    """Every key and value leaf of an ``info`` value, stringified (floats via ``repr``).

    Example:
        >>> info_leaves({"turn": 2, "debug": {"target": 0.5, "ok": True}})
        ['turn', '2', 'debug', 'target', '0.5', 'ok']
    """
    if isinstance(info, Mapping):
        return [s for k, v in info.items() for s in (*info_leaves(k), *info_leaves(v))]
    if isinstance(info, np.ndarray):
        info = info.tolist()
    if isinstance(info, (list, tuple, set, frozenset)):
        return [s for v in info for s in info_leaves(v)]
    if info is None or isinstance(info, (bool, np.bool_)):
        return []
    if isinstance(info, (float, np.floating)):
        return [repr(float(info))]
    return [str(info)]


def find_leak(
    needles: Sequence[Needle],
    transcript: Sequence[tuple[str, Any, bool]],
    actions: Sequence[str] = (),
    *,
    prompt: str = "",
) -> Leak | None:
    """The first leak in an episode, or ``None``.

    Args:
        needles: From :func:`privileged_needles`.
        transcript: ``(observation, info, terminated)`` for the reset (first) and each step.
        actions: The actions sent; ``actions[i]`` led to ``transcript[i + 1]``.
        prompt: The task's public prompt; needles found in it are exempt.

    Example:
        >>> needles = privileged_needles({"answer": "Paris"})
        >>> find_leak(needles, [("Capital?", {}, False), ("Yes, Paris.", {}, True)], ["Paris"]) is None
        True
        >>> str(find_leak(needles, [("Capital?", {"hint": "Paris"}, False)]))
        "info at reset contains privileged value ['answer'] = 'Paris': ...'Paris'..."
    """
    live = [n for n in needles if not n.search(prompt)]
    for i, (obs, info, terminated) in enumerate(transcript):
        said = [n for n in live if any(n.search(a) for a in actions[:i] if isinstance(a, str))]
        step = "reset" if i == 0 else f"step {i}"
        texts = [] if terminated else [("the reset observation" if i == 0 else f"the observation after {step}", obs)]
        texts += [(f"info at {step}", leaf) for leaf in info_leaves(info)]
        for where, text in texts:
            for n in live:
                m = n.search(str(text)) if n not in said else None
                if m is not None:
                    return Leak(where, n, str(text)[max(0, m.start() - 30) : m.end() + 30])
    return None


def exempt_count(needles: Sequence[Needle], prompt: str) -> int:
    """How many needles occur in the public prompt (and are therefore not searched).

    Example:
        >>> exempt_count(privileged_needles({"expr": "17*31", "answer": 527}, min_chars=3), "Compute 17*31.")
        1
    """
    return sum(1 for n in needles if n.search(prompt))
