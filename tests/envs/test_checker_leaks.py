"""The privileged-leak heuristic: which values are needles and where they are found."""

from __future__ import annotations

import numpy as np
import pytest

from turnkit.envs.checker_leaks import exempt_count, find_leak, info_leaves, privileged_needles, scan_leaks


def texts(privileged, **kwargs) -> list[str]:
    return [n.text for n in privileged_needles(privileged, **kwargs)]


def test_booleans_none_and_short_punctuation_are_not_needles() -> None:
    assert texts({"c": True, "d": None, "e": "+", "f": "", "g": np.bool_(False)}) == []


def test_short_values_are_needles_marked_short() -> None:
    needles = privileged_needles({"a": "abc", "b": 42, "e": 3.5, "long": 1234})
    assert [(n.text, n.short) for n in needles] == [("abc", True), ("42", True), ("3.5", True), ("1234", False)]


def test_min_chars_sets_what_is_short() -> None:
    assert [n.short for n in privileged_needles({"b": 42}, min_chars=2)] == [False]
    assert [n.short for n in privileged_needles({"b": 42}, min_chars=3)] == [True]


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
        (7, "ANSWER: 7", True),
        (7, "17 apples", False),
        (7, "7.5", False),
        (7, "0.7", False),
        (7, "70", False),
        (7, "7th", False),
        (7, "x = -7", False),
        (7, "-7", False),
        (7, "10-7", True),
        (7, "10 - 7", True),
        (7, "(3)-7", True),
        (7, "a 7.", True),
        (-4, "x = -4", True),
        (-4, "5-4", False),
        (-4, "-45", False),
        ("7", "is 17", False),
        ("3/4", "it is 3/4.", True),
        ("3/4", "13/4", False),
        ("3/4", "3/4.5", False),
        ("B", "option B", True),
        ("B", "BB or bB", False),
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


SEVEN = privileged_needles({"answer": 7})


def test_a_short_answer_in_an_observation_is_a_leak() -> None:
    leak = find_leak(SEVEN, [("Add 3 and 4.", {"turn": 0}, False), ("No. It is 7.", {"turn": 1}, False)])
    assert leak is not None and leak.where == "the observation after step 1"
    assert "a short value, matched as a whole token" in str(leak) and "leak_ignore={'7'}" in str(leak)


def test_a_seventeen_is_no_seven() -> None:
    transcript = [("Add 9 and 8.", {}, False), ("No. It is 17, -7 or 7.5.", {"total": 17, "p": 0.7}, False)]
    assert find_leak(SEVEN, transcript) is None


def test_a_short_value_in_the_prompt_is_exempt() -> None:
    assert exempt_count(SEVEN, "What is 7 times 1?") == 1
    assert (
        find_leak(SEVEN, [("What is 7 times 1?", {}, False), ("No, not 7.", {}, False)], prompt="What is 7 times 1?")
        is None
    )


def test_a_counter_passing_the_answer_is_a_coincidence() -> None:
    transcript = [("Go.", {"turn": t, "budget": {"used": [t, 2 * t]}}, False) for t in range(9)]
    scan = scan_leaks(SEVEN, transcript)
    assert scan.leak is None
    assert [c.where for c in scan.coincidences] == ["info at step 7"] * 2  # turn and budget.used[0]


def test_a_place_that_always_shows_the_answer_is_a_leak() -> None:
    transcript = [("Go.", {"debug": {"target": 7}}, False)]
    others = [({"answer": 5}, [("Go.", {"debug": {"target": 5}}, False)])]
    leak = find_leak(SEVEN, transcript, others=others)
    assert leak is not None and leak.where == "info at reset"


def test_another_episode_shows_a_message_is_no_answer() -> None:
    mine = [("Go.", {}, False), ("Wrong. 7 tries left.", {}, False)]
    assert find_leak(SEVEN, mine) is not None  # one episode alone: nothing says "7 tries" is not the answer
    others = [({"answer": 5}, [("Go.", {}, False), ("Wrong. 7 tries left.", {}, False)])]
    scan = scan_leaks(SEVEN, mine, others=others)
    assert scan.leak is None and len(scan.coincidences) == 1
    same_answer = [({"answer": 7}, [("Go.", {}, False), ("Wrong. 7 tries left.", {}, False)])]
    assert find_leak(SEVEN, mine, others=same_answer) is not None  # an episode with the same answer proves nothing


def test_long_values_need_no_evidence() -> None:
    others = [({"answer": 5}, [("Lower than 4821.", {}, False)])]
    assert find_leak(NEEDLES, [("Lower than 4821.", {}, False)], others=others) is not None


def test_info_leaves_keep_their_order_and_places() -> None:
    info = {"turn": 1, "log": [{"n": 2}, {"n": 3}]}
    assert info_leaves(info) == ["turn", "1", "log", "n", "2", "n", "3"]
