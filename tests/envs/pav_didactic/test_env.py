"""PAVDidacticEnv: rules, splits, the contract, and agreement with the vectorised automaton."""

from __future__ import annotations

import numpy as np
import pytest

import turnkit
from turnkit.agents.oracle import OracleAgent
from turnkit.envs.pav_didactic.env import PAVDidacticEnv, parse_tokens, target_of
from turnkit.envs.pav_didactic.prover import EOS, match_states, step_mask, transition_table
from turnkit.errors import ConfigError


def _contains(seq: list[int], target: tuple[int, ...]) -> bool:
    m = len(target)
    return any(tuple(seq[i : i + m]) == target for i in range(len(seq) - m + 1))


def test_env_agrees_with_the_vectorised_automaton() -> None:
    target = (3, 3, 7)
    env = PAVDidacticEnv(target=target)
    table = transition_table(target)
    rng = np.random.default_rng(0)
    # mostly tokens 3 and 7 so that successes happen; EOS now and then
    tokens = rng.choice([3, 7, 1, EOS], p=[0.45, 0.35, 0.15, 0.05], size=(300, 10))
    mask = step_mask(table, tokens)
    states = match_states(table, tokens)
    for row, mrow, srow in zip(tokens, mask, states, strict=True):
        env.reset(seed=1)
        n_steps = int(mrow.sum())
        for h in range(n_steps):
            _, reward, terminated, _, info = env.step(str(row[h]))
            assert terminated == (h == n_steps - 1)
        found = bool(srow[n_steps] == len(target))
        assert info["success"] == found == _contains(list(row[:n_steps]), target)
        assert reward == float(found)


def test_multi_token_action_stops_at_success_and_counts_ignored() -> None:
    env = PAVDidacticEnv(target="1 2")
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("5 1 2 9 9")
    assert (reward, terminated, info["success"], info["ignored_tokens"]) == (1.0, True, True, 2)
    assert obs == "Found the hidden run: 5 1 2. Success."


def test_eos_ends_without_success() -> None:
    env = PAVDidacticEnv(target="1 2")
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(f"1 {EOS}")
    assert (reward, terminated, info["success"]) == (0.0, True, False)
    assert "without the hidden run" in obs


def test_length_limit_ends_the_episode() -> None:
    env = PAVDidacticEnv(target="1 2", seq_len=3)
    env.reset(seed=0)
    assert env.step("0 0")[2] is False
    _, _, terminated, _, info = env.step("0 1 2")
    assert terminated and not info["success"] and info["ignored_tokens"] == 2 and info["length"] == 3


def test_malformed_action_appends_nothing() -> None:
    env = PAVDidacticEnv(target="1 2")
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("one two")
    assert info["malformed"] and not terminated and info["length"] == 0 and reward == 0.0
    assert "Not a token sequence" in obs


def test_parse_tokens_rejects_out_of_range_and_signs() -> None:
    assert parse_tokens("0 14", 15) == [0, 14]
    assert parse_tokens("-1", 15) is None
    assert parse_tokens("15", 15) is None
    assert parse_tokens("٣", 15) is None  # a non-ASCII digit


def test_observations_never_show_the_target_before_the_end() -> None:
    env = PAVDidacticEnv(target="4 5 6")
    obs, info = env.reset(seed=0)
    assert "4 5 6" not in obs and "target" not in info
    obs, *_ = env.step("4 5")
    assert obs == "Sequence so far: 4 5 (2/10 tokens)."


@pytest.mark.parametrize("seed", range(20))
def test_splits_draw_their_kind_of_target(seed: int) -> None:
    id_t = _task("id", seed)
    assert len(id_t) == 5 and len(set(id_t)) == 5 and EOS not in id_t
    combo = _task("combo", seed)
    assert len(combo) == 5 and len(set(combo)) == 4
    ood = _task("ood", seed)
    assert len(ood) == 6 and len(set(ood)) == 6


def _task(split: str, seed: int) -> tuple[int, ...]:
    env = PAVDidacticEnv(split=split)
    env.reset(seed=seed)
    return target_of(env.task)


def test_fixed_target_plays_every_episode() -> None:
    env = PAVDidacticEnv(target=(2, 9))
    targets = set()
    for seed in range(5):
        env.reset(seed=seed)
        targets.add(target_of(env.task))
    assert targets == {(2, 9)}


def test_oracle_solves_every_split() -> None:
    for split in ("id", "ood", "combo"):
        traj = turnkit.collect(PAVDidacticEnv(split=split), OracleAgent(), seed=5)
        assert traj.success and len(traj.steps) == 1


def test_check_env_passes() -> None:
    report = turnkit.check_env(PAVDidacticEnv(split="combo"), cross_process=False, raise_on_failure=False)
    assert report.ok, str(report)


def test_bad_config_raises() -> None:
    with pytest.raises(ConfigError, match="EOS"):
        PAVDidacticEnv(target="14 1")
    with pytest.raises(ConfigError, match="seq_len"):
        PAVDidacticEnv(seq_len=0)
    with pytest.raises(ConfigError, match="target_len"):
        PAVDidacticEnv(target_len=14)
