"""Symlink-safe file access to a sandbox's work directory from the host.

The sandboxed code owns the work directory and may plant symlinks, hard links or FIFOs in it, hoping that
the host (often root) follows them. Every path component is therefore opened with ``O_NOFOLLOW`` relative
to its parent's descriptor, FIFOs and devices are refused, and files with extra hard links are refused.

Example:
    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> write_under(root, "a/b.txt", b"hi")
    >>> read_under(root, "a/b.txt", max_bytes=10)
    b'hi'
"""

from __future__ import annotations

import contextlib
import os
import stat

from turnkit.errors import SandboxError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _walk(root: str, parts: list[str], *, create: bool, owner: tuple[int, int] | None) -> int:
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                    if owner is not None:
                        os.chown(part, *owner, dir_fd=fd, follow_symlinks=False)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError:
        os.close(fd)
        raise
    return fd


def _split(rel: str) -> tuple[list[str], str]:
    parts = rel.split("/")
    return parts[:-1], parts[-1]


def write_under(root: str, rel: str, data: bytes, *, owner: tuple[int, int] | None = None) -> None:
    """Write ``data`` to ``root/rel`` without following links planted by the sandbox.

    Args:
        root: The host directory (the sandbox's work directory).
        rel: A normalised relative path (see :func:`turnkit.sandbox.base.sandbox_path`).
        data: The bytes to write.
        owner: ``(uid, gid)`` to give new files and directories (the sandbox's ids).

    Raises:
        SandboxError: If a component is a symlink, the target is not a regular file, or it has other links.

    Example:
        >>> import tempfile
        >>> root = tempfile.mkdtemp()
        >>> os.symlink("/etc/passwd", os.path.join(root, "evil"))
        >>> write_under(root, "evil", b"x")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        turnkit.errors.SandboxError: cannot write 'evil' in the sandbox: it is a symlink or ...
    """
    dirs, name = _split(rel)
    try:
        dfd = _walk(root, dirs, create=True, owner=owner)
    except OSError as exc:
        raise SandboxError(f"cannot write {rel!r} in the sandbox: {_why(exc)}") from exc
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(name, flags, 0o644, dir_fd=dfd)
    except OSError as exc:
        raise SandboxError(f"cannot write {rel!r} in the sandbox: {_why(exc)}") from exc
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise SandboxError(f"cannot write {rel!r} in the sandbox: not a regular file with a single link")
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if owner is not None:
            os.fchown(fd, *owner)
    finally:
        os.close(fd)


def read_under(root: str, rel: str, *, max_bytes: int) -> bytes:
    """Read ``root/rel`` without following links planted by the sandbox.

    Args:
        root: The host directory (the sandbox's work directory).
        rel: A normalised relative path.
        max_bytes: Refuse files larger than this.

    Raises:
        SandboxError: If the file is missing, a symlink, not regular, or too large.

    Example:
        >>> import tempfile
        >>> read_under(tempfile.mkdtemp(), "missing.txt", max_bytes=10)
        Traceback (most recent call last):
        ...
        turnkit.errors.SandboxError: cannot read 'missing.txt' in the sandbox: no such file
    """
    dirs, name = _split(rel)
    try:
        dfd = _walk(root, dirs, create=False, owner=None)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        finally:
            os.close(dfd)
    except OSError as exc:
        raise SandboxError(f"cannot read {rel!r} in the sandbox: {_why(exc)}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SandboxError(f"cannot read {rel!r} in the sandbox: not a regular file")
        if st.st_size > max_bytes:
            raise SandboxError(f"cannot read {rel!r} in the sandbox: {st.st_size} bytes exceeds {max_bytes}")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise SandboxError(f"cannot read {rel!r} in the sandbox: it grew past {max_bytes} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _why(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if exc.errno in (40, 20):  # ELOOP, ENOTDIR
        return "it is a symlink or a path component is not a directory"
    if isinstance(exc, IsADirectoryError):
        return "it is a directory"
    return f"{type(exc).__name__}: {exc.strerror}"


def remove_tree(path: str) -> bool:
    """Remove a work directory whatever the code left in it; ``True`` when it is gone.

    ``shutil.rmtree`` recurses once per level and stops at a locked directory; the code can nest directories
    deeper than Python's recursion limit (or than a path can name) and lock them. Then ``chmod -R`` and ``rm -rf``
    (which walk by descriptor, at any depth, never following links) remove what is left.

    Example:
        >>> import tempfile
        >>> root = tempfile.mkdtemp()
        >>> deep = root
        >>> for _ in range(1200):  # deeper than shutil.rmtree's recursion reaches
        ...     deep = os.path.join(deep, "d")
        ...     os.mkdir(deep)
        >>> os.chmod(os.path.join(root, "d"), 0o500)
        >>> remove_tree(root), os.path.exists(root)
        (True, False)
    """
    import shutil
    import subprocess

    with contextlib.suppress(RecursionError):
        shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        for argv in (["chmod", "-R", "u+rwx", "--", path], ["rm", "-rf", "--one-file-system", "--", path]):
            with contextlib.suppress(OSError):
                subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=300, check=False)
    return not os.path.lexists(path)
