#!/usr/bin/env bash
# Every advantage estimator with its method's critic, and with the oracle critic, through `turnkit train` on the
# embedded tiny model (issue #51): a few steps each, to show they run end to end. Not a study: too few steps to
# compare learning. For each run it prints the last step's reward and the mean |advantage| of the turns in
# env-tied groups (every episode of the task got the same env reward) against the other groups, read from the
# rollouts the run kept (rollouts_every=1). `grpo` + `prime` is the summed-reward path the estimators replace.
#   bash .ci/estimators_smoke.sh [OUT]      # OUT: run folders (default a new folder under /tmp)
# Environment: PYTHON (default python3); SMOKE_STEPS (default 3).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
out=$(realpath -m "${1:-$(mktemp -d /tmp/turnkit-estimators.XXXXXX)}")
steps=${SMOKE_STEPS:-3}
export TQDM_DISABLE=1 PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$out"
cd "$repo"

pairs=(
  "grpo prime"  "prime prime"  "mrt mrt"  "pav pav"  "sweet sweet"  "paper prime"
  "prime oracle"  "mrt oracle"  "pav oracle"  "sweet oracle"  "dr_grpo oracle"
)
declare -A keys=([prime]='{}' [mrt]='{"samples": 2}' [pav]='{"samples": 2, "best_of": 2}' [sweet]='{"steps": 2}'
                 [oracle]='{}')
for pair in "${pairs[@]}"; do
  read -r estimator critic <<<"$pair"
  run=$out/$estimator-$critic
  rm -rf "$run"
  start=$(date +%s)
  "$py" -m turnkit.cli train --out "$run" --quiet --threads 1 \
    --set model=tiny --set steps="$steps" --set grpo.group_size=4 --set groups_per_step=4 --set max_turns=3 \
    --set log.rollouts_every=1 --set log.checkpoint_every="$steps" --set seed=0 \
    --set grpo.estimator="$estimator" --set "critic={\"$critic\": ${keys[$critic]}}" 2>"$run.log" \
    || { echo "estimators-smoke: $estimator + $critic failed (see $run.log)" >&2; exit 1; }
  echo "$estimator + $critic: $(( $(date +%s) - start )) s"
done

"$py" - "$out" "${pairs[@]}" <<'EOF'
import json, sys
from collections import defaultdict
from pathlib import Path

out = Path(sys.argv[1])
print(f"\n{'estimator + critic':<18} {'reward':>6} {'tied |A|':>9} {'other |A|':>9} {'tied groups':>11}")
for pair in sys.argv[2:]:
    estimator, critic = pair.split()
    run = out / f"{estimator}-{critic}"
    last = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"reward_mean"' in line][-1]
    tied, other, n_tied, n_groups = [], [], 0, 0
    for folder in sorted((run / "rollouts").iterdir()):
        groups = defaultdict(list)
        for line in (folder / "trajectories.jsonl").read_text().splitlines():
            ep = json.loads(line)
            groups[(ep["seed"], ep.get("group"))].append(ep)
        for eps in groups.values():
            env = {round(sum(s["reward"] for s in ep["steps"]), 9) for ep in eps}
            sizes = [abs(s["advantage"]) for ep in eps for s in ep["steps"] if "advantage" in s]
            (tied if len(env) == 1 else other).extend(sizes)
            n_tied += len(env) == 1
            n_groups += 1
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    print(f"{estimator + ' + ' + critic:<18} {last['reward_mean']:6.3f} {mean(tied):9.4f} {mean(other):9.4f} "
          f"{n_tied:>5}/{n_groups:<5}")
print(f"\nrun folders: {out}")
EOF
