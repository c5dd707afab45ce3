"""The wire models: openenv-core ``Action``/``Observation`` subclasses for turnkit text envs (pydantic).

They are built on first use, because importing openenv-core takes seconds (it pulls in gradio); the package
``__init__`` hands them out as ``turnkit.integrations.openenv.TextAction`` / ``TextObservation``.
"""

from __future__ import annotations

import functools
from typing import Any

from turnkit.errors import EnvError

from .wire import PUBLIC_MODULE


@functools.cache
def wire_models() -> tuple[type, type]:
    """``(TextAction, TextObservation)``, built from openenv-core on the first call."""
    try:
        from openenv.core.env_server.types import Action, Observation
    except ImportError as exc:  # pragma: no cover - the openenv extra is part of every test set-up
        raise EnvError("serving needs openenv-core: pip install 'turnkit[openenv]'") from exc
    from pydantic import Field

    class TextAction(Action):
        """One agent message for a turnkit env (``{"message": "..."}`` on the wire)."""

        message: Any = Field(
            description="The agent's reply. Anything but acceptable text (empty, too long, not a string) is "
            "answered with invalid-action feedback, as turnkit envs do."
        )

    class TextObservation(Observation):
        """A turnkit env's reply: its new message, the public ``info`` and the two end flags."""

        message: str = Field(default="", description="The env's new message to the agent.")
        info: dict[str, Any] = Field(default_factory=dict, description="Public info (never privileged data).")
        terminated: bool = Field(default=False, description="The episode reached a terminal state.")
        truncated: bool = Field(default=False, description="The time limit cut the episode.")

    for cls in (TextAction, TextObservation):
        cls.__module__, cls.__qualname__ = PUBLIC_MODULE, cls.__name__
    return TextAction, TextObservation
