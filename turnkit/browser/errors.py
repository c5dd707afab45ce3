"""Typed browser failures: the browser itself (infrastructure) versus the page it was asked to render.

:class:`BrowserError` is :class:`turnkit.errors.BrowserError` (re-exported here); the rollout layer records
it as ``ErrorCause.BROWSER``. A :class:`PageError` is the page's own fault (a script that never yields, a
renderer crash it caused): the browser has already been recovered when it is raised, and envs turn it into
feedback rather than an error.

Example:
    >>> import turnkit.errors
    >>> from turnkit.browser.errors import BrowserError, PageError
    >>> from turnkit.errors import TurnkitError
    >>> BrowserError is turnkit.errors.BrowserError
    True
    >>> err = PageError("timeout", "the page did not finish rendering within 2.0 s")
    >>> isinstance(err, BrowserError), isinstance(err, TurnkitError), err.reason
    (True, True, 'timeout')
"""

from __future__ import annotations

from turnkit.errors import BrowserError

__all__ = ["BrowserError", "PageError"]


class PageError(BrowserError):
    """The rendered page failed (it hung or crashed its renderer) while a fresh browser works fine.

    Args:
        reason: ``"timeout"`` or ``"crash"``.
        message: What happened.
    """

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)
