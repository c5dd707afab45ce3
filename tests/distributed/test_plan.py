"""plan_chunks: whole same-seed units, every episode once, about one chunk per worker (no Ray needed)."""

from __future__ import annotations

import pytest

from turnkit.distributed import plan_chunks
from turnkit.errors import ConfigError


@pytest.mark.parametrize("workers", [1, 2, 3, 5, 8])
def test_every_episode_once_and_same_seeds_together(workers: int) -> None:
    seeds = [s for s in (9, 4, 9, 7) for _ in range(3)] + [None, None]
    chunks = plan_chunks(seeds, [None] * len(seeds), workers=workers)
    assert sorted(i for c in chunks for i in c) == list(range(len(seeds)))
    for seed in (9, 4, 7):
        holding = [c for c in chunks if any(seeds[i] == seed for i in c)]
        assert len(holding) == 1  # the two groups of seed 9 too: their samples differ by rank in one batch
    assert len(chunks) == min(workers, 5) and all(chunks)  # one per worker, at most one per seed unit


def test_a_unit_larger_than_a_worker_s_envs_is_an_error() -> None:
    with pytest.raises(ConfigError, match="4 episodes share seed 3, more than envs_per_worker=2"):
        plan_chunks([3, 3, 3, 3], [0, 0, 0, 0], workers=2, max_chunk=2)
    assert plan_chunks([1, 1, 2, 2], [0, 0, 1, 1], workers=1, max_chunk=2) == [(0, 1), (2, 3)]


def test_shares_are_balanced_for_equal_groups() -> None:
    seeds = [s for s in range(12) for _ in range(4)]
    assert [len(c) for c in plan_chunks(seeds, seeds, workers=3)] == [16, 16, 16]
    assert [len(c) for c in plan_chunks(seeds, seeds, workers=5)] == [12, 8, 12, 8, 8]
