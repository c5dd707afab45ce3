"""LocalSandbox specifics: refusing without bubblewrap, the unsafe mode, lifecycle and cleanup."""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.sandbox.conftest import TEST_LIMITS, local_sandbox
from turnkit.errors import ConfigError, SandboxError
from turnkit.sandbox import LocalSandbox, _bwrap, _frames, _wire
from turnkit.sandbox.local import reap_stale_workdirs

pytestmark = pytest.mark.skipif(_bwrap.bwrap_path() is None, reason="bubblewrap is not installed")


def test_refuses_without_bubblewrap(monkeypatch):
    monkeypatch.setattr(_bwrap, "bwrap_path", lambda: None)
    _bwrap.probe.cache_clear()
    try:
        with pytest.raises(SandboxError, match="unsafe_no_isolation=True"):
            LocalSandbox()
    finally:
        _bwrap.probe.cache_clear()


def test_unsafe_mode_warns_and_still_enforces_timeouts(monkeypatch):
    monkeypatch.setattr(_bwrap, "bwrap_path", lambda: None)
    with pytest.warns(UserWarning, match="WITHOUT isolation"), LocalSandbox(unsafe_no_isolation=True) as sb:
        r = sb.run_python("while True:\n    pass", timeout=1)
    assert r.timed_out


def test_unsafe_mode_runs_in_the_host_workdir():
    with pytest.warns(UserWarning), LocalSandbox(unsafe_no_isolation=True) as sb:
        sb.write_file("x.txt", "1")
        assert sb.run("cat x.txt; pwd", timeout=5).stdout == f"1{sb.workdir}\n"


def test_code_runs_as_an_unprivileged_user():
    with LocalSandbox() as sb:
        assert sb.run("id -u", timeout=5).stdout == "65534\n" and sb.uid != 0


def test_bad_python_path_is_a_config_error():
    with pytest.raises(ConfigError, match="python"):
        LocalSandbox(python="python3")


def test_missing_ro_bind_is_a_config_error():
    with pytest.raises(ConfigError, match="ro_binds"):
        LocalSandbox(ro_binds=["/no/such/dir"])


def test_ro_bind_is_visible_read_only():
    shared = Path(tempfile.mkdtemp(prefix="tk-ro-bind-"))
    shared.chmod(0o755)
    (shared / "lib.py").write_text("VALUE = 5\n")
    try:
        with LocalSandbox(ro_binds=[str(shared)]) as sb:
            r = sb.run_python(f"import sys; sys.path.insert(0, {str(shared)!r}); import lib; print(lib.VALUE)")
            w = sb.run(f"touch {shared}/new", timeout=5)
    finally:
        (shared / "lib.py").unlink()
        shared.rmdir()
    assert r.stdout == "5\n" and w.exit_code != 0, r.stderr


def test_unreachable_ro_bind_is_a_clear_start_error(tmp_path):
    hidden = tmp_path / "hidden"  # under pytest's 0700 base directory: the sandbox uid cannot reach it
    hidden.mkdir()
    with LocalSandbox(ro_binds=[str(hidden)]) as sb, pytest.raises(SandboxError, match="Permission denied"):
        sb.run("true", timeout=5)


def test_close_is_idempotent_and_removes_the_workdir():
    sb = LocalSandbox(persistent=True)
    sb.run("true", timeout=5)
    sb.close()
    sb.close()
    assert not os.path.exists(sb.workdir)


def test_closed_sandbox_refuses_calls():
    sb = LocalSandbox()
    sb.close()
    with pytest.raises(SandboxError, match="closed"):
        sb.run("true")


def test_exception_in_with_block_still_cleans_up():
    with pytest.raises(RuntimeError), LocalSandbox(persistent=True) as sb:
        sb.run("true", timeout=5)
        raise RuntimeError("boom")
    assert sb.closed and not os.path.exists(sb.workdir)


def test_persistent_worker_is_reused_between_calls():
    with LocalSandbox(persistent=True) as sb:
        pids = {sb.run_python("import os; print(os.getppid())", timeout=5).stdout for _ in range(3)}
    assert len(pids) == 1


def test_persistent_sandbox_is_safe_from_threads():
    with LocalSandbox(TEST_LIMITS, persistent=True) as sb:
        results: list[str] = []

        def work(i: int) -> None:
            results.append(sb.run_python(f"print({i} * 2)", timeout=10).stdout)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(results) == sorted(f"{i * 2}\n" for i in range(6))


def test_sandbox_dies_with_a_killed_parent():
    script = textwrap.dedent(
        """
        import sys, time
        from turnkit.sandbox import LocalSandbox
        sb = LocalSandbox(persistent=True)
        sb.run("true", timeout=10)
        print(sb.uid, sb.workdir, flush=True)
        sb.run("sleep 600", timeout=600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    uid_text, workdir = proc.stdout.readline().split()
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while _processes_of_uid(int(uid_text)) and time.monotonic() < deadline:
        time.sleep(0.1)
    reap_stale_workdirs(tempfile.gettempdir())
    assert _processes_of_uid(int(uid_text)) == [] and not os.path.exists(workdir)


def _processes_of_uid(uid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    found.append(int(name))
            except OSError:
                continue
    return found


def test_write_file_refuses_a_symlink_planted_by_the_code():
    victim = Path(tempfile.mkdtemp(prefix="tk-victim-")) / "victim.txt"
    victim.write_text("keep")
    try:
        with LocalSandbox() as sb:
            sb.run(["ln", "-s", str(victim), "planted"], timeout=5)
            with pytest.raises(SandboxError, match="symlink"):
                sb.write_file("planted", "pwned")
        assert victim.read_text() == "keep"
    finally:
        victim.unlink()
        victim.parent.rmdir()


def test_reap_stale_workdirs_keeps_live_owners(tmp_path):
    (tmp_path / f"turnkit-sandbox-{os.getpid()}-live").mkdir()
    (tmp_path / "turnkit-sandbox-999999999-dead").mkdir()
    reap_stale_workdirs(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"turnkit-sandbox-{os.getpid()}-live"]


def test_a_forked_child_exiting_leaves_the_parents_sandbox_alone():
    with LocalSandbox(persistent=True) as sb:
        sb.run("true", timeout=5)
        pid = os.fork()
        if pid == 0:  # the child runs the exit hooks of a normal interpreter shutdown (incl. finalizers)
            atexit._run_exitfuncs()
            os._exit(0)
        os.waitpid(pid, 0)
        assert os.path.isdir(sb.workdir) and sb.run("echo still", timeout=5).stdout == "still\n"


def test_killed_spare_children_are_replaced_on_demand():
    """The worker's zygote forks the next calls' children ahead of time; if they die, the call gets another."""
    if _bwrap.bwrap_path() is None:
        pytest.skip("bubblewrap is not installed")
    with LocalSandbox(persistent=True) as sb:
        assert sb.run_python("print(1)").stdout == "1\n"
        worker = sb._worker.proc.pid
        spares: list[int] = []
        # Two spares are queued after each call: python3 children of the zygote, itself a python3 child of the
        # supervisor (python3 under bwrap). Each is the keeper of its call's jail (an init and the process that
        # takes the request run below it, in the jail's namespaces). The previous call's keeper is SIGKILLed after
        # its reply and may still be tearing down for a moment (a loaded machine): wait until both spares sleep.
        for _ in range(500):
            spares = [
                p
                for p in _descendants(worker)
                if _comm(p) == "python3"
                and _comm(_parent(p)) == "python3"
                and _comm(_parent(_parent(p))) == "python3"
                and _comm(_parent(_parent(_parent(p)))) != "python3"
                and _state(p) not in ("Z", "X")
            ]
            if len(spares) == 2 and all(_state(p) == "S" for p in spares):
                break
            time.sleep(0.01)
        assert len(spares) == 2
        for pid in spares:
            os.kill(pid, signal.SIGKILL)
        r = sb.run_python("print(2)")
        # A killed keeper kills its jail a moment later: the spare is replaced, or, where its code had already
        # started, the call is a worker fault (never a wrong result of the code's) and the worker is replaced.
        assert (r.exit_code, r.stdout) == (0, "2\n") or r.fault == "worker_broken", r
        assert sb.run_python("print(3)").stdout == "3\n"


@pytest.mark.parametrize("jail", [False, True])
def test_the_code_cannot_reach_its_zygote(jail):
    # Under the code's own uid (a root host) its parent is the zygote, which runs as root: the kill is refused. In
    # a jail the code's parent is the jail's init, which ignores signals from inside; the zygote has no pid there.
    # Every later call runs as usual.
    if _bwrap.bwrap_path() is None:
        pytest.skip("bubblewrap is not installed")
    with local_sandbox(persistent=True, jail=jail) as sb:
        r = sb.run_python("import os\nos.kill(os.getppid(), 9)\nprint(os.getppid())", timeout=5)
        if sb._two_uids:
            assert r.exit_code == 1 and "PermissionError" in r.stderr, r
        else:
            assert (r.exit_code, r.stdout) == (0, "1\n"), r
        for i in range(4):
            assert sb.run_python(f"print({i})", timeout=5).stdout == f"{i}\n"


def test_a_broken_worker_says_why_and_is_replaced():
    # A zygote killed from outside (the code cannot reach it): the queued spares still serve the next calls;
    # then the worker answers worker_broken with the zygote's end as the cause, and the sandbox's next call runs
    # on a new worker.
    if _bwrap.bwrap_path() is None:
        pytest.skip("bubblewrap is not installed")
    with LocalSandbox(persistent=True) as sb:
        assert sb.run_python("print(1)", timeout=5).ok
        tree = _descendants(sb._worker.proc.pid)
        supervisor = next(p for p in tree if _comm(p) == "python3" and _comm(_parent(p)) != "python3")
        zygote = next(p for p in _descendants(supervisor) if _parent(p) == supervisor)
        os.kill(zygote, signal.SIGKILL)
        worker, faults = sb._ready_worker(), []
        for i in range(4):
            req = _wire.exec_request(sb.limits, op="python", timeout=5, cwd="/work")
            result, usable = sb._exchange(worker, "r", _frames.encode_frame(dict(req, id="r"), [b"print(1)"]), 5)
            if not usable:
                faults.append((i, result.fault, result.stderr))
                break
        assert faults and faults[0][1] == "worker_broken" and "zygote" in faults[0][2], faults
        assert "exited with status -9" in faults[0][2], faults
        worker.kill()
        sb._worker = None
        assert sb.run_python("print(2)", timeout=5).stdout == "2\n"


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:  # gone while the tree was walked (the previous call's child tearing down)
        return 0


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:  # gone while the tree was walked
        return []


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out
