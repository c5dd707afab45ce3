"""Sandboxed code execution: run untrusted, model-written code and commands safely.

Backends share one contract (:class:`Sandbox`): ``run``, ``run_python``, ``write_file``, ``read_file`` and an
idempotent ``close``; every outcome of the code (exit, crash, timeout, memory blow-up, flood of output) is an
:class:`~turnkit.types.ExecResult`, and :class:`~turnkit.errors.SandboxError` means the infrastructure failed.

* :class:`LocalSandbox` (embedded default): bubblewrap namespaces + rlimits; ``persistent=True`` keeps a warm
  supervisor that hands each call a child it forked ahead of time, for millisecond evaluations.
* :class:`DockerSandbox`: a locked-down container per sandbox (no network, read-only root, tmpfs work dir,
  cgroup memory/CPU/pids limits), an offline-built image, guaranteed cleanup.
* :class:`PythonSession`, :class:`ShellSession`: persistent interactive REPL/shell (pexpect) in either backend.
* :class:`SandboxPool`: pre-started sandboxes handed out one per task and replaced in the background.
* :func:`run_batch`: load code once and evaluate many calls, each with its own time limit, in one round trip.

Threat model
------------
The adversary is the code being run: model-generated programs that may be buggy, greedy or hostile
(reward hacking, prompt-injected payloads). It runs as an unprivileged user with no capabilities.

Covered (tested in ``tests/sandbox`` for every backend):

* **Network**: off by default; the sandbox has its own empty network namespace (no loopback service of the
  host, no route anywhere). ``Limits(network=True)`` turns this off deliberately.
* **Filesystem**: the root is read-only; only the private work directory ``/work`` and a private ``/tmp`` are
  writable. Host home directories, ``/root``, ``/run`` (the Docker socket), ``/var`` and the project tree are
  not mounted. Host-side ``write_file``/``read_file`` never follow links planted by the sandbox.
* **Secrets**: the environment is rebuilt from scratch (no host variable is inherited); the sandbox owns no
  host file.
* **Resources**: wall timeout (the whole process tree is killed), CPU seconds, memory, processes (fork bombs),
  file size, open files, and captured output (read incrementally; a flood is cut and killed, never buffered).
* **Calls apart** (:mod:`turnkit.sandbox._calljail`): nothing a call changes reaches a later one. On Docker,
  and on bubblewrap where the host runs as root, the code runs as ``nobody`` and the supervisor, its zygote and
  the next calls' spares as root with a few capabilities (bubblewrap's user namespace then maps two host uids):
  the uid check for rlimits, priority, scheduler, affinity and signals fails, and after each call every process
  of the code dies at once (``kill(-1)`` with the code's uid), its SysV IPC objects and ``/dev/shm`` files (64 MB)
  go with it, and ``/dev`` is not the code's. On bubblewrap run by an unprivileged user each call runs instead in
  new user, PID, IPC and mount namespaces, so those processes have no pid it could name; its processes die with
  it (the kernel kills the namespace when the call's init ends); SysV IPC, ``/dev/shm`` (64 MB) and a read-only
  ``/dev`` are its own.
* **Leftovers**: orphans, daemons and zombies die with their call; sandboxes, work dirs and containers are removed
  on ``close``, on interpreter exit, and — for Docker — by a watchdog when the parent is killed. Stale ones from
  dead owners are reaped at the next start.
* **Grading trust boundary** (docs/sandbox.md): calls of a persistent worker are forked by a zygote that never
  held a request or reply, so the code inherits no earlier call's data; the supervisor and zygote are
  non-dumpable and PID 1 is the supervisor (bubblewrap) or a non-dumpable init (Docker), so the code can neither
  read nor write them; replies carry the request's random id, and a dead, hung or desynchronised worker is
  replaced, its call's ``ExecResult.fault`` saying why.
* **Robustness**: a segfault, ``os.abort``, NUL bytes or invalid UTF-8 in code or output, a garbage end report,
  or the code trying to kill its own supervisor all come back as that call's result, never as a fault.

Not covered:

* **Kernel exploits**: namespaces share the host kernel; there is no seccomp filter in the local backend
  (Docker applies its default seccomp profile). Use a VM (gVisor, Firecracker) for hostile code at scale.
* **Side channels and timing**, and CPU contention between concurrent sandboxes (local: rlimits, no cgroups).
* **Local memory accounting** is per process (``RLIMIT_AS``), so a call may use up to ``pids x memory``;
  the Docker backend also caps the whole container with a cgroup.
* **Disk**: the local work directory lives on the host disk and is bounded per file (``RLIMIT_FSIZE``),
  not in total; Docker's tmpfs is bounded in total (``Limits.disk_mb``).
* **Files**: ``/work`` (and ``/tmp`` of a persistent sandbox) persist between calls by design; a call that fills
  or locks them can slow or fail later calls of the same sandbox (graders open and empty ``/work`` first).
* ``unsafe_no_isolation=True`` keeps limits and cleanup but removes all isolation.

Example:
    >>> from turnkit.sandbox import LocalSandbox, Limits
    >>> with LocalSandbox(Limits(wall_time_s=5)) as sb:
    ...     r = sb.run_python("print(sum(range(10)))")
    >>> r.ok, r.stdout
    (True, '45\\n')
"""

from turnkit.sandbox.base import Limits, Sandbox, SandboxBase
from turnkit.sandbox.batch import BatchResult, CallResult, run_batch
from turnkit.sandbox.docker import DockerSandbox, docker_available
from turnkit.sandbox.local import LocalSandbox
from turnkit.sandbox.pool import SandboxPool
from turnkit.sandbox.repl import PythonSession, ShellSession
from turnkit.types import ExecResult

__all__ = [
    "BatchResult",
    "CallResult",
    "DockerSandbox",
    "ExecResult",
    "Limits",
    "LocalSandbox",
    "PythonSession",
    "Sandbox",
    "SandboxBase",
    "SandboxPool",
    "ShellSession",
    "docker_available",
    "run_batch",
]
