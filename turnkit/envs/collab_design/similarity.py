"""Visual similarity of two screenshots, in [0, 1]: the reward of the collaborative design env.

ColBench scores a design by the CLIP ViT-B/32 cosine similarity of the two screenshots. CLIP weights cannot
be downloaded here, and a learned metric would tie the reward to one model's quirks. We use a transparent,
numpy-only blend of two classic terms instead:

* **Structure** (weight :data:`STRUCTURE_WEIGHT`): multi-scale SSIM (Wang, Simoncelli & Bovik 2003) on the
  CIELAB lightness channel, at 4 scales: 1/4, 1/8, 1/16 and 1/32 of the screenshot's resolution (2 x 2 area
  averaging of linear luminance between scales; 160 x 120 down to 20 x 15 for a 640 x 480 page), with a 7 x 7
  uniform window;
  each scale's mean SSIM (clipped at 0) weighs equally. It sees layout, blocks and text lines. Starting at
  1/4 resolution forgives a few pixels of displacement (a page shifted by 4 px keeps 0.9 overall) while a
  different layout still scores below 0.4; finer scales mostly measured glyph edges, i.e. noise for a
  design comparison, at four times the cost.
* **Colour** (weight :data:`COLOUR_WEIGHT`): SSIM is blind to hue at equal lightness (a red and a green
  banner of the same lightness look alike to it), and designs differ first of all in their palettes. Both
  images are averaged over 8 x 8 blocks, converted to CIELAB, and each block scores
  ``1 - min(ΔE76 / 50, 1)``: 1 for the same colour, 0 for a clearly different one (ΔE 2.3 is a
  just-noticeable difference; ΔE >= 50 separates e.g. navy from orange).

Identical images score exactly 1; the score is symmetric. How it ranks real renders (reference vs a shifted
copy, another palette, another layout, a blank page) is measured in ``docs/envs/collab_design.md`` and pinned
by the tests.

Example:
    >>> import numpy as np
    >>> a = np.zeros((48, 64, 3), np.uint8); a[8:24, 8:40] = (200, 30, 30)   # a red box
    >>> shifted = np.roll(a, 2, axis=1)                                      # the same box, 2 px right
    >>> recoloured = a.copy(); recoloured[8:24, 8:40] = (30, 30, 200)        # a blue box
    >>> visual_similarity(a, a)
    1.0
    >>> visual_similarity(a, shifted) > visual_similarity(a, recoloured)
    True
"""

from __future__ import annotations

import numpy as np

STRUCTURE_WEIGHT = 0.5
"""Weight of the multi-scale SSIM term."""
COLOUR_WEIGHT = 0.5
"""Weight of the block-colour term."""
SCALES = 4
"""Number of SSIM scales (each halves the resolution)."""
FIRST_SCALE = 2
"""Halvings before the first SSIM scale (2: the finest scale is 1/4 of the screenshot's resolution)."""
WINDOW = 7
"""Side of the uniform SSIM window, in pixels."""
COLOUR_BLOCK = 8
"""Side of the blocks averaged for the colour term."""
DELTA_E_MAX = 50.0
"""CIELAB distance at which a block's colour counts as entirely different."""

_C1 = 0.01**2
_C2 = 0.03**2


def _check(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape or a.ndim != 3 or a.shape[2] != 3:
        raise ValueError(f"need two (height, width, 3) images of the same shape, got {a.shape} and {b.shape}")


def srgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """Convert ``uint8`` (or [0, 255] float) sRGB to CIELAB (D65 white).

    Example:
        >>> lab = srgb_to_lab(np.array([[[255, 255, 255], [0, 0, 0]]], np.uint8))
        >>> (np.round(lab, 1) + 0.0).tolist()  # + 0.0 turns -0.0 into 0.0
        [[[100.0, 0.0, 0.0], [0.0, 0.0, 0.0]]]
    """
    c = np.asarray(rgb, dtype=np.float64) / 255.0
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    m = np.array(
        [[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750], [0.0193339, 0.1191920, 0.9503041]]
    )
    xyz = lin @ m.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    lab = np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], axis=-1)
    return np.asarray(lab)


_LINEAR = np.where(
    np.arange(256) / 255.0 <= 0.04045, np.arange(256) / 255.0 / 12.92, ((np.arange(256) / 255.0 + 0.055) / 1.055) ** 2.4
)
_Y_LUTS = [(_LINEAR * w).astype(np.float32) for w in (0.2126729, 0.7151522, 0.0721750)]


def luminance(rgb: np.ndarray) -> np.ndarray:
    """Relative luminance ``Y`` (linear light, 0 to 1) of a ``uint8`` sRGB image, as ``float32``.

    Example:
        >>> luminance(np.array([[[255, 255, 255], [0, 0, 0]]], np.uint8)).round(3).tolist()
        [[1.0, 0.0]]
    """
    rgb = np.asarray(rgb, dtype=np.uint8)
    return np.asarray(_Y_LUTS[0][rgb[..., 0]] + _Y_LUTS[1][rgb[..., 1]] + _Y_LUTS[2][rgb[..., 2]])


def _y_to_l(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    f = np.where(y > (6 / 29) ** 3, np.cbrt(y), y / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.asarray((116 * f - 16) / 100)


def lightness(rgb: np.ndarray) -> np.ndarray:
    """CIELAB lightness ``L*`` in [0, 1] (i.e. divided by 100) of a ``uint8`` sRGB image.

    Example:
        >>> lightness(np.array([[[255, 255, 255], [0, 0, 0], [119, 119, 119]]], np.uint8)).round(2).tolist()
        [[1.0, 0.0, 0.5]]
    """
    return _y_to_l(luminance(rgb))


def _window_mean(x: np.ndarray, k: int) -> np.ndarray:
    """Means over every k x k window (valid positions only), via a summed-area table."""
    c = np.pad(x, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    return np.asarray((c[k:, k:] - c[:-k, k:] - c[k:, :-k] + c[:-k, :-k]) / (k * k))


def _halve(x: np.ndarray) -> np.ndarray:
    h, w = x.shape[0] // 2 * 2, x.shape[1] // 2 * 2
    x = x[:h, :w]
    return np.asarray((x[0::2, 0::2] + x[1::2, 0::2] + x[0::2, 1::2] + x[1::2, 1::2]) / 4)


def ssim(x: np.ndarray, y: np.ndarray, window: int = WINDOW) -> float:
    """Mean SSIM of two single-channel images with values in [0, 1] (uniform window), clipped at 0.

    Example:
        >>> x = np.linspace(0, 1, 100).reshape(10, 10)
        >>> ssim(x, x), ssim(x, 1 - x) < 0.5
        (1.0, True)
    """
    k = min(window, x.shape[0], x.shape[1])
    mx, my = _window_mean(x, k), _window_mean(y, k)
    vx = _window_mean(x * x, k) - mx * mx
    vy = _window_mean(y * y, k) - my * my
    cov = _window_mean(x * y, k) - mx * my
    s = ((2 * mx * my + _C1) * (2 * cov + _C2)) / ((mx * mx + my * my + _C1) * (vx + vy + _C2))
    return float(min(1.0, max(0.0, float(np.mean(s)))))


def structure_similarity(a: np.ndarray, b: np.ndarray, scales: int = SCALES) -> float:
    """Multi-scale SSIM of the CIELAB lightness of two RGB images (scales 1/4 to 1/32, equal weights).

    Example:
        >>> a = np.zeros((128, 128, 3), np.uint8); a[:, 64:] = 255
        >>> structure_similarity(a, a), structure_similarity(a, 255 - a) < 0.2
        (1.0, True)
    """
    _check(a, b)
    if np.array_equal(a, b):
        return 1.0
    levels = [(luminance(a), luminance(b))]  # downsampled in linear light, compared in L*
    while len(levels) < FIRST_SCALE + scales and min(levels[-1][0].shape) // 2 >= WINDOW:
        x, y = levels[-1]
        levels.append((_halve(x), _halve(y)))
    scores = [ssim(_y_to_l(x), _y_to_l(y)) for x, y in (levels[FIRST_SCALE:] or levels[-1:])]
    return float(np.mean(scores))


def colour_similarity(a: np.ndarray, b: np.ndarray, block: int = COLOUR_BLOCK) -> float:
    """Mean over ``block`` x ``block`` blocks of ``1 - min(ΔE76 / 50, 1)`` between block-average colours.

    Example:
        >>> red = np.full((16, 16, 3), (200, 0, 0), np.uint8)
        >>> colour_similarity(red, red), colour_similarity(red, red[..., ::-1])
        (1.0, 0.0)
    """
    _check(a, b)
    h, w = a.shape[0] // block * block or a.shape[0], a.shape[1] // block * block or a.shape[1]
    bh, bw = (block, block) if h >= block and w >= block else (h, w)

    def blocks(img: np.ndarray) -> np.ndarray:  # rows then columns: contiguous sums, ~5x faster than one reshape
        rows = np.asarray(img[:h, :w], dtype=np.float32).reshape(h // bh, bh, w * 3).sum(axis=1)
        return np.asarray(rows.reshape(h // bh, w // bw, bw, 3).sum(axis=2) / (bh * bw))

    de = np.linalg.norm(srgb_to_lab(blocks(a)) - srgb_to_lab(blocks(b)), axis=-1)
    return float(np.mean(1.0 - np.minimum(de / DELTA_E_MAX, 1.0)))


def visual_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """The env's reward: ``0.5 * structure_similarity + 0.5 * colour_similarity``, rounded to 4 decimals.

    Rounding keeps the reward identical across processes (float summation order cannot flip a digit that
    the policy or a success threshold would see).

    Args:
        a: ``(height, width, 3)`` ``uint8`` RGB image.
        b: Another image of the same shape.

    Raises:
        ValueError: The shapes differ or are not RGB images.
    """
    _check(a, b)
    if np.array_equal(a, b):
        return 1.0
    s = STRUCTURE_WEIGHT * structure_similarity(a, b) + COLOUR_WEIGHT * colour_similarity(a, b)
    return round(float(s), 4)
