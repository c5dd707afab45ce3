"""How much probability the answer format keeps through the DPO rounds of ``mcts_dpo.py`` (issue #21, item 3).

MathEpisodes answers are ``ANSWER: <n>``. In a step-level pair the chosen and the rejected answer share the
``ANSWER: `` prefix, so that prefix goes into the pair's prompt: neither the DPO term nor an NLL term on the
chosen *suffix* (``--nll-scope suffix``) puts any loss on it, and nothing holds its probability up while LoRA on
every layer moves the model. ``--nll-scope turn`` puts the NLL on the whole chosen turn, prefix included.

For each ``mcts_dpo.py`` run folder (``<out>/<name>/mcts-s<seed>`` or ``bon-s<seed>``) this script loads the
policy after every round (``iter_NNN/adapter`` on the embedded SFT policy) and measures, on the first turn of
``--tasks`` held-out tasks (seeds from 10**9, the study's evaluation tasks), the mean log-probability of the
format prefix: ``log π("ANSWER: " | prompt)``, summed over its tokens. The SFT start is round ``-1``.

Run (after ``mcts_dpo.py`` runs whose folders are kept, e.g. ``--out /tmp/mcts``; one float path per process,
with the same ``ATEN_CPU_CAPABILITY`` and ``TURNKIT_CACHE`` as the runs it reads):
    python studies/mcts_dpo_format.py /tmp/mcts/avx512-*/mcts-s* /tmp/mcts/avx512-*/bon-s* \\
        --out studies/results/mcts_dpo/format/avx512.json
    python studies/mcts_dpo_format.py --summary studies/results/mcts_dpo/format/*.json    # the table
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import time
from pathlib import Path
from typing import Any

from common.provenance import write_result

import turnkit  # noqa: F401  (registers the built-in envs)

MATH = "turnkit/MathEpisodes-v0"
HELD_OUT_SEED = 10**9
ENV_KWARGS = {"difficulty": 1, "max_attempts": 1, "kinds": ("arithmetic",)}
"""The quickstart tasks of ``mcts_dpo.py`` (``--kinds arithmetic --max-attempts 1``)."""


def format_prefix_ids(tokenizer: Any) -> list[int]:
    """The token ids every ``ANSWER: <n>`` reply starts with (the common prefix of two such replies)."""
    a = tokenizer("ANSWER: 1", add_special_tokens=False)["input_ids"]
    b = tokenizer("ANSWER: 2", add_special_tokens=False)["input_ids"]
    prefix = []
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        prefix.append(x)
    if not prefix:
        raise ValueError("the tokenizer shares no prefix between 'ANSWER: 1' and 'ANSWER: 2'")
    return prefix


def held_out_prompts(policy: Any, tasks: int) -> list[tuple[int, ...]]:
    """The exact prompt ids of the first turn of each held-out task, as the policy builds them."""
    import gymnasium

    from turnkit.rollout.collect import collect_batch

    envs = [gymnasium.make(MATH, **ENV_KWARGS) for _ in range(tasks)]
    try:
        view = policy.with_sampling(temperature=0.0)
        trajs = collect_batch(envs, view, list(range(HELD_OUT_SEED, HELD_OUT_SEED + tasks)), max_turns=1)
    finally:
        for env in envs:
            env.close()
    return [tuple(t.steps[0].action.prompt_token_ids) for t in trajs]


def format_logprob(policy: Any, prompts: list[tuple[int, ...]], prefix: list[int]) -> float:
    """Mean over prompts of ``log π(prefix | prompt)`` (temperature 1)."""
    policy.model.eval()
    lp = policy.sequence_logprobs(prompts, [prefix] * len(prompts), temperature=1.0)
    return float(lp.sum(dim=1).mean())


def measure(run_dirs: list[Path], tasks: int) -> dict[str, Any]:
    import torch

    from turnkit.models.embedded import tiny_policy

    torch.set_num_threads(1)
    base = tiny_policy(progress=False)
    prefix = format_prefix_ids(base.tokenizer)
    prompts = held_out_prompts(base, tasks)
    start = format_logprob(base, prompts, prefix)
    out: dict[str, Any] = {"prefix_ids": prefix, "tasks": tasks, "sft": start, "runs": {}}
    for run in run_dirs:
        rounds = sorted(p for p in run.glob("iter_*") if (p / "adapter").is_dir())
        policy = tiny_policy(progress=False)
        values = []
        for r in rounds:
            policy.load_adapter(r / "adapter")
            values.append(format_logprob(policy, prompts, prefix))
        out["runs"][str(run)] = values
        print(json.dumps({"run": str(run), "sft": round(start, 4), "rounds": [round(v, 4) for v in values]}))
    return out


DRIFT = -0.1
"""A round whose ``log π(format)`` is below this (the format's probability under 0.9) counts as an excursion."""


def group_of(run: str) -> str:
    """``.../avx512-suffix-s3/mcts-s3`` -> ``avx512-suffix/mcts``: the run's study name and method, seed dropped."""
    name, method = Path(run).parent.name, Path(run).name
    return f"{re.sub(r'-s[0-9]+$', '', name)}/{re.sub(r'-s[0-9]+$', '', method)}"


def summary(results: list[dict[str, Any]]) -> list[str]:
    """Markdown rows: per group of runs, the worst round's ``log π(format)`` (median and minimum over seeds) and
    how many seeds had a round below :data:`DRIFT`."""
    groups: dict[str, list[float]] = {}
    for result in results:
        for run, values in result["runs"].items():
            groups.setdefault(group_of(run), []).append(min(values))
    lines = [
        "| runs | seeds | worst round, median | worst round, minimum | seeds below −0.1 |",
        "|---|---|---|---|---|",
    ]
    for group, worst in sorted(groups.items()):
        below = sum(w < DRIFT for w in worst)
        lines.append(
            f"| {group} | {len(worst)} | {statistics.median(worst):.4f} | {min(worst):.4f} | {below} of {len(worst)} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="mcts_dpo.py run folders (mcts-s<seed> / bon-s<seed>)")
    parser.add_argument("--tasks", type=int, default=200, help="held-out tasks")
    parser.add_argument("--out", type=Path, default=None, help="result JSON")
    parser.add_argument("--summary", action="store_true", help="the runs are result JSONs of this script: tabulate")
    args = parser.parse_args()
    if args.summary:
        print("\n".join(summary([json.loads(p.read_text()) for p in args.runs])))
        return
    started = time.time()
    result = measure(args.runs, args.tasks)
    result["p_format_sft"] = math.exp(result["sft"])
    if args.out:
        write_result(
            args.out,
            {"settings": {"runs": [str(r) for r in args.runs], "tasks": args.tasks}, **result},
            started=started,
        )


if __name__ == "__main__":
    main()
