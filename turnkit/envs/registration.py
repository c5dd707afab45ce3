"""Registers the built-in envs with Gymnasium. Only ``gymnasium.register`` calls belong here.

Example:
    >>> import gymnasium, turnkit
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0", split="ood")
    >>> env.spec.max_episode_steps
    10
"""

from gymnasium.envs.registration import register

register(
    id="turnkit/MathEpisodes-v0",
    entry_point="turnkit.envs.math.env:MathEpisodesEnv",
    max_episode_steps=10,
)
register(
    id="turnkit/PhysicsPrediction-v0",
    entry_point="turnkit.envs.physics.env:PhysicsPredictionEnv",
    max_episode_steps=6,
)
register(
    id="turnkit/CollabCode-v0",
    entry_point="turnkit.envs.collab_code.env:CollabCodeEnv",
    max_episode_steps=10,
)
register(
    id="turnkit/CollabDesign-v0",
    entry_point="turnkit.envs.collab_design.env:CollabDesignEnv",
    max_episode_steps=10,
)
register(
    id="turnkit/PAVDidactic-v0",
    entry_point="turnkit.envs.pav_didactic.env:PAVDidacticEnv",
    max_episode_steps=20,
)
register(
    id="turnkit/WebShop-v0",
    entry_point="turnkit.envs.web.webshop.env:WebShopEnv",
    max_episode_steps=15,
)
register(
    id="turnkit/MiniWoB-v0",
    entry_point="turnkit.envs.web.miniwob.env:MiniWoBEnv",
    max_episode_steps=12,
)
