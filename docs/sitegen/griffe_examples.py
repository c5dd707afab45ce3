"""Griffe extension (mkdocs.yml, mkdocstrings ``extensions``): ``Example:`` sections parse as ``Examples:``.

turnkit's docstrings say ``Example:`` (singular; ruff's Google convention accepts both). Griffe's Google parser
only knows the plural as a section of doctests; it reads the singular as an admonition of Markdown prose, where
doctest output such as ``['a'] [0]`` turns into link syntax and the ``>>>`` lines lose their code formatting.

Example:
    >>> fix("Summary.\\n\\nExample:\\n    >>> 1 + 1\\n    2")
    'Summary.\\n\\nExamples:\\n    >>> 1 + 1\\n    2'
"""

from __future__ import annotations

import re
from typing import Any

try:
    from griffe import Extension
except ImportError:  # the docs packages are not installed; only the site build loads this extension
    Extension = object  # type: ignore[assignment,misc]

_SINGULAR = re.compile(r"^(\s*)Example:\s*$", re.M)


def fix(docstring: str) -> str:
    """``docstring`` with every ``Example:`` section header written ``Examples:``."""
    return _SINGULAR.sub(r"\1Examples:", docstring)


class ExamplesSections(Extension):  # type: ignore[misc,valid-type]
    """Rewrites ``Example:`` section headers before the docstrings are parsed."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        """Fix the docstring of every object griffe loads."""
        if getattr(obj, "docstring", None) is not None:
            obj.docstring.value = fix(obj.docstring.value)
