"""Search over env snapshots: MCTS, best-of-N, beam, and step-level preference pairs.

Importing this package does not import torch; the synthesis loop (:mod:`turnkit.train.synth`) and the
DPO learner do.

Example:
    >>> import gymnasium, turnkit
    >>> from turnkit.agents.oracle import OracleAgent
    >>> from turnkit.search import MCTS, MCTSConfig
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
    >>> MCTS(MCTSConfig(iterations=2, root_multiplier=1)).search(env, OracleAgent(), seed=0).success
    True
"""

from turnkit.search.beam import BeamConfig, beam_search
from turnkit.search.best_of_n import BestOfNResult, best_of_n
from turnkit.search.expand import Expander, SearchStats
from turnkit.search.mcts import MCTS, MCTSConfig, SearchResult
from turnkit.search.pairs import (
    PairConfig,
    PreferencePair,
    pairs_to_dataset,
    read_pairs,
    trajectory_pair,
    tree_pairs,
    write_pairs,
)
from turnkit.search.render import render_html, render_png
from turnkit.search.tree import SearchTree
from turnkit.search.values import ValueFn, outcome_value, return_value

__all__ = [
    "MCTS",
    "BeamConfig",
    "BestOfNResult",
    "Expander",
    "MCTSConfig",
    "PairConfig",
    "PreferencePair",
    "SearchResult",
    "SearchStats",
    "SearchTree",
    "ValueFn",
    "beam_search",
    "best_of_n",
    "outcome_value",
    "pairs_to_dataset",
    "read_pairs",
    "render_html",
    "render_png",
    "return_value",
    "trajectory_pair",
    "tree_pairs",
    "write_pairs",
]
