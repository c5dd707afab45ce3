"""The text-block score: hand-computed values of its parts and of the area-weighted total."""

from __future__ import annotations

import pytest

from turnkit.browser import DomItem
from turnkit.envs.collab_design.textmatch import block_quality, match_blocks, text_similarity, wording_similarity

VP = (640, 480)


def item(text: str, x: float = 0, y: float = 0, w: float = 10, h: float = 10, colour=(0, 0, 0), size: float = 16):
    return DomItem("text", "p", text, (x, y, w, h), colour, None, size, 400)


def test_wording_similarity_is_the_case_folded_sequence_matcher_ratio() -> None:
    assert wording_similarity("abcd", "abce") == pytest.approx(2 * 3 / 8)  # 3 matching chars of 8
    assert wording_similarity("Hello  World", "hello world") == 1.0
    assert wording_similarity("abc", "xyz") == 0.0


def test_block_quality_by_hand() -> None:
    r = item("Hello", x=0, y=0, size=32)
    # moved 64 px right (p = 1 - 64/640 = 0.9), half the font size (s = 0.5), same colour (c = 1), same words
    a = item("Hello", x=64, y=0, size=16)
    assert block_quality(r, a, VP) == pytest.approx(0.6 + 0.2 * 0.9 + 0.1 * 1.0 + 0.1 * 0.5)
    # one letter of four differs: t = 0.75 ** 2; everything else equal
    assert block_quality(item("abcd"), item("abce"), VP) == pytest.approx(0.5625)
    # white text for black: ΔE76 = 100 >= 50, so c = 0
    assert block_quality(item("x"), item("x", colour=(255, 255, 255)), VP) == pytest.approx(0.9)
    assert block_quality(item("abc"), item("xyz"), VP) == 0.0


def test_text_similarity_by_hand() -> None:
    ref = [item("abcd", w=10, h=10)]
    assert text_similarity(ref, ref, VP) == 1.0
    assert text_similarity(ref, [item("abce", w=10, h=10)], VP) == pytest.approx(0.5625)
    # an extra agent block of area 200 joins the denominator: 0.5625 * 200 / (100 + 100 + 200)
    extra = item("zzz zzz", x=300, y=300, w=20, h=10)
    assert text_similarity(ref, [item("abce", w=10, h=10), extra], VP) == pytest.approx(0.28125)
    # nothing written: 0; nothing to write and nothing written: 1
    assert text_similarity(ref, [], VP) == 0.0 and text_similarity([], [], VP) == 1.0


def test_matching_prefers_the_right_words_over_the_right_place_and_is_symmetric() -> None:
    a, b = item("alpha beta", y=0), item("gamma delta", y=100)
    swapped = [item("gamma delta", y=0), item("alpha beta", y=100)]
    assert [(i, j) for i, j, _ in match_blocks([a, b], swapped, VP)] == [(0, 1), (1, 0)]
    s = text_similarity([a, b], swapped, VP)
    assert s == pytest.approx(0.6 + 0.2 * (1 - 100 / 480) + 0.2)
    assert text_similarity(swapped, [a, b], VP) == pytest.approx(s)
