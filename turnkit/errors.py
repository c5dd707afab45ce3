"""The turnkit exception hierarchy: one base class and a flat set of domain errors.

Exceptions are for programming errors and infrastructure faults. A policy's bad action is never an
exception: envs turn it into an observation (see :class:`turnkit.TextEnv`).

Example:
    >>> from turnkit.errors import DataError, TurnkitError
    >>> err = DataError("missing field 'answer'", path="gsm8k.jsonl", line=3)
    >>> str(err)
    "gsm8k.jsonl:3: missing field 'answer'"
    >>> isinstance(err, TurnkitError)
    True
"""

from __future__ import annotations

from pathlib import Path


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
