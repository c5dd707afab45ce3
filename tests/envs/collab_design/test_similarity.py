from __future__ import annotations

import numpy as np
import pytest

from turnkit.envs.collab_design.similarity import (
    colour_similarity,
    lightness,
    srgb_to_lab,
    ssim,
    structure_similarity,
    visual_similarity,
)

H, W = 240, 320


def page(bg=(245, 245, 245)) -> np.ndarray:
    img = np.zeros((H, W, 3), np.uint8)
    img[:] = bg
    return img


def design() -> np.ndarray:
    """A hand-made "page": a dark bar, a coloured banner, two cards and some text-like stripes."""
    img = page()
    img[0:24] = (20, 40, 90)
    img[24:110, :] = (230, 100, 30)
    img[130:200, 20:150] = (255, 255, 255)
    img[130:200, 170:300] = (255, 255, 255)
    for y in range(50, 80, 6):
        img[y : y + 3, 40:200] = (255, 255, 255)
    return img


def test_identical_images_score_exactly_one() -> None:
    img = design()
    assert visual_similarity(img, img.copy()) == 1.0
    assert structure_similarity(img, img) == 1.0 and colour_similarity(img, img) == 1.0


def test_score_is_symmetric() -> None:
    a, b = design(), page()
    assert visual_similarity(a, b) == visual_similarity(b, a)


def test_small_shift_scores_higher_than_a_large_change() -> None:
    a = design()
    shifted = np.roll(a, 3, axis=(0, 1))
    recoloured = a.copy()
    recoloured[24:110] = (40, 160, 60)  # the banner in another colour
    blank = page()
    s_shift, s_recol, s_blank = (visual_similarity(a, x) for x in (shifted, recoloured, blank))
    assert s_shift > s_recol > s_blank
    assert s_shift > 0.85


def test_more_shift_scores_lower() -> None:
    a = design()
    scores = [visual_similarity(a, np.roll(a, k, axis=1)) for k in (2, 8, 32)]
    assert scores[0] > scores[1] > scores[2]


def test_colour_term_sees_a_hue_change_that_lightness_ssim_misses() -> None:
    red = page((200, 60, 60))
    green = np.zeros_like(red)
    green[:] = (83, 123, 62)  # about the same CIELAB lightness as red
    assert abs(float(lightness(red).mean() - lightness(green).mean())) < 0.01
    assert structure_similarity(red, green) > 0.99
    assert colour_similarity(red, green) < 0.1
    assert visual_similarity(red, green) < 0.6


def test_colour_similarity_hand_computed() -> None:
    """Half the blocks identical (score 1), half at ΔE >= 50 (score 0): mean 0.5."""
    a = page((255, 255, 255))
    b = a.copy()
    b[:, : W // 2] = (0, 0, 0)  # ΔE 100 on the left half (block edges align: 160 is a multiple of 8)
    assert colour_similarity(a, b) == pytest.approx(0.5)


def test_colour_similarity_is_linear_below_the_cap() -> None:
    a, b = page((128, 128, 128)), page((138, 138, 138))
    de = float(
        np.linalg.norm(srgb_to_lab(np.array([[[128] * 3]], np.uint8)) - srgb_to_lab(np.array([[[138] * 3]], np.uint8)))
    )
    assert colour_similarity(a, b) == pytest.approx(1 - de / 50)


def test_lab_reference_values() -> None:
    lab = srgb_to_lab(np.array([[[255, 255, 255], [0, 0, 0], [255, 0, 0]]], np.uint8))[0]
    assert lab[0] == pytest.approx([100, 0, 0], abs=0.01)
    assert lab[1] == pytest.approx([0, 0, 0], abs=0.01)
    assert lab[2] == pytest.approx([53.24, 80.09, 67.20], abs=0.05)  # sRGB red, D65


def test_ssim_of_inverted_gradient_is_low_and_bounded() -> None:
    x = np.linspace(0, 1, 400).reshape(20, 20)
    assert 0.0 <= ssim(x, 1 - x) < 0.3


def test_scores_stay_in_the_unit_interval() -> None:
    rng = np.random.default_rng(0)
    for _ in range(5):
        a, b = (rng.integers(0, 256, (H, W, 3)).astype(np.uint8) for _ in range(2))
        assert 0.0 <= visual_similarity(a, b) <= 1.0


def test_shape_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="same shape"):
        visual_similarity(page(), np.zeros((10, 10, 3), np.uint8))
