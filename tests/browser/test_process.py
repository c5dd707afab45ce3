from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from turnkit.browser import BrowserError, ChromiumProcess, find_chromium, pids_with
from turnkit.browser.process import PROFILE_PREFIX

from .conftest import exit_code_in_forked_child


def chromium() -> str:
    try:
        return find_chromium()
    except BrowserError as exc:
        pytest.skip(str(exc))


def wait_gone(marker: str, seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := pids_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_missing_executable_is_a_browser_error_naming_it() -> None:
    with pytest.raises(BrowserError, match="/no/such/chrome"):
        find_chromium("/no/such/chrome")


def test_env_var_chooses_the_executable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNKIT_CHROMIUM", "/bin/sh")
    assert find_chromium() == "/bin/sh"


def test_a_program_that_is_not_chromium_fails_to_start_with_a_clear_error() -> None:
    with pytest.raises(BrowserError, match="did not start"):
        ChromiumProcess("/bin/true", start_timeout_s=5.0)


def test_kill_stops_every_process_and_deletes_the_profile() -> None:
    proc = ChromiumProcess(chromium(), extra_flags=("--no-sandbox",) if os.geteuid() == 0 else ())
    assert proc.alive and pids_with(proc.profile)
    proc.kill()
    assert not proc.alive
    assert wait_gone(proc.profile) == []
    assert not Path(proc.profile).exists()
    proc.kill()  # idempotent


def test_chromium_exits_when_its_python_process_is_killed(tmp_path: Path) -> None:
    """Even kill -9 of the owner leaves no browser: Chromium quits when its DevTools pipe closes."""
    script = textwrap.dedent(
        f"""
        import os, sys
        from turnkit.browser import ChromiumProcess
        p = ChromiumProcess({chromium()!r}, extra_flags=("--no-sandbox",) if os.geteuid() == 0 else ())
        print(p.profile, flush=True)
        os.kill(os.getpid(), 9)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGKILL
    profile = out.stdout.strip()
    assert profile.startswith(str(Path(profile).parent / PROFILE_PREFIX))
    assert wait_gone(profile) == []
    # the next launch sweeps the profile that the killed process could not delete
    proc = ChromiumProcess(chromium(), extra_flags=("--no-sandbox",) if os.geteuid() == 0 else ())
    proc.kill()
    assert not Path(profile).exists()


def test_a_forked_child_exiting_leaves_the_parents_browser_running() -> None:
    """The child inherits the object and its exit hooks; running them there must not kill the parent's browser."""
    proc = ChromiumProcess(chromium(), extra_flags=("--no-sandbox",) if os.geteuid() == 0 else ())
    try:
        # kill() and the exit-time finalizer share one clean-up, which checks the owner
        assert exit_code_in_forked_child(proc.kill) == 0
        assert proc.alive and pids_with(proc.profile)
        assert Path(proc.profile).is_dir()
        assert proc.conn.call("Browser.getVersion", deadline=time.monotonic() + 10.0)["product"]
    finally:
        proc.kill()
    assert wait_gone(proc.profile) == []
