"""The turnkit exception hierarchy: one base class and a flat set of domain errors (and warnings).

Exceptions are for programming errors and infrastructure faults. A policy's bad action is never an
exception: envs turn it into an observation (see :class:`turnkit.TextEnv`). Things turnkit recovers from on
its own (a damaged checkpoint skipped, a dead run's lock taken over) are warnings of a
:class:`TurnkitWarning` category, so they can be filtered or turned into errors
(``warnings.simplefilter("error", CheckpointWarning)``).

Example:
    >>> from turnkit.errors import DataError, TurnkitError
    >>> err = DataError("missing field 'answer'", path="gsm8k.jsonl", line=3)
    >>> str(err)
    "gsm8k.jsonl:3: missing field 'answer'"
    >>> isinstance(err, TurnkitError)
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class TurnkitError(Exception):
    """Base class of every error turnkit raises on purpose."""


class EnvError(TurnkitError):
    """An env was misused or misconfigured (e.g. step before reset, unknown split)."""


class ContractError(TurnkitError):
    """An env breaks the text-env contract; raised by :func:`turnkit.check_env`."""


class SandboxError(TurnkitError):
    """The sandbox infrastructure failed or is unavailable (not the code it ran)."""


class BrowserError(TurnkitError):
    """The rendering browser crashed, hung or could not start (not the page's own errors)."""


class AgentError(TurnkitError):
    """A policy or policy server failed to produce a turn."""


class CriticError(TurnkitError):
    """A critic could not score a trajectory."""


class ConfigError(TurnkitError):
    """A configuration value is invalid; the message names the field and the value."""


class CheckpointError(TurnkitError):
    """No intact checkpoint (or resume state) to resume from. The message names every file and what is wrong.

    Args:
        message: What is wrong.
        damaged: ``(path, reason)`` for each damaged checkpoint, newest first.
    """

    def __init__(self, message: str, *, damaged: Sequence[tuple[str | Path, str]] = ()) -> None:
        self.damaged = [(Path(path), reason) for path, reason in damaged]
        super().__init__(message)


class RunLockedError(TurnkitError):
    """Another process holds the run directory's lock. The message names the directory and the holder.

    Args:
        message: What is wrong.
        run_dir: The locked directory.
        holder: The holder's record (``pid``, ``host``, ``started``, ``command``), if it could be read.
    """

    def __init__(self, message: str, *, run_dir: str | Path, holder: Mapping[str, Any] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.holder = dict(holder) if holder is not None else None
        super().__init__(message)


class DataError(TurnkitError):
    """A data file is malformed. The message names the file and the line.

    Args:
        message: What is wrong.
        path: The offending file, if any.
        line: The 1-based line number, if any.
    """

    def __init__(self, message: str, *, path: str | Path | None = None, line: int | None = None) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        where = ""
        if self.path is not None:
            where = f"{self.path}:{line}: " if line is not None else f"{self.path}: "
        super().__init__(f"{where}{message}")


class TurnkitWarning(UserWarning):
    """Base category of the warnings turnkit emits when it recovers from a fault on its own."""


class CheckpointWarning(TurnkitWarning):
    """A damaged checkpoint (or saved search tree, or adapter) was skipped; an older intact one is used."""


class StaleLockWarning(TurnkitWarning):
    """A run directory's lock was left by a process that no longer holds it; it was taken over."""
