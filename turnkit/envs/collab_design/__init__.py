"""The collaborative front-end design env family (ColBench frontend, rendered in headless Chromium).

Example:
    >>> from turnkit.envs.collab_design import CollabDesignEnv, visual_similarity
    >>> CollabDesignEnv.splits
    ('id', 'ood', 'combo')
"""

from turnkit.envs.collab_design.env import SUCCESS_THRESHOLD, CollabDesignEnv
from turnkit.envs.collab_design.human import DesignHuman, LLMHuman, RuleBasedHuman, View
from turnkit.envs.collab_design.similarity import visual_similarity

__all__ = [
    "SUCCESS_THRESHOLD",
    "CollabDesignEnv",
    "DesignHuman",
    "LLMHuman",
    "RuleBasedHuman",
    "View",
    "visual_similarity",
]
