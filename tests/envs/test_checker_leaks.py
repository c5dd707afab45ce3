"""The privileged-leak heuristic: which values are needles and where they are found."""

from __future__ import annotations

import numpy as np
import pytest

from turnkit.envs.checker_leaks import exempt_count, find_leak, info_leaves, privileged_needles


def texts(privileged, **kwargs) -> list[str]:
    return [n.text for n in privileged_needles(privileged, **kwargs)]


def test_short_values_booleans_and_none_are_not_needles() -> None:
    assert texts({"a": "abc", "b": 42, "c": True, "d": None, "e": 3.5}) == []


def test_min_chars_is_configurable() -> None:
    assert texts({"b": 42, "c": True}, min_chars=2) == ["42"]


def test_integral_floats_are_searched_in_both_renderings() -> None:
    assert sorted(texts({"x": 1234.0})) == ["1234", "1234.0"]


def test_nested_values_keep_their_path() -> None:
    needles = privileged_needles({"tests": ["assert f(3) == 9", {"hidden": np.int64(98765)}]})
    assert [(n.path, n.text) for n in needles] == [
        ("['tests'][0]", "assert f(3) == 9"),
        ("['tests'][1]['hidden']", "98765"),
    ]


def test_ignore_drops_renderings() -> None:
    assert texts({"a": "secret", "b": "public"}, ignore={"public"}) == ["secret"]


def test_default_object_reprs_are_not_needles() -> None:
    assert texts({"f": object()}) == []


@pytest.mark.parametrize(
    ("value", "text", "found"),
    [
        (1234, "the answer is 1234.", True),
        (1234, "12345 apples", False),
        (1234, "0.1234", False),
        (1234, "1234.5", False),
        ("1234", "x=1234", True),
        ("1234", "1234.0 and 51234", False),
        ("cats", "two cats.", True),
        ("cats", "scatsy", False),
        ("x + 1 = 5", "so x + 1 = 5!", True),
        (0.4375, "p=0.4375", True),
    ],
)
def test_matching_respects_boundaries(value, text: str, found: bool) -> None:
    (needle,) = privileged_needles({"v": value})
    assert (needle.search(text) is not None) == found


def test_info_leaves_are_keys_and_values() -> None:
    assert info_leaves({"k": [1, 2.5, {"inner": "v"}], "flag": False}) == ["k", "1", "2.5", "inner", "v", "flag"]


NEEDLES = privileged_needles({"answer": 4821})


def test_leak_in_an_observation_before_termination() -> None:
    leak = find_leak(NEEDLES, [("Guess.", {}, False), ("Lower than 4821.", {}, False)], ["5000"])
    assert leak is not None and leak.where == "the observation after step 1"


def test_terminal_observation_may_reveal_the_answer() -> None:
    assert find_leak(NEEDLES, [("Guess.", {}, False), ("Out of tries: it was 4821.", {}, True)], ["5000"]) is None


def test_terminal_info_is_still_searched() -> None:
    leak = find_leak(NEEDLES, [("Guess.", {}, False), ("Out of tries.", {"target": 4821}, True)], ["5000"])
    assert leak is not None and leak.where == "info at step 1"


def test_echo_of_the_agents_own_action_is_not_a_leak() -> None:
    transcript = [("Guess.", {}, False), ("You said 4821: correct.", {"parsed": 4821}, False)]
    assert find_leak(NEEDLES, transcript, ["ANSWER: 4821"]) is None


def test_reset_observation_is_searched() -> None:
    leak = find_leak(NEEDLES, [("Guess (psst: 4821).", {}, False)], prompt="Guess.")
    assert leak is not None and leak.where == "the reset observation"


def test_values_in_the_public_prompt_are_exempt() -> None:
    needles = privileged_needles({"expression": "17*31", "answer": 527}, min_chars=3)
    assert exempt_count(needles, "Compute 17*31.") == 1
    assert find_leak(needles, [("Compute 17*31.", {}, False)], prompt="Compute 17*31.") is None


def test_leak_message_names_path_value_and_context() -> None:
    leak = find_leak(NEEDLES, [("Lower than 4821.", {}, False)])
    assert str(leak) == "the reset observation contains privileged value ['answer'] = '4821': ...'Lower than 4821.'..."
