"""CollabCode with a language-model human: the cached tiny human vs the rule-based human.

Measures, on seeded evaluation tasks (seeds ``0 .. tasks-1`` per split; the tiny human was trained on seeds
from 1,000,000 on):

(a) agreement with the rule-based human on the same questions: the clarifying agent's questions (from its
    episodes against the rule-based human) and held-out probe questions (off-topic, asking for the code or
    the tests, another family's question); exact match and fact-level precision/recall/F1
    (:mod:`turnkit.envs.collab_code.human_eval`), plus facts stated with a wrong value;
(b) clarifying agent vs answer-at-once agent on full episodes with the LM human (in-process
    :class:`~turnkit.agents.hf.HFPolicy`), and the clarifying agent with the rule-based human for reference;
(c) privileged leaks: replies containing a reference-code line or a hidden fact that was not asked about,
    for the LM human and for the rule-based human (the control);
(d) latency per reply: in-process (batch 1, as the env calls it) and over HTTP on loopback
    (:class:`~turnkit.agents.serve.AgentServer` + :class:`~turnkit.agents.openai.OpenAIAgent`, the path a
    vLLM server would take); the HTTP episodes (first ``--http-tasks`` seeds per split) also check that
    every reply equals the in-process one at temperature 0.

Run: ``python studies/collab_llm_human.py --tasks 200 --http-tasks 50``
(writes ``studies/results/collab_llm_human/results.json`` with :func:`common.provenance.write_result`: the
machine record under ``machine`` and the wall time, ``wall_s``).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from common.provenance import write_result

import turnkit
from turnkit.agents.openai import OpenAIAgent
from turnkit.agents.serve import AgentServer
from turnkit.envs.collab_code.agents import AnswerAtOnceAgent, ClarifyingAgent
from turnkit.envs.collab_code.env import CollabCodeEnv
from turnkit.envs.collab_code.generator import SPLITS
from turnkit.envs.collab_code.human_data import EVAL_PROBES, clarify_examples, probe_examples
from turnkit.envs.collab_code.human_eval import fact_scores, leaks, same_params_wrong_value, stated_facts
from turnkit.envs.collab_code.llm_human import LLMHuman
from turnkit.models.recipe import model_folder
from turnkit.models.tiny_human import DEFAULT_HUMAN_RECIPE, human_for, tiny_human_policy
from turnkit.stats import mean_ci, wilson_interval
from turnkit.types import AgentTurn

OUT = Path(__file__).parent / "results" / "collab_llm_human"


class TimedAgent:
    """Wraps an agent and records the wall time of every ``act`` call (one call = one env reply)."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.seconds: list[float] = []

    def act(self, contexts: Sequence[Any]) -> list[AgentTurn]:
        start = time.perf_counter()
        turns = self.agent.act(contexts)
        self.seconds.append(time.perf_counter() - start)
        return turns


class RecordingHuman:
    """Wraps a human and records ``(task_id, question, reply)`` of every reply."""

    def __init__(self, human: Any) -> None:
        self.human = human
        self.log: list[tuple[str, str, str]] = []

    def reply(self, task: Any, dialogue: Sequence[Any]) -> str:
        text = self.human.reply(task, dialogue)
        self.log.append((task.task_id, dialogue[-1].content, text))
        return text


def _ci(values: Sequence[float]) -> dict[str, float]:
    mean, lo, hi = mean_ci([float(v) for v in values])
    return {"mean": mean, "lo": lo, "hi": hi, "n": len(values)}


def _rate(flags: Sequence[bool]) -> dict[str, float]:
    k, n = int(sum(flags)), len(flags)
    lo, hi = wilson_interval(k, n) if n else (0.0, 0.0)
    return {"rate": k / n if n else 0.0, "lo": lo, "hi": hi, "k": k, "n": n}


def _latency(seconds: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(seconds, dtype=float) * 1000
    return {"median_ms": float(np.median(arr)), "p90_ms": float(np.percentile(arr, 90)), "n": int(arr.size)}


def agreement(human: LLMHuman, split: str, seeds: Sequence[int], batch: int = 64) -> dict[str, Any]:
    """(a) and (c) on the clarifying agent's questions and on held-out probes of ``split``."""
    clarify = clarify_examples(split=split, seeds=seeds)
    probes = probe_examples(clarify, probes=EVAL_PROBES, rng=np.random.default_rng(1), per_task=1)
    out: dict[str, Any] = {}
    samples: list[dict[str, str]] = []
    for source, examples in (("clarify", clarify), ("probe", probes)):
        replies: list[str] = []
        for i in range(0, len(examples), batch):
            chunk = examples[i : i + batch]
            replies += human.replies([(e.task, e.dialogue) for e in chunk])
        scores = [fact_scores(e.task, r, e.reply) for e, r in zip(examples, replies, strict=True)]
        lm_leaks = [leaks(e.task, e.dialogue[-1].content, r) for e, r in zip(examples, replies, strict=True)]
        rule_leaks = [leaks(e.task, e.dialogue[-1].content, e.reply) for e in examples]
        out[source] = {
            "questions": len(examples),
            "exact_match": _rate([r == e.reply for e, r in zip(examples, replies, strict=True)]),
            "fact_f1": _ci([s["f1"] for s in scores]),
            "fact_precision": _ci([s["precision"] for s in scores]),
            "fact_recall": _ci([s["recall"] for s in scores]),
            "replies_with_wrong_fact": _rate([s["wrong"] > 0 for s in scores]),
            "same_facts_wrong_value": _rate(
                [same_params_wrong_value(e.task, r, e.reply) for e, r in zip(examples, replies, strict=True)]
            ),
            "leak_code": _rate([x["code"] for x in lm_leaks]),
            "leak_unasked_fact": _rate([x["unasked_fact"] for x in lm_leaks]),
            "rule_leak_code": _rate([x["code"] for x in rule_leaks]),
            "rule_leak_unasked_fact": _rate([x["unasked_fact"] for x in rule_leaks]),
        }
        out[source]["fact_recall_by_kind"] = _recall_by_kind(examples, replies)
        for e, r in list(zip(examples, replies, strict=True))[:4]:
            samples.append({"source": source, "question": e.dialogue[-1].content, "rule": e.reply, "lm": r})
    out["samples"] = samples
    return out


def _recall_by_kind(examples: Sequence[Any], replies: Sequence[str]) -> dict[str, Any]:
    """Of the facts the rule-based replies state, the share the LM reply states with the same value,
    for numeric values (cutoffs, amounts, days, decimals) and for the others (yes/no, choices, none)."""
    hits: dict[str, list[bool]] = {"numeric": [], "other": []}
    for e, r in zip(examples, replies, strict=True):
        got = dict(stated_facts(e.task, r))
        for name, value in stated_facts(e.task, e.reply):
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            hits["numeric" if numeric else "other"].append(got.get(name, object()) == value)
    return {kind: _rate(flags) for kind, flags in hits.items()}


def episodes(env: CollabCodeEnv, agent: Any, seeds: Sequence[int]) -> dict[str, Any]:
    """(b): success and tests passed of ``agent`` over seeded episodes."""
    trajs = [turnkit.collect(env, agent, seed=s) for s in seeds]
    errors = [t.error.message for t in trajs if t.error is not None]
    return {
        "success": _rate([bool(t.success) for t in trajs]),
        "tests_passed": _ci([t.total_reward for t in trajs]),
        "turns": float(np.mean([len(t.steps) for t in trajs])),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
    }


def run_split(split: str, policy: Any, tasks: int, http_tasks: int, base_url: str) -> dict[str, Any]:
    seeds = list(range(tasks))
    timed = TimedAgent(policy)
    in_process = RecordingHuman(human_for(timed))
    t0 = time.perf_counter()
    result: dict[str, Any] = {"agreement": agreement(human_for(policy), split, seeds)}
    t1 = time.perf_counter()
    lm_env = CollabCodeEnv(split=split, human=in_process)
    result["clarify_lm_human"] = episodes(lm_env, ClarifyingAgent(), seeds)
    result["answer_at_once_lm_human"] = episodes(lm_env, AnswerAtOnceAgent(), seeds)
    result["clarify_rule_human"] = episodes(CollabCodeEnv(split=split), ClarifyingAgent(), seeds)
    result["latency_in_process"] = _latency(timed.seconds)
    t2 = time.perf_counter()
    client = TimedAgent(OpenAIAgent(base_url, "tiny-human", temperature=0.0, max_tokens=policy.sampling.max_new_tokens))
    over_http = RecordingHuman(human_for(client))
    http_seeds = seeds[:http_tasks]
    result["clarify_lm_human_http"] = episodes(
        CollabCodeEnv(split=split, human=over_http), ClarifyingAgent(), http_seeds
    )
    local = {(tid, q): r for tid, q, r in in_process.log}
    same = [local.get((tid, q)) == r for tid, q, r in over_http.log]
    result["http_vs_in_process_same_reply"] = _rate(same)
    result["latency_http"] = _latency(client.seconds)
    result["wall_s"] = {"agreement": t1 - t0, "episodes": t2 - t1, "http": time.perf_counter() - t2}
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="seeded tasks per split")
    parser.add_argument("--http-tasks", type=int, default=50, help="of those, played over HTTP too")
    parser.add_argument("--splits", nargs="+", default=list(SPLITS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT / "results.json")
    parser.add_argument("--table", type=Path, help="print the markdown tables of a results file and exit")
    args = parser.parse_args(argv)
    if args.table is not None:
        print(tables(json.loads(args.table.read_text())))
        return
    torch.set_num_threads(args.threads)
    started = time.time()
    policy = tiny_human_policy()
    build = json.loads((model_folder(DEFAULT_HUMAN_RECIPE) / "turnkit_recipe.json").read_text())
    results: dict[str, Any] = {
        "command": "python " + " ".join([f"studies/{Path(__file__).name}", *sys.argv[1:]]),
        "recipe_key": DEFAULT_HUMAN_RECIPE.key(),
        "build": build,
        "params": sum(p.numel() for p in policy.model.parameters()),
        "torch_threads": args.threads,
        "python": platform.python_version(),
        "splits": {},
    }
    with AgentServer(policy, model_name="tiny-human") as server:
        for split in args.splits:
            results["splits"][split] = run_split(split, policy, args.tasks, args.http_tasks, server.base_url)
            print(split, json.dumps(_summary(results["splits"][split])), flush=True)
    # default=str as before: a value JSON cannot hold is written as its text
    path = write_result(args.out, json.loads(json.dumps(results, default=str)), started=started)
    print(f"wrote {path} in {time.time() - started:.0f}s")


def _pct(x: dict[str, float], key: str = "rate") -> str:
    return f"{100 * x[key]:.1f} [{100 * x['lo']:.1f}, {100 * x['hi']:.1f}]"


def tables(results: dict[str, Any]) -> str:
    """Markdown tables (percentages with 95% intervals: Wilson for rates, normal for means) of a results file."""
    splits = results["splits"]
    rows = [
        "| Split | Questions | Exact match % | Fact F1 % | Replies with a wrong fact % | Right facts, "
        "wrong value % | Probes: exact % |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in splits.items():
        c, p = r["agreement"]["clarify"], r["agreement"]["probe"]
        rows.append(
            f"| `{name}` | {c['questions']} + {p['questions']} probes | {_pct(c['exact_match'])} | "
            f"{_pct(c['fact_f1'], 'mean')} | {_pct(c['replies_with_wrong_fact'])} | "
            f"{_pct(c['same_facts_wrong_value'])} | "
            f"{_pct(p['exact_match'])} |"
        )
    rows += [
        "",
        "| Split | Clarifying, LM human: success % | tests passed % | Answer at once: success % | tests passed % "
        "| Clarifying, rule human: success % | Clarifying over HTTP: success % (n) | HTTP replies = in-process |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in splits.items():
        lm, once, rule, http = (
            r["clarify_lm_human"],
            r["answer_at_once_lm_human"],
            r["clarify_rule_human"],
            r["clarify_lm_human_http"],
        )
        same = r["http_vs_in_process_same_reply"]
        rows.append(
            f"| `{name}` | {_pct(lm['success'])} | {_pct(lm['tests_passed'], 'mean')} | {_pct(once['success'])} | "
            f"{_pct(once['tests_passed'], 'mean')} | {_pct(rule['success'])} | "
            f"{_pct(http['success'])} ({http['success']['n']}) | {same['k']}/{same['n']} |"
        )
    rows += [
        "",
        "| Split | Code-line leaks: LM (rule) | Unasked-fact leaks: LM (rule) | Latency in-process median / p90 ms "
        "| Latency HTTP median / p90 ms |",
        "|---|---|---|---|---|",
    ]
    for name, r in splits.items():
        a = r["agreement"]
        n = a["clarify"]["questions"] + a["probe"]["questions"]
        code = sum(a[s]["leak_code"]["k"] for s in ("clarify", "probe"))
        fact = sum(a[s]["leak_unasked_fact"]["k"] for s in ("clarify", "probe"))
        rcode = sum(a[s]["rule_leak_code"]["k"] for s in ("clarify", "probe"))
        rfact = sum(a[s]["rule_leak_unasked_fact"]["k"] for s in ("clarify", "probe"))
        li, lh = r["latency_in_process"], r["latency_http"]
        rows.append(
            f"| `{name}` | {code}/{n} ({rcode}/{n}) | {fact}/{n} ({rfact}/{n}) | "
            f"{li['median_ms']:.0f} / {li['p90_ms']:.0f} (n={li['n']}) | {lh['median_ms']:.0f} / {lh['p90_ms']:.0f} "
            f"(n={lh['n']}) |"
        )
    return "\n".join(rows)


def _summary(r: dict[str, Any]) -> dict[str, Any]:
    a = r["agreement"]
    return {
        "exact_clarify": round(a["clarify"]["exact_match"]["rate"], 3),
        "f1_clarify": round(a["clarify"]["fact_f1"]["mean"], 3),
        "exact_probe": round(a["probe"]["exact_match"]["rate"], 3),
        "clarify_success_lm": round(r["clarify_lm_human"]["success"]["rate"], 3),
        "at_once_success_lm": round(r["answer_at_once_lm_human"]["success"]["rate"], 3),
        "http_same": round(r["http_vs_in_process_same_reply"]["rate"], 3),
        "lat_ms": round(r["latency_in_process"]["median_ms"], 1),
        "lat_http_ms": round(r["latency_http"]["median_ms"], 1),
    }


if __name__ == "__main__":
    main()
