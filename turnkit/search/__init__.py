"""Search over env snapshots: MCTS, best-of-N, beam, and preference-pair extraction."""
