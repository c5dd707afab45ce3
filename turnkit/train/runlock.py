"""Run-directory locks: one turnkit process writes a run directory at a time.

Two ``turnkit train`` (or ``turnkit synth``, ``turnkit quickstart``) processes on the same directory would
interleave ``metrics.jsonl`` and overwrite each other's checkpoints. Each of them therefore holds a
:class:`RunLock` on its directory while it runs, and a second one is refused with a
:class:`~turnkit.errors.RunLockedError` that names the directory and the holder::

    runs/x is in use by another turnkit process (pid 4242 on host gpu-3, started 2025-05-01T09:12:44+00:00:
    turnkit train --out runs/x); wait for it to finish, stop it, or use another directory

**How.** :class:`RunLock` opens ``<run_dir>/turnkit.lock`` and takes an exclusive ``fcntl.flock`` on it
without waiting. The *kernel* holds that lock for the open file and drops it when the file is closed or the
process ends in any way: normal exit, an exception, Ctrl-C, ``SIGKILL``, the OOM killer, a segfault. So a
crash can never leave a stuck lock; there is no timeout to tune and no pid guessing. The holder writes a
record of itself into the file (``pid``, ``host``, ``started``, ``command``) for the refusal message, and a
clean release empties the file. A non-empty file whose lock is free was therefore left by a holder that died
without releasing it: the next run takes the lock over and says so with a
:class:`~turnkit.errors.StaleLockWarning` naming the old holder.

The file itself is never deleted. Deleting a lock file races: a process still waiting on the old file could
lock the deleted inode while another creates a new file and locks that, and both would "hold" the lock.

**Limits.**

* ``flock`` is advisory: it stops only processes that also take a :class:`RunLock` (every turnkit command
  that writes a run directory does).
* Children made by ``fork()`` without ``exec`` (e.g. ``multiprocessing``'s default start method on Linux)
  share the open file and so the lock, which is then freed when the last of them exits. Children started with
  ``subprocess`` do not inherit it (the file is opened close-on-exec).
* Network filesystems: Linux NFS clients map ``flock`` onto NFS byte-range locks, which work across machines
  unless the share is mounted with ``local_lock=flock`` or ``local_lock=all`` (then the lock covers one
  machine only). The recorded host tells you where a holder runs.
* Not reentrant: a second :class:`RunLock` on the same directory is refused, also inside one process.

Example:
    >>> import tempfile
    >>> run = tempfile.mkdtemp()
    >>> with RunLock(run, command="turnkit train --out demo") as lock:
    ...     read_holder(run)["command"]
    ...     try:
    ...         RunLock(run).acquire()
    ...     except RunLockedError as err:
    ...         print("refused:", "turnkit train --out demo" in str(err))
    'turnkit train --out demo'
    refused: True
    >>> read_holder(run) is None  # released: the record is gone, the next run starts without a note
    True
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import shlex
import socket
import sys
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any

from turnkit.errors import RunLockedError, StaleLockWarning

LOCK_FILE = "turnkit.lock"
"""Name of the lock file inside a run directory."""


def default_command() -> str:
    """This process's command line, as the holder record shows it (``python3 -m turnkit.cli train ...``).

    Example:
        >>> import shlex
        >>> shlex.split(default_command())[0] == os.path.basename(getattr(sys, "orig_argv", sys.argv)[0])
        True
    """
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if argv:
        argv[0] = os.path.basename(argv[0])
    return shlex.join(argv)


def _parse(text: str) -> dict[str, Any] | None:
    if not text.strip():
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return {"unreadable": text[:200]}
    return record if isinstance(record, dict) else {"unreadable": text[:200]}


def _read_fd(fd: int) -> dict[str, Any] | None:
    chunks, offset = [], 0
    while chunk := os.pread(fd, 65536, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return _parse(b"".join(chunks).decode("utf-8", errors="replace"))


def read_holder(run_dir: str | Path) -> dict[str, Any] | None:
    """The record of the process holding (or, after a crash, last holding) ``run_dir``'s lock, or ``None``.

    This only reads the file; it does not tell whether the holder is still alive (only taking the lock can).
    """
    path = Path(run_dir) / LOCK_FILE
    try:
        return _parse(path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return None


def describe_holder(holder: dict[str, Any] | None) -> str:
    """A holder record as one phrase.

    Example:
        >>> describe_holder({"pid": 7, "host": "box", "started": "2025-01-01T00:00:00+00:00", "command": "x"})
        'pid 7 on host box, started 2025-01-01T00:00:00+00:00: x'
        >>> describe_holder(None)
        'holder not recorded yet'
    """
    if holder is None:
        return "holder not recorded yet"
    if "unreadable" in holder:
        return f"unreadable holder record {holder['unreadable']!r}"
    return (
        f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, "
        f"started {holder.get('started', '?')}: {holder.get('command', '?')}"
    )


def _pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunLock:
    """An exclusive, crash-safe lock on a run directory (see the module docstring).

    Use it as a context manager; it is released on normal exit, on exceptions and on ``KeyboardInterrupt``
    (and by the kernel when the process dies).

    Args:
        run_dir: The directory to lock (created if missing).
        command: What the holder record shows as the command (default: this process's command line).

    Raises:
        RunLockedError: From :meth:`acquire` (or ``with``), when another process holds the directory.
    """

    def __init__(self, run_dir: str | Path, *, command: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self.command = command if command is not None else default_command()
        self._fd: int | None = None
        self._pid: int | None = None

    @property
    def locked(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> RunLock:
        """Take the lock now (never waits); returns ``self``.

        Raises:
            RunLockedError: Another process (or another :class:`RunLock` in this one) holds the directory.
        """
        if self._fd is not None:
            raise RuntimeError(f"this RunLock already holds {self.run_dir}")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_fd(fd)
            os.close(fd)
            raise RunLockedError(
                f"{self.run_dir} is in use by another turnkit process ({describe_holder(holder)}); "
                "wait for it to finish, stop it, or use another directory",
                run_dir=self.run_dir,
                holder=holder,
            ) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._pid = fd, os.getpid()
        try:
            previous = _read_fd(fd)
            record = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                "command": self.command,
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(record, sort_keys=True) + "\n").encode("utf-8"), 0)
            if previous is not None:
                gone = previous.get("host") == record["host"] and not _pid_alive(previous.get("pid"))
                how = "is no longer running" if gone else "no longer holds the lock"
                warnings.warn(
                    f"took over a stale lock on {self.run_dir}: its previous holder ({describe_holder(previous)}) "
                    f"{how} and did not release it (killed or crashed)",
                    StaleLockWarning,
                    stacklevel=3,
                )
        except BaseException:  # e.g. Ctrl-C here, or the warning turned into an error: do not keep the lock
            self.release()
            raise
        return self

    def release(self) -> None:
        """Empty the holder record and drop the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if os.getpid() != self._pid:  # a fork()ed child: the lock is the parent's; only close our copy
            os.close(fd)
            return
        try:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"RunLock({str(self.run_dir)!r}, locked={self.locked})"
