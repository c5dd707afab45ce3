"""verifiers' name for turnkit's adapter: the taskset id ``turnkit-verifiers`` imports this module.

verifiers (0.4) loads a taskset by importing the installed module its id names and taking the ``Taskset`` (and
``Env``) subclass it exports in ``__all__``; everything lives in :mod:`turnkit.integrations.verifiers`.
"""

from turnkit.integrations.verifiers import TurnkitEnv, TurnkitTaskset, load_environment

__all__ = ["TurnkitEnv", "TurnkitTaskset", "load_environment"]
