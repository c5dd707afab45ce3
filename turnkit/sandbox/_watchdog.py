"""Watchdog that removes a process's sandbox containers when that process dies, however it dies.

Run as ``python -c <this source> OWNER``, with stdin connected to a pipe whose write end only the owner
holds. When the owner exits (normally, by exception, or by SIGKILL) the kernel closes the pipe, the
watchdog reads EOF and force-removes every container labelled ``turnkit.owner=OWNER``. It imports only the
standard library and the docker SDK, so it starts fast and holds little memory.

Example:
    >>> owner_label(pid=1, start_ticks=5, host="h")
    'h/1/5'
"""

import socket
import sys

SANDBOX_LABEL = "turnkit.sandbox"
OWNER_LABEL = "turnkit.owner"


def owner_label(pid: int, start_ticks: int, host: str | None = None) -> str:
    """The owner label of containers created by process ``pid`` (start time guards against pid reuse)."""
    return f"{host or socket.gethostname()}/{pid}/{start_ticks}"


def remove_owned(client: object, owner: str) -> int:
    """Force-remove every container labelled with ``owner``; return how many were removed."""
    import docker

    removed = 0
    for container in client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={owner}"}):  # type: ignore[attr-defined]
        try:
            container.remove(force=True)
            removed += 1
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise
    return removed


def main(argv: list[str]) -> int:
    """Block until stdin closes, then remove the owner's containers."""
    owner = argv[1]
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, KeyboardInterrupt):
        pass
    import docker

    remove_owned(docker.from_env(timeout=60), owner)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
