"""``LocalSandbox``: bubblewrap namespaces plus rlimits, the embedded default backend.

Two ways to run code:

* fresh (default): every call starts ``bwrap`` and a supervisor in new namespaces (~40 ms);
* persistent (``persistent=True``): one warm supervisor per sandbox runs each call in a child it forked ahead
  of time (a few ms).
  Each call still gets fresh globals and fresh processes; files in ``/work`` and ``/tmp`` persist.

See :mod:`turnkit.sandbox` for the threat model and :mod:`turnkit.sandbox._bwrap` for the exact
bubblewrap configuration.

Example:
    >>> from turnkit.sandbox import LocalSandbox
    >>> with LocalSandbox(persistent=True) as sb:
    ...     sb.write_file("data.txt", "21")
    ...     sb.run_python("print(2 * int(open('data.txt').read()))", timeout=5).stdout
    '42\\n'
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import warnings
import weakref
from dataclasses import dataclass
from typing import Any

from turnkit.errors import ConfigError, SandboxError
from turnkit.sandbox import _bwrap, _frames, _hostio, _wire
from turnkit.sandbox._spawn import in_spawner_thread
from turnkit.sandbox.base import (
    WORKDIR,
    Command,
    Limits,
    SandboxBase,
    infra_result,
    sandbox_path,
    to_bytes,
)
from turnkit.types import ExecResult

SECOND_UID = True
"""On a root host a worker's calls run under a uid of their own in bubblewrap's user namespace (the supervisor,
zygote and spares under another, as on Docker); elsewhere every call gets a jail of its own. ``False`` jails the
calls on root hosts too (the test suite runs both; its controls run the worker as it was before, jail-shaped)."""

DEFAULT_PYTHON = "/usr/bin/python3"
READ_MAX_BYTES = 64 << 20
_WORKDIR_PREFIX = "turnkit-sandbox-"


@dataclass(frozen=True)
class InteractiveCommand:
    """How to start an interactive program in a sandbox on a private terminal (used by pexpect sessions).

    Attributes:
        argv: The host command line.
        env: Its environment.
        uid: Host uid to switch to before exec, if any (``None``: keep the caller's).

    Example:
        >>> InteractiveCommand(argv=["true"], env={}).uid is None
        True
    """

    argv: list[str]
    env: dict[str, str]
    uid: int | None = None

    def preexec(self) -> None:
        """Drop to the sandbox's uid (runs in the forked child before exec)."""
        if self.uid is not None:
            os.setgroups([])
            os.setgid(self.uid)
            os.setuid(self.uid)


class _Supervisor:
    """One supervisor process (bwrap + python) and its pipes, owned by the host."""

    def __init__(
        self,
        argv: list[str],
        ids: tuple[int, int] | None,
        max_reply: int,
        env: dict[str, str],
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        kwargs: dict[str, Any] = {"pass_fds": pass_fds}
        if ids is not None:
            kwargs.update(user=ids[0], group=ids[1], extra_groups=[])
        try:
            self.proc: subprocess.Popen[bytes] = in_spawner_thread(
                subprocess.Popen,
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                cwd="/",
                env=env,
                **kwargs,
            )
        except OSError as exc:
            raise SandboxError(f"cannot start the sandbox ({argv[0]}): {exc}") from exc
        assert self.proc.stdout is not None and self.proc.stderr is not None
        os.set_blocking(self.proc.stderr.fileno(), False)
        self.reader = _wire.ReplyReader(self.proc.stdout.fileno(), max_bytes=max_reply)

    def send(self, frame: bytes) -> bool:
        """Write a request; False if the supervisor is gone."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(frame)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            return False
        return True

    def wait_ready(self) -> None:
        """Wait for the supervisor's ``ready`` frame.

        Raises:
            SandboxError: If the sandbox could not start (bubblewrap or Python failed).
        """
        try:
            frame = self.reader.next(deadline=time.monotonic() + _wire.START_S)
        except TimeoutError:
            self.kill()
            raise SandboxError(f"the sandbox did not start within {_wire.START_S:.0f} s") from None
        if frame is None or frame[0].get("ready") is not True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            detail = self.stderr_text() or "no error output"
            self.kill()
            raise SandboxError(f"the sandbox failed to start: {detail}")

    def stderr_text(self) -> str:
        """Whatever bubblewrap or the supervisor printed (bounded)."""
        assert self.proc.stderr is not None
        try:
            data = self.proc.stderr.read(8192) or b""
        except (BlockingIOError, ValueError):
            data = b""
        return data.decode("utf-8", "replace").strip()

    def alive(self) -> bool:
        return self.proc.poll() is None and not self.reader.eof

    def kill(self) -> None:
        """Kill the whole sandbox (bwrap's session; its PID namespace dies with it)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.close(grace_s=5.0)

    def close(self, grace_s: float = 2.0) -> None:
        """Close stdin (the supervisor exits at EOF), wait a little, then kill."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


class LocalSandbox(SandboxBase):
    """A sandbox made of Linux namespaces (bubblewrap) and rlimits, with a private work directory.

    Args:
        limits: Resource limits (``Limits()`` by default).
        persistent: Keep one warm supervisor and fork it per call (low latency for repeated evaluation).
        python: The interpreter inside the sandbox (must live under ``/usr`` or ``ro_binds``).
        ro_binds: Extra host paths to mount read-only at the same place (e.g. a virtualenv); the sandbox's
            unprivileged uid must be able to reach them (every parent directory searchable by others).
        unsafe_no_isolation: Run without bubblewrap: rlimits, timeouts, output caps and process cleanup
            still apply, but the code can read host files, use the network and see the host's processes
            (and, with no PID namespace, processes of code that kills its own supervisor may outlive the
            call). Only for trusted code on hosts without user namespaces.
        tmp_root: Host directory under which the work directory is created (the system temp dir by default).

    Raises:
        SandboxError: If bubblewrap is missing or cannot create namespaces (unless ``unsafe_no_isolation``).

    Example:
        >>> with LocalSandbox() as sb:
        ...     r = sb.run("echo $HOME; cat", stdin="piped", timeout=5)
        >>> r.exit_code, r.stdout
        (0, '/work\\npiped')
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        persistent: bool = False,
        python: str = DEFAULT_PYTHON,
        ro_binds: tuple[str, ...] | list[str] = (),
        unsafe_no_isolation: bool = False,
        tmp_root: str | None = None,
    ) -> None:
        super().__init__(limits)
        self._closed = True  # until fully constructed, so that close() is a no-op on failure
        if not os.path.isabs(python) or not os.access(python, os.X_OK):
            raise ConfigError(f"python must be an absolute path to an executable, got {python!r}")
        for path in ro_binds:
            if not os.path.isabs(path) or not os.path.exists(path):
                raise ConfigError(f"ro_binds entries must be existing absolute paths, got {path!r}")
        self.persistent = persistent
        self.python = python
        self.unsafe = unsafe_no_isolation
        if unsafe_no_isolation:
            warnings.warn(
                "LocalSandbox(unsafe_no_isolation=True) runs code WITHOUT isolation: only for trusted code",
                stacklevel=2,
            )
            self._ids = None
        else:
            _bwrap.probe(self.limits.network)
            self._ids = _bwrap.allocate_ids()
        self._two_uids = (
            SECOND_UID and self._ids is not None and _bwrap.supports_two_uids(_bwrap.bwrap_path() or "bwrap")
        )
        """Calls run under the code's uid, apart from the supervisor's (else each in a jail of its own)."""
        root = tmp_root or tempfile.gettempdir()
        reap_stale_workdirs(root)
        self.workdir = tempfile.mkdtemp(prefix=f"{_WORKDIR_PREFIX}{os.getpid()}-", dir=root)
        if self._ids is not None:
            os.chown(self.workdir, *self._ids)
        self._ro_binds = tuple(ro_binds)
        self._lock = threading.Lock()
        self._worker: _Supervisor | None = None
        # Runs at close(), when the sandbox is garbage-collected unclosed, or at interpreter exit.
        self._finalizer = weakref.finalize(self, _cleanup, self.workdir, self.__dict__, os.getpid())
        self._closed = False

    @property
    def uid(self) -> int:
        """The host uid that the sandboxed code runs as (on a root host its supervisor runs as another one).

        Example:
            >>> with LocalSandbox() as sb:
            ...     sb.run("id -u", timeout=5).stdout  # the uid inside the user namespace
            '65534\\n'
            >>> with LocalSandbox() as sb:
            ...     os.geteuid() != 0 or sb.uid >= 2**30
            True
        """
        return self._ids[0] if self._ids is not None else os.getuid()

    # --- public API -----------------------------------------------------------------------------

    def run(self, cmd: Command, *, timeout: float | None = None, stdin: bytes | str | None = None) -> ExecResult:
        """Run a command in ``/work`` (a string runs through ``/bin/sh -c``).

        Args:
            cmd: The command.
            timeout: Wall-clock seconds (``limits.wall_time_s`` by default).
            stdin: Bytes or text fed to the command's standard input.

        Returns:
            The result; timeouts, crashes and huge output are results, not exceptions.

        Example:
            >>> with LocalSandbox() as sb:
            ...     sb.run(["sh", "-c", "exit 3"], timeout=5).exit_code
            3
        """
        self._check_open()
        wall = self.timeout_for(timeout)
        req = _wire.exec_request(
            self.limits, op="exec", argv=self.argv(cmd), timeout=wall, cwd=self._cwd, env=self._env
        )
        return self._call(req, [to_bytes(stdin)], wall)

    def run_python(self, code: str | bytes, *, timeout: float | None = None) -> ExecResult:
        """Run Python source as ``__main__`` with fresh globals, in ``/work``.

        Example:
            >>> with LocalSandbox() as sb:
            ...     sb.run_python("import sys; sys.exit(4)", timeout=5).exit_code
            4
        """
        self._check_open()
        wall = self.timeout_for(timeout)
        req = _wire.exec_request(self.limits, op="python", timeout=wall, cwd=self._cwd, env=self._env)
        return self._call(req, [to_bytes(code)], wall)

    def run_batch_natively(
        self, setup: bytes, calls: bytes, per_call_timeout_s: float, wall_s: float, *, fresh_workdir: bool = False
    ) -> ExecResult:
        """Run the batch harness compiled into the supervisor (see :func:`turnkit.sandbox.batch.run_batch`).

        Example:
            >>> with LocalSandbox() as sb:
            ...     sb.run_batch_natively(b"x = 2", b'["x * 3"]', 1.0, 5.0).stdout.splitlines()[1]
            '@@turnkit-batch@@{"ok": ["int", "6"]}'
        """
        self._check_open()
        req = _wire.exec_request(self.limits, op="batch", timeout=wall_s, cwd=self._cwd, env=self._env)
        req["item_timeout"] = per_call_timeout_s
        req["fresh_workdir"] = bool(fresh_workdir)
        return self._call(req, [setup, calls], wall_s)

    def write_file(self, path: str, data: bytes | str) -> None:
        """Write a file in the work directory (parents are created).

        Example:
            >>> with LocalSandbox() as sb:
            ...     sb.write_file("/work/pkg/x.txt", b"abc")
            ...     sb.run("cat pkg/x.txt", timeout=5).stdout
            'abc'
        """
        self._check_open()
        _hostio.write_under(self.workdir, sandbox_path(path), to_bytes(data), owner=self._ids)

    def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """Read a file from the work directory.

        Example:
            >>> with LocalSandbox() as sb:
            ...     _ = sb.run("echo made > out.txt", timeout=5)
            ...     sb.read_file("out.txt")
            b'made\\n'
        """
        self._check_open()
        return _hostio.read_under(self.workdir, sandbox_path(path), max_bytes=max_bytes or READ_MAX_BYTES)

    def interactive_command(self, argv: list[str], *, env: dict[str, str] | None = None) -> InteractiveCommand:
        """The command line that runs ``argv`` in this sandbox on a private terminal (for pexpect).

        The program becomes the terminal's foreground process group, so Ctrl-C reaches it and not bubblewrap.

        Example:
            >>> with LocalSandbox() as sb:
            ...     sb.interactive_command(["bash"]).argv[-1]
            'bash'
        """
        self._check_open()
        inner_env = dict(_wire.SANDBOX_ENV, TERM="dumb", **(env or {}))
        limits = self.limits.child_rlimits()
        inner = _wire.supervisor_argv(self.python, "fg", json.dumps(limits), *argv)
        if self.unsafe:
            return InteractiveCommand(argv=inner, env=dict(inner_env, HOME=self.workdir))
        cfg = self._bwrap_config(new_session=False, env=inner_env)
        return InteractiveCommand(argv=cfg.argv(inner), env={}, uid=self.uid if self._ids else None)

    def end_interactive(self, pid: int) -> None:
        """Stop what remains of an interactive program: nothing here, its PID namespace died with bwrap.

        Example:
            >>> with LocalSandbox() as sb:
            ...     sb.end_interactive(2)
        """

    @property
    def cwd(self) -> str:
        """The work directory as the sandboxed code sees it (``/work``; the host path when unsafe)."""
        return self._cwd

    # --- internals -------------------------------------------------------------------------------

    @property
    def _cwd(self) -> str:
        return self.workdir if self.unsafe else WORKDIR

    @property
    def _env(self) -> dict[str, str]:
        return dict(_wire.SANDBOX_ENV, HOME=self.workdir) if self.unsafe else dict(_wire.SANDBOX_ENV)

    def _bwrap_config(
        self,
        *,
        new_session: bool = True,
        env: dict[str, str] | None = None,
        jail: bool = False,
        two_uids: tuple[int, int] | None = None,
    ) -> _bwrap.BwrapConfig:
        kwargs: dict[str, Any] = {} if env is None else {"env": env}
        return _bwrap.BwrapConfig(
            workdir=self.workdir,
            network=self.limits.network,
            ro_binds=self._ro_binds,
            new_session=new_session,
            tmp_mb=self.limits.disk_mb,
            jail=jail,
            two_uids=two_uids,
            **kwargs,
        )

    def _start(self, mode: str) -> _Supervisor:
        with contextlib.suppress(FileNotFoundError):  # removed: close() says so, the start then fails clearly
            os.chmod(self.workdir, 0o700)  # the code may have locked /work: bwrap could not enter it
        max_reply = _wire.max_reply_bytes(self.limits)
        if self.unsafe:
            argv, env = _wire.supervisor_argv(self.python, mode, str(256 << 20)), self._env
        elif self._two_uids and self._ids is not None:
            return self._start_two_uids(mode, self._ids, max_reply)
        else:
            inner = _wire.supervisor_argv(self.python, mode, str(256 << 20), "jail")
            argv, env = self._bwrap_config(jail=True).argv(inner), {"PATH": "/usr/bin:/bin"}
        return _Supervisor(argv, self._ids, max_reply, env)

    def _start_two_uids(self, mode: str, code_ids: tuple[int, int], max_reply: int) -> _Supervisor:
        """Start bwrap as the supervisor's host uid and give its user namespace the code's uid as a second one."""
        block_r, block_w = os.pipe()
        info_r, info_w = os.pipe()
        inner = _wire.supervisor_argv(self.python, mode, str(256 << 20), "uid", "nouserns")
        argv = self._bwrap_config(two_uids=(block_r, info_w)).argv(inner)
        try:
            sup = _Supervisor(
                argv, _bwrap.supervisor_ids(code_ids), max_reply, {"PATH": "/usr/bin:/bin"}, (block_r, info_w)
            )
        except SandboxError:
            os.close(info_r)
            os.close(block_w)
            raise
        finally:
            os.close(block_r)
            os.close(info_w)
        try:
            _bwrap.map_two_uids(info_r, block_w, code_ids, _wire.START_S)
        except SandboxError as exc:
            detail = sup.stderr_text() or "bubblewrap said nothing"
            sup.kill()
            raise SandboxError(f"{exc} ({detail})") from None
        return sup

    def _call(self, req: dict[str, Any], blobs: list[bytes], wall: float) -> ExecResult:
        if not self.persistent:
            req = dict(req, id=_wire.new_request_id())
            sup = self._start("once")
            try:
                sup.send(_frames.encode_frame(req, blobs))
                sup.wait_ready()
                return self._exchange(sup, req["id"], frame=None, wall=wall)[0]
            finally:
                # The supervisor exits right after its reply; reaping it off the caller's path saves the
                # ~10-50 ms that Popen.wait(timeout) spends polling.
                threading.Thread(target=sup.close, name="turnkit-sandbox-reap", daemon=True).start()
        with self._lock:
            self._check_open()
            result = self._call_worker(req, blobs, wall)
            if result.fault == "worker_broken":  # nothing ran: once more, on a new worker
                result = self._call_worker(req, blobs, wall)
            return result

    def _call_worker(self, req: dict[str, Any], blobs: list[bytes], wall: float) -> ExecResult:
        """One request to the warm worker, under a fresh id; a worker left unusable is killed."""
        worker = self._ready_worker()
        req = dict(req, id=_wire.new_request_id())
        result, healthy = self._exchange(worker, req["id"], _frames.encode_frame(req, blobs), wall)
        if not healthy:
            worker.kill()
            self._worker = None
        return result

    def _ready_worker(self) -> _Supervisor:
        """The warm worker, replaced first if it died or sent anything unasked since its last reply."""
        worker = self._worker
        if worker is not None and (not worker.alive() or worker.reader.pending()):
            worker.kill()
            worker = self._worker = None
        if worker is None:
            worker = self._worker = self._start("worker")
            worker.wait_ready()
        return worker

    def _exchange(self, sup: _Supervisor, request_id: str, frame: bytes | None, wall: float) -> tuple[ExecResult, bool]:
        """Send (if given) and await one reply; returns the result and whether the supervisor is still usable."""
        start = time.monotonic()
        if frame is not None and not sup.send(frame):
            return infra_result(
                "the sandbox supervisor exited before the request was sent", fault="supervisor_died"
            ), False
        try:
            reply = sup.reader.next(deadline=start + wall + _wire.SLACK_S)
            if reply is not None:
                _wire.check_reply_id(reply, request_id)
                broken = _wire.broken_worker_result(reply)
                if broken is not None:
                    return broken, False
            result = None if reply is None else _wire.result_from_frame(reply)
        except _wire.ProtocolError as exc:
            sup.kill()
            return infra_result(f"{exc}; the code may have tampered with it", fault="desync"), False
        except TimeoutError:
            sup.kill()
            return infra_result(
                f"no reply within {wall + _wire.SLACK_S:.1f} s; the sandbox was killed",
                fault="no_reply",
                exit_code=-signal.SIGKILL,
                timed_out=True,
                duration_s=time.monotonic() - start,
            ), False
        if result is None:
            sup.kill()
            status = sup.proc.returncode
            return infra_result(
                f"the sandbox supervisor exited without a reply (status {status}); the code may have killed it",
                fault="supervisor_died",
                duration_s=time.monotonic() - start,
            ), False
        return result, True

    def _close(self) -> None:
        with self._lock:
            self._finalizer()


def _cleanup(workdir: str, state: dict[str, Any], owner_pid: int) -> None:
    if os.getpid() != owner_pid:  # a forked child exiting must not tear down its parent's sandbox
        return
    worker, state["_worker"] = state.get("_worker"), None
    if worker is not None:
        worker.close()
    _hostio.remove_tree(workdir)


def reap_stale_workdirs(root: str) -> list[str]:
    """Remove work directories left by dead processes (e.g. a killed parent) under ``root``.

    Returns:
        The removed paths.

    Example:
        >>> import tempfile
        >>> root = tempfile.mkdtemp()
        >>> os.mkdir(os.path.join(root, "turnkit-sandbox-999999999-abc"))
        >>> [os.path.basename(p) for p in reap_stale_workdirs(root)]
        ['turnkit-sandbox-999999999-abc']
    """
    removed: list[str] = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(_WORKDIR_PREFIX):
            continue
        pid_text = name[len(_WORKDIR_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or _pid_alive(int(pid_text)):
            continue
        path = os.path.join(root, name)
        _hostio.remove_tree(path)
        removed.append(path)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
