"""The math episodes family: procedural arithmetic, fractions, equations and word problems.

See :class:`turnkit.envs.math.env.MathEpisodesEnv` and ``docs/envs/math.md``.
"""
