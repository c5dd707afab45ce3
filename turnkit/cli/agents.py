"""Build agents from short command-line specs such as ``oracle`` or ``hf:/path/to/model``.

Specs:
    ``oracle``            :class:`~turnkit.agents.oracle.OracleAgent` (uses privileged task data)
    ``random``            :class:`~turnkit.agents.scripted.RandomAgent`
    ``scripted:TEXT``     :class:`~turnkit.agents.scripted.ScriptedAgent` that always replies ``TEXT``
    ``hf:PATH``           ``HFPolicy`` over a local Hugging Face model directory
    ``tiny``              the embedded default tiny policy (built and cached locally on first use)
    ``openai:URL#MODEL``  ``OpenAIAgent`` against an OpenAI-compatible server

Example:
    >>> type(make_agent("oracle")).__name__, type(make_agent("scripted:ANSWER: 1")).__name__
    ('OracleAgent', 'ScriptedAgent')
    >>> make_agent("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: unknown agent spec 'nope'; use one of: oracle, random, ...
"""

from __future__ import annotations

from turnkit.agents.base import Agent
from turnkit.errors import ConfigError

SPECS = ("oracle", "random", "scripted:TEXT", "hf:PATH", "tiny", "openai:URL#MODEL")


def make_agent(spec: str, *, seed: int = 0) -> Agent:
    """Build the agent named by ``spec`` (see the module docstring)."""
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
    if kind == "tiny" and not arg:
        from turnkit.models.embedded import tiny_policy

        return tiny_policy(seed=seed)
    if kind == "openai" and arg:
        from turnkit.agents.openai import OpenAIAgent

        url, _, model = arg.partition("#")
        return OpenAIAgent(base_url=url, model=model or "default")
    raise ConfigError(f"unknown agent spec {spec!r}; use one of: {', '.join(SPECS)}")


class AgentSpec:
    """A picklable agent factory for Ray workers: each worker builds ``make_agent(spec, seed=seed)`` itself.

    Example:
        >>> type(AgentSpec("oracle")(3)).__name__
        'OracleAgent'
    """

    def __init__(self, spec: str, seed: int = 0) -> None:
        if spec.partition(":")[0] not in {s.partition(":")[0] for s in SPECS}:
            make_agent(spec)  # an unknown spec fails here, in the driver, not in every worker
        self.spec, self.seed = spec, seed

    def __call__(self, index: int) -> Agent:
        """The worker's agent."""
        return make_agent(self.spec, seed=self.seed)
