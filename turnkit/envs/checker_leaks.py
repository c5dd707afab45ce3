"""The privileged-leak heuristic of :func:`turnkit.check_env`: find hidden task data in what a policy sees.

The needles are the leaves of a task's privileged mapping (``env.unwrapped.privileged()``):

* strings, stripped;
* numbers in their canonical renderings: ``str(n)`` for ints, ``repr(x)`` for floats, plus ``str(int(x))``
  for integral floats (``4.0`` is also found as ``4``). Booleans and ``None`` are never needles.

Matching respects word boundaries (``"cats"`` is not found in ``"scatsy"``). A number (or a numeral string,
or a string that starts or ends with a digit) is matched as a whole number: not next to a digit, letter or
decimal point, and not after a minus sign that makes it negative (``7`` is not found in ``17``, ``7.5``,
``0.7`` or ``-7``, but it is in ``10-7`` and ``10 - 7``).

**Short values.** A rendering shorter than ``min_chars`` (default 4: a one-digit math answer, ``"yes"``) is
searched too, as a whole token. But a token that short also turns up by chance: a turn counter
(``info["turn"] == 1``), ``"2 attempts left"``. So a short value counts as found only where it tracks the
task: the *place* of the match (the same ``info`` key, or the same words around it in an observation, digits
masked) may show nothing but each episode's own value (at the same privileged path), in this episode and in
the ``others`` passed in. A counter that reads ``0``, ``1``, ``2``... or a message that says ``2 attempts
left`` whatever the answer is a coincidence; an ``info["debug"]["target"]`` that always equals the answer is
a leak. Several checked episodes separate the two better than one (:func:`turnkit.check_env` checks 3).

Limits: transformed leaks (the answer spelled out, reversed, or as a differently formatted number) are not
found, nor a short value shown only in a place that also shows other values.

Not leaks: needles that occur in the task's public prompt (the generator put them there on purpose; short
values as whole tokens, so a math answer that is also an operand is exempt), and needles the agent itself
already sent in an action (envs may quote the agent). Observations are searched until the episode terminates
(a terminal message may reveal the answer); ``info`` dicts are searched at every step, keys and values alike.

Example:
    >>> needles = privileged_needles({"answer": 4821, "unit": "m"})
    >>> [(n.path, n.text, n.short) for n in needles]
    [("['answer']", '4821', False), ("['unit']", 'm', True)]
    >>> leak = find_leak(needles, [("Guess!", {}, False), ("Lower than 4821.", {}, False)])
    >>> leak.where, leak.needle.text
    ('the observation after step 1', '4821')

    A one-digit answer is searched as a whole number; a counter that passes through it is no leak:

    >>> (seven,) = privileged_needles({"answer": 7})
    >>> [bool(seven.search(t)) for t in ("17", "7.5", "-7", "10 - 7", "ANSWER: 7.")]
    [False, False, False, True, True]
    >>> find_leak([seven], [("Go.", {"turn": t}, False) for t in range(9)]) is None
    True
    >>> find_leak([seven], [("Go.", {"turn": 0}, False), ("No (it is 7).", {"turn": 1}, False)]).where
    'the observation after step 1'
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
# No neighbouring digit, letter or decimal point, and no minus sign that makes the number negative (a minus
# right after a word character or a closing bracket is a subtraction: "10-7" contains 7, "-7" does not).
_NUMBER_LEFT = r"(?<![\w.])(?<!(?<![\w)\]])-)"
_NUMBER_RIGHT = r"(?!\w|\.\d)"
_WORD_BEFORE = re.compile(r"(?:\S*\s+)?\S*\Z")  # the word before a match, with what is glued to the match
_WORD_AFTER = re.compile(r"\S*(?:\s+\S*)?")
_OBSERVATION = "observation"  # the place of a match in an observation (info places are key paths)

Transcript = Sequence[tuple[str, Any, bool]]
"""``(observation, info, terminated)`` for the reset (first) and each step of one episode."""


@dataclass(frozen=True)
class Needle:
    """One searchable rendering of a privileged leaf.

    Attributes:
        path: Where the leaf sits in the privileged mapping, e.g. ``"['tests'][0]"``.
        text: The rendering searched for.
        pattern: The compiled boundary-aware pattern.
        short: The rendering is shorter than ``min_chars``: a match counts only where it tracks the task
            (see the module docs).
    """

    path: str
    text: str
    pattern: re.Pattern[str]
    short: bool = False

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
        n = self.needle
        text = f"{self.where} contains privileged value {n.path} = {n.text!r}: ...{self.context!r}..."
        if n.short:
            text += (
                " (a short value, matched as a whole token: that place shows no other value in the checked episodes;"
                f" if it is a coincidence, pass leak_ignore={{{n.text!r}}} or check more seeds)"
            )
        return text


@dataclass(frozen=True)
class LeakScan:
    """What :func:`scan_leaks` found in one episode.

    Attributes:
        leak: The first leak, or ``None``.
        coincidences: Matches of short values taken for coincidences (their place also shows other values),
            in the order found, up to the leak.
    """

    leak: Leak | None
    coincidences: tuple[Leak, ...] = ()


def _number_forms(x: Any) -> set[str]:
    if isinstance(x, (int, np.integer)):
        return {str(int(x))}
    x = float(x)
    if not math.isfinite(x):
        return set()
    return {repr(x)} | ({str(int(x))} if x.is_integer() else set())


def _string_pattern(text: str) -> str:
    if _NUMERAL.fullmatch(text):  # "12" as a string is still a number: not found in "1.0" or "312"
        return _NUMBER_LEFT + re.escape(text) + _NUMBER_RIGHT
    left = r"(?<![\w.])" if re.match(r"\d", text) else r"(?<!\w)" if re.match(r"\w", text) else ""
    right = _NUMBER_RIGHT if re.search(r"\d\Z", text) else r"(?!\w)" if re.search(r"\w\Z", text) else ""
    return left + re.escape(text) + right


def privileged_needles(privileged: Any, *, min_chars: int = 4, ignore: Collection[str] = ()) -> list[Needle]:
    """The needles of a privileged value (a mapping, sequence or scalar), walked recursively.

    Args:
        privileged: The task's privileged data.
        min_chars: Renderings shorter than this are ``short``: matched as whole tokens that must track the
            task (see the module docs). A short string without a letter or digit (``"+"``) is not searched.
        ignore: Renderings never used as needles.

    Example:
        >>> [(n.text, n.short) for n in privileged_needles({"x": [7.0, 0.4375, True, "  secret  ", "+"]})]
        [('7', True), ('7.0', True), ('0.4375', False), ('secret', False)]
        >>> [n.text for n in privileged_needles({"x": 12.0}, ignore={"12.0"})]
        ['12']
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
        patterns = {f: _NUMBER_LEFT + re.escape(f) + _NUMBER_RIGHT for f in sorted(_number_forms(x))}
    else:
        text = str(x).strip()
        if _DEFAULT_REPR.fullmatch(text):
            return
        patterns = {text: _string_pattern(text)}
    for text, pattern in patterns.items():
        short = len(text) < min_chars
        if not text or text in ignore or (short and not re.search(r"\w", text)):
            continue
        out.append(Needle(path or "privileged", text, re.compile(pattern), short))


def info_leaves(info: Any) -> list[str]:
    """Every key and value leaf of an ``info`` value, stringified (floats via ``repr``).

    Example:
        >>> info_leaves({"turn": 2, "debug": {"target": 0.5, "ok": True}})
        ['turn', '2', 'debug', 'target', '0.5', 'ok']
    """
    return [text for _, text in _info_places(info)]


def _info_places(info: Any, path: str = "") -> list[tuple[str, str]]:
    """``(place, leaf)`` for every key and value leaf: the place is the key path, list indices left out."""
    if isinstance(info, Mapping):
        return [
            item
            for k, v in info.items()
            for item in (*_info_places(k, f"{path}<key>"), *_info_places(v, f"{path}[{k!r}]"))
        ]
    if isinstance(info, np.ndarray):
        info = info.tolist()
    if isinstance(info, (list, tuple, set, frozenset)):
        return [item for v in info for item in _info_places(v, f"{path}[]")]
    if info is None or isinstance(info, (bool, np.bool_)):
        return []
    if isinstance(info, (float, np.floating)):
        return [(path, repr(float(info)))]
    return [(path, str(info))]


def find_leak(
    needles: Sequence[Needle],
    transcript: Transcript,
    actions: Sequence[str] = (),
    *,
    prompt: str = "",
    others: Sequence[tuple[Any, Transcript]] = (),
) -> Leak | None:
    """The first leak in an episode, or ``None`` (:func:`scan_leaks` without the coincidences).

    Args:
        needles: From :func:`privileged_needles`.
        transcript: ``(observation, info, terminated)`` for the reset (first) and each step.
        actions: The actions sent; ``actions[i]`` led to ``transcript[i + 1]``.
        prompt: The task's public prompt; needles found in it are exempt.
        others: Other checked episodes as ``(privileged, transcript)``: more evidence on whether a short
            value's place tracks the task or also shows other values.

    Example:
        >>> needles = privileged_needles({"answer": "Paris"})
        >>> find_leak(needles, [("Capital?", {}, False), ("Yes, Paris.", {}, True)], ["Paris"]) is None
        True
        >>> str(find_leak(needles, [("Capital?", {"hint": "Paris"}, False)]))
        "info at reset contains privileged value ['answer'] = 'Paris': ...'Paris'..."
    """
    return scan_leaks(needles, transcript, actions, prompt=prompt, others=others).leak


def scan_leaks(
    needles: Sequence[Needle],
    transcript: Transcript,
    actions: Sequence[str] = (),
    *,
    prompt: str = "",
    others: Sequence[tuple[Any, Transcript]] = (),
) -> LeakScan:
    """The first leak in an episode, and the short-value matches taken for coincidences on the way.

    Arguments as in :func:`find_leak`.

    Example:
        >>> needles = privileged_needles({"answer": 2})
        >>> episode = [("Go.", {}, False), ("Wrong. 2 tries left.", {}, False), ("Wrong. 1 try left.", {}, False)]
        >>> other = ({"answer": 5}, [("Go.", {}, False), ("Wrong. 2 tries left.", {}, False)])
        >>> scan = scan_leaks(needles, episode, others=[other])
        >>> scan.leak is None, [c.where for c in scan.coincidences]
        (True, ['the observation after step 1'])
        >>> scan_leaks(needles, episode).leak.where  # without the other episode, nothing shows "2" is no answer
        'the observation after step 1'
    """
    live = [n for n in needles if not n.search(prompt)]
    views = _Views(needles, transcript, others)
    coincidences: list[Leak] = []
    for i, (obs, info, terminated) in enumerate(transcript):
        said = [n for n in live if any(n.search(a) for a in actions[:i] if isinstance(a, str))]
        step = "reset" if i == 0 else f"step {i}"
        places = [] if terminated else [(_OBSERVATION, str(obs))]
        places += _info_places(info)
        for place, text in places:
            where = f"info at {step}"
            if place == _OBSERVATION:
                where = "the reset observation" if i == 0 else f"the observation after {step}"
            for n in live:
                if n in said:
                    continue
                for m in n.pattern.finditer(text):
                    leak = Leak(where, n, text[max(0, m.start() - 30) : m.end() + 30])
                    if not (n.short and views.shows_others(n, place, text, m)):
                        return LeakScan(leak, tuple(coincidences))
                    coincidences.append(leak)
    return LeakScan(None, tuple(coincidences))


class _Views:
    """The checked episodes (this one first) as seen by the coincidence test for short values."""

    def __init__(self, needles: Sequence[Needle], transcript: Transcript, others: Sequence[tuple[Any, Transcript]]):
        self._needles, self._transcript, self._others = needles, transcript, others
        self._episodes: list[tuple[dict[str, set[str]], Transcript]] | None = None  # built on first use
        self._verdicts: dict[tuple[str, str, str], bool] = {}

    def shows_others(self, needle: Needle, place: str, text: str, match: re.Match[str]) -> bool:
        """Whether ``match``'s place shows, in some episode, a value other than that episode's own."""
        slot = _slot(text, match.start(), match.end())
        key = (needle.path, place, slot.pattern)
        if key not in self._verdicts:
            self._verdicts[key] = any(
                found.group(1) not in values.get(needle.path, ())
                for values, transcript in self._all()
                for candidate in _texts_at(transcript, place)
                for found in slot.finditer(candidate)
            )
        return self._verdicts[key]

    def _all(self) -> list[tuple[dict[str, set[str]], Transcript]]:
        if self._episodes is None:
            self._episodes = [(_values(self._needles), self._transcript)]
            self._episodes += [(_values(privileged_needles(p, min_chars=1)), t) for p, t in self._others]
        return self._episodes


def _texts_at(transcript: Transcript, place: str) -> list[str]:
    """Every text of an episode at ``place``: all its observations (terminal ones too), or one info key path."""
    if place == _OBSERVATION:
        return [str(obs) for obs, _, _ in transcript]
    return [text for _, info, _ in transcript for p, text in _info_places(info) if p == place]


def _values(needles: Sequence[Needle]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for n in needles:
        out.setdefault(n.path, set()).add(n.text)
    return out


def _slot(text: str, start: int, end: int) -> re.Pattern[str]:
    """A pattern for the place of ``text[start:end]``: the word on each side (digits masked), captured between."""
    before, after = text[max(0, start - 80) : start], text[end : end + 80]
    left_match, right_match = _WORD_BEFORE.search(before), _WORD_AFTER.match(after)
    left = left_match.group() if left_match else ""
    right = right_match.group() if right_match else ""
    head = r"\A" if len(left) == start else ""
    tail = r"\Z" if len(right) == len(text) - end else ""
    return re.compile(head + _loose(left) + r"(\S+?)" + _loose(right) + tail)


def _loose(context: str) -> str:
    return "".join(
        r"\s+" if part.isspace() else r"\d+" if part.isdigit() else re.escape(part)
        for part in re.split(r"(\s+|\d+)", context)
        if part
    )


def exempt_count(needles: Sequence[Needle], prompt: str) -> int:
    """How many needles occur in the public prompt (and are therefore not searched).

    Example:
        >>> exempt_count(privileged_needles({"expr": "17*31", "answer": 527}, min_chars=3), "Compute 17*31.")
        1
    """
    return sum(1 for n in needles if n.search(prompt))
