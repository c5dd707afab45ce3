"""TextSpace: any str up to a length; printable, seeded samples."""

from __future__ import annotations

import pickle
import string

import numpy as np
import pytest

from turnkit.envs.spaces import TextSpace


@pytest.mark.parametrize("text", ["", "x", "héllo wörld ✓", "\u202e\u200b", "a\x00b", "\ud800"])
def test_contains_any_str_within_the_length(text: str) -> None:
    assert TextSpace(max_length=16).contains(text)


@pytest.mark.parametrize("value", [b"bytes", None, 3, 1.5, ["a"], np.array(["a"])])
def test_contains_rejects_non_str(value) -> None:
    assert not TextSpace().contains(value)


def test_contains_respects_max_length() -> None:
    space = TextSpace(max_length=3)
    assert space.contains("abc") and not space.contains("abcd")


def test_samples_are_printable_and_within_bounds() -> None:
    space = TextSpace(max_length=200, min_length=5, seed=0)
    samples = [space.sample() for _ in range(50)]
    allowed = set(string.ascii_letters + string.digits + string.punctuation + " \n")
    assert all(set(s) <= allowed for s in samples)
    assert all(5 <= len(s) <= 64 for s in samples)
    assert all(space.contains(s) for s in samples)


def test_sample_length_never_exceeds_a_small_max_length() -> None:
    space = TextSpace(max_length=2, seed=1)
    assert {len(space.sample()) for _ in range(40)} <= {1, 2}


def test_same_seed_same_samples() -> None:
    a, b = TextSpace(seed=7), TextSpace(seed=7)
    assert [a.sample() for _ in range(5)] == [b.sample() for _ in range(5)]


def test_different_seeds_differ() -> None:
    assert [TextSpace(seed=1).sample() for _ in range(3)] != [TextSpace(seed=2).sample() for _ in range(3)]


def test_zero_min_length_allows_empty_samples() -> None:
    space = TextSpace(max_length=1, min_length=0, seed=3)
    assert "" in {space.sample() for _ in range(60)}


@pytest.mark.parametrize(("lo", "hi"), [(-1, 5), (6, 5)])
def test_bad_bounds_raise(lo: int, hi: int) -> None:
    with pytest.raises(ValueError, match="0 <= min_length <= max_length"):
        TextSpace(max_length=hi, min_length=lo)


def test_equality_depends_on_max_length() -> None:
    assert TextSpace(10) == TextSpace(10)
    assert TextSpace(10) != TextSpace(11)
    assert TextSpace(10) != "TextSpace(max_length=10)"


def test_repr_and_flattening() -> None:
    assert repr(TextSpace(5)) == "TextSpace(max_length=5)"
    assert TextSpace().is_np_flattenable is False


def test_pickle_round_trip() -> None:
    space = TextSpace(12)
    assert pickle.loads(pickle.dumps(space)) == space
