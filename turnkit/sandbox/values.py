"""The host side of the canonical value encoding: read result lines and compare values, never raising on them.

The process that writes a batch's results runs the graded code, which can rewrite everything in it: the harness's
globals, its ``json`` module, the result pipe itself. So whatever arrives is read within bounds set here, not by
what the sender promised: a line nested deeper than :data:`MAX_LINE_DEPTH` is refused before it is parsed (no
``RecursionError``), JSON integers are read as floats (no int-string conversion limit, no quadratic parse; the
harness writes none), and a value :func:`~turnkit.sandbox.batch.encode_value` would never write (a forged tag, an
int in neither of its two spellings, a payload of the wrong type) is a :class:`MalformedValue`, which
:func:`~turnkit.sandbox.run_batch` reports as that call's ``"malformed"`` result.

:func:`values_equal` compares two encoded values as Python's ``==`` compares the values they stand for, with the
exceptions a grader wants (see its docstring).

Example:
    >>> from turnkit.sandbox.batch import encode_value
    >>> values_equal(encode_value(10**5000), encode_value(10**5000)), values_equal(["int", "x"], ["int", "x"])
    (True, False)
    >>> value_problem(["int", "x"])
    "an int must be decimal or '0x' hexadecimal text, got 'x'"
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from turnkit.sandbox._harness import DECIMAL_INT_BITS, MAX_DEPTH

__all__ = ["MAX_LINE_DEPTH", "MalformedValue", "decode_value", "read_line", "value_problem", "values_equal"]

MAX_LINE_DEPTH = 200
"""Deepest JSON nesting of one result line (the harness's deepest, a dict at every level, is 3 per level + 3)."""

_DECIMAL_CHARS = 1 + len(str(2**DECIMAL_INT_BITS))
_CONTAINERS = ("list", "tuple", "set", "dict")  # a tuple: `in` never hashes a forged tag
_TRUE, _FALSE = ("bool", True), ("bool", False)
_HEX = re.compile(r"-?0x[0-9a-f]+")
_FLOAT_CHARS = 32  # float.__repr__ writes at most 24
_STRING = re.compile(r'"(?:[^"\\]|\\.)*+"?', re.DOTALL)  # from any quote it matches: linear on any text
_PLAIN_STRING = re.compile(r'"[^"]*+"?')  # the same where no string holds an escape (faster)
_NOT_BRACKETS = re.compile(r"[^][{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class MalformedValue(ValueError):
    """An encoded value that :func:`~turnkit.sandbox.batch.encode_value` never writes (forged or garbled)."""


class _Opaque:
    """A value known only by its type (``other``) or too big to carry (``too_big``): equal to nothing else."""

    __slots__ = ()


def read_line(text: str) -> Any:
    """Parse one JSON result line, refusing nesting deeper than :data:`MAX_LINE_DEPTH` before parsing it.

    Raises:
        ValueError: The text is not JSON, or nests too deep (never ``RecursionError``).

    Example:
        >>> read_line('{"ok": ["int", "3"]}')
        {'ok': ['int', '3']}
        >>> read_line("[" * 50_000 + "]" * 50_000)
        Traceback (most recent call last):
        ...
        ValueError: the line nests deeper than 200
    """
    if text.count("[") + text.count("{") > MAX_LINE_DEPTH and _nesting(text) > MAX_LINE_DEPTH:
        raise ValueError(f"the line nests deeper than {MAX_LINE_DEPTH}")
    try:
        return json.loads(text, parse_int=float)
    except RecursionError as exc:  # a caller already deep in its own stack
        raise ValueError("the line nests too deep to parse here") from exc


def _nesting(text: str) -> int:
    """The deepest bracket nesting of JSON text, brackets inside strings not counted (linear time, mostly in C)."""
    bare = (_PLAIN_STRING if "\\" not in text else _STRING).sub("", text)
    return max(itertools.accumulate(map(_STEP.__getitem__, _NOT_BRACKETS.sub("", bare))), default=0)


def decode_value(encoded: Any) -> Any:
    """The Python value an encoding stands for, in the form :func:`values_equal` compares.

    Numbers, strings and ``None`` decode to themselves (an int of any size, in linear time); ``bool`` and the
    containers to tagged tuples, so that ``True`` is not ``1`` and a list is not a tuple; sets to frozensets and
    dicts to frozensets of their items, so that their members match as Python's set and dict lookups match them;
    ``other`` and ``too_big`` to a fresh object equal to nothing else.

    Raises:
        MalformedValue: The encoding is not one that ``encode_value`` writes; the message says what is wrong.

    Example:
        >>> decode_value(["list", [["int", "1"], ["bool", True], ["float", "-0.0"]]])
        ('list', (1, ('bool', True), -0.0))
        >>> decode_value(["bool", 1])
        Traceback (most recent call last):
        ...
        turnkit.sandbox.values.MalformedValue: a bool must be true or false, got 1
    """
    return _decode(encoded, 0)


def _decode(encoded: Any, depth: int) -> Any:
    if isinstance(encoded, list) and len(encoded) == 2:
        tag, payload = encoded
        if isinstance(payload, str):
            if tag == "str":
                return payload
            if tag == "int":
                return _int(payload)
            if tag == "float":
                return _float(payload)
            if tag == "other":
                return _Opaque()
        elif isinstance(payload, list) and tag in _CONTAINERS and depth <= MAX_DEPTH:
            return _container(tag, payload, depth + 1)
        elif tag == "bool" and (payload is True or payload is False):
            return _TRUE if payload else _FALSE
    elif isinstance(encoded, list) and len(encoded) == 1:
        if encoded[0] == "none":
            return None
        if encoded[0] == "too_big":
            return _Opaque()
    raise MalformedValue(_problem(encoded))


def _problem(encoded: Any) -> str:
    """Why :func:`_decode` refused ``encoded`` (the slow path: only for a malformed value)."""
    if not isinstance(encoded, list) or not encoded or not isinstance(encoded[0], str):
        return f"not a tagged value: {_show(encoded)}"
    tag, payload = encoded[0], encoded[1:]
    if tag in ("none", "too_big"):
        return f"{tag!r} takes no payload"
    if len(payload) != 1:
        return f"{_show(tag)} is not a tag with one payload"
    if tag == "bool":
        return f"a bool must be true or false, got {_show(payload[0])}"
    if tag in _CONTAINERS and isinstance(payload[0], list):
        return f"a {tag} nested deeper than {MAX_DEPTH}"
    return f"{_show(tag)} with a payload of type {type(payload[0]).__name__}"


def _container(tag: str, payload: list, depth: int) -> Any:
    if tag == "list" or tag == "tuple":
        return (tag, tuple([_decode(item, depth) for item in payload]))
    if tag == "set":
        items = [_key(_decode(item, depth)) for item in payload]
        members = frozenset(items)
        if len(members) != len(items):
            raise MalformedValue("a set holds the same member twice")
        return ("set", members)
    pairs = {}
    for pair in payload:
        if not isinstance(pair, list) or len(pair) != 2:
            raise MalformedValue(f"a dict item must be a [key, value] pair, got {_show(pair)}")
        pairs[_key(_decode(pair[0], depth))] = _decode(pair[1], depth)
    if len(pairs) != len(payload):
        raise MalformedValue("a dict holds the same key twice")
    return ("dict", frozenset(pairs.items()))


def _key(value: Any) -> Any:
    """A set member or dict key, refused where Python could not hash the value (a list or dict, even in a tuple)."""
    if not _hashable(value):
        raise MalformedValue("a list or dict as a set member or dict key")
    return value


def _hashable(value: Any) -> bool:
    if not isinstance(value, tuple) or value[0] in ("bool", "set"):  # a "set" may be a frozenset
        return True
    return value[0] == "tuple" and all(_hashable(item) for item in value[1])


def _int(text: str) -> int:
    if len(text) <= _DECIMAL_CHARS:  # a sign and at most 617 digits: under every limit Python allows
        try:
            return int(text)
        except ValueError:
            pass
    if _HEX.fullmatch(text):
        return int(text, 16)  # hexadecimal: no limit, linear time
    raise MalformedValue(f"an int must be decimal or '0x' hexadecimal text, got {_show(text)}")


def _float(text: str) -> float:
    if len(text) <= _FLOAT_CHARS:
        try:
            return float(text)
        except ValueError:
            pass
    raise MalformedValue(f"a float must be its repr, got {_show(text)}")


def _show(obj: Any) -> str:
    text = repr(obj) if isinstance(obj, str | int | float | bool | None) else f"a {type(obj).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."


def value_problem(encoded: Any) -> str:
    """What makes an encoded value malformed, or ``""`` for one that ``encode_value`` could have written.

    Example:
        >>> value_problem(["tuple", [["none"], ["other", "Foo"]]]), value_problem(["frob", 1])
        ('', "'frob' with a payload of type int")
    """
    try:
        _decode(encoded, 0)
    except MalformedValue as exc:
        return str(exc)
    return ""


def values_equal(a: Any, b: Any) -> bool:
    """Whether two encoded values stand for equal Python values; never raises.

    The rule is Python's ``==`` on the values the two functions returned, except:

    * ``bool`` never equals ``int`` or ``float`` (``True != 1``), and a list never equals a tuple;
    * values compare by content: a subclass of ``int``, ``float`` or ``str`` compares as the built-in value it
      holds (its own ``__eq__`` never runs), and any other type (``other``) equals nothing, itself included;
    * a value over the encoding's bounds (``too_big``: nested deeper than 40 or over 10,000 values) equals
      nothing, where Python's ``==`` would compare it or give up at its recursion limit;
    * a malformed encoding (:func:`value_problem`) equals nothing.

    Numbers follow Python exactly: ``1 == 1.0``, ``-0.0 == 0``, ``inf == inf``, ``nan`` equals nothing (two
    functions never return the same ``nan`` object), ints of any size compare exactly, also with floats; sets and
    dict keys match as Python's lookups match them (``{1} == {1.0}``).

    Example:
        >>> from turnkit.sandbox.batch import encode_value
        >>> values_equal(encode_value(3), encode_value(3.0)), values_equal(encode_value(1), encode_value(True))
        (True, False)
        >>> values_equal(encode_value([1, 2]), encode_value((1, 2))), values_equal(encode_value(float("nan")),
        ...     encode_value(float("nan")))
        (False, False)
        >>> values_equal(encode_value({1: -0.0}), encode_value({1.0: 0})), values_equal(["int", "1"], ["int", 1])
        (True, False)
    """
    try:
        return bool(_decode(a, 0) == _decode(b, 0))
    except MalformedValue:
        return False
