"""Suite-wide set-up: one copy of the package, a private temp dir, and no browser outliving its module.

With ``--import-mode=importlib`` and ``--doctest-modules``, a module file collected before ``turnkit`` was
imported gets loaded as a second copy (its enums and classes then differ from the package's). Importing
the package here, before collection, makes every test and doctest share one copy.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import time
from collections.abc import Iterator

import pytest

import turnkit  # noqa: F401
from turnkit.browser import launched_profiles, pids_with, shared_pool

_SESSION_TMP: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Give the run a temp dir of its own: what a test leaves there cannot reach a later run or another program."""
    global _SESSION_TMP
    _SESSION_TMP = tempfile.mkdtemp(prefix="turnkit-tests-")
    os.chmod(_SESSION_TMP, 0o1777)  # like /tmp: sandboxes run under their own uids and must reach their work dirs
    os.environ["TMPDIR"] = _SESSION_TMP  # subprocesses (check_env's fresh process, Chromium) use it too
    # datasets caches what tests load under ~/.cache/huggingface, where a later run would find it
    os.environ["HF_DATASETS_CACHE"] = os.path.join(_SESSION_TMP, "hf-datasets")
    tempfile.tempdir = _SESSION_TMP


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the run's temp dir with whatever the tests left in it."""
    tempfile.tempdir = None
    if _SESSION_TMP is not None:
        shutil.rmtree(_SESSION_TMP, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def no_chromium_left() -> Iterator[None]:
    """Close what a module (a test file or a doc) left in the shared browser pool and check its Chromium is gone.

    A doctest that fails before its ``env.close()`` leaves its browser held; this ends it with its module. Only the
    browsers the module started are looked at, never other Chromium processes on the machine.
    """
    before = len(launched_profiles())
    yield
    gc.collect()  # unreachable browsers are killed by their finalizers
    shared_pool().close_all()
    mine = launched_profiles()[before:]
    deadline = time.monotonic() + 10.0
    while (left := {p: pids_with(p) for p in mine if pids_with(p)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"Chromium processes outlived the module that started them: {left}"
