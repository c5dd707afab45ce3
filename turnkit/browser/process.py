"""Start and stop one headless Chromium with a DevTools pipe, and never leave a process behind.

The browser is spawned with ``os.posix_spawn`` (no shell, no ``preexec_fn``, safe with threads) in its own
session, so that its whole process tree shares one process group. Its DevTools pipes are mapped to the
descriptors 3 and 4 that ``--remote-debugging-pipe`` expects. Chromium exits by itself when the pipe
closes, so even a ``kill -9`` of the Python process takes the browser down with it.

:meth:`ChromiumProcess.kill` is idempotent: it asks the browser to close, then kills the process group,
reaps the main process, kills any straggler whose command line names the private profile directory and
deletes that directory. A ``weakref.finalize`` runs the same clean-up when the object is garbage-collected
or the interpreter exits. Both do nothing in a forked child: only the process that started the browser stops it.

Example:
    >>> import shutil
    >>> sorted(f for f in LAUNCH_FLAGS if "sandbox" in f or "headless" in f)
    ['--headless']
    >>> find_chromium("/no/such/browser")
    Traceback (most recent call last):
    ...
    turnkit.errors.BrowserError: no Chromium at '/no/such/browser' (not an executable file)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
import weakref
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from turnkit.browser.cdp import CDPConnection, EventHandler
from turnkit.browser.errors import BrowserError

CANDIDATES: tuple[str, ...] = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
"""Executable names searched on ``PATH`` when no path is given (after ``$TURNKIT_CHROMIUM``)."""

LAUNCH_FLAGS: tuple[str, ...] = (
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-dev-shm-usage",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--mute-audio",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--font-render-hinting=none",
    "--disable-features=BackForwardCache,PaintHolding,Translate,MediaRouter,OptimizationHints",
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--remote-debugging-pipe",
)
"""Flags of every launch. ``--proxy-server`` points at a closed port: a request that escapes the page's
request interception (a popup window, a service worker) still cannot reach any host, loopback included."""

PROFILE_PREFIX = "turnkit-chromium-"
"""Prefix of the private profile directories; the owning Python pid follows it."""

_LAUNCHED: deque[str] = deque(maxlen=10_000)


def launched_profiles() -> tuple[str, ...]:
    """Profile directories of the browsers this process started, oldest first (the last 10,000).

    With :func:`pids_with` this tells whether any of them left a process behind.

    Example:
        >>> isinstance(launched_profiles(), tuple)
        True
    """
    return tuple(_LAUNCHED)


def find_chromium(executable: str | os.PathLike[str] | None = None) -> str:
    """Resolve the Chromium executable: ``executable``, else ``$TURNKIT_CHROMIUM``, else :data:`CANDIDATES`.

    Raises:
        BrowserError: Nothing executable was found; the message says how to install Chromium.

    Example:
        >>> find_chromium("/bin/sh")
        '/bin/sh'
    """
    chosen = executable if executable is not None else os.environ.get("TURNKIT_CHROMIUM")
    if chosen:
        path = shutil.which(str(chosen))
        if path is None:
            raise BrowserError(f"no Chromium at {str(chosen)!r} (not an executable file)")
        return str(Path(path).absolute())
    for name in CANDIDATES:
        path = shutil.which(name)
        if path is not None:
            return str(Path(path).absolute())
    raise BrowserError(
        f"no Chromium found on PATH (tried {', '.join(CANDIDATES)}); install it with `bash .ci/chromium.sh` "
        "(Debian: apt-get install chromium) or set TURNKIT_CHROMIUM=/path/to/chrome"
    )


def pids_with(marker: str) -> list[int]:
    """Pids of live processes whose command line contains ``marker`` (Linux ``/proc``; ``[]`` elsewhere).

    Example:
        >>> pids_with("no-process-has-this-marker-3f9a")
        []
    """
    out: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return out
    needle = marker.encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_bytes().rsplit(b")", 1)[-1].split()[0]
        except OSError:  # the process exited while we looked
            continue
        if needle in cmdline and state != b"Z":
            out.append(int(entry.name))
    return out


def owned_chromium_pids(owner_pid: int | None = None) -> list[int]:
    """Live Chromium processes started by :class:`ChromiumProcess` in process ``owner_pid`` (default: this one).

    Example:
        >>> owned_chromium_pids(owner_pid=999_999_999)
        []
    """
    return pids_with(f"{PROFILE_PREFIX}{owner_pid if owner_pid is not None else os.getpid()}-")


def _sweep_stale_profiles() -> None:
    """Delete profile directories left by dead Python processes (a ``kill -9`` skips all clean-up)."""
    for path in Path(tempfile.gettempdir()).glob(f"{PROFILE_PREFIX}*-*"):
        owner = path.name[len(PROFILE_PREFIX) :].split("-", 1)[0]
        if not owner.isdigit() or int(owner) == os.getpid():
            continue
        try:
            os.kill(int(owner), 0)
        except ProcessLookupError:  # the owner is gone: its browser died with the DevTools pipe
            if not pids_with(str(path)):
                shutil.rmtree(path, ignore_errors=True)
        except PermissionError:  # another user's live process
            continue


def _high_fd(fd: int) -> int:
    """Move ``fd`` to a number >= 10 (so that mapping children's 3 and 4 cannot clobber it)."""
    import fcntl

    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


def _reap(pid: int, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for child ``pid`` to exit; True once reaped (or already gone)."""
    end = time.monotonic() + timeout_s
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)


def _terminate(pid: int, conn: CDPConnection, profile: str, graceful: bool, owner_pid: int) -> None:
    """Stop the browser tree of ``pid`` and delete its profile; safe to call on a dead browser.

    Does nothing outside process ``owner_pid``: a forked child inherits the object and its exit hooks, and its
    exit must not kill the browser that its parent still uses.
    """
    if os.getpid() != owner_pid:
        return
    if graceful and not conn.closed:
        with contextlib.suppress(BrowserError, OSError):
            conn.fire("Browser.close")
        _reap(pid, 1.0)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # the whole group: zygote, renderers, utilities
    _reap(pid, 5.0)
    conn.close()
    for straggler in pids_with(profile):  # anything that left the group but still names our profile
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(straggler, signal.SIGKILL)
    shutil.rmtree(profile, ignore_errors=True)


class ChromiumProcess:
    """One headless Chromium with its DevTools connection.

    Args:
        executable: The Chromium binary (see :func:`find_chromium`).
        extra_flags: More command-line flags (e.g. ``--no-sandbox`` when running as root).
        start_timeout_s: How long the browser may take to answer its first DevTools command.
        on_event: DevTools event handler (see :class:`~turnkit.browser.cdp.CDPConnection`).

    Raises:
        BrowserError: The browser did not start; the message ends with its last stderr lines.

    Attributes:
        pid: The browser's process id (also its process-group id).
        profile: The private ``--user-data-dir``, deleted by :meth:`kill`.
        conn: The DevTools connection.
    """

    def __init__(
        self,
        executable: str,
        *,
        extra_flags: Sequence[str] = (),
        start_timeout_s: float = 20.0,
        on_event: EventHandler | None = None,
    ) -> None:
        _sweep_stale_profiles()
        self.profile = tempfile.mkdtemp(prefix=f"{PROFILE_PREFIX}{os.getpid()}-")
        _LAUNCHED.append(self.profile)
        self._log = os.path.join(self.profile, "stderr.log")
        to_child, ours_w = os.pipe()
        ours_r, from_child = os.pipe()
        to_child, from_child = _high_fd(to_child), _high_fd(from_child)
        argv = [executable, *LAUNCH_FLAGS, *extra_flags, f"--user-data-dir={self.profile}", "about:blank"]
        env = dict(os.environ)
        env.update(HOME=self.profile, XDG_CONFIG_HOME=self.profile, XDG_CACHE_HOME=self.profile)
        env.pop("DISPLAY", None)
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, self._log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
            (os.POSIX_SPAWN_DUP2, to_child, 3),
            (os.POSIX_SPAWN_DUP2, from_child, 4),
        ]
        try:
            self.pid = os.posix_spawn(executable, argv, env, file_actions=actions, setsid=True)
        except OSError as exc:
            for fd in (to_child, ours_w, ours_r, from_child):
                os.close(fd)
            shutil.rmtree(self.profile, ignore_errors=True)
            raise BrowserError(f"cannot start Chromium {executable!r}: {exc}") from exc
        finally:
            with contextlib.suppress(OSError):
                os.close(to_child)
                os.close(from_child)
        self.conn = CDPConnection(read_fd=ours_r, write_fd=ours_w, on_event=on_event)
        self._owner_pid = os.getpid()
        self._finalizer = weakref.finalize(self, _terminate, self.pid, self.conn, self.profile, False, self._owner_pid)
        try:
            self.version = self.conn.call("Browser.getVersion", deadline=time.monotonic() + start_timeout_s)
        except BrowserError as exc:
            tail = self.stderr_tail()
            self.kill(graceful=False)
            raise BrowserError(f"Chromium {executable!r} did not start: {exc}; stderr: {tail}") from exc

    @property
    def alive(self) -> bool:
        """Whether the browser process is still running (and has not been killed by us)."""
        if not self._finalizer.alive:
            return False
        try:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return done == 0

    def stderr_tail(self, lines: int = 5) -> str:
        """The browser's last stderr lines (for error messages), ``""`` once the profile is gone."""
        try:
            text = Path(self._log).read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])

    def kill(self, *, graceful: bool = True) -> None:
        """Stop the browser and every process it started, delete the profile (idempotent).

        Args:
            graceful: First ask the browser to close (up to 1 s) before killing its process group.
        """
        if self._finalizer.alive:
            self._finalizer.detach()
            _terminate(self.pid, self.conn, self.profile, graceful, self._owner_pid)
