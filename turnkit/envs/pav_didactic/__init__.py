"""The PAV didactic family: find a planted run of tokens (PAV, arXiv 2410.08146, App. B).

See :class:`turnkit.envs.pav_didactic.env.PAVDidacticEnv` for the env and
:mod:`turnkit.envs.pav_didactic.prover` for the prover policies and their exact ``Q`` tables.
"""
