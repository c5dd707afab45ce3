"""The physics prediction family: PhyWorld's scenarios and splits as a multi-turn text task.

See ``docs/envs/physics.md``. Modules: :mod:`~turnkit.envs.physics.simulate` (exact physics),
:mod:`~turnkit.envs.physics.scenarios` (sampling and splits), :mod:`~turnkit.envs.physics.tasks` (task
schema), :mod:`~turnkit.envs.physics.protocol` (text in and out), :mod:`~turnkit.envs.physics.scoring`
(errors and rewards), :mod:`~turnkit.envs.physics.env` (the env), :mod:`~turnkit.envs.physics.oracle` and
:mod:`~turnkit.envs.physics.baselines` and :mod:`~turnkit.envs.physics.solver` (reference policies).

Example:
    >>> from turnkit.envs.physics import PhysicsPredictionEnv
    >>> PhysicsPredictionEnv.splits
    ('id', 'ood', 'interp_train', 'interp', 'combo_train', 'combo')
"""

from turnkit.envs.physics.env import PhysicsPredictionEnv

__all__ = ["PhysicsPredictionEnv"]
