"""Reading and writing position lines."""

import numpy as np

from turnkit.envs.physics.protocol import (
    COORDINATE_LIMIT,
    format_frames,
    missing_positions,
    parse_positions,
    parse_request,
    request_text,
)


def test_round_trip_through_format_and_parse():
    frames = np.array([[[1.234, 5.0], [7.5, -0.25]], [[1.5, 4.9], [7.0, -0.5]]])
    parsed = parse_positions("\n".join(format_frames(frames, 10, ("A", "B"))), ("A", "B"))
    assert parsed == {(10, "A"): (1.23, 5.0), (10, "B"): (7.5, -0.25), (11, "A"): (1.5, 4.9), (11, "B"): (7.0, -0.5)}


def test_last_duplicate_wins():
    assert parse_positions("frame 3 A: x=1 y=1\nframe 3 A: x=2 y=2", ("A",)) == {(3, "A"): (2.0, 2.0)}


def test_lenient_spacing_case_and_separators():
    text = "FRAME 4 b x = 1.5 ; Y=-2e-1\n  - frame 5 B: x=.5, y=+3."
    assert parse_positions(text, ("A", "B")) == {(4, "B"): (1.5, -0.2), (5, "B"): (0.5, 3.0)}


def test_unnamed_lines_need_a_single_body():
    assert parse_positions("frame 3: x=1 y=2", ("A", "B")) == {}
    assert parse_positions("frame 3: x=1 y=2", ("A",)) == {(3, "A"): (1.0, 2.0)}


def test_placeholders_and_non_numbers_are_not_positions():
    assert parse_positions("frame 3 A: x=<x> y=<y>\nframe 4 A: x=nan y=inf", ("A",)) == {}


def test_huge_values_are_clipped():
    assert parse_positions("frame 3 A: x=-1e400 y=1e5", ("A",)) == {(3, "A"): (-COORDINATE_LIMIT, COORDINATE_LIMIT)}


def test_missing_lists_requested_pairs_in_order():
    assert missing_positions({(4, "B"): (0.0, 0.0)}, [4], ("A", "B")) == ["frame 4 A"]


def test_request_round_trip():
    assert parse_request(request_text(24, 31, ("A",))) == (24, 31)
