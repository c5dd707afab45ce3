"""Bubblewrap command lines for :class:`~turnkit.sandbox.local.LocalSandbox`.

The configuration that works on this project's machines (root inside a container-like VM, kernel with
unprivileged user namespaces):

* The host drops to a dedicated unprivileged uid before starting ``bwrap`` (when it runs as root), so the
  sandbox owns no host file and ``RLIMIT_NPROC`` applies (the kernel exempts uid 0).
* ``--unshare-all`` gives new user, PID, network, IPC, UTS and cgroup namespaces; ``--die-with-parent`` and
  ``--new-session``. ``--disable-userns`` (when bwrap supports it) forbids nested user namespaces, except where
  the supervisor jails every call (``jail``): it needs one more level for each call's namespaces, and closes it
  again inside them (:mod:`turnkit.sandbox._calljail`).
* A worker on a root host (``two_uids``) gets a user namespace with two uids, written by the host: the
  supervisor is uid 0 inside (the host's :func:`supervisor_ids`) with only ``CAP_SETUID``, ``CAP_SETGID`` and
  ``CAP_KILL`` kept (``CAP_SYS_RESOURCE`` too, until it has set ``user.max_user_namespaces`` to 0), and a call's
  code is uid 65534 (the host's :func:`allocate_ids`), as on Docker. bwrap waits on ``--userns-block-fd`` until
  the host has written both maps; ``/dev/shm`` is a tmpfs of :data:`SHM_BYTES` that the code can write, ``/dev``
  is the supervisor's.
* ``--as-pid-1`` (supervisor sandboxes, where bwrap supports it): the supervisor itself is PID 1 of the
  namespace. bwrap's own init would be a dumpable process of the sandbox's uid holding the host's pipes, which
  the code could open through ``/proc/1/fd`` or patch through ``/proc/1/mem``; an init also ignores every
  signal from inside its namespace that it has no handler for, so the code cannot kill or stop it.
* The root is a fresh tmpfs holding only read-only ``/usr`` (plus the ``/bin``, ``/lib*`` links), a few
  ``/etc`` files, a minimal ``/dev``, a private ``/proc`` and ``/tmp``, and the writable work directory at
  ``/work``. ``/root``, ``/home``, ``/run`` (the Docker socket), ``/var`` and the project tree are absent.

Example:
    >>> cfg = BwrapConfig(workdir="/tmp/w")
    >>> args = cfg.argv(["/usr/bin/python3", "-c", "pass"])
    >>> args[0].endswith("bwrap"), "--unshare-all" in args, args[-3:]
    (True, True, ['/usr/bin/python3', '-c', 'pass'])
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from turnkit.errors import SandboxError

INNER_UID = 65534
"""The uid (``nobody``) the sandboxed processes see."""

SHM_BYTES = 64 << 20
"""Size of ``/dev/shm`` where the sandbox has two uids (as Docker's default ``--shm-size``)."""

CODE_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_SYS_RESOURCE")
"""What a two-uid supervisor starts with (it drops ``CAP_SYS_RESOURCE`` once it has closed user namespaces)."""

_ETC_FILES = (
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/localtime",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/mime.types",
)
_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")

_UID_BASE = 1 << 30
_uid_counter = itertools.count()
_uid_lock = threading.Lock()


def allocate_ids() -> tuple[int, int] | None:
    """A host ``(uid, gid)`` for a new sandbox, or ``None`` when the host is not root (keep the caller's ids).

    Ids are unique among live sandboxes of live processes: ``2**30 + (pid * 256 + counter % 256) % (2**30 - 1)``.

    Example:
        >>> ids = allocate_ids()
        >>> ids is None or ids[0] >= 2**30
        True
    """
    if os.geteuid() != 0:
        return None
    with _uid_lock:
        n = next(_uid_counter) % 256
    uid = _UID_BASE + ((os.getpid() << 8) | n) % (_UID_BASE - 1)  # + 2 * _UID_BASE stays below 2**32 - 1
    return uid, uid


KILLER_UID = 65533
"""The uid inside a two-uid sandbox that only the killer of the code's processes takes (as its real uid)."""


def supervisor_ids(code_ids: tuple[int, int]) -> tuple[int, int]:
    """The host ``(uid, gid)`` of a two-uid sandbox's supervisor, given its code's (from :func:`allocate_ids`).

    Example:
        >>> supervisor_ids((2**30 + 5, 2**30 + 5)) == (2**31 + 5, 2**31 + 5)
        True
    """
    return code_ids[0] + _UID_BASE, code_ids[1] + _UID_BASE


def two_uid_maps(code_ids: tuple[int, int]) -> tuple[str, str]:
    """The ``uid_map`` and ``gid_map`` of a two-uid sandbox.

    Inside, 0 is the supervisor's host id (:func:`supervisor_ids`), :data:`INNER_UID` the code's, and
    :data:`KILLER_UID` a third host id (``2**31`` above the code's) that only the killer of the code's processes
    takes.

    Example:
        >>> two_uid_maps((7, 8))[0].splitlines()[1:]
        ['65534 7 1', '65533 2147483655 1']
    """
    sup = supervisor_ids(code_ids)
    maps = []
    for i in range(2):
        maps.append(f"0 {sup[i]} 1\n{INNER_UID} {code_ids[i]} 1\n{KILLER_UID} {code_ids[i] + 2 * _UID_BASE} 1\n")
    return maps[0], maps[1]


def supports_two_uids(bwrap: str) -> bool:
    """Whether this bwrap can wait for a host-written user namespace (``--userns-block-fd``, ``--perms``)."""
    return all(_help_mentions(bwrap, opt) for opt in ("--userns-block-fd", "--info-fd", "--perms", "--size BYTES"))


def map_two_uids(info_r: int, block_w: int, code_ids: tuple[int, int], timeout_s: float) -> None:
    """Write a starting bwrap's two-uid maps (see :func:`two_uid_maps`), then let it go on.

    ``info_r`` and ``block_w`` are the host's ends of the pipes passed as :attr:`BwrapConfig.two_uids`; both are
    closed here.

    Raises:
        SandboxError: bwrap ended or said nothing within ``timeout_s``, or the kernel refused the maps.
    """
    import json
    import select
    import time

    deadline = time.monotonic() + timeout_s
    info = b""
    try:
        while not info.rstrip().endswith(b"}"):
            if not select.select([info_r], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise SandboxError(f"bubblewrap did not report its namespaces within {timeout_s:.0f} s")
            chunk = os.read(info_r, 4096)
            if not chunk:
                raise SandboxError("bubblewrap ended before it reported its namespaces")
            info += chunk
        pid = int(json.loads(info)["child-pid"])
        uid_map, gid_map = two_uid_maps(code_ids)
        for name, text in (("uid_map", uid_map), ("gid_map", gid_map)):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(text)
        os.write(block_w, b"1")
    except (OSError, ValueError, KeyError) as exc:
        raise SandboxError(f"cannot give the sandbox its two uids: {exc}") from exc
    finally:
        os.close(info_r)
        os.close(block_w)


def bwrap_path() -> str | None:
    """The ``bwrap`` executable, if installed.

    Example:
        >>> bwrap_path() is None or bwrap_path().endswith("bwrap")
        True
    """
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=8)
def _help_text(bwrap: str) -> str:
    out = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False)
    return out.stdout + out.stderr


def _help_mentions(bwrap: str, option: str) -> bool:
    return option in _help_text(bwrap)


@dataclass(frozen=True)
class BwrapConfig:
    """How to wrap a command in bubblewrap.

    Attributes:
        workdir: Host directory mounted read-write at ``/work``.
        network: Keep the host network (off: an empty network namespace).
        ro_binds: Extra host paths mounted read-only at the same place (e.g. a virtualenv).
        env: Environment of the supervisor inside (the supervisor sets each execution's own environment).
        new_session: Detach from the controlling terminal (off only for private pexpect terminals).
        tmp_mb: Size of the private ``/tmp`` tmpfs (``--size`` where bwrap supports it).
        jail: The supervisor inside jails every call in namespaces of its own, so nested user namespaces stay
            allowed at this level (the jail forbids them to the code).
        two_uids: ``(block_fd, info_fd)``: the user namespace gets two uids, mapped by the host once bwrap has
            written its child's pid on ``info_fd``; bwrap waits on ``block_fd`` until then (see
            :func:`two_uid_maps`). The supervisor closes nested user namespaces itself.
        bwrap: The bubblewrap executable.

    Example:
        >>> "--share-net" in BwrapConfig(workdir="/tmp/w", network=True).argv(["true"])
        True
    """

    workdir: str
    network: bool = False
    ro_binds: Sequence[str] = ()
    env: dict[str, str] = field(default_factory=lambda: {"PATH": "/usr/local/bin:/usr/bin:/bin"})
    new_session: bool = True
    tmp_mb: int = 256
    jail: bool = False
    two_uids: tuple[int, int] | None = None
    bwrap: str = field(default_factory=lambda: bwrap_path() or "/usr/bin/bwrap")

    def argv(self, inner: Sequence[str]) -> list[str]:
        """The full ``bwrap ... -- inner`` command line."""
        args = [self.bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--hostname", "sandbox"]
        if self.two_uids is not None:
            block_fd, info_fd = self.two_uids
            args += ["--userns-block-fd", str(block_fd), "--info-fd", str(info_fd), "--cap-drop", "ALL"]
            for cap in CODE_CAPS:
                args += ["--cap-add", cap]
        elif not self.jail and _help_mentions(self.bwrap, "--disable-userns"):
            args.append("--disable-userns")
        if self.network:
            args.append("--share-net")
        if self.new_session:
            args.append("--new-session")
            if _help_mentions(self.bwrap, "--as-pid-1"):
                # No bwrap init: the supervisor is PID 1, which the code cannot signal, and there is no dumpable
                # long-lived process holding the host's pipes that the code could open through /proc/1.
                args.append("--as-pid-1")
        inner_id = "0" if self.two_uids is not None else str(INNER_UID)
        args += ["--uid", inner_id, "--gid", inner_id]
        args += ["--tmpfs", "/", "--ro-bind", "/usr", "/usr"]
        for name in _ROOT_LINKS:
            path = "/" + name
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        for path in _ETC_FILES:
            args += ["--ro-bind-try", path, path]
        if self.network:
            args += ["--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"]
        args += ["--dev", "/dev", "--proc", "/proc"]
        if self.two_uids is not None:
            args += ["--perms", "01777"]  # the supervisor's tmpfs: the code's to write, as a host's /tmp
        if _help_mentions(self.bwrap, "--size BYTES"):
            args += ["--size", str(self.tmp_mb * 1024 * 1024)]
        args += ["--tmpfs", "/tmp", "--dir", "/run"]
        if self.two_uids is not None:
            args += ["--perms", "01777", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
        if self.two_uids is not None:  # bwrap makes a bind's missing parents 0700, and root's: the code's way there
            args += _open_parents(self.ro_binds)
        for path in self.ro_binds:  # after /tmp, so that binds under /tmp are not hidden by the tmpfs
            args += ["--ro-bind", path, path]
        # A two-uid supervisor cannot enter the code's /work (mode 0700); each call enters it as the code's uid.
        cwd = "/" if self.two_uids is not None else "/work"
        args += ["--bind", self.workdir, "/work", "--chdir", cwd, "--remount-ro", "/", "--clearenv"]
        for key, value in self.env.items():
            args += ["--setenv", key, value]
        return [*args, "--", *inner]


def _open_parents(paths: Sequence[str]) -> list[str]:
    """``--perms 0755 --dir`` for each parent of ``paths`` that the sandbox's own root or ``/tmp`` lacks.

    Parents under a path bound from the host (``/usr``, ``/etc``...) exist there already.

    Example:
        >>> _open_parents(["/tmp/a/b", "/opt/venv", "/usr/lib/x"])
        ['--perms', '0755', '--dir', '/tmp/a', '--perms', '0755', '--dir', '/opt']
    """
    bound = {"usr", "etc", "dev", "proc", "work", "run", *_ROOT_LINKS}
    made = {"/", "/tmp"}
    args: list[str] = []
    for path in paths:
        parts = os.path.normpath(path).strip("/").split("/")
        if parts[0] in bound:
            continue
        for depth in range(1, len(parts)):
            parent = "/" + "/".join(parts[:depth])
            if parent not in made:
                made.add(parent)
                args += ["--perms", "0755", "--dir", parent]
    return args


@functools.lru_cache(maxsize=4)
def probe(network: bool = False) -> None:
    """Check once per process that bubblewrap can build a sandbox here; raise a clear error if not.

    Raises:
        SandboxError: If ``bwrap`` is missing or cannot create the namespaces.

    Example:
        >>> probe() if bwrap_path() else None
    """
    bwrap = bwrap_path()
    if bwrap is None:
        raise SandboxError(
            "bubblewrap (bwrap) is not installed: install it (apt-get install bubblewrap) or pass "
            "LocalSandbox(unsafe_no_isolation=True) to run without isolation"
        )
    import tempfile

    with tempfile.TemporaryDirectory(prefix="turnkit-bwrap-probe-") as tmp:
        ids = allocate_ids()
        if ids is not None:
            os.chown(tmp, *ids)
        argv = BwrapConfig(workdir=tmp, network=network, bwrap=bwrap).argv(["/bin/sh", "-c", "exit 0"])
        kwargs = {"user": ids[0], "group": ids[1], "extra_groups": []} if ids else {}
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False, **kwargs)  # type: ignore[call-overload]
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxError(f"bubblewrap probe failed: {exc}") from exc
    if out.returncode != 0:
        raise SandboxError(
            f"bubblewrap cannot create a sandbox on this host (exit {out.returncode}): {out.stderr.strip()}. "
            "Unprivileged user namespaces must be enabled (sysctl kernel.unprivileged_userns_clone=1, "
            "user.max_user_namespaces > 0)."
        )
