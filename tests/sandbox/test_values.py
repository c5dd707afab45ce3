"""The host side of the value encoding (issue #50): whatever the result stream holds, reading it never raises.

No sandbox here: the streams are what a graded answer can write into its result channel (it can rewrite its
harness), fed to the host's parser directly. tests/envs/collab_code/test_grading_hostile.py sends the same
through real sandboxes.

Run: python -m pytest tests/sandbox/test_values.py -q
"""

from __future__ import annotations

import json
import pickle
import sys

import pytest

from turnkit.sandbox.batch import BATCH_MARK, encode_value, parse_batch
from turnkit.sandbox.values import MAX_LINE_DEPTH, decode_value, read_line, value_problem, values_equal
from turnkit.types import ExecResult

NAN = float("nan")
BIG = 10**5000  # over sys.get_int_max_str_digits(): Python's own str() refuses it

# Values an honest function may return; every pair is compared as Python's == compares them.
POOL = [
    0, -0.0, 0.0, 1, 1.0, -1, 2**53, 2.0**53, 2**53 + 1, 2**1000, 2.0**1000, 2**1000 + 1, BIG, BIG + 1, -BIG,
    2**4096, float(2**1023), float("inf"), float("-inf"), NAN, 0.1 + 0.2, 0.3, "", "a", "é\ud800", None,
    (), [], (1,), [1], [1.0], (1, [2, (3,)]), {1}, {1.0}, frozenset({1}), {frozenset({2})}, {1: 2}, {1.0: 2.0},
    {1: [NAN]}, {"a": {"b": BIG}}, [NAN], {NAN}, {(1, "x"): None}, {BIG: 1}, {True: 1}, {"k": (True,)},
]  # fmt: skip


def stream(*lines: object) -> ExecResult:
    """An execution whose stdout carries these result lines (a str is written as it is, anything else as JSON)."""
    text = "".join(BATCH_MARK + (x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    return ExecResult(0, text, "", False, False, 0.01)


def _has_bool(value: object) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, dict):
        return any(_has_bool(k) or _has_bool(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return any(_has_bool(v) for v in value)
    return False


@pytest.mark.parametrize("a", POOL, ids=lambda v: type(v).__name__)  # repr(BIG) raises
def test_values_compare_as_python_compares_them(a):
    # b crosses a process boundary (a new object, as a second function's value is): nan is never the same nan
    for b in POOL:
        if _has_bool(a) or _has_bool(b):
            continue  # the one deliberate difference, tested below
        expected = a == pickle.loads(pickle.dumps(b))
        assert values_equal(encode_value(a), encode_value(b)) is expected, (a, b)


def test_bool_never_equals_a_number_and_lookalikes_compare_by_content():
    class Liar(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    class Shifty(int):
        def __repr__(self):
            return "999"

    assert not values_equal(encode_value(True), encode_value(1))
    assert not values_equal(encode_value({True: 1}), encode_value({1: 1}))
    assert values_equal(encode_value({"k": (True,)}), encode_value({"k": (True,)}))
    assert not values_equal(encode_value(Liar("nope")), encode_value("yes"))
    assert values_equal(encode_value(Liar("yes")), encode_value("yes"))
    assert values_equal(encode_value(Shifty(1)), encode_value(1))


def test_huge_ints_travel_whatever_the_int_string_limit():
    before = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(640)  # the lowest Python allows, in the sandbox or on the host
        assert encode_value(BIG)[1].startswith("0x") and encode_value(2**2048 - 1)[1] == str(2**2048 - 1)
        assert values_equal(encode_value(BIG), ["int", hex(BIG)]) and decode_value(encode_value(-BIG)) == -BIG
    finally:
        sys.set_int_max_str_digits(before)


FORGED = {
    "int tag on text": ["int", "x"],
    "int as a JSON number": ["int", 5.0],
    "decimal past 2048 bits": ["int", "9" * 700],
    "bool from a number": ["bool", 1.0],
    "float text": ["float", "one"],
    "unknown tag": ["frob", "x"],
    "no tag": [],
    "bare value": 3.0,
    "list of strings": ["list", "abc"],
    "none with payload": ["none", "x"],
    "duplicate set member": ["set", [["int", "1"], ["float", "1.0"]]],
    "duplicate dict key": ["dict", [[["int", "1"], ["none"]], [["int", "1"], ["none"]]]],
    "list as a dict key": ["dict", [[["list", []], ["none"]]]],
    "dict item not a pair": ["dict", [[["int", "1"]]]],
    "unhashable tag": [["list"], []],
    "deeper than the encoder goes": json.loads('["list", [' * 60 + '["none"]' + "]]" * 60),
}


@pytest.mark.parametrize("value", FORGED.values(), ids=FORGED.keys())
def test_forged_values_are_malformed_and_equal_nothing(value):
    assert value_problem(value)
    assert not values_equal(value, value) and not values_equal(value, ["int", "1"])


def test_an_unreadable_line_fails_the_batch_as_a_crash_never_an_exception():
    ok = [{"load": "ok"}]
    for line in [
        '{"ok": ' + "[" * 50_000 + "]" * 50_000 + "}",  # RecursionError in json before
        '{"ok": ' + "[" * 50_000 + "}",  # unbalanced: json would recurse before it found out
        '{"ok": ["int", ' + "9" * 5000 + "]}",  # a JSON int over the int-string limit: ValueError before
        '{"ok": ["str", "unterminated',
    ]:
        batch = parse_batch(stream(*ok, line, {"done": True}), 1, 1.0, 4.0)
        if batch.calls is None:
            assert batch.error == "crash" and "garbled" in batch.detail, batch
        else:
            assert batch.calls[0].status == "malformed", batch


def test_malformed_values_are_results_of_their_own_calls():
    lines = [{"ok": ["int", "x"]}, {"ok": ["int", hex(BIG)]}, {"raised": ["not", "a", "name"]}, {"timeout": True}]
    batch = parse_batch(stream({"load": "ok"}, *lines, {"done": True}), 4, 1.0, 6.0)
    assert [c.status for c in batch.calls] == ["malformed", "ok", "malformed", "timeout"], batch
    assert "decimal or '0x' hexadecimal" in batch.calls[0].message


def test_read_line_counts_only_real_brackets():
    deep_text = "[" * MAX_LINE_DEPTH + "]" * MAX_LINE_DEPTH
    assert read_line(json.dumps([deep_text, "\\" + deep_text])) == [deep_text, "\\" + deep_text]
    assert read_line("[" * MAX_LINE_DEPTH + "]" * MAX_LINE_DEPTH) is not None
    with pytest.raises(ValueError, match="deeper than"):
        read_line("[" * (MAX_LINE_DEPTH + 1) + "]" * (MAX_LINE_DEPTH + 1))
    with pytest.raises(ValueError, match="deeper than"):  # closing brackets hidden in a string do not hide depth
        read_line("[" * 150 + '"' + "]" * 150 + '"' + "[" * 100 + "]" * 250)
    assert read_line('["\\\\", [[1]]]') == ["\\", [[1.0]]]  # JSON ints are read as floats
