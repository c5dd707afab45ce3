"""Build agents from short command-line specs such as ``oracle`` or ``hf:/path/to/model``.

Specs:
    ``oracle``            :class:`~turnkit.agents.oracle.OracleAgent` (uses privileged task data)
    ``random``            :class:`~turnkit.agents.scripted.RandomAgent`
    ``scripted:TEXT``     :class:`~turnkit.agents.scripted.ScriptedAgent` that always replies ``TEXT``
    ``hf:PATH``           ``HFPolicy`` over a local Hugging Face model directory
    ``tiny``              the embedded default tiny policy (built and cached locally on first use)
    ``smollm2``           SmolLM2-135M-Instruct (``smollm2-bf16``: in bfloat16), converted and cached on first use;
                          any name of :mod:`turnkit.models.names` works the same way
    ``openai:URL#MODEL``  ``OpenAIAgent`` against an OpenAI-compatible server (without ``#MODEL``: the one it serves)

Example:
    >>> type(make_agent("oracle")).__name__, type(make_agent("scripted:ANSWER: 1")).__name__
    ('OracleAgent', 'ScriptedAgent')
    >>> make_agent("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: unknown agent spec 'nope'; use one of: oracle, random, ...
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from turnkit.agents.base import Agent
from turnkit.errors import ConfigError
from turnkit.models.names import model_names

SPECS = ("oracle", "random", "scripted:TEXT", "hf:PATH", *model_names(), "openai:URL#MODEL")
SAMPLING_FLAGS = ("temperature", "top_p", "max_new_tokens")
"""The sampling settings a command line may give a model agent (``hf:``, ``tiny``, ``openai:``)."""


def add_sampling_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--temperature``, ``--top-p``, ``--max-new-tokens`` and ``--threads`` to a command that runs an agent.

    Example:
        >>> p = argparse.ArgumentParser()
        >>> add_sampling_args(p)
        >>> args = p.parse_args(["--max-new-tokens", "32", "--threads", "1"])
        >>> sampling_changes(args), args.threads
        ({'max_new_tokens': 32}, 1)
    """
    g = parser.add_argument_group("sampling (model agents: hf:PATH, tiny, smollm2, openai:URL#MODEL)")
    g.add_argument("--temperature", type=float, default=None, help="sampling temperature (0: greedy)")
    g.add_argument("--top-p", type=float, default=None, help="nucleus mass in (0, 1]")
    g.add_argument("--max-new-tokens", type=int, default=None, help="most tokens per turn")
    g.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own count)")


def sampling_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling flags a command line gave (those left out keep the agent's own settings).

    Example:
        >>> sampling_changes(argparse.Namespace(temperature=0.0, top_p=None, max_new_tokens=None))
        {'temperature': 0.0}
    """
    return {k: getattr(args, k) for k in SAMPLING_FLAGS if getattr(args, k, None) is not None}


MODEL_KINDS = ("hf", *model_names(), "openai")
"""Agent spec kinds that sample from a model (and so take the sampling flags)."""


def with_sampling(agent: Agent, spec: str, changes: Mapping[str, Any]) -> Agent:
    """``agent`` with the sampling settings in ``changes`` (validated); an agent that does not sample refuses them.

    Raises:
        ConfigError: Sampling flags for an agent without sampling, or an invalid value.

    Example:
        >>> with_sampling(make_agent("oracle"), "oracle", {"temperature": 0.5})
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: --temperature/--top-p/--max-new-tokens set the sampling of a model agent \
(hf:PATH, tiny, smollm2, openai:URL#MODEL); agent 'oracle' does not sample
    """
    if not changes:
        return agent
    _check_samples(spec)
    if spec.startswith("openai:"):
        names = {"temperature": "temperature", "top_p": "top_p", "max_new_tokens": "max_tokens"}
        for key, value in changes.items():
            setattr(agent, names[key], value)
        return agent
    return agent.with_sampling(**changes)  # type: ignore[attr-defined]


def _check_samples(spec: str) -> None:
    if spec.partition(":")[0] not in MODEL_KINDS:
        raise ConfigError(
            "--temperature/--top-p/--max-new-tokens set the sampling of a model agent (hf:PATH, tiny, smollm2, "
            f"openai:URL#MODEL); agent {spec!r} does not sample"
        )


def make_agent(spec: str, *, seed: int = 0, sampling: Mapping[str, Any] | None = None, progress: bool = True) -> Agent:
    """Build the agent named by ``spec`` (see the module docstring), with optional sampling settings.

    ``sampling`` keys are :data:`SAMPLING_FLAGS`; an agent that does not sample refuses them before it is built.
    ``progress=False`` (a ``--quiet`` command) builds a built-in model that is not cached yet without its bars.

    Example:
        >>> make_agent("openai:http://127.0.0.1:8000/v1#my-model", sampling={"max_new_tokens": 32}).max_tokens
        32
    """
    if sampling:
        _check_samples(spec)
    return with_sampling(_make_agent(spec, seed=seed, progress=progress), spec, sampling or {})


def _make_agent(spec: str, *, seed: int, progress: bool) -> Agent:
    kind, _, arg = spec.partition(":")
    if kind == "oracle" and not arg:
        from turnkit.agents.oracle import OracleAgent

        return OracleAgent()
    if kind == "random" and not arg:
        from turnkit.agents.scripted import RandomAgent

        return RandomAgent(seed=seed)
    if kind == "scripted" and arg:
        from turnkit.agents.scripted import ScriptedAgent

        return ScriptedAgent([arg])
    if kind == "hf" and arg:
        from turnkit.agents.hf import HFPolicy

        return HFPolicy.from_pretrained(arg)
    if kind in model_names() and not arg:
        from turnkit.models.names import load_policy

        return load_policy(kind, seed=seed, progress=progress)
    if kind == "openai" and arg:
        from turnkit.agents.openai import OpenAIAgent

        url, _, model = arg.partition("#")
        return OpenAIAgent(base_url=url, model=model or served_model(url))
    raise ConfigError(f"unknown agent spec {spec!r}; use one of: {', '.join(SPECS)}")


def served_model(base_url: str, timeout_s: float = 30.0) -> str:
    """The one model an OpenAI-compatible server serves (its ``/models``): an ``openai:URL`` spec without ``#MODEL``.

    Raises:
        ConfigError: The server cannot be asked, or serves no or several models (their names are listed).

    Example:
        >>> served_model("http://127.0.0.1:9/v1", timeout_s=1)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: cannot ask http://127.0.0.1:9/v1/models which model it serves (...); name it: ...
    """
    import json
    import urllib.error
    import urllib.request

    url = base_url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            names = [m["id"] for m in json.loads(reply.read())["data"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot ask {url} which model it serves ({exc}); name it: openai:URL#MODEL") from exc
    if len(names) != 1:
        served = ", ".join(map(repr, names))
        raise ConfigError(f"{url} serves {len(names)} models ({served}): name one, openai:URL#MODEL")
    return str(names[0])


class AgentSpec:
    """A picklable agent factory for Ray workers: each worker builds ``make_agent(spec, seed=seed)`` itself.

    Example:
        >>> type(AgentSpec("oracle")(3)).__name__
        'OracleAgent'
    """

    def __init__(self, spec: str, seed: int = 0, sampling: Mapping[str, Any] | None = None) -> None:
        if spec.partition(":")[0] not in {s.partition(":")[0] for s in SPECS}:
            make_agent(spec)  # an unknown spec fails here, in the driver, not in every worker
        self.spec, self.seed, self.sampling = spec, seed, dict(sampling or {})

    def __call__(self, index: int) -> Agent:
        """The worker's agent."""
        return make_agent(self.spec, seed=self.seed, sampling=self.sampling)
