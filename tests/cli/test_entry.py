"""The command runs the same way as ``turnkit``, ``python -m turnkit`` and ``python -m turnkit.cli``."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["turnkit", "turnkit.cli"])
def test_python_dash_m_runs_the_command(module: str) -> None:
    out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "quickstart" in out.stdout and "usage: turnkit" in out.stdout
