"""File and folder names made from env ids, safe on Linux, macOS and Windows.

Env ids are not file names: ``turnkit/MathEpisodes-v0`` has a ``/``, and Gymnasium's ``module:env-id`` form
(``my_pkg.envs:Grid-v0``) has a ``:``, which Windows forbids and macOS's Finder shows as ``/``. Every default
output folder that turnkit derives from an env id goes through :func:`safe_name`.

Example:
    >>> safe_name("turnkit/MathEpisodes-v0")
    'turnkit_MathEpisodes-v0'
    >>> safe_name("eval-my_pkg.envs:ns/Grid-v0-id-s0")
    'eval-my_pkg.envs_ns_Grid-v0-id-s0'
"""

from __future__ import annotations

import re

_FORBIDDEN = re.compile(r'[<>:"/\\|?*\x00-\x1f\x7f]')
"""Characters Windows forbids in a name (``<>:"/\\|?*`` and control characters); ``/`` is also Unix's separator."""

_RESERVED = frozenset(["CON", "PRN", "AUX", "NUL"] + [f"{kind}{i}" for kind in ("COM", "LPT") for i in range(1, 10)])
"""Windows device names: reserved as a name's stem in any letter case, with or without an extension."""


def safe_name(text: str) -> str:
    """Turn ``text`` (an env id, or a name built from one) into one path component safe on every OS.

    Each forbidden character (``<>:"/\\|?*`` and control characters) becomes ``_``; trailing dots and spaces,
    which Windows drops, are removed; a Windows device name as the stem (``CON``, ``nul.txt``, ``COM1``) gets a
    ``_`` appended to the stem; an empty result becomes ``_``. Names that are already safe come back
    unchanged, so ``turnkit/...`` ids keep their ``turnkit_...`` folder names. Different ids can map to the
    same name (``a/b`` and ``a:b``); that is fine for default folder names, which also carry split and seed.

    Args:
        text: The env id or name to convert.

    Returns:
        A non-empty name without separators, usable as a file or folder name on Linux, macOS and Windows.

    Example:
        >>> safe_name("my_pkg.envs:Grid-v0"), safe_name("a/b\\\\c"), safe_name('what?<"now">|*')
        ('my_pkg.envs_Grid-v0', 'a_b_c', 'what___now____')
        >>> safe_name("CON"), safe_name("nul.envs:Grid-v0"), safe_name("Console-v0")
        ('CON_', 'nul_.envs_Grid-v0', 'Console-v0')
        >>> safe_name("runs. . "), safe_name(".."), safe_name("")
        ('runs', '_', '_')
    """
    name = _FORBIDDEN.sub("_", text).rstrip(". ")
    stem, dot, rest = name.partition(".")
    if stem.upper() in _RESERVED:
        name = f"{stem}_{dot}{rest}"
    return name or "_"
