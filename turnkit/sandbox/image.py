"""Build the Docker sandbox image offline, from the host's own files.

No registry is reachable, so nothing is pulled: the image is a root filesystem assembled from the host's
Python interpreter, its standard library, a shell and a few core utilities, plus every shared library they
load (found with ``ldd``), streamed as a tar archive into ``docker import``. The result (about 40 MB) has no
package manager, no compiler and no network tools.

Usage::

    python -m turnkit.sandbox.image build [--tag turnkit-sandbox:py311] [--python /usr/bin/python3.11] [--force]
    python -m turnkit.sandbox.image files     # list what would go in, without Docker

Example:
    >>> spec = RootfsSpec(tools=("sh", "cat"))
    >>> spec.python, DEFAULT_TAG
    ('/usr/bin/python3.11', 'turnkit-sandbox:py311')
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from turnkit.errors import SandboxError
from turnkit.sandbox.base import DEFAULT_IMAGE

DEFAULT_TAG = DEFAULT_IMAGE
"""The image :class:`~turnkit.sandbox.docker.DockerSandbox` uses by default."""

IMAGE_LABEL = "turnkit.sandbox.image"

DEFAULT_TOOLS = (
    "sh", "bash", "cat", "echo", "ls", "env", "sleep", "head", "tail", "mkdir", "rm", "cp", "mv", "wc",
    "true", "false", "printf", "base64", "id", "kill", "timeout", "grep", "sed", "tr", "sort", "uniq", "cut",
    "touch", "chmod", "ln", "pwd", "uname", "date", "dirname", "basename", "seq", "yes", "stat", "readlink",
    "tee", "test", "expr", "find", "xargs", "diff", "stty",
)  # fmt: skip
"""Programs copied from the host's PATH when present."""

_STDLIB_SKIP = ("test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "config-")
_LDD_LINE = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x[0-9a-f]+\)")
_PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/work:/usr/sbin/nologin\n"
_GROUP = "root:x:0:\nnogroup:x:65534:\n"


@dataclass(frozen=True)
class RootfsSpec:
    """What goes into the image.

    Attributes:
        python: The host interpreter to copy (its standard library comes along).
        tools: Program names looked up on the host's PATH.
        extra_paths: More host files or directories to copy verbatim.

    Example:
        >>> RootfsSpec(tools=("sh",)).tools
        ('sh',)
    """

    python: str = "/usr/bin/python3.11"
    tools: Sequence[str] = DEFAULT_TOOLS
    extra_paths: Sequence[str] = field(default_factory=tuple)

    def entries(self) -> dict[str, str]:
        """Map of image path to host path for every file and link to copy (directories expanded).

        Link entries map to ``"link:<target>"``.

        Raises:
            SandboxError: If the interpreter or its standard library is missing.
        """
        python = os.path.realpath(self.python)
        if not os.access(python, os.X_OK):
            raise SandboxError(f"cannot build the sandbox image: {self.python} is not an executable")
        out = subprocess.run(
            [python, "-I", "-c", "import sys, sysconfig; print(sysconfig.get_paths()['stdlib'])"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        stdlib = out.stdout.strip()
        if out.returncode != 0 or not os.path.isdir(stdlib):
            raise SandboxError(f"cannot find the standard library of {python}: {out.stderr.strip()}")
        files: dict[str, str] = {}
        _add_path(files, python)
        for link in ("python3", "python"):
            files[f"/usr/bin/{link}"] = f"link:{os.path.basename(python)}"
        for path in _walk_files(stdlib, skip=_STDLIB_SKIP):
            _add_path(files, path)
        for name in self.tools:
            found = shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
            if found:
                _add_path(files, os.path.join(os.path.realpath(os.path.dirname(found)), os.path.basename(found)))
        for extra in self.extra_paths:
            for path in _walk_files(extra, skip=()) if os.path.isdir(extra) else [extra]:
                _add_path(files, path)
        elf = [host for host in files.values() if not host.startswith("link:") and _is_elf(host)]
        for lib in _shared_libraries(elf):
            _add_path(files, lib)
        return files

    def digest(self) -> str:
        """A short hash of the file list, sizes and mtimes: the image label that says what it was built from."""
        h = hashlib.sha256()
        for dest, src in sorted(self.entries().items()):
            h.update(dest.encode())
            if not src.startswith("link:"):
                st = os.stat(src)
                h.update(f"{st.st_size}:{int(st.st_mtime)}".encode())
            else:
                h.update(src.encode())
        return h.hexdigest()[:16]


def _walk_files(root: str, skip: Sequence[str]) -> Iterable[str]:
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == root:
            dirnames[:] = [d for d in dirnames if not any(d.startswith(s) for s in skip)]
        dirnames[:] = [d for d in dirnames if d not in ("site-packages", "dist-packages")]
        for name in filenames:
            yield os.path.join(dirpath, name)


def _canonical_dir(path: str) -> str:
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _add_path(files: dict[str, str], path: str) -> None:
    """Add a host path, following symlink chains (each link and its target are kept)."""
    for _ in range(16):
        path = _canonical_dir(path)
        if path in files:
            return
        if os.path.islink(path):
            target = os.readlink(path)
            files[path] = f"link:{target}"
            path = os.path.join(os.path.dirname(path), target)
            continue
        if os.path.isfile(path):
            files[path] = path
        return


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _shared_libraries(binaries: Sequence[str]) -> set[str]:
    libs: set[str] = set()
    for start in range(0, len(binaries), 64):
        out = subprocess.run(
            ["ldd", *binaries[start : start + 64]], capture_output=True, text=True, check=False, timeout=120
        )
        libs.update(m.group(1) for m in _LDD_LINE.finditer(out.stdout))
    return libs


def _tar_rootfs(files: dict[str, str], dest: str) -> None:
    dirs: set[str] = set()

    def add_dirs(tar: tarfile.TarFile, path: str) -> None:
        parent = os.path.dirname(path)
        if parent in ("/", "") or parent in dirs:
            return
        add_dirs(tar, parent)
        dirs.add(parent)
        info = tarfile.TarInfo(parent.lstrip("/"))
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)

    with tarfile.open(dest, "w") as tar:
        for name in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
            if os.path.islink("/" + name):
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink("/" + name)
                tar.addfile(info)
        for path, mode in (("/work", 0o1777), ("/tmp", 0o1777), ("/root", 0o700), ("/proc", 0o555),
                           ("/dev", 0o755), ("/sys", 0o555), ("/etc", 0o755)):  # fmt: skip
            info = tarfile.TarInfo(path.lstrip("/"))
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
            dirs.add(path)
        for path, text in (("/etc/passwd", _PASSWD), ("/etc/group", _GROUP), ("/etc/hosts", "127.0.0.1 localhost\n"),
                           ("/etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\n")):  # fmt: skip
            data = text.encode()
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        for dest_path in sorted(files):
            src = files[dest_path]
            add_dirs(tar, dest_path)
            if src.startswith("link:"):
                info = tarfile.TarInfo(dest_path.lstrip("/"))
                info.type, info.linkname = tarfile.SYMTYPE, src[len("link:") :]
                tar.addfile(info)
                continue
            st = os.stat(src)
            info = tarfile.TarInfo(dest_path.lstrip("/"))
            info.size, info.mode, info.mtime = st.st_size, stat.S_IMODE(st.st_mode) & 0o755, int(st.st_mtime)
            with open(src, "rb") as f:
                tar.addfile(info, f)


def image_exists(tag: str = DEFAULT_TAG, client: Any = None) -> bool:
    """Whether the Docker engine has the image.

    Example:
        >>> from turnkit.sandbox.docker import docker_available
        >>> image_exists("turnkit-no-such-image:0") if docker_available() else False
        False
    """
    import docker

    client = client or docker.from_env()
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def build_image(
    tag: str = DEFAULT_TAG, *, spec: RootfsSpec | None = None, force: bool = False, client: Any = None
) -> str:
    """Build the sandbox image from host files and import it into Docker (no registry needed).

    Args:
        tag: Image tag to create.
        spec: What to copy; ``RootfsSpec()`` by default.
        force: Rebuild even if the tag already exists.
        client: A ``docker.DockerClient`` (``docker.from_env()`` by default).

    Returns:
        The image id.

    Raises:
        SandboxError: If the engine is unreachable or the files are missing.

    Example:
        >>> from turnkit.sandbox.docker import docker_available
        >>> build_image().startswith("sha256:") if docker_available() else True
        True
    """
    try:
        import docker
    except ImportError as exc:
        raise SandboxError("the docker SDK is missing: pip install 'turnkit[sandbox]'") from exc
    try:
        client = client or docker.from_env()
        try:
            previous: str | None = str(client.images.get(tag).id)
        except docker.errors.ImageNotFound:
            previous = None
        if previous is not None and not force:
            return previous
        spec = spec or RootfsSpec()
        files = spec.entries()
        with tempfile.TemporaryDirectory(prefix="turnkit-image-") as tmp:
            archive = os.path.join(tmp, "rootfs.tar")
            _tar_rootfs(files, archive)
            repo, _, version = tag.rpartition(":") if ":" in tag else (tag, "", "latest")
            changes = [
                "ENV PATH=/usr/local/bin:/usr/bin:/bin",
                "ENV LANG=C.UTF-8",
                "ENV HOME=/work",
                "WORKDIR /work",
                'CMD ["/usr/bin/sleep", "infinity"]',
                f"LABEL {IMAGE_LABEL}={spec.digest()}",
            ]
            client.api.import_image(src=archive, repository=repo, tag=version, changes=changes)
        image_id = str(client.images.get(tag).id)
        if previous is not None and previous != image_id:
            with contextlib.suppress(docker.errors.APIError):  # still used by a container: leave it
                client.images.remove(previous)
        return image_id
    except docker.errors.DockerException as exc:
        raise SandboxError(f"cannot build the sandbox image {tag}: {exc}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m turnkit.sandbox.image build|files``.

    Example:
        >>> main(["files", "--python", "/nonexistent/python"])
        Traceback (most recent call last):
        ...
        turnkit.errors.SandboxError: cannot build the sandbox image: /nonexistent/python is not an executable
    """
    parser = argparse.ArgumentParser(prog="python -m turnkit.sandbox.image", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["build", "files"])
    parser.add_argument("--tag", default=DEFAULT_TAG)
    parser.add_argument("--python", default=RootfsSpec.python)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    spec = RootfsSpec(python=args.python)
    if args.command == "files":
        files = spec.entries()
        size = sum(os.path.getsize(s) for s in files.values() if not s.startswith("link:"))
        print(f"{len(files)} files, {size / 1e6:.1f} MB")
        return 0
    image_id = build_image(args.tag, spec=spec, force=args.force)
    print(f"{args.tag} {image_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
