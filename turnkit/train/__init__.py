"""Training loops: SFT on demonstrations and on-policy RL (GRPO/RLOO) over the shared rollout layer.

Loops here orchestrate; the math lives in :mod:`turnkit.learners` and env interaction in
:mod:`turnkit.rollout`.
"""
