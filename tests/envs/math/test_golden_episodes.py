"""Pinned MathEpisodes outputs: the same seed gives the same observation, reward, flags, info and RNG stream.

The expected outputs in ``golden_episodes.json`` were recorded from the env before its per-episode cost was cut
(issue #20), so any speed-up that changes behaviour fails here. Every call's full output is compared by
``repr`` (types and ``info`` key order included); so are each task and the RNG state after ``reset``.

Run: python -m pytest tests/envs/math/test_golden_episodes.py -q
Re-record (only for an intended behaviour change): python tests/envs/math/test_golden_episodes.py --write
"""

from __future__ import annotations

import hashlib
import json
import sys
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

import turnkit  # noqa: F401  (registers envs)
from turnkit.envs.core import restore_env, snapshot_env
from turnkit.envs.math.env import MathEpisodesEnv
from turnkit.envs.math.generator import KINDS, SPLITS, generate
from turnkit.types import Task

GOLDEN = Path(__file__).with_name("golden_episodes.json")
ENV_ID = "turnkit/MathEpisodes-v0"
SWEEP_SEEDS = (0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 1000, 4242, 99999, 123456789, 2**31 - 1, 2**40 + 7)


def _variants(ref: str) -> dict[str, str]:
    """Answer texts derived from the reference: equal in value but written differently, and wrong ones."""
    value = Fraction(ref)
    doubled = f"{2 * value.numerator}/{2 * value.denominator}"
    wrong = value + 1000
    decimal = None
    den = value.denominator
    while den % 2 == 0:
        den //= 2
    while den % 5 == 0:
        den //= 5
    if den == 1:  # a terminating decimal
        decimal = f"{float(value):.6f}".rstrip("0")
    return {
        "ref": ref,
        "doubled": doubled,
        "decimal": decimal or doubled,
        "wrong": str(wrong.numerator) if wrong.denominator == 1 else f"{wrong.numerator}/{wrong.denominator}",
    }


SCRIPTS: dict[str, list[str]] = {
    # each entry is a format string over _variants(ref); the episode stops when it ends
    "long": [
        "Let me think about it first.",
        "",
        "ANSWER: banana",
        "ANSWER: {wrong}",
        "So the value is \\boxed{{{ref}}}.",
    ],
    "equivalent": ["ANSWER: 0.5", "x = 1\nANSWER: {doubled}.", "ANSWER: {decimal}"],
    "bench": ["ANSWER: 0.5"] * 4,
    "wrong": ["ANSWER: {wrong}", "I give up: ANSWER: ", "answer: {wrong}  "],
}


def _call(out: Any) -> str:
    return repr(out)


def _episode(env: gymnasium.Env, seed: int, script: str, options: dict | None = None) -> list[str]:
    """Reset with ``seed`` and play ``script``; the repr of every output, the task and the RNG state."""
    core = env.unwrapped
    out = [_call(env.reset(seed=seed, options=options))]
    out.append(repr(core.task))
    out.append(repr(core.np_random.bit_generator.state))
    forms = _variants(str(core.privileged()["answer"])) if core.task.family == "math" else {}
    for template in SCRIPTS[script]:
        step = env.step(template.format(**forms) if forms else template)
        out.append(_call(step))
        if step[2] or step[3]:
            break
    return out


def _in_memory_tasks() -> list[Task]:
    tasks = [generate(np.random.default_rng(i), split="id", difficulty=2, kinds=KINDS) for i in range(5)]
    tasks.append(Task(task_id="gsm-1", prompt="Natalia sold 48 clips...", privileged={"answer": "72"}))
    tasks.append(Task(task_id="text-1", prompt="Which day?", privileged={"answer": "\\text{Monday}"}, family="m"))
    tasks.append(Task(task_id="frac-1", prompt="Half?", privileged={"answer": "\\frac{1}{2}"}, metadata={"kind": "k"}))
    return tasks


def record_detailed() -> dict[str, list[str]]:
    """Readable full outputs of a few episodes, one per behaviour worth pinning."""
    cases: dict[str, list[str]] = {}
    env = gymnasium.make(ENV_ID)
    for seed in (0, 7, 123456789):
        for script in SCRIPTS:
            cases[f"default seed={seed} {script}"] = _episode(env, seed, script)
    for kind in KINDS:
        env = gymnasium.make(ENV_ID, kinds=(kind,), difficulty=3, split="combo")
        cases[f"{kind} d3 combo seed=3 long"] = _episode(env, 3, "long")
    env = gymnasium.make(ENV_ID, split="ood", difficulty=5, max_attempts=1)
    cases["ood d5 max_attempts=1 seed=11 wrong"] = _episode(env, 11, "wrong")
    env = gymnasium.make(ENV_ID, difficulty=1, kinds=("arithmetic",), max_attempts=1)
    for seed in (0, 1, 2):
        cases[f"arith d1 max_attempts=1 seed={seed} bench"] = _episode(env, seed, "bench")
    env = gymnasium.make(ENV_ID, token_budget=9, budget_unit="chars")
    cases["chars budget 9 seed=4 long"] = _episode(env, 4, "long")
    env = gymnasium.make(ENV_ID, token_budget=6)
    cases["words budget 6 seed=4 long"] = _episode(env, 4, "long")
    tasks = _in_memory_tasks()
    env = gymnasium.make(ENV_ID, tasks=tasks)
    for i in range(len(tasks)):
        cases[f"in-memory task_index={i} long"] = _episode(env, 100 + i, "long", {"task_index": i})
    for seed in (0, 1, 2, 3):
        cases[f"in-memory drawn seed={seed} equivalent"] = _episode(env, seed, "equivalent")
    env = gymnasium.make(ENV_ID, max_attempts=10, token_budget=10_000)
    cases["truncated by TimeLimit seed=9"] = _time_limit(env, 9)
    cases["tools submit seed=5"] = _tools(5)
    cases["snapshot/restore seed=6"] = _snapshots(6)
    cases["after the end seed=8"] = _after_end(8)
    return cases


def _time_limit(env: gymnasium.Env, seed: int) -> list[str]:
    out = [_call(env.reset(seed=seed))]
    for k in range(10):
        out.append(_call(env.step(f"step {k}: still thinking")))
    return out


def _tools(seed: int) -> list[str]:
    env = gymnasium.make(ENV_ID, kinds=("fractions",), difficulty=2, tools=["submit"])
    out = [_call(env.reset(seed=seed))]
    ref = str(env.unwrapped.privileged()["answer"])
    for text in (
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
        "<submit>12345</submit>",
        "Thinking, no call.",
        f'<tool_call>{{"name": "submit", "arguments": {{"answer": "{ref}"}}}}</tool_call>',
    ):
        out.append(_call(env.step(text)))
    env.close()
    return out


def _snapshots(seed: int) -> list[str]:
    env = gymnasium.make(ENV_ID, difficulty=2)
    out = [_call(env.reset(seed=seed))]
    ref = str(env.unwrapped.privileged()["answer"])
    out.append(_call(env.step("ANSWER: 1000000")))
    snap = snapshot_env(env)
    out.append(repr(snap))
    rest = ["thinking", "", f"ANSWER: {ref}"]
    first = [_call(env.step(a)) for a in rest]
    restore_env(env, snap)
    second = [_call(env.step(a)) for a in rest]
    assert first == second
    out += first
    out.append(repr(env.unwrapped.np_random.bit_generator.state))
    return out


def _after_end(seed: int) -> list[str]:
    env = MathEpisodesEnv(max_attempts=1)
    out = [_call(env.reset(seed=seed)), _call(env.step("ANSWER: 99999"))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out.append(_call(env.step("ANSWER: 1")))
    return out


def record_sweep() -> dict[str, str]:
    """A sha256 per (kind, split, difficulty) over many seeds and every script, for wide coverage."""
    digests: dict[str, str] = {}
    for kind in KINDS:
        for split in SPLITS:
            for difficulty in range(1, 6):
                env = gymnasium.make(ENV_ID, kinds=(kind,), split=split, difficulty=difficulty)
                h = hashlib.sha256()
                for i, seed in enumerate(SWEEP_SEEDS):
                    script = list(SCRIPTS)[i % len(SCRIPTS)]
                    for line in _episode(env, seed, script):
                        h.update(line.encode())
                        h.update(b"\n")
                digests[f"{kind} {split} d{difficulty}"] = h.hexdigest()
    return digests


def record() -> dict[str, Any]:
    """Everything the golden file holds."""
    return {"detailed": record_detailed(), "sweep": record_sweep()}


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


def test_detailed_episodes_match_the_recorded_outputs(golden) -> None:
    actual = record_detailed()
    assert actual.keys() == golden["detailed"].keys()
    for name, lines in golden["detailed"].items():
        assert actual[name] == lines, name


def test_seed_sweep_matches_the_recorded_digests(golden) -> None:
    assert record_sweep() == golden["sweep"]


def test_repeating_a_seed_after_other_episodes_gives_the_same_outputs() -> None:
    env = gymnasium.make(ENV_ID, difficulty=4)
    first = _episode(env, 77, "long")
    for seed in range(5):
        _episode(env, seed, "wrong")
    assert _episode(env, 77, "long") == first


if __name__ == "__main__":
    if "--write" in sys.argv:
        GOLDEN.write_text(json.dumps(record(), indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {GOLDEN}")
