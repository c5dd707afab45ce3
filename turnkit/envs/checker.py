"""`check_env`: the public checker of the turnkit text-env contract (see :mod:`turnkit.envs.core`).

Run it on any env before training on it. Each check is one property of the contract:

=====================  ========================================================================================
``gymnasium``          Gymnasium's own ``env_checker.check_env`` on ``env.unwrapped`` (render/close skipped).
``text_env``           ``env.unwrapped`` is a :class:`~turnkit.TextEnv` with :class:`TextSpace` spaces;
                       ``reset`` / ``step`` return ``str`` observations and ``dict`` infos.
``determinism``        The same seed gives the same task (privileged part included) and the same episode,
                       also after other episodes and with two instances stepping in lockstep; different seeds
                       give different tasks (a warning otherwise).
``privileged_leak``    No privileged value in an observation before termination or in any ``info``
                       (heuristic in :mod:`turnkit.envs.checker_leaks`).
``snapshot``           Snapshot at several points, continue, restore, continue: identical continuations, also
                       when restoring twice, after another episode, and into a fresh env instance.
``garbage_actions``    Empty, huge, binary, NUL, surrogate, ``None``, markup, RTL, 10k-digit and power-tower
                       actions never raise; invalid ones are reported in ``info["invalid_action"]``.
``invalid_allowance``  ``max_invalid_actions + 1`` invalid actions end the episode, not fewer; stepping after
                       the end answers ``"episode_over"``.
``truncation``         The unwrapped env never returns ``truncated=True`` (only ``TimeLimit`` truncates).
``cross_process``      The same seeded episodes replayed in a fresh ``python -c`` process (built from
                       ``env.spec``, with another hash seed) give identical transcripts.
=====================  ========================================================================================

Episodes are driven by a deterministic action plan: random text, one invalid (empty) action, random text,
then the family's oracle (:func:`turnkit.agents.oracle.oracle_for`) or a ``policy`` you pass, falling back
to random text. The recorded actions are replayed by the other checks. Transcripts are compared in the
canonical form of :mod:`turnkit.envs.checker_episodes`; a difference is reported with its path, e.g.
``step 2: info['debug']['target'] differs: 4821 vs 1234``.

Example:
    >>> import gymnasium, turnkit
    >>> report = turnkit.check_env(gymnasium.make("turnkit/MathEpisodes-v0"), cross_process=False)
    >>> report.ok, report.result("cross_process").status.value
    (True, 'skipped')
"""

from __future__ import annotations

import base64
import enum
import json
import math
import os
import pickle
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np
from gymnasium.utils import env_checker as gym_checker

from turnkit.agents.base import Context
from turnkit.agents.scripted import RandomAgent
from turnkit.envs.checker_episodes import (
    Episode,
    canonical,
    canonical_reset,
    first_difference,
    play,
    record_episode,
    replay,
    short_repr,
)
from turnkit.envs.checker_episodes import (
    EpisodeFault as _Failed,
)
from turnkit.envs.checker_leaks import exempt_count, privileged_needles, scan_leaks
from turnkit.envs.core import TextEnv, restore_env, snapshot_env, validate_action
from turnkit.envs.spaces import TextSpace
from turnkit.errors import AgentError, ConfigError, ContractError
from turnkit.types import Message

Policy = Callable[[Context], str]
"""A function from the conversation so far to the next action (like an oracle's ``oracle_reply``)."""

CHECKS: tuple[str, ...] = (
    "gymnasium",
    "text_env",
    "determinism",
    "privileged_leak",
    "snapshot",
    "garbage_actions",
    "invalid_allowance",
    "truncation",
    "cross_process",
)
"""Every check, in the order they run."""

GARBAGE_ACTIONS: tuple[tuple[str, Any], ...] = (
    ("empty", ""),
    ("whitespace", " \t\n "),
    ("1 MB of text", "x" * (1 << 20)),
    ("NUL bytes", "ANSWER: 1\x00\x00"),
    ("lone surrogate", "\ud800"),
    ("valid UTF-8 bytes", b"ANSWER: 1"),
    ("invalid UTF-8 bytes", b"\xff\xfe\xfa"),
    ("None", None),
    ("int", 12345),
    ("list", ["ANSWER: 1"]),
    ("script tag", "<script>alert('x')</script>"),
    ("code fence", "```python\nimport os\nos.system('echo pwned')\n```"),
    ("template braces", "{{}} {0} {} %s %(x)s {{7*7}}"),
    ("shell expansion", "${HOME} $(whoami) `id`"),
    ("very long line", "ab " * 5000),
    ("RTL and zero-width", "\u202eANSWER: 1\u200b\u200d\ufeff\u2066"),
    ("10k-digit number", "9" * 10_000),
    ("ANSWER: 10k digits", "ANSWER: " + "9" * 10_000),
    ("power tower", "9**9**9**9"),
    ("ANSWER: power tower", "ANSWER: 9**9**9**9"),
    ("ANSWER: specials", "ANSWER: nan inf -0 1/0 1e999999"),
)
"""``(name, action)`` pairs sent by the ``garbage_actions`` check (one per fresh episode)."""

CONTROL_EPISODES = 3
"""Extra episodes the ``privileged_leak`` check records before it reports a short value (one shorter than
``leak_min_chars``) as a leak: if the place where it was found shows other values in them, it is a coincidence."""


class Status(str, enum.Enum):
    """Outcome of one check."""

    PASSED = "passed"
    WARNING = "warning"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check.

    Attributes:
        name: The check, one of :data:`CHECKS`.
        status: ``"passed"``, ``"warning"`` (passed with remarks), ``"failed"`` or ``"skipped"``.
        seconds: Wall time the check took.
        detail: What was checked, the failure, or the reason for skipping.
        seed: The seed of the failing episode, if any.

    Example:
        >>> CheckResult("truncation", Status.PASSED, 0.01).ok
        True
    """

    name: str
    status: Status
    seconds: float
    detail: str = ""
    seed: int | None = None

    @property
    def ok(self) -> bool:
        """Whether the check did not fail."""
        return self.status != Status.FAILED


@dataclass(frozen=True)
class CheckReport:
    """All check results for one env; ``str(report)`` is a readable table.

    Attributes:
        env_id: The env id (or class name of an unregistered env).
        results: One result per check that was asked for, in run order.

    Example:
        >>> report = CheckReport("demo", (CheckResult("truncation", Status.PASSED, 0.01, "20 steps"),))
        >>> report.ok, len(report.failures)
        (True, 0)
        >>> print(report)  # doctest: +NORMALIZE_WHITESPACE
        check_env(demo): OK: 1 passed in 0.01 s
          passed   truncation          0.01 s  20 steps
    """

    env_id: str
    results: tuple[CheckResult, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether no check failed."""
        return all(r.ok for r in self.results)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        """The failed checks."""
        return tuple(r for r in self.results if not r.ok)

    def result(self, name: str) -> CheckResult:
        """The result of check ``name``."""
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(f"check {name!r} did not run; ran {[r.name for r in self.results]}")

    def error(self) -> ContractError | None:
        """A :class:`ContractError` describing every failure, or ``None`` when all passed."""
        if self.ok:
            return None
        err = ContractError("\n".join(_failure_message(self.env_id, r) for r in self.failures))
        err.report = self  # type: ignore[attr-defined]
        return err

    def __str__(self) -> str:
        counts = {s: sum(r.status == s for r in self.results) for s in Status}
        summary = ", ".join(f"{n} {s.value}" for s, n in counts.items() if n)
        total = sum(r.seconds for r in self.results)
        lines = [f"check_env({self.env_id}): {'OK' if self.ok else 'FAILED'}: {summary} in {total:.2f} s"]
        for r in self.results:
            detail = (f"seed={r.seed}: " if r.seed is not None else "") + r.detail
            if r.ok and len(detail) > 100:
                detail = detail[:99] + "…"
            lines.append(f"  {r.status.value:<8} {r.name:<18} {r.seconds:6.2f} s  {detail}")
        return "\n".join(lines)


def _failure_message(env_id: str, r: CheckResult) -> str:
    seed = f" (seed={r.seed})" if r.seed is not None else ""
    return f"{env_id} fails check '{r.name}'{seed}: {r.detail}"


class _Skipped(Exception):
    """A check cannot run on this env; the message says why."""


@dataclass(frozen=True)
class _Options:
    seeds: tuple[int, ...]
    steps: int
    policy: Policy | None
    leak_min_chars: int
    leak_ignore: frozenset[str]
    ignore_info_keys: frozenset[str]
    garbage_time_limit_s: float
    cross_process_timeout_s: float


@dataclass
class _Run:
    """Shared state of one ``check_env`` call."""

    env: gymnasium.Env
    env_id: str
    opts: _Options
    notes: list[str] = field(default_factory=list)
    warned: bool = False
    made: list[gymnasium.Env] = field(default_factory=list)
    _episodes: dict[int, Episode] | None = None
    _controls: list[Episode] | None = None

    @property
    def base(self) -> Any:
        return self.env.unwrapped

    def warn(self, message: str) -> None:
        self.warned = True
        self.notes.append(message)

    def text_env(self) -> TextEnv:
        if not isinstance(self.base, TextEnv):
            raise _Skipped(f"needs a turnkit.TextEnv, got {type(self.base).__name__}")
        return self.base

    def episodes(self) -> dict[int, Episode]:
        if self._episodes is None:
            self._episodes = {s: record_episode(self.env, s, _Driver(self, s)) for s in self.opts.seeds}
        return self._episodes

    def control_episodes(self) -> list[Episode]:
        """Extra episodes (the seeds after the checked ones) that tell a short value's coincidences from leaks."""
        if self._controls is None:
            first = max(self.opts.seeds) + 1
            seeds = range(first, first + CONTROL_EPISODES)
            self._controls = [record_episode(self.env, s, _Driver(self, s)) for s in seeds]
        return self._controls

    def fresh_env(self) -> gymnasium.Env | None:
        spec = self.env.spec
        if spec is None:
            return None
        env = gymnasium.make(spec)
        self.made.append(env)
        env.reset(seed=self.opts.seeds[-1] + 7919)  # gymnasium's PassiveEnvChecker needs a reset before step
        return env


class _Driver:
    """The deterministic action plan: random, empty, random, then the policy (or random) text."""

    def __init__(self, run: _Run, seed: int) -> None:
        self.run, self.seed = run, seed
        self.random = RandomAgent(max_chars=40, seed=seed)
        self.policy: Policy | None = run.opts.policy
        self.resolved = run.opts.policy is not None

    def __call__(self, turn: int, messages: list[Message]) -> str | None:
        if turn >= self.run.opts.steps:
            return None
        base = self.run.base
        if turn == 1 and getattr(base, "max_invalid_actions", 1) >= 1:
            return ""
        task = getattr(base, "task", None)
        tools = tuple(getattr(base, "tool_schemas", ()))
        ctx = Context(tuple(messages), self.run.env_id, turn, self.seed, task, tools=tools)
        if turn >= 3:
            policy = self._policy(task)
            if policy is not None:
                try:
                    return str(policy(ctx))
                except Exception as exc:  # the checker is not an oracle test: note it and go on randomly
                    self.run.notes.append(f"policy raised {type(exc).__name__}: {exc}; using random text")
                    self.policy = None
        return self.random.act([ctx])[0].text

    def _policy(self, task: Any) -> Policy | None:
        if not self.resolved:
            self.resolved = True
            family = getattr(task, "family", "")
            if family:
                from turnkit.agents.oracle import oracle_for

                try:
                    self.policy = oracle_for(family)
                except (AgentError, ImportError) as exc:
                    self.run.notes.append(f"no oracle ({exc}); driving with random text")
        return self.policy


# ---------------------------------------------------------------------------------------------- checks
def _check_gymnasium(run: _Run) -> str:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            gym_checker.check_env(run.base, skip_render_check=True, skip_close_check=True)
        except AssertionError as exc:
            raise _Failed(f"gymnasium's env checker: {exc or 'an assertion failed'}") from exc
        except Exception as exc:
            raise _Failed(f"gymnasium's env checker raised {type(exc).__name__}: {exc}") from exc
    for message in sorted({str(w.message) for w in caught}):
        run.warn(f"gymnasium warned: {message}")
    return "gymnasium.utils.env_checker.check_env passed"


def _check_text_env(run: _Run) -> str:
    base = run.base
    if not isinstance(base, TextEnv):
        raise _Failed(f"env.unwrapped is a {type(base).__name__}, not a turnkit.TextEnv subclass")
    for name in ("observation_space", "action_space"):
        space = getattr(base, name)
        if not isinstance(space, TextSpace):
            raise _Failed(f"{name} is {space!r}, not a turnkit TextSpace")
    if not base.splits or not all(isinstance(s, str) for s in base.splits):
        raise _Failed(f"splits must be a non-empty tuple of str, got {base.splits!r}")
    seed = run.opts.seeds[0]
    obs, info = run.env.reset(seed=seed)
    if not isinstance(obs, str) or not isinstance(info, dict):
        raise _Failed(f"reset returned ({type(obs).__name__}, {type(info).__name__}), not (str, dict)", seed)
    out = run.env.step("hello")
    types: tuple[type | tuple[type, ...], ...] = (
        str,
        (int, float, np.number),
        (bool, np.bool_),
        (bool, np.bool_),
        dict,
    )
    for what, value, kind in zip(("observation", "reward", "terminated", "truncated", "info"), out, types, strict=True):
        if not isinstance(value, kind) or (what == "reward" and isinstance(value, bool)):
            raise _Failed(f"step returned a {type(value).__name__} {what}", seed)
    if base.render_mode == "ansi" and not isinstance(base.render(), str):
        raise _Failed("render() with render_mode='ansi' must return a str")
    return f"TextEnv with TextSpace spaces; splits {list(base.splits)}"


def _check_determinism(run: _Run) -> str:
    reference = run.episodes()
    for seed in reversed(run.opts.seeds):  # other episodes ran in between: catches state kept across resets
        again = record_episode(run.env, seed, replay(reference[seed].actions))
        diff = first_difference(reference[seed].records, again.records, run.opts.ignore_info_keys)
        if diff is not None:
            raise _Failed(f"non-deterministic: two runs with the same seed and actions differ at {diff}", seed)
    concurrent = _check_lockstep(run, reference)
    tasks = {json.dumps([ep.records[0]["observation"], canonical(ep.privileged)]) for ep in reference.values()}
    fixed = getattr(run.base, "_fixed_tasks", None)
    if len(run.opts.seeds) > 1 and len(tasks) == 1 and not (fixed is not None and len(fixed) == 1):
        run.warn(f"all {len(run.opts.seeds)} seeds gave the same task; a procedural env should vary it")
    steps = sum(len(ep.actions) for ep in reference.values())
    return f"{len(reference)} seeds, {steps} steps replayed identically{concurrent}; {len(tasks)} distinct tasks"


def _check_lockstep(run: _Run, reference: dict[int, Episode]) -> str:
    """Replay each episode in this env and a fresh instance, alternating steps (like a same-seed group)."""
    other = run.fresh_env()
    if other is None:
        return ""
    for seed, ep in reference.items():
        pair = (run.env, other)
        records: list[list[dict]] = [[], []]
        for k, env in enumerate(pair):
            obs, info = env.reset(seed=seed)
            records[k].append(canonical_reset(env, obs, info))
        for action in ep.actions:
            for k, env in enumerate(pair):
                records[k].extend(play(env, [action]))
        for k, how in enumerate(("this env", "a second instance")):
            diff = first_difference(ep.records, records[k], run.opts.ignore_info_keys)
            if diff is not None:
                msg = f"non-deterministic: replayed in lockstep with another instance, {how} differs at {diff}"
                raise _Failed(msg, seed)
    return " (also two instances in lockstep)"


def _check_privileged_leak(run: _Run) -> str:
    run.text_env()
    episodes = run.episodes()
    searched = exempt = short = coincidences = controls = 0
    for seed, ep in episodes.items():
        needles = privileged_needles(ep.privileged, min_chars=run.opts.leak_min_chars, ignore=run.opts.leak_ignore)
        exempt += exempt_count(needles, ep.prompt)
        searched += len(needles)
        short += sum(1 for n in needles if n.short and not n.search(ep.prompt))
        others = [(other.privileged, other.raw) for s, other in episodes.items() if s != seed]
        scan = scan_leaks(needles, ep.raw, ep.actions, prompt=ep.prompt, others=others)
        if scan.leak is not None and scan.leak.needle.short:  # before calling it a leak, look at more episodes
            others += [(control.privileged, control.raw) for control in run.control_episodes()]
            controls = len(run.control_episodes())
            scan = scan_leaks(needles, ep.raw, ep.actions, prompt=ep.prompt, others=others)
        coincidences += len(scan.coincidences)
        if scan.leak is not None:
            raise _Failed(str(scan.leak), seed)
    if searched == exempt:  # a count of 0 would read like a pass: say that the check could not look
        run.warned = True
        if exempt:
            return f"nothing searched (all {exempt} privileged values occur in the public prompt, so are exempt)"
        return "nothing searched (no privileged value renders to a searchable string)"
    detail = f"{searched - exempt} privileged values searched for"
    detail += f" ({short} short ones as whole tokens)" if short else ""
    detail += f", {exempt} exempt (in the public prompt)"
    if coincidences:
        detail += f", {coincidences} short-value matches taken for coincidences (that place shows other values too)"
    if controls:
        detail += f"; {controls} control episodes recorded to tell them from leaks"
    return detail


def _same(ep: Episode, records: list[dict], p: int, how: str, ignore: Collection[str]) -> None:
    diff = first_difference(ep.records[p + 1 :], records, ignore, first_step=p + 1)
    if diff is not None:
        raise _Failed(f"snapshot taken after step {p}, {how}: the continuation differs at {diff}", ep.seed)


def _check_snapshot(run: _Run) -> str:
    run.text_env()
    env, ignore, count = run.env, run.opts.ignore_info_keys, 0
    fresh = run.fresh_env()
    if fresh is None:
        run.notes.append("no spec: restore into a fresh instance not checked")
    for seed, ep in run.episodes().items():
        n = len(ep.actions)
        for p in sorted({0, 1, n // 2, n - 1} & set(range(n))):
            rest = ep.actions[p:]
            record_episode(env, seed, replay(ep.actions[:p]))
            snap = snapshot_env(env)
            _same(ep, play(env, rest), p, "continued without restoring (taking it changed the episode)", ignore)
            restore_env(env, snap)
            _same(ep, play(env, rest), p, "restored once", ignore)
            record_episode(env, seed + 1, replay(["hello"]))  # play another episode, then restore again
            restore_env(env, snap)
            _same(ep, play(env, rest), p, "restored a second time after another episode", ignore)
            if fresh is not None:
                restore_env(fresh, snap)
                _same(ep, play(fresh, rest), p, "restored into a fresh env instance", ignore)
            count += 1
    return f"{count} snapshots restored and continued identically"


def _check_garbage_actions(run: _Run) -> str:
    seed, limit = run.opts.seeds[0], run.opts.garbage_time_limit_s
    max_chars = getattr(run.base, "max_action_chars", None)
    invalid = 0
    for name, action in GARBAGE_ACTIONS:
        run.env.reset(seed=seed)
        start = time.perf_counter()
        try:
            out = run.env.step(action)
        except Exception as exc:
            raise _Failed(
                f"garbage action {name} ({short_repr(action)}) raised {type(exc).__name__}: {exc}", seed
            ) from exc
        took = time.perf_counter() - start
        if took > limit:
            raise _Failed(f"garbage action {name} took {took:.1f} s (limit {limit} s)", seed)
        obs, reward, _, _, info = out
        if not isinstance(obs, str) or not isinstance(info, dict):
            raise _Failed(
                f"garbage action {name} gave a {type(obs).__name__} observation and {type(info).__name__} info", seed
            )
        if not isinstance(reward, (int, float, np.number)) or not math.isfinite(float(reward)):
            raise _Failed(f"garbage action {name} gave reward {reward!r}; rewards must be finite numbers", seed)
        if max_chars is not None:
            problem = validate_action(action, max_chars)[1]
            if problem is not None:
                invalid += 1
                if info.get("invalid_action") != problem.value:
                    got = info.get("invalid_action", "<missing>")
                    raise _Failed(
                        f"garbage action {name}: info['invalid_action'] is {got!r}, expected {problem.value!r}", seed
                    )
    return f"{len(GARBAGE_ACTIONS)} garbage actions answered ({invalid} flagged invalid)"


def _check_invalid_allowance(run: _Run) -> str:
    base = run.text_env()
    seed, k = run.opts.seeds[0], base.max_invalid_actions
    if k > 1000:
        raise _Skipped(f"max_invalid_actions={k} is too large to exhaust")
    base.reset(seed=seed)
    for i in range(1, k + 2):
        obs, _, terminated, _, info = base.step("")
        if info.get("invalid_action") != "empty":
            raise _Failed(
                f"invalid action {i}: info['invalid_action'] is {info.get('invalid_action')!r}, not 'empty'", seed
            )
        if not isinstance(obs, str) or not obs.strip():
            raise _Failed(f"invalid action {i} got no feedback observation ({obs!r})", seed)
        if terminated != (i == k + 1):
            state = "ended" if terminated else "did not end"
            raise _Failed(f"the episode {state} after {i} invalid actions with max_invalid_actions={k}", seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        obs, _, terminated, _, info = base.step("after the end")
    if info.get("invalid_action") != "episode_over" or not terminated or not isinstance(obs, str):
        raise _Failed(f"a step after the end must be terminated with invalid_action 'episode_over', got {info!r}", seed)
    return f"ended after {k + 1} invalid actions (max_invalid_actions={k}); later steps answer 'episode_over'"


def _check_truncation(run: _Run) -> str:
    base, steps = run.base, 0
    limit = getattr(run.env.spec, "max_episode_steps", None) or 0
    horizon = min(64, max(run.opts.steps, limit + 2))
    for seed in run.opts.seeds:
        base.reset(seed=seed)
        agent = RandomAgent(seed=seed)
        for turn in range(horizon):
            action = agent.act([Context((), run.env_id, turn, seed)])[0].text
            _, _, terminated, truncated, _ = base.step(action)
            steps += 1
            if truncated is not False:
                msg = f"the unwrapped env returned truncated={truncated!r} at step {turn + 1}; truncation must come"
                raise _Failed(msg + " only from gymnasium's TimeLimit (register with max_episode_steps)", seed)
            if terminated:
                break
    return f"{steps} unwrapped steps, never truncated"


_MARK = "TURNKIT-CHECK-RESULT:"


def _check_cross_process(run: _Run) -> str:
    spec = run.env.spec
    if spec is None:
        raise _Skipped("the env has no spec; make it with gymnasium.make(<registered id>) to check this")
    try:
        spec_bytes = pickle.dumps(spec)
    except Exception as exc:
        raise _Skipped(f"its spec cannot be pickled ({type(exc).__name__}: {exc})") from exc
    reference = run.episodes()
    job = {
        "spec": base64.b64encode(spec_bytes).decode("ascii"),
        "episodes": [{"seed": s, "actions": ep.actions} for s, ep in reference.items()],
    }
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *(p for p in sys.path if p)])
    hash_seed = os.environ.get("PYTHONHASHSEED", "")
    child_env["PYTHONHASHSEED"] = str(int(hash_seed) + 1) if hash_seed.isdigit() else "random"
    code = "from turnkit.envs.checker import _child_main; _child_main()"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            timeout=run.opts.cross_process_timeout_s,
            env=child_env,
            cwd=os.getcwd(),
        )
    except subprocess.TimeoutExpired as exc:
        raise _Failed(f"the fresh process did not finish in {run.opts.cross_process_timeout_s} s") from exc
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["<no output>"])[-1]
        raise _Failed(f"the fresh process failed (exit {proc.returncode}): {tail}")
    answer = json.loads(lines[-1][len(_MARK) :])
    if "unavailable" in answer:
        raise _Skipped(f"a fresh process cannot build the env from its spec: {answer['unavailable']}")
    for (seed, ep), records in zip(reference.items(), answer["episodes"], strict=True):
        diff = first_difference(ep.records, records, run.opts.ignore_info_keys)
        if diff is not None:
            raise _Failed(f"a fresh process replaying the same episode differs at {diff}", seed)
    return f"{len(reference)} episodes identical in a fresh process (PYTHONHASHSEED={child_env['PYTHONHASHSEED']})"


def _child_main() -> None:
    """Entry point of the ``cross_process`` child: replay episodes from a spec read as JSON on stdin."""
    job = json.loads(sys.stdin.read())
    try:
        env = gymnasium.make(pickle.loads(base64.b64decode(job["spec"])))
    except (ImportError, AttributeError, gymnasium.error.Error) as exc:
        print(_MARK + json.dumps({"unavailable": f"{type(exc).__name__}: {exc}"}))
        return
    out = [record_episode(env, e["seed"], replay(e["actions"])).records for e in job["episodes"]]
    print(_MARK + json.dumps({"episodes": out}))


_CHECK_FUNCTIONS: dict[str, Callable[[_Run], str]] = {
    "gymnasium": _check_gymnasium,
    "text_env": _check_text_env,
    "determinism": _check_determinism,
    "privileged_leak": _check_privileged_leak,
    "snapshot": _check_snapshot,
    "garbage_actions": _check_garbage_actions,
    "invalid_allowance": _check_invalid_allowance,
    "truncation": _check_truncation,
    "cross_process": _check_cross_process,
}


def _run_check(run: _Run, name: str) -> CheckResult:
    run.notes, run.warned = [], False
    start = time.perf_counter()
    status, seed = Status.PASSED, None
    try:
        detail = _CHECK_FUNCTIONS[name](run)
    except _Failed as exc:
        status, detail, seed = Status.FAILED, str(exc), exc.seed
    except _Skipped as exc:
        status, detail = Status.SKIPPED, str(exc)
    except Exception as exc:  # an env fault outside the recorded episodes is a failure of this check
        status, detail = Status.FAILED, f"raised {type(exc).__name__}: {exc}"
    if status == Status.PASSED and run.warned:
        status = Status.WARNING
    if run.notes:
        detail = "; ".join([detail, *run.notes])
    return CheckResult(name, status, time.perf_counter() - start, detail, seed)


def check_env(
    env: gymnasium.Env | str,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    steps: int = 8,
    cross_process: bool = True,
    checks: Sequence[str] | None = None,
    policy: Policy | None = None,
    raise_on_failure: bool = True,
    leak_min_chars: int = 4,
    leak_ignore: Collection[str] = (),
    ignore_info_keys: Collection[str] = (),
    garbage_time_limit_s: float = 10.0,
    cross_process_timeout_s: float = 120.0,
) -> CheckReport:
    """Check that ``env`` follows the turnkit text-env contract (the checks are listed in the module docs).

    The env is reset and stepped many times; afterwards it is in an arbitrary state (reset it before use).

    Args:
        env: The env (wrapped as ``gymnasium.make`` returns it, or bare), or a registered env id.
        seeds: Reset seeds of the checked episodes (several, so that tiny task spaces are still covered).
        steps: Most agent turns per checked episode.
        cross_process: Run the ``cross_process`` check (spawns one Python process).
        checks: Run only these checks (names from :data:`CHECKS`); default all.
        policy: ``Context -> str`` that drives episodes from turn 3 on; default the family's oracle.
        raise_on_failure: Raise :class:`ContractError` at the first failed check (the message names the
            check, env id, seed and what differed); with ``False``, run everything and return the report.
        leak_min_chars: Privileged renderings shorter than this (a one-digit answer) are searched as whole
            tokens and count only where they track the task, not where a counter happens to equal them (see
            :mod:`turnkit.envs.checker_leaks`).
        leak_ignore: Privileged renderings never reported as leaks.
        ignore_info_keys: ``info`` keys left out of determinism comparisons (e.g. wall-clock durations).
        garbage_time_limit_s: Longest time one garbage action may take (measured, not interrupted).
        cross_process_timeout_s: Time limit of the fresh process.

    Returns:
        The :class:`CheckReport` (``print`` it for a table of checks and timings).

    Raises:
        ContractError: A check failed and ``raise_on_failure`` is true; ``.report`` holds the results.
        ConfigError: An argument is invalid.

    Example:
        >>> import gymnasium, turnkit
        >>> env = gymnasium.make("turnkit/MathEpisodes-v0")
        >>> report = turnkit.check_env(env, seeds=(0, 1), checks=["determinism", "truncation"])
        >>> [r.status.value for r in report.results]
        ['passed', 'passed']
    """
    names = list(CHECKS if checks is None else checks)
    unknown = [n for n in names if n not in _CHECK_FUNCTIONS]
    if unknown:
        raise ConfigError(f"unknown check(s) {unknown}; choose from {list(CHECKS)}")
    if not seeds or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in seeds):
        raise ConfigError(f"seeds must be a non-empty sequence of ints, got {seeds!r}")
    if steps < 1:
        raise ConfigError(f"steps must be >= 1, got {steps}")
    if leak_min_chars < 1:
        raise ConfigError(f"leak_min_chars must be >= 1, got {leak_min_chars}")
    owned = isinstance(env, str)
    the_env = gymnasium.make(env) if isinstance(env, str) else env
    opts = _Options(
        seeds=tuple(int(s) for s in seeds),
        steps=steps,
        policy=policy,
        leak_min_chars=leak_min_chars,
        leak_ignore=frozenset(leak_ignore),
        ignore_info_keys=frozenset(ignore_info_keys),
        garbage_time_limit_s=garbage_time_limit_s,
        cross_process_timeout_s=cross_process_timeout_s,
    )
    env_id = the_env.spec.id if the_env.spec is not None else type(the_env.unwrapped).__name__
    run = _Run(the_env, env_id, opts)
    results: list[CheckResult] = []
    try:
        for name in names:
            if name == "cross_process" and not cross_process:
                results.append(CheckResult(name, Status.SKIPPED, 0.0, "turned off (cross_process=False)"))
                continue
            results.append(_run_check(run, name))
            if raise_on_failure and not results[-1].ok:
                break
    finally:
        for made in [*run.made, *([the_env] if owned else [])]:
            made.close()
    report = CheckReport(env_id, tuple(results))
    error = report.error()
    if raise_on_failure and error is not None:
        raise error
    return report
