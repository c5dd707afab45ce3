"""Per-episode env cost of turnkit beside each peer's closest task, interleaved in one run.

One "episode" is everything an env does for one rollout when the agent costs nothing: a scripted agent
that gives the reference answer (the ``correct`` rows) or a wrong one (the ``wrong`` rows, where the
number of steps changes). Each comparison pairs a turnkit side with a peer side that does the same job:

* reasoning-gym ``basic_arithmetic`` (two one-digit terms, ``+``/``-``): item generation, ``extract_answer``
  on ``<answer>..</answer>`` and ``score_answer`` (string equality) vs turnkit/MathEpisodes-v0
  (``kinds=["arithmetic"]``, difficulty 1, ``max_attempts=1``): ``reset`` (task generation with an
  independently verified answer) and one ``step`` (answer extraction and an equivalence check).
* skyrl-gym ``gsm8k`` / ``gsm8k_multi_turn`` on an in-memory example: ``skyrl_gym.make`` (its env holds one
  example, so SkyRL makes one per episode), ``init`` and ``step`` vs MathEpisodes on the same in-memory
  tasks (``tasks=[...]``): ``reset(options={"task_index": i})`` and the steps. The multi-turn pair allows three
  answers on both sides (``max_turns=3`` / ``max_attempts=3``); a second single-turn pair makes the turnkit
  env with ``gymnasium.make`` per episode too.
* verifiers 0.4 (``verifiers.v1``): a ``Task`` with one ``@vf.reward`` on an in-memory task list; per episode
  the ``Trace`` a rollout records (task key/hash, agent info, the prompt and the scripted reply as message
  nodes) and ``await task.score(trace)``, with verifiers' math scorer (``verify_boxed_math_answer``,
  math-verify) or an exact-match reward; no model call, no harness program (see bench_rollout.py for those).
* TextArena ``GuessTheNumber-v0`` (single player, ``max_turns=3``; the game draws its own target): ``ta.make`` +
  ``reset`` + ``get_observation``/``step`` to the end + ``close``, per episode (its default observation wrapper
  keeps every observation across resets, so an env must not be reused) vs MathEpisodes' multi-turn episode
  (a generated task, three attempts), with the turnkit env made once and made per episode.

A reference pair puts the in-memory single-turn episode beside ``CartPole-v1`` (``reset(seed)`` + one
``step``): the floor any ``gymnasium.Env`` with a seeded ``np_random`` and ``gymnasium.make``'s wrappers pays.

Trials interleave the two sides of every comparison (turnkit first on even trials, the peer first on odd
ones); we report medians over trials of µs per episode and the ratio turnkit / peer (< 1: turnkit is
cheaper). Seeds are fresh in every trial; one untimed warm-up trial comes first.

Run:  .venv-peers/bin/python benchmarks/peers/bench_env_cost.py --trials 11 --episodes 300
      (the peers live in their own virtualenv: see benchmarks/peers/README.md)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np

import turnkit  # noqa: F401  (registers envs)
from turnkit.envs.math.generator import generate
from turnkit.types import Task

ENV_ID = "turnkit/MathEpisodes-v0"
ARITH = {"kinds": ["arithmetic"], "difficulty": 1}

Runner = Callable[[int, int], float]
"""``runner(episodes, seed0) -> seconds`` for ``episodes`` episodes with seeds ``seed0, seed0 + 1, ...``."""


@dataclass
class Side:
    name: str
    includes: str
    steps: int
    run: Runner
    times: list[float] = field(default_factory=list)


@dataclass
class Comparison:
    name: str
    answer: str
    turnkit: Side
    peer: Side


def wrong(answer: str) -> str:
    """A wrong answer of the same shape (the reference plus 1000)."""
    return str(int(answer) + 1000)


def in_memory_tasks(n: int = 512) -> list[Task]:
    """One-digit arithmetic tasks from turnkit's generator, shared by both sides of the given-example pairs."""
    return [generate(np.random.default_rng(i), split="id", **ARITH) for i in range(n)]


# --------------------------------------------------------------------------------------------- turnkit


def turnkit_in_memory(env: gymnasium.Env, answers: list[str], n_tasks: int) -> Side:
    """The turnkit side of a one-step comparison over in-memory tasks."""
    how = TK_SINGLE.format(how="picks an in-memory task")
    return Side("turnkit", how, 1, turnkit_episodes(env, answers, n_tasks=n_tasks))


def turnkit_episodes(env: gymnasium.Env, answers: list[str], *, n_tasks: int = 0) -> Runner:
    """``reset`` + one ``step`` per answer until the episode ends (answers: "ref" or "wrong").

    With ``n_tasks``, the env holds an in-memory task list and episode ``i`` plays task ``i % n_tasks``.
    """
    core = env.unwrapped

    def run(episodes: int, seed0: int) -> float:
        start = time.perf_counter()
        for i in range(seed0, seed0 + episodes):
            options = {"task_index": i % n_tasks} if n_tasks else None
            env.reset(seed=i, options=options)
            ref = str(core.privileged()["answer"])
            for kind in answers:
                _, _, term, trunc, _ = env.step(f"ANSWER: {ref if kind == 'ref' else wrong(ref)}")
                if term or trunc:
                    break
        return time.perf_counter() - start

    return run


def turnkit_made_per_episode(tasks: list[Task] | None, answers: list[str], **kwargs: Any) -> Runner:
    """``gymnasium.make`` + ``reset`` + steps + ``close`` per episode (in-memory ``tasks``, or generated ones)."""

    def run(episodes: int, seed0: int) -> float:
        start = time.perf_counter()
        for i in range(seed0, seed0 + episodes):
            if tasks is None:
                env = gymnasium.make(ENV_ID, **kwargs)
                env.reset(seed=i)
            else:
                env = gymnasium.make(ENV_ID, tasks=tasks, **kwargs)
                env.reset(seed=i, options={"task_index": i % len(tasks)})
            ref = str(env.unwrapped.privileged()["answer"])
            for kind in answers:
                _, _, term, trunc, _ = env.step(f"ANSWER: {ref if kind == 'ref' else wrong(ref)}")
                if term or trunc:
                    break
            env.close()
        return time.perf_counter() - start

    return run


# --------------------------------------------------------------------------------------------- peers


def cartpole_episodes() -> Runner:
    """The Gymnasium floor: ``CartPole-v1`` made once, ``reset(seed)`` + one ``step(0)`` per episode."""
    env = gymnasium.make("CartPole-v1")

    def run(episodes: int, seed0: int) -> float:
        start = time.perf_counter()
        for i in range(seed0, seed0 + episodes):
            env.reset(seed=i)
            env.step(0)
        return time.perf_counter() - start

    return run


def reasoning_gym_episodes(kind: str) -> Runner:
    from reasoning_gym import create_dataset
    from reasoning_gym.utils import extract_answer

    data = create_dataset(
        "basic_arithmetic",
        min_terms=2,
        max_terms=2,
        min_digits=1,
        max_digits=1,
        operators=("+", "-"),
        allow_parentheses=False,
        allow_negation=False,
        seed=0,
        size=10**9,
    )

    def run(episodes: int, seed0: int) -> float:
        start = time.perf_counter()
        for i in range(seed0, seed0 + episodes):
            entry = data[i]
            ref = entry["answer"]
            completion = f"<answer>{ref if kind == 'ref' else wrong(ref)}</answer>"
            data.score_answer(extract_answer(completion), entry)
        return time.perf_counter() - start

    return run


def skyrl_episodes(env_id: str, tasks: list[Task], answers: list[str], max_turns: int = 1) -> Runner:
    import skyrl_gym

    def run(episodes: int, seed0: int) -> float:
        start = time.perf_counter()
        for i in range(seed0, seed0 + episodes):
            task = tasks[i % len(tasks)]
            ref = str(task.privileged["answer"])
            extras = {"reward_spec": {"method": "rule", "ground_truth": ref}, "max_turns": max_turns}
            env = skyrl_gym.make(env_id, env_config={}, extras=extras)
            env.init([{"role": "user", "content": task.prompt}])
            for kind in answers:
                out = env.step(f"The answer is\n#### {ref if kind == 'ref' else wrong(ref)}")
                if out["done"]:
                    break
            env.close()
        return time.perf_counter() - start

    return run


def verifiers_episodes(tasks: list[Task], kind: str, *, math_verify: bool) -> Runner:
    import verifiers.v1 as vf
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.trace import AgentInfo, TraceTask

    class MathData(vf.TaskData):
        answer: str

    if math_verify:

        class MathTask(vf.Task[MathData, vf.State, vf.TaskConfig]):
            @vf.reward
            async def correct(self, task: MathData, trace: vf.Trace) -> float:
                return vf.verify_boxed_math_answer(trace.last_reply, task.answer)

    else:

        class MathTask(vf.Task[MathData, vf.State, vf.TaskConfig]):  # type: ignore[no-redef]
            @vf.reward
            async def correct(self, task: MathData, trace: vf.Trace) -> float:
                return float(vf.extract_boxed_answer(trace.last_reply, strict=True).strip() == task.answer)

    dataset = [
        MathTask(MathData(idx=i, prompt=t.prompt, answer=str(t.privileged["answer"]))) for i, t in enumerate(tasks)
    ]
    agent_config = vf.AgentConfig(model="scripted", runtime=vf.SubprocessConfig())

    async def episodes_async(episodes: int, seed0: int) -> float:
        start = time.perf_counter()
        for i in range(seed0, seed0 + episodes):
            task = dataset[i % len(dataset)]
            ref = task.data.answer
            reply = f"The answer is \\boxed{{{ref if kind == 'ref' else wrong(ref)}}}."
            trace = vf.Trace(
                task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
                agent=AgentInfo(config=agent_config),
            )
            trace.nodes.append(MessageNode(message=vf.UserMessage(content=task.data.prompt_text)))
            trace.nodes.append(MessageNode(parent=0, message=vf.AssistantMessage(content=reply), sampled=True))
            await task.score(trace)
        return time.perf_counter() - start

    def run(episodes: int, seed0: int) -> float:
        return asyncio.run(episodes_async(episodes, seed0))

    return run


def textarena_episodes(answers: list[str]) -> Runner:
    """``ta.make`` + ``reset`` + ``get_observation``/``step`` to the end + ``close``, per episode.

    The env is made per episode (as verifiers' TextArena taskset does): the default ``LLMObservationWrapper``
    keeps every observation across resets, so a reused env's prompts grow with each episode.
    """
    import textarena as ta

    def run(episodes: int, seed0: int) -> float:
        start = time.perf_counter()
        for i in range(seed0, seed0 + episodes):
            env = ta.make("GuessTheNumber-v0", max_turns=len(answers))
            env.reset(num_players=1, seed=i)
            target = env.game_number
            misses = iter(n for n in range(env.min_number, env.max_number + 1) if n != target)
            for kind in answers:
                env.get_observation()
                done, _ = env.step(f"My guess is [{target if kind == 'ref' else next(misses)}].")
                if done:
                    break
            env.close()
        return time.perf_counter() - start

    return run


# --------------------------------------------------------------------------------------------- cases


TK_SINGLE = "gymnasium.make'd once; reset(seed) {how} + step('ANSWER: x'): answer extraction, equivalence check"


def comparisons() -> list[Comparison]:
    tasks = in_memory_tasks()
    cases: list[Comparison] = []
    for kind, answers in (("correct", ["ref"]), ("wrong", ["wrong"])):
        gen_env = gymnasium.make(ENV_ID, max_attempts=1, **ARITH)
        cases.append(
            Comparison(
                "reasoning-gym basic_arithmetic",
                kind,
                Side(
                    "turnkit", TK_SINGLE.format(how="generates a verified task"), 1, turnkit_episodes(gen_env, answers)
                ),
                Side(
                    "reasoning-gym",
                    "dataset[i] (item generation) + extract_answer('<answer>x</answer>') + score_answer (string ==)",
                    1,
                    reasoning_gym_episodes(answers[0]),
                ),
            )
        )
    cases.append(
        Comparison(
            "reference: the Gymnasium floor (CartPole-v1)",
            "correct",
            turnkit_in_memory(gymnasium.make(ENV_ID, tasks=tasks, max_attempts=1), ["ref"], len(tasks)),
            Side(
                "CartPole-v1",
                "gymnasium.make'd once; reset(seed) + step(0): any gymnasium.Env pays this",
                1,
                cartpole_episodes(),
            ),
        )
    )
    for kind, answers in (("correct", ["ref"]), ("wrong", ["wrong"])):
        fixed_env = gymnasium.make(ENV_ID, tasks=tasks, max_attempts=1)
        cases.append(
            Comparison(
                "skyrl-gym gsm8k (in-memory example)",
                kind,
                turnkit_in_memory(fixed_env, answers, len(tasks)),
                Side(
                    "skyrl-gym",
                    "skyrl_gym.make('gsm8k', extras=example) + init + step('#### x'): regex + string ==",
                    1,
                    skyrl_episodes("gsm8k", tasks, answers),
                ),
            )
        )
    cases.append(
        Comparison(
            "skyrl-gym gsm8k, env made per episode on both sides",
            "correct",
            Side(
                "turnkit",
                "gymnasium.make(tasks=...) + reset + step + close per episode",
                1,
                turnkit_made_per_episode(tasks, ["ref"], max_attempts=1),
            ),
            Side("skyrl-gym", "skyrl_gym.make + init + step + close", 1, skyrl_episodes("gsm8k", tasks, ["ref"])),
        )
    )
    cases.append(
        Comparison(
            "skyrl-gym gsm8k, made per episode, turnkit without gymnasium's env checker",
            "correct",
            Side(
                "turnkit",
                "gymnasium.make(tasks=..., disable_env_checker=True) + reset + step + close per episode",
                1,
                turnkit_made_per_episode(tasks, ["ref"], max_attempts=1, disable_env_checker=True),
            ),
            Side("skyrl-gym", "skyrl_gym.make + init + step + close", 1, skyrl_episodes("gsm8k", tasks, ["ref"])),
        )
    )
    three_wrong = ["wrong"] * 3
    for kind, answers in (("correct", ["ref"]), ("wrong x3", three_wrong)):
        fixed_env = gymnasium.make(ENV_ID, tasks=tasks, max_attempts=3)
        cases.append(
            Comparison(
                "skyrl-gym gsm8k_multi_turn (3 answers allowed)",
                kind,
                Side(
                    "turnkit",
                    "made once (max_attempts=3); reset picks an in-memory task; steps with feedback",
                    len(answers),
                    turnkit_episodes(fixed_env, answers, n_tasks=len(tasks)),
                ),
                Side(
                    "skyrl-gym",
                    "make('gsm8k_multi_turn', max_turns=3) + init + steps (strict regex, per-turn reward, feedback)",
                    len(answers),
                    skyrl_episodes("gsm8k_multi_turn", tasks, answers, max_turns=3),
                ),
            )
        )
    for kind in ("correct", "wrong"):
        for scorer, mv in (("math-verify", True), ("exact match", False)):
            fixed_env = gymnasium.make(ENV_ID, tasks=tasks, max_attempts=1)
            answers = ["ref"] if kind == "correct" else ["wrong"]
            cases.append(
                Comparison(
                    f"verifiers v1 Task.score, {scorer} reward",
                    kind,
                    turnkit_in_memory(fixed_env, answers, len(tasks)),
                    Side(
                        "verifiers",
                        f"Trace (task key/hash, agent info, prompt + reply nodes) + await task.score: {scorer}",
                        1,
                        verifiers_episodes(tasks, answers[0], math_verify=mv),
                    ),
                )
            )
    for per_episode in (False, True):
        for kind, answers in (("correct", ["ref"]), ("wrong x3", three_wrong)):
            if per_episode:
                label, tk = "made per episode", turnkit_made_per_episode(None, answers, max_attempts=3, **ARITH)
            else:
                label, tk = "made once", turnkit_episodes(gymnasium.make(ENV_ID, max_attempts=3, **ARITH), answers)
            cases.append(
                Comparison(
                    f"TextArena GuessTheNumber-v0 (turnkit env {label})",
                    kind,
                    Side(
                        "turnkit",
                        f"MathEpisodes {label}, generated task, 3 attempts: reset + steps with feedback",
                        len(answers),
                        tk,
                    ),
                    Side(
                        "textarena",
                        "ta.make (default wrappers, max_turns=3) + reset + get_observation/step + close, per episode",
                        len(answers),
                        textarena_episodes(answers),
                    ),
                )
            )
    return cases


# --------------------------------------------------------------------------------------------- main


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("turnkit", "reasoning_gym", "skyrl-gym", "verifiers", "textarena", "math-verify", "gymnasium"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "missing"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=11)
    parser.add_argument("--episodes", type=int, default=300, help="episodes per side per trial")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args([a for a in argv if a != "--"])

    cases = comparisons()
    load_before = os.getloadavg()
    for trial in range(args.trials + 1):  # trial 0 is an untimed warm-up
        seed0 = 1_000_000 + trial * args.episodes
        for case in cases:
            sides = (case.turnkit, case.peer) if trial % 2 == 0 else (case.peer, case.turnkit)
            for side in sides:
                seconds = side.run(args.episodes, seed0)
                if trial:
                    side.times.append(1e6 * seconds / args.episodes)
    load_after = os.getloadavg()

    rows = []
    for case in cases:
        tk, peer = statistics.median(case.turnkit.times), statistics.median(case.peer.times)
        ratios = [a / b for a, b in zip(case.turnkit.times, case.peer.times, strict=True)]
        rows.append(
            {
                "comparison": case.name,
                "answer": case.answer,
                "steps": case.turnkit.steps,
                "peer": case.peer.name,
                "turnkit_us": tk,
                "peer_us": peer,
                "ratio": tk / peer,
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
                "turnkit_includes": case.turnkit.includes,
                "peer_includes": case.peer.includes,
            }
        )
    meta = {
        "trials": args.trials,
        "episodes": args.episodes,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "versions": versions(),
    }
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=2))
        return 0
    print(
        f"median over {args.trials} interleaved trials x {args.episodes} episodes; µs per episode; "
        f"load average before {load_before[0]:.2f} / after {load_after[0]:.2f} (1 min), {os.cpu_count()} CPUs"
    )
    print("versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()))
    print()
    print("| comparison | answer | steps | turnkit µs | peer µs | turnkit / peer (min-max over trials) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['comparison']} | {r['answer']} | {r['steps']} | {r['turnkit_us']:.1f} | {r['peer_us']:.1f} | "
            f"{r['ratio']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f}) |"
        )
    print()
    print("| comparison | turnkit side does | peer side does |")
    print("|---|---|---|")
    seen = set()
    for r in rows:
        if r["comparison"] not in seen:
            seen.add(r["comparison"])
            print(f"| {r['comparison']} | {r['turnkit_includes']} | {r['peer_includes']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
