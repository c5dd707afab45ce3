"""`ProverAgent`: the PAV didactic prover ``μ_γ`` as a turnkit agent (one token per turn).

It reads ``y*`` from the privileged task (``uses_privileged = True``: provers are training-time tools, like
oracles) and the tokens written so far from the conversation, then samples the next token from
:func:`~turnkit.envs.pav_didactic.prover.prover_probs`. Generic tools (Monte Carlo ``Q`` by branching
from env snapshots, verifier labels) can then use it like any other agent.

Example:
    >>> import turnkit
    >>> from turnkit.envs.pav_didactic.env import PAVDidacticEnv
    >>> traj = turnkit.collect(PAVDidacticEnv(target="3 1", seq_len=4), ProverAgent(gamma=1e6), seed=0)
    >>> [s.action.text for s in traj.steps], traj.success
    (['3', '1'], True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from turnkit.agents.base import Context
from turnkit.envs.pav_didactic.env import parse_tokens, target_of
from turnkit.envs.pav_didactic.prover import VOCAB_SIZE, prover_probs, transition_table
from turnkit.errors import AgentError
from turnkit.types import AgentTurn


class ProverAgent:
    """Samples one token per turn from ``μ_γ`` given the conversation so far.

    Args:
        gamma: Prover strength (weight of the next ``y*`` token; 1 is uniform).
        vocab_size: Must match the env's.
        seed: Mixed with each context's episode seed, turn and rank in the batch.
    """

    uses_privileged = True

    def __init__(self, gamma: float, vocab_size: int = VOCAB_SIZE, seed: int = 0) -> None:
        self.gamma = float(gamma)
        self.vocab_size = vocab_size
        self.seed = seed
        self._calls = 0

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        """One token per context."""
        self._calls += 1
        out = []
        for rank, ctx in enumerate(contexts):
            if ctx.task is None:
                raise AgentError("ProverAgent needs Context.task (run it through turnkit.collect)")
            target = target_of(ctx.task)
            table = transition_table(target, self.vocab_size)
            k = 0
            for msg in ctx.messages:
                if msg.role == "assistant":
                    for t in parse_tokens(msg.content, self.vocab_size) or []:
                        k = int(table[k, t])
            probs = prover_probs(target, self.gamma, self.vocab_size)[min(k, len(target) - 1)]
            rng = np.random.default_rng([self.seed, ctx.episode_seed or 0, ctx.turn, rank, self._calls])
            out.append(AgentTurn(text=str(int(rng.choice(self.vocab_size, p=probs)))))
        return out
