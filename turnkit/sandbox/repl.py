"""Persistent interactive sessions (pexpect): a Python REPL and a bash shell inside a sandbox.

State persists between calls (variables, imports, the shell's directory and environment), unlike
:meth:`Sandbox.run_python`. The program runs on a private pseudo-terminal in either backend: bubblewrap on
the host, or ``docker exec -it`` in the container.

Synchronisation does not depend on echo or timing: each session sets a unique prompt, and every call is a
single line ``_tk_run(id, base64)`` that prints ``STX TKS id ETX`` before the code's output and
``STX TKE id:status ETX`` after it. The caller reads from the start marker to the next prompt. Code is sent
base64-encoded in lines of at most 2 KiB (terminals limit line length), so any text, including NUL bytes,
arrives intact; the lines carry their call's id, so a call cut off while its code is still being sent leaves
nothing in front of the next call's code. A process forked by Python code exits at the end of the call instead
of returning to the session's prompt, and :meth:`PexpectSession.stop_background` kills everything a call left
running below the program. Output is capped; a timeout or a flood sends Ctrl-C, and a session that
does not come back (or has crashed) is restarted. stdout and stderr share the terminal, so both arrive in
``stdout``.

Example:
    >>> from turnkit.sandbox import LocalSandbox
    >>> with LocalSandbox() as sb, PythonSession(sb) as py:
    ...     _ = py.run("x = 20")
    ...     py.run("x + 22").stdout
    '42\\n'
"""

from __future__ import annotations

import base64
import itertools
import re
import secrets
import time
import zlib
from types import TracebackType
from typing import Any, Protocol

import pexpect

from turnkit.errors import SandboxError
from turnkit.sandbox._spawn import in_spawner_thread
from turnkit.sandbox.base import to_bytes
from turnkit.sandbox.local import InteractiveCommand
from turnkit.types import ExecResult

_CHUNK = 2048
_INTERRUPT_GRACE_S = 3.0
_START_S = 20.0
_END_REAP_S = 2.0

_PY_SETUP = r"""
import sys as _tk_sys, base64 as _tk_b64, ast as _tk_ast, traceback as _tk_tb
_tk_sys.ps1, _tk_sys.ps2 = PROMPT, PROMPT2
_tk_pid = __import__("os").getpid()
_tk_sys.stdout.write("\x02TKPID" + str(_tk_pid) + "\x03")
_tk_buf = ["", []]
_tk_ns = {"__name__": "__main__", "__builtins__": __builtins__}
def _tk_b(run_id, chunk):
    if _tk_buf[0] != run_id:
        _tk_buf[0] = run_id
        _tk_buf[1].clear()
    _tk_buf[1].append(chunk)
def _tk_run(run_id, chunk):
    src = ("".join(_tk_buf[1]) if _tk_buf[0] == run_id else "") + chunk
    _tk_buf[0] = ""
    _tk_buf[1].clear()
    out = _tk_sys.stdout
    out.write("\x02TKS" + run_id + "\x03")
    out.flush()
    status = 0
    try:
        tree = _tk_ast.parse(_tk_b64.b64decode(src), "<session>")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], _tk_ast.Expr) else None
        exec(compile(tree, "<session>", "exec"), _tk_ns)
        if last is not None:
            value = eval(compile(_tk_ast.Expression(last.value), "<session>", "eval"), _tk_ns)
            if value is not None:
                print(repr(value))
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=_tk_sys.stderr)
    except KeyboardInterrupt:
        status = 130
        print("KeyboardInterrupt", file=_tk_sys.stderr)
    except BaseException as exc:
        status = 1
        _tk_tb.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    finally:
        for stream in (_tk_sys.stdout, _tk_sys.stderr):
            stream.flush()
        if __import__("os").getpid() != _tk_pid:  # a forked child must not return to the session's prompt
            __import__("os")._exit(status)
        out.write("\x02TKE" + run_id + ":" + str(status) + "\x03")
        out.flush()
_tk_held = {}
def _tk_reap():
    import os, signal, time
    me, sid = os.getpid(), str(os.getsid(0))
    def tree():  # (pid, state, parent, start time) of every descendant, zombies too
        kids, info, found, todo, ours = {}, {}, [], [me], []
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    with open("/proc/%s/stat" % p) as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    info[int(p)] = (int(p), fields[0], int(fields[1]), fields[19])
                    kids.setdefault(int(fields[1]), []).append(int(p))
                    if fields[3] == sid and fields[0] not in "ZX" and int(p) not in (1, me):
                        ours.append(int(p))
                except (OSError, ValueError, IndexError):
                    pass
        while todo:
            for c in kids.pop(todo.pop(), ()):
                found.append(info.pop(c))
                todo.append(c)
        # and what runs in the program's session without being below it: clone(CLONE_PARENT) in the REPL's own
        # process makes a sibling
        return found + [info[p] for p in ours if p in info]
    def held():  # pids of children the code holds a running subprocess/multiprocessing handle of
        import gc
        mods = _tk_sys.modules
        kinds = [getattr(mods.get(m), "Popen", None) for m in ("subprocess", "multiprocessing.popen_fork")]
        kinds = tuple(k for k in kinds if isinstance(k, type))
        if not kinds:
            return set()
        active = getattr(mods.get("subprocess"), "_active", None)
        dropped = {id(o) for o in active} if isinstance(active, list) else set()
        found = set()
        for o in gc.get_objects():
            if issubclass(type(o), kinds) and id(o) not in dropped:
                try:  # the code's own handle class may raise here: then it is not a handle we can honour
                    if o.returncode is None:
                        found.add(o.pid)
                except Exception:
                    continue
        return found
    found = tree()
    if all(state == "Z" and parent == me and _tk_held.get((p, start)) for p, state, parent, start in found):
        _tk_sys.stdout.write("\x02TKR0\x03")
        _tk_sys.stdout.flush()
        return
    for _ in range(200):  # freeze first: a stopped process cannot fork, so a fork bomb stops refilling
        running = [p for p, state, _, _ in found if state not in "TtZX"]
        if not running:
            break
        for p in running:
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                pass
        found = tree()
    killed = set()
    for _ in range(50):
        hit = False
        for p, state, _, _ in tree():
            if state not in "ZX":
                try:
                    os.kill(p, signal.SIGKILL)
                    hit = True
                    killed.add(p)
                except OSError:
                    pass
        if not hit:
            break
    # The dead are the program's children now (a subreaper adopts orphans): wait for each, except the children
    # the code still holds a handle of (their exit status is the code's to read, as before).
    keep, zombies, end = None, {}, time.monotonic() + 2.0
    while True:
        left = 0
        for p, state, parent, start in tree():
            if state == "Z" and parent == me:
                if (p, start) not in _tk_held:
                    keep = held() if keep is None else keep
                    _tk_held[p, start] = p in keep
                zombies[p, start] = _tk_held[p, start]
                try:
                    if zombies[p, start] or os.waitpid(p, os.WNOHANG)[0]:
                        continue
                except OSError:
                    pass
            left += 1
        if not left or time.monotonic() > end:
            break
        time.sleep(0.002)
    _tk_held.clear()
    _tk_held.update((k, v) for k, v in zombies.items() if v)
    _tk_sys.stdout.write("\x02TKR" + str(len(killed)) + "\x03")
    _tk_sys.stdout.flush()
"""

_SH_SETUP = r"""
PS1=PROMPT; PS2=PROMPT2; unset PROMPT_COMMAND; set +o history 2>/dev/null
printf '\002TKPID%s\003' "$$"
bind 'set enable-bracketed-paste off' 2>/dev/null; stty -echo 2>/dev/null
_tk_buf=; _tk_bid=
_tk_b() { [ "$_tk_bid" = "$1" ] || { _tk_buf=; _tk_bid=$1; }; _tk_buf="$_tk_buf$2"; }
_tk_run() {
  printf '\002TKS%s\003' "$1"
  if [ "$_tk_bid" = "$1" ]; then _tk_src="$_tk_buf$2"; else _tk_src="$2"; fi
  _tk_buf=; _tk_bid=
  eval "$(printf %s "$_tk_src" | base64 -d)"
  _tk_rc=$?
  printf '\002TKE%s:%s\003' "$1" "$_tk_rc"
}
_tk_tree() {
  local p s; local -A kids=() st=()
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    read -r s 2>/dev/null < "/proc/$p/stat" || continue
    s=${s##*) }; set -- $s
    st[$p]=$1; kids[$2]+=" $p"
  done
  _tk_up=; _tk_go=; set -- ${kids[$$]-}
  while [ $# -gt 0 ]; do
    p=$1; shift; set -- "$@" ${kids[$p]-}
    case ${st[$p]} in Z|X) ;; T|t) _tk_up+=" $p" ;; *) _tk_up+=" $p"; _tk_go+=" $p" ;; esac
  done
}
_tk_reap() {
  local - IFS=$' \t\n' p n=0 pass=0 seen=" " _tk_up _tk_go
  set +eufx
  _tk_tree
  while [ -n "$_tk_go" ] && [ "$pass" -lt 200 ]; do
    kill -STOP $_tk_go 2>/dev/null; pass=$((pass + 1)); _tk_tree
  done
  pass=0
  while [ -n "$_tk_up" ] && [ "$pass" -lt 50 ]; do
    for p in $_tk_up; do
      kill -9 "$p" 2>/dev/null || continue
      case "$seen" in *" $p "*) ;; *) seen="$seen$p "; n=$((n + 1)) ;; esac
    done
    pass=$((pass + 1)); _tk_tree
  done
  printf '\002TKR%s\003' "$n"
}
"""


class _Backend(Protocol):
    def interactive_command(self, argv: list[str], *, env: dict[str, str] | None = None) -> InteractiveCommand: ...

    def end_interactive(self, pid: int) -> None: ...


class PexpectSession:
    """Shared machinery of :class:`PythonSession` and :class:`ShellSession`.

    Args:
        sandbox: A :class:`~turnkit.sandbox.LocalSandbox` or :class:`~turnkit.sandbox.DockerSandbox`.
        timeout: Default seconds per call.
        output_bytes: Captured bytes per call (``sandbox.limits.output_bytes`` by default).

    Example:
        >>> PexpectSession.__subclasses__()[0].__name__
        'PythonSession'
    """

    argv: tuple[str, ...] = ()

    def __init__(self, sandbox: Any, *, timeout: float = 10.0, output_bytes: int | None = None) -> None:
        if not hasattr(sandbox, "interactive_command"):
            raise SandboxError(f"{type(sandbox).__name__} cannot host interactive sessions")
        self.sandbox: _Backend = sandbox
        self.timeout = timeout
        self.output_bytes = output_bytes or sandbox.limits.output_bytes
        self.restarts = 0
        self._ids = itertools.count(1)
        self._child: pexpect.spawn | None = None
        self._pending = b""
        self._inner_pid: int | None = None
        self._closed = False
        nonce = secrets.token_hex(6)
        self._prompt = f"[tk-{nonce}]> "
        self._prompt2 = f"[tk-{nonce}]. "
        self._start()

    # --- lifecycle --------------------------------------------------------------------------------

    def __enter__(self) -> PexpectSession:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _start(self) -> None:
        cmd = self.sandbox.interactive_command(list(self.argv))
        try:
            child = in_spawner_thread(  # the sandbox dies with the thread that forks it (PDEATHSIG)
                pexpect.spawn,
                cmd.argv[0],
                cmd.argv[1:],
                env=cmd.env,
                preexec_fn=cmd.preexec if cmd.uid is not None else None,
                echo=False,
                encoding=None,
                dimensions=(50, 4000),
                timeout=None,
            )
        except pexpect.ExceptionPexpect as exc:
            raise SandboxError(f"cannot start an interactive session: {exc}") from exc
        child.delaybeforesend = None  # pexpect sleeps 50 ms before every send by default
        self._child = child
        self._pending = b""
        setup = self._setup_source().replace("PROMPT2", repr(self._prompt2)).replace("PROMPT", repr(self._prompt))
        child.sendline(self._exec_line(setup))
        try:
            greeting = self._read_until(self._prompt.encode(), deadline=time.monotonic() + _START_S)
        except (pexpect.EOF, TimeoutError) as exc:
            self._kill()
            raise SandboxError(f"the interactive session did not start: {type(exc).__name__}") from None
        found = re.search(rb"\x02TKPID(\d+)\x03", greeting)
        self._inner_pid = int(found.group(1)) if found else None

    def restart(self) -> None:
        """Kill the program and start a fresh one (all session state is lost).

        Example:
            >>> from turnkit.sandbox import LocalSandbox
            >>> with LocalSandbox() as sb, ShellSession(sb) as sh:
            ...     _ = sh.run("X=1"); sh.restart()
            ...     sh.run("echo ${X:-unset}").stdout, sh.restarts
            ('unset\\n', 1)
        """
        if self._closed:
            raise SandboxError("the session is closed")
        self._end()
        self.restarts += 1
        self._start()

    def close(self) -> None:
        """Stop the program and what it started. Idempotent."""
        if not self._closed:
            self._closed = True
            self._end()

    def _end(self) -> None:
        """Kill what the program started (when it still answers), then the program.

        Killing the program alone is not enough in every backend: ``DockerSandbox.end_interactive`` kills its
        session, and a daemon in a session of its own, reparented to the container's init when the program dies,
        would live on until the container closes.
        """
        if self.alive:
            assert self._child is not None
            try:
                self._child.sendline(self._reap_line())
                self._read_until(self._prompt.encode(), deadline=time.monotonic() + _END_REAP_S)
            except (pexpect.EOF, TimeoutError, OSError):
                pass
        self._kill()

    def _kill(self) -> None:
        if self._child is not None:
            self._child.close(force=True)
            self._child = None
        if self._inner_pid is not None:  # e.g. `docker exec` leaves the program running when the CLI dies
            self.sandbox.end_interactive(self._inner_pid)
            self._inner_pid = None

    @property
    def alive(self) -> bool:
        """Whether the program is running."""
        return self._child is not None and self._child.isalive()

    def interrupt(self) -> None:
        """Send Ctrl-C to the running program (the call in progress ends with status 130)."""
        if self._child is not None:
            self._child.sendintr()

    def stop_background(self, *, timeout: float = 5.0) -> int | None:
        """Kill every process the session started that is still running (background jobs, forked children, daemons).

        The program is a child subreaper (the sandbox's supervisor makes it one before it execs the program), so
        whatever a call started stays its descendant, whatever session or process group it moved to (a double
        fork, ``setsid``, ``start_new_session=True``): the reaper kills every descendant of the program (and, in
        the Python REPL, whatever else is in the program's session: ``clone(CLONE_PARENT)`` in the REPL's own
        process makes a sibling), freezing them first (SIGSTOP: a stopped process cannot fork, so a fork bomb
        stops refilling), without forking (a fork bomb may have used up the process limit). The program itself
        and its state stay. The dead are the program's children then: bash waits for them itself, the Python
        REPL waits for them here, except the children the code holds a running ``subprocess`` or
        ``multiprocessing`` handle of, whose exit status (-9) stays the code's to read.

        Returns:
            The number of processes killed, or ``None`` when the session did not answer and was restarted.

        Example:
            >>> from turnkit.sandbox import LocalSandbox
            >>> with LocalSandbox() as sb, ShellSession(sb) as sh:
            ...     _ = sh.run("X=1; sleep 300 & sleep 300 &")
            ...     sh.stop_background(), sh.run("echo $X; jobs -r | wc -l").stdout
            (2, '1\\n0\\n')
        """
        if self._closed:
            raise SandboxError("the session is closed")
        if not self.alive:
            return None
        assert self._child is not None
        self._child.sendline(self._reap_line())
        try:
            head = self._read_until(self._prompt.encode(), deadline=time.monotonic() + timeout)
        except (pexpect.EOF, TimeoutError):
            self._kill()
            self.restarts += 1
            self._start()
            return None
        found = re.search(rb"\x02TKR(\d+)\x03", head)
        return int(found.group(1)) if found else 0

    # --- running code -----------------------------------------------------------------------------

    def run(self, code: str | bytes, *, timeout: float | None = None) -> ExecResult:
        """Run code in the session; state persists across calls.

        Args:
            code: Source text (Python or bash, depending on the session).
            timeout: Seconds before Ctrl-C (then a restart if the program does not come back).

        Returns:
            The result; ``stdout`` holds the terminal output (stdout and stderr together).
        """
        if self._closed:
            raise SandboxError("the session is closed")
        if not self.alive:
            self._kill()
            self.restarts += 1
            self._start()
        child = self._child
        assert child is not None
        wall = self.timeout if timeout is None else timeout
        run_id = str(next(self._ids))
        payload = base64.b64encode(to_bytes(code)).decode()
        chunks = [payload[i : i + _CHUNK] for i in range(0, len(payload), _CHUNK)] or [""]
        start = time.monotonic()
        try:
            for chunk in chunks[:-1]:
                child.sendline(self._buffer_line(run_id, chunk))
                self._read_until(self._prompt.encode(), deadline=start + wall)
            child.sendline(self._run_line(run_id, chunks[-1]))
            return self._collect(run_id, start, wall)
        except pexpect.EOF:
            return self._crashed(start)
        except TimeoutError:
            return self._recover(b"", truncated=False, start=start, timed_out=True)

    def _collect(self, run_id: str, start: float, wall: float) -> ExecResult:
        begin = f"\x02TKS{run_id}\x03".encode()
        self._read_until(begin, deadline=start + wall)
        out = _Capped(self.output_bytes)
        end = run_id.encode()
        prompt = self._prompt.encode()
        scan = b""
        while True:
            try:
                chunk = self._read(deadline=start + wall)
            except TimeoutError:
                return self._recover(out.data, truncated=out.truncated, start=start, timed_out=True)
            out.add(chunk)
            scan += chunk
            at = scan.find(prompt)
            if at >= 0:
                self._pending = scan[at + len(prompt) :]
                data = out.data if out.truncated else out.data[: len(out.data) - (len(scan) - at)]
                status, text = _split_status(data, end)
                return _result(text, status, start, truncated=out.truncated)
            scan = scan[-len(prompt) :]
            if out.truncated:
                return self._recover(out.data, truncated=True, start=start, timed_out=False)

    def _recover(self, data: bytes, *, truncated: bool, start: float, timed_out: bool) -> ExecResult:
        """Ctrl-C, wait for the prompt, restart if it does not come back."""
        note = ""
        try:
            self.interrupt()
            self._read_until(self._prompt.encode(), deadline=time.monotonic() + _INTERRUPT_GRACE_S)
        except (pexpect.EOF, TimeoutError):
            self._kill()
            self.restarts += 1
            self._start()
            note = "[turnkit session] the program did not respond to Ctrl-C and was restarted\n"
        status = _split_status(data, None)[0]
        return ExecResult(
            exit_code=status if status is not None else 130,
            stdout=data.replace(b"\r\n", b"\n").decode("utf-8", "replace"),
            stderr=note,
            timed_out=timed_out,
            truncated=truncated,
            duration_s=time.monotonic() - start,
        )

    def _crashed(self, start: float) -> ExecResult:
        child = self._child
        code = -1
        if child is not None:
            child.close(force=True)
            if child.signalstatus is not None:
                code = -int(child.signalstatus)
            elif child.exitstatus is not None:
                code = int(child.exitstatus)
                # bwrap and `docker exec` report death by signal N as 128 + N.
                code = -(code - 128) if 128 < code < 160 else code
        self._child = None
        self._kill()  # what the dead program left behind goes now (Docker: what its container's init adopted)
        return ExecResult(
            exit_code=code,
            stderr="[turnkit session] the program exited; it restarts on the next call\n",
            duration_s=time.monotonic() - start,
        )

    def _read(self, *, deadline: float) -> bytes:
        """The next bytes from the terminal. Raises TimeoutError at the deadline, pexpect.EOF at exit."""
        if self._pending:
            data, self._pending = self._pending, b""
            return data
        child = self._child
        assert child is not None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no output from the session before the deadline")
            try:
                return bytes(child.read_nonblocking(65536, timeout=min(remaining, 1.0)))
            except pexpect.TIMEOUT:
                continue

    def _read_until(self, marker: bytes, *, deadline: float, keep: int = 4096) -> bytes:
        """Consume terminal output up to and including ``marker``; keep what follows it for later reads.

        Returns:
            The first ``keep`` bytes that came before the marker.
        """
        scan = b""
        head = b""
        while True:
            chunk = self._read(deadline=deadline)
            if len(head) < keep:
                head += chunk[: keep - len(head)]
            scan += chunk
            at = scan.find(marker)
            if at >= 0:
                self._pending = scan[at + len(marker) :]
                return head
            scan = scan[-len(marker) :]

    # --- language-specific pieces ------------------------------------------------------------------

    def _setup_source(self) -> str:
        raise NotImplementedError

    def _exec_line(self, setup: str) -> str:
        """One line that runs `setup`; under the terminal's 4095-byte line limit (longer lines are cut)."""
        raise NotImplementedError

    def _buffer_line(self, run_id: str, chunk: str) -> str:
        raise NotImplementedError

    def _run_line(self, run_id: str, chunk: str) -> str:
        raise NotImplementedError

    def _reap_line(self) -> str:
        raise NotImplementedError


class _Capped:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = b""
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if len(chunk) > room:
            self.data += chunk[: max(room, 0)]
            self.truncated = True
        else:
            self.data += chunk


_END_MARK = re.compile(rb"\x02TKE(\d+):(-?\d+)\x03")


def _split_status(data: bytes, run_id: bytes | None) -> tuple[int | None, bytes]:
    """The exit status in the last end marker (of call ``run_id``, or of any call) and the output before it."""
    matches = [m for m in _END_MARK.finditer(data) if run_id is None or m.group(1) == run_id]
    if not matches:
        return None, data
    return int(matches[-1].group(2)), data[: matches[-1].start()]


def _result(text: bytes, status: int | None, start: float, *, truncated: bool) -> ExecResult:
    return ExecResult(
        exit_code=130 if status is None else status,
        stdout=text.replace(b"\r\n", b"\n").decode("utf-8", "replace"),
        truncated=truncated,
        duration_s=time.monotonic() - start,
    )


class PythonSession(PexpectSession):
    """A persistent Python REPL in a sandbox. The value of a final expression is printed, as in a REPL.

    Args:
        sandbox: The backend to run in.
        timeout: Default seconds per call.
        output_bytes: Captured bytes per call.

    Example:
        >>> from turnkit.sandbox import LocalSandbox
        >>> with LocalSandbox() as sb, PythonSession(sb) as py:
        ...     r = py.run("1 / 0")
        >>> r.exit_code, r.stdout.strip().splitlines()[-1]
        (1, 'ZeroDivisionError: division by zero')
    """

    argv = ("python3", "-I", "-q", "-u", "-i")

    def _setup_source(self) -> str:
        return _PY_SETUP

    def _exec_line(self, setup: str) -> str:
        packed = base64.b64encode(zlib.compress(setup.encode(), 9)).decode()
        return f"exec(__import__('zlib').decompress(__import__('base64').b64decode('{packed}')).decode())"

    def _buffer_line(self, run_id: str, chunk: str) -> str:
        return f"_tk_b('{run_id}', '{chunk}')"

    def _run_line(self, run_id: str, chunk: str) -> str:
        return f"_tk_run('{run_id}', '{chunk}')"

    def _reap_line(self) -> str:
        return "_tk_reap()"


class ShellSession(PexpectSession):
    """A persistent bash shell in a sandbox (working directory and variables persist).

    Args:
        sandbox: The backend to run in.
        timeout: Default seconds per call.
        output_bytes: Captured bytes per call.

    Example:
        >>> from turnkit.sandbox import LocalSandbox
        >>> with LocalSandbox() as sb, ShellSession(sb) as sh:
        ...     _ = sh.run("mkdir -p d && cd d && N=7")
        ...     sh.run("pwd; echo $N; false").stdout, sh.run("false").exit_code
        ('/work/d\\n7\\n', 1)
    """

    argv = ("bash", "--norc", "--noprofile", "-i")

    def _setup_source(self) -> str:
        return _SH_SETUP

    def _exec_line(self, setup: str) -> str:
        packed = base64.b64encode(setup.encode()).decode()
        return f"eval \"$(printf %s '{packed}' | base64 -d)\""

    def _buffer_line(self, run_id: str, chunk: str) -> str:
        return f"_tk_b '{run_id}' '{chunk}'"

    def _run_line(self, run_id: str, chunk: str) -> str:
        return f"_tk_run '{run_id}' '{chunk}'"

    def _reap_line(self) -> str:
        return "_tk_reap"
