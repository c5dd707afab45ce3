"""Collaborative backend coding (ColBench-style): write a function with a simulated human's help.

See :class:`turnkit.envs.collab_code.env.CollabCodeEnv` and ``docs/envs/collab_code.md``.
"""
