"""Rollout: running agents in envs and turning episodes into training batches."""
