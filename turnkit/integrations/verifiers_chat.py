"""verifiers' chat program, locked once so that verifiers episodes run without a network afterwards.

verifiers (0.4) plays a seat with the ``null`` (or ``bash``) harness by running its chat program, a PEP 723
script, with ``uv``. On the local ``subprocess`` runtime it writes the script to a content-addressed path under
``~/.cache/verifiers/runtimes/scripts/`` and, once in every new process, runs ``uv sync --script`` on it with
``UV_OFFLINE=false``. Without a lock file that sync resolves the script's dependencies against PyPI each time,
so with the network cut every episode fails (uv's cache full or not).

:func:`prepare_chat_program` writes the script where verifiers runs it, locks it once (``uv lock --script``
writes ``<script>.py.lock`` beside it: the one step that needs PyPI) and builds its environment from the lock.
From then on verifiers' own ``uv sync --script`` installs the lock from uv's cache and resolves nothing;
the adapter's seat also runs with ``UV_FROZEN=1`` (:data:`FROZEN_ENV`), so uv takes the lock as it is and
never checks it against an index. :class:`turnkit.integrations.verifiers.TurnkitEnv` calls it before any
episode (``env.serving()``), so a chat program that cannot be made ready fails there, with uv's reason,
rather than as episodes with reward 0 and no metrics. Set-up runs it once with PyPI reachable:
``python -m turnkit.integrations.verifiers``.

What it relies on: the lock and the environment live in the user's caches (``~/.cache/verifiers``, uv's
cache, ``~/.cache/uv`` unless ``UV_CACHE_DIR`` says otherwise); clearing them, or a verifiers release whose chat
program differs (a new script path), needs PyPI once more.

Example:
    >>> script = chat_program_script()
    >>> script.parent == Path.home() / ".cache" / "verifiers" / "runtimes" / "scripts", script.suffix
    (True, '.py')
    >>> lock_path(script).name == script.name + ".lock"
    True
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from turnkit.errors import AgentError

CHAT_HARNESSES = frozenset({"null", "bash"})
"""The verifiers harness ids that run the shared chat program (``CHAT_PROGRAM_SOURCE``)."""

FROZEN_ENV = {"UV_FROZEN": "1"}
"""Harness environment that makes verifiers' ``uv sync --script`` install the lock as it is (no resolution)."""

UV_TIMEOUT_S = 600
"""The longest one ``uv`` command may take (locking and installing over a slow link included)."""


@dataclass(frozen=True)
class ChatProgram:
    """verifiers' chat program, ready to run offline.

    Attributes:
        script: The script, where verifiers' subprocess runtime runs it.
        lock: Its uv lock file (``<script>.lock``).
        python: The interpreter of its uv environment (what verifiers launches it with).
    """

    script: Path
    lock: Path
    python: Path


def chat_program_source() -> str:
    """The text of verifiers' chat program (the script the ``null`` and ``bash`` harnesses run)."""
    from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE

    return CHAT_PROGRAM_SOURCE


def chat_program_script() -> Path:
    """Where verifiers' ``subprocess`` runtime writes the chat program: ``<scripts_dir>/<sha256>.py``.

    The same path ``Runtime.prepare_uv_script`` derives (the scripts folder of ``SubprocessRuntime``, the
    SHA-256 of the script's text), so a lock written beside it is the one ``uv`` finds when verifiers syncs it.
    """
    from verifiers.v1.runtimes.subprocess import SubprocessRuntime

    digest = hashlib.sha256(chat_program_source().encode()).hexdigest()
    return Path(SubprocessRuntime.scripts_dir) / f"{digest}.py"


def lock_path(script: Path) -> Path:
    """The lock file ``uv lock --script`` writes for ``script``: ``<script>.lock``."""
    return script.with_name(script.name + ".lock")


def find_uv() -> str:
    """The ``uv`` verifiers runs: ``~/.local/bin/uv`` first, then the first on ``PATH``.

    Raises:
        AgentError: no ``uv`` is installed.
    """
    path = os.pathsep.join([str(Path.home() / ".local" / "bin"), os.environ.get("PATH", "")])
    uv = shutil.which("uv", path=path)
    if uv is None:
        raise AgentError("verifiers' chat program needs uv, and none is installed: pip install 'turnkit[verifiers]'")
    return uv


def prepare_chat_program(env: Mapping[str, str] | None = None) -> ChatProgram:
    """Write verifiers' chat program where verifiers runs it, lock it once and build its environment.

    Idempotent and cheap once done (no network then): the lock is written only when missing, and syncing an
    environment that already matches it installs nothing. Processes preparing at once take turns (a file lock).

    Args:
        env: Extra environment for ``uv`` (the harness's, e.g. ``UV_NATIVE_TLS``); ``os.environ`` is inherited.

    Returns:
        The script, its lock and its interpreter.

    Raises:
        AgentError: uv is missing, or could not lock (PyPI unreachable before the lock existed) or install the
            script's dependencies (uv's cache cleared while offline); the message has uv's own reason.
    """
    script = chat_program_script()
    source = chat_program_source().encode()
    script.parent.mkdir(parents=True, exist_ok=True)
    uv = find_uv()
    full_env = {**os.environ, **(env or {})}
    with open(script.parent / ".turnkit-prepare.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not script.is_file() or script.read_bytes() != source:
            tmp = script.with_name(f"{script.name}.{os.getpid()}.tmp")
            tmp.write_bytes(source)
            tmp.replace(script)  # verifiers publishes it the same way: never a half-written script
        lock = lock_path(script)
        if not lock.is_file():
            unlocked = {k: v for k, v in full_env.items() if k not in FROZEN_ENV}  # the lock is what it writes
            run_uv([uv, "lock", "--script", str(script), "-q", "--no-config"], unlocked, "lock", script)
        frozen = {**full_env, **FROZEN_ENV}
        run_uv([uv, "sync", "--script", str(script), "-q", "--no-config"], frozen, "install", script)
        found = run_uv([uv, "python", "find", "--script", str(script), "--no-config"], frozen, "find", script)
    return ChatProgram(script=script, lock=lock, python=Path(found.strip().splitlines()[-1]))


def run_uv(argv: Sequence[str], env: Mapping[str, str], what: str, script: Path) -> str:
    """Run one ``uv`` command for the chat program; its stdout, or an :class:`AgentError` with uv's reason."""
    try:
        done = subprocess.run(argv, env=dict(env), capture_output=True, text=True, timeout=UV_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise AgentError(f"verifiers' chat program: `{' '.join(argv[1:3])}` took over {UV_TIMEOUT_S} s") from exc
    if done.returncode == 0:
        return done.stdout
    hint = {
        "lock": "its dependencies are locked once, which needs PyPI: run `python -m turnkit.integrations.verifiers` "
        "once where PyPI is reachable, and episodes run offline afterwards",
        "install": f"the lock {lock_path(script).name} is there but uv cannot install it (its cache cleared while "
        "offline?): run `python -m turnkit.integrations.verifiers` once where PyPI is reachable",
        "find": "uv built no interpreter for it",
    }[what]
    raise AgentError(
        f"verifiers' chat program {script} is not ready to run: {hint}. uv said: {done.stderr.strip()[-1500:]}"
    )
