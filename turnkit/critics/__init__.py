"""Critics: per-step rewards for trajectories (rules, judges, learned step critics, progress)."""
