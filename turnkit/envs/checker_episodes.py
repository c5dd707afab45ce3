"""Recorded episodes for :func:`turnkit.check_env`: play, replay, canonicalise and compare transcripts.

A transcript is a list of *records*: the reset (``observation``, ``info``), then one per step (also
``reward``, ``terminated``, ``truncated``). Records are canonical (:func:`canonical`): JSON-compatible and
independent of the process, so that a fresh process can send its transcript back for comparison.

Example:
    >>> import gymnasium, turnkit
    >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
    >>> a = record_episode(env, 0, replay(["ANSWER: 1", "ANSWER: 2"]))
    >>> b = record_episode(env, 0, replay(["ANSWER: 1", "ANSWER: 2"]))
    >>> first_difference(a.records, b.records) is None, len(a.actions)
    (True, 2)
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np

from turnkit.types import Message, observation_role

NextAction = Callable[[int, list[Message]], Any]
"""``(turn, messages so far) -> action``, or ``None`` to stop the episode."""


class EpisodeFault(Exception):
    """The env raised while an episode was being recorded; ``seed`` says which episode."""

    def __init__(self, message: str, seed: int | None = None) -> None:
        super().__init__(message)
        self.seed = seed


@dataclass
class Episode:
    """One recorded episode.

    Attributes:
        seed: The reset seed.
        actions: The actions sent, in order.
        records: Canonical records: the reset first (with the ``task`` id and privileged data, for TextEnvs),
            then one per step.
        raw: ``(observation, info, terminated)`` as returned, the reset first.
        privileged: The task's privileged data (``env.unwrapped.privileged()``), for TextEnvs.
        prompt: The task's public prompt, for TextEnvs.
        task_id: The task id, for TextEnvs.
    """

    seed: int
    actions: list[Any] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    raw: list[tuple[str, Any, bool]] = field(default_factory=list)
    privileged: Any = None
    prompt: str = ""
    task_id: str = ""


def canonical(x: Any) -> Any:
    """A JSON-compatible, process-independent form of ``x``.

    Floats become exact ``"float:<repr>"`` strings (so NaN compares equal to NaN), mappings are sorted by
    key, numpy values become Python values, and memory addresses in reprs are masked.

    Example:
        >>> canonical({"b": np.float32(0.5), "a": (1, np.int64(2)), "c": float("nan")})
        {'a': [1, 2], 'b': 'float:0.5', 'c': 'float:nan'}
    """
    if isinstance(x, enum.Enum):
        return canonical(x.value)
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if x is None:
        return None
    if isinstance(x, str):
        return str.__str__(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return "float:" + repr(float(x))
    if isinstance(x, Mapping):
        return {str(k): canonical(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, np.ndarray):
        return canonical(x.tolist())
    if isinstance(x, (list, tuple)):
        return [canonical(v) for v in x]
    if isinstance(x, (set, frozenset)):
        return sorted(json.dumps(canonical(v)) for v in x)
    return re.sub(r" at 0x[0-9a-fA-F]+", " at 0x…", repr(x))


def _step_record(obs: Any, reward: Any, terminated: Any, truncated: Any, info: Any) -> dict[str, Any]:
    return {
        "observation": canonical(obs),
        "reward": canonical(reward),
        "terminated": canonical(terminated),
        "truncated": canonical(truncated),
        "info": canonical(info),
    }


def canonical_reset(env: gymnasium.Env, obs: Any, info: Any) -> dict[str, Any]:
    """The record of a reset; for a TextEnv it includes the task id and privileged data (hidden but seeded).

    Example:
        >>> import gymnasium, turnkit
        >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
        >>> sorted(canonical_reset(env, *env.reset(seed=0)))
        ['info', 'observation', 'task']
    """
    from turnkit.envs.core import TextEnv

    record = {"observation": canonical(obs), "info": canonical(info)}
    base = env.unwrapped
    if isinstance(base, TextEnv):
        record["task"] = canonical({"task_id": base.task.task_id, "privileged": base.privileged()})
    return record


def replay(actions: Sequence[Any]) -> NextAction:
    """A :data:`NextAction` that sends ``actions`` in order, then stops.

    Example:
        >>> plan = replay(["a", "b"])
        >>> plan(0, []), plan(1, []), plan(2, [])
        ('a', 'b', None)
    """
    return lambda turn, _messages: actions[turn] if turn < len(actions) else None


def record_episode(env: gymnasium.Env, seed: int, next_action: NextAction) -> Episode:
    """Play one episode from ``env.reset(seed=seed)`` until it ends or ``next_action`` returns ``None``.

    Raises:
        EpisodeFault: ``reset`` or ``step`` raised; the message names the step and action.

    Example:
        >>> import gymnasium, turnkit
        >>> ep = record_episode(gymnasium.make("turnkit/MathEpisodes-v0"), 3, replay(["hi"]))
        >>> [sorted(r) for r in ep.records][1]
        ['info', 'observation', 'reward', 'terminated', 'truncated']
    """
    from turnkit.envs.core import TextEnv

    ep = Episode(seed)
    try:
        obs, info = env.reset(seed=seed)
    except Exception as exc:
        raise EpisodeFault(f"reset raised {type(exc).__name__}: {exc}", seed) from exc
    base = env.unwrapped
    if isinstance(base, TextEnv):
        ep.privileged, ep.prompt, ep.task_id = base.privileged(), base.task.prompt, base.task.task_id
    ep.records.append(canonical_reset(env, obs, info))
    ep.raw.append((obs, info, False))
    messages = [Message("user", str(obs))]
    while (action := next_action(len(ep.actions), messages)) is not None:
        try:
            obs, reward, terminated, truncated, info = env.step(action)
        except Exception as exc:
            where = f"step {len(ep.actions) + 1} (action {short_repr(action)})"
            raise EpisodeFault(f"{where} raised {type(exc).__name__}: {exc}", seed) from exc
        ep.actions.append(action)
        ep.records.append(_step_record(obs, reward, terminated, truncated, info))
        ep.raw.append((obs, info, bool(terminated)))
        role = observation_role(info) if isinstance(info, dict) else "user"
        messages += [Message("assistant", str(action)), Message(role, str(obs))]
        if terminated or truncated:
            break
    return ep


def play(env: gymnasium.Env, actions: Sequence[Any]) -> list[dict[str, Any]]:
    """Step ``actions`` from the env's current state until it ends; the canonical step records.

    Example:
        >>> import gymnasium, turnkit
        >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
        >>> _ = env.reset(seed=0)
        >>> len(play(env, ["", ""]))
        2
    """
    out = []
    for action in actions:
        out.append(_step_record(*env.step(action)))
        if out[-1]["terminated"] or out[-1]["truncated"]:
            break
    return out


def short_repr(x: Any, limit: int = 60) -> str:
    """``repr(x)``, shortened in the middle when longer than ``limit``.

    Example:
        >>> short_repr("9" * 10_000)
        "'9999999999999999999…999999999' (10000 chars)"
    """
    text = repr(x)
    if len(text) <= limit:
        return text
    size = f" ({len(x)} chars)" if isinstance(x, (str, bytes)) else ""
    return f"{text[: limit - 40]}…{text[-10:]}{size}"


def first_difference(
    a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], ignore: Collection[str] = (), first_step: int = 0
) -> str | None:
    """Where two transcripts first differ, in words, or ``None`` if they are identical.

    Args:
        a: Records of the first transcript.
        b: Records of the second.
        ignore: ``info`` keys left out of the comparison.
        first_step: The step number of the first record (0 for a transcript starting at the reset).

    Example:
        >>> x = [{"observation": "hi", "info": {}}, {"observation": "Lower.", "info": {"turn": 1}}]
        >>> y = [{"observation": "hi", "info": {}}, {"observation": "Higher.", "info": {"turn": 1}}]
        >>> first_difference(x, y)
        "step 1: observation differs: 'Lower.' vs 'Higher.' (from character 0)"
        >>> first_difference([{"info": {"d": {"t": [1, 2]}}}], [{"info": {"d": {"t": [1, 3]}}}])
        "reset: info['d']['t'][1] differs: 2 vs 3"
    """
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        where = "reset" if i + first_step == 0 else f"step {i + first_step}"
        for key in sorted(x.keys() | y.keys()):
            u, v = x.get(key, _MISSING), y.get(key, _MISSING)
            if key == "info" and isinstance(u, Mapping) and isinstance(v, Mapping):
                u = {k: w for k, w in u.items() if k not in ignore}
                v = {k: w for k, w in v.items() if k not in ignore}
            found = _locate(u, v, key)
            if found is not None:
                path, p, q = found
                return f"{where}: {path} differs: {_contrast(p, q)}"
    if len(a) != len(b):
        n, m = len(a) + first_step - 1, len(b) + first_step - 1
        return f"the episodes have different lengths ({n} vs {m} steps)"
    return None


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _locate(u: Any, v: Any, path: str) -> tuple[str, Any, Any] | None:
    """The first place where two canonical values differ: ``(path, u_part, v_part)``."""
    if isinstance(u, Mapping) and isinstance(v, Mapping):
        for k in sorted(u.keys() | v.keys(), key=str):
            found = _locate(u.get(k, _MISSING), v.get(k, _MISSING), f"{path}[{k!r}]")
            if found is not None:
                return found
        return None
    if isinstance(u, list) and isinstance(v, list):
        for i, (p, q) in enumerate(zip(u, v, strict=False)):
            found = _locate(p, q, f"{path}[{i}]")
            if found is not None:
                return found
        return None if len(u) == len(v) else (f"the length of {path}", len(u), len(v))
    return None if u == v else (path, u, v)


def _contrast(u: Any, v: Any) -> str:
    if isinstance(u, str) and isinstance(v, str) and u.startswith("float:") and v.startswith("float:"):
        return f"{u[6:]} vs {v[6:]}"
    if isinstance(u, str) and isinstance(v, str):
        i = next((k for k, (p, q) in enumerate(zip(u, v, strict=False)) if p != q), min(len(u), len(v)))
        lo = max(0, i - 20)
        return f"{u[lo : i + 30]!r} vs {v[lo : i + 30]!r} (from character {lo})"
    return f"{short_repr(u)} vs {short_repr(v)}"
