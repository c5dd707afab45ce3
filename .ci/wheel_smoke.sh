#!/usr/bin/env bash
# The wheel, tested as users get it (issue #42): build the sdist and the wheel (the wheel from the sdist, so both
# are checked), `twine check --strict` them, assert every file of the package in the source tree is in the wheel,
# install the wheel (not editable) with the users' extras into a new venv outside the checkout, and run a smoke
# set there from an empty folder: `turnkit list`, `turnkit eval` on every registered env, sandboxed code and a
# tool call, a one-step `turnkit train`, a tiny `turnkit synth`, `turnkit serve-env` answering one reset, and
# `turnkit view` serving the folders those steps wrote.
# Each step prints its wall time; a failing one names itself and stops the script. See docs/release.md.
#   bash .ci/wheel_smoke.sh          # from anywhere; needs what .ci/setup.sh installs (bwrap, Chromium, Docker)
# Environment: PYTHON (default python3); WHEEL_SMOKE_DIR (work folder, default a new one under /tmp, removed at
# the end unless WHEEL_SMOKE_KEEP=1); WHEEL_SMOKE_UNPINNED=1 installs without .ci/constraints.txt, as a user would.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
extras=train,sandbox,browser,search,trl,openenv,ray,web  # every extra but vllm (CUDA) and peers (benchmarks only)
work=${WHEEL_SMOKE_DIR:-$(mktemp -d /tmp/turnkit-wheel-smoke.XXXXXX)}
work=$(realpath -m "$work")
case "$work/" in "$repo"/*) echo "wheel-smoke: WHEEL_SMOKE_DIR must be outside the checkout ($repo)" >&2; exit 2 ;; esac
mkdir -p "$work"
venv=$work/venv dist=$work/dist run=$work/run
pins=()
[ "${WHEEL_SMOKE_UNPINNED:-0}" = 1 ] || pins=(-c "$repo/.ci/constraints.txt")
export PIP_DISABLE_PIP_VERSION_CHECK=1
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV  # nothing may point back at the checkout
# With a cold cache the first `tiny` command builds the embedded policy, and its SFT bar shows despite --quiet:
# keep the CI log short.
export TQDM_DISABLE=1

server_pid=
cleanup() {
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  if [ "${WHEEL_SMOKE_KEEP:-0}" = 1 ] || [ -n "${WHEEL_SMOKE_DIR:-}" ]; then echo "wheel-smoke: work folder kept: $work"
  else rm -rf "$work"; fi
}
trap cleanup EXIT

timings=()
t_start=$EPOCHREALTIME
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
# step NAME FUNCTION: run FUNCTION in a subshell under `set -e`, print and record its wall time, stop on failure.
step() {
  local name=$1 t0=$EPOCHREALTIME rc
  echo "wheel-smoke: ${name} ..."
  set +e
  (set -e; "$2")
  rc=$?
  set -e
  local dt
  dt=$(elapsed "$t0")
  timings+=("$(printf '%7ss  %s' "$dt" "$name")")
  if [ "$rc" -ne 0 ]; then
    echo "wheel-smoke: FAILED: ${name} (exit ${rc}, ${dt}s; work folder: ${work})" >&2
    WHEEL_SMOKE_KEEP=1
    exit 1
  fi
  echo "wheel-smoke: ok: ${name} (${dt}s)"
}

# quiet_pip PIP ARGS...: pip -q with its output in pip.log, shown (less local-index noise) only when it fails.
quiet_pip() {
  "$@" -q >"$work/pip.log" 2>&1 || { grep -v "is ignored: it is neither" "$work/pip.log" | tail -40 >&2; return 1; }
}

build_dists() {
  rm -rf "$dist" "$work/tools"
  "$py" -c "import ensurepip, venv" 2>/dev/null \
    || { echo "$py cannot make a venv (no ensurepip; on Debian: apt-get install python3-venv)" >&2; exit 1; }
  "$py" -m venv "$work/tools"
  quiet_pip "$work/tools/bin/pip" install build twine
  # `python -m build` makes the sdist, then the wheel from the unpacked sdist: a file the sdist lacks fails here.
  # It builds from a copy of the files git tracks (or would), so no build/ or *.egg-info of the checkout can leak in.
  rm -rf "$work/src"
  "$py" - "$repo" "$work/src" <<'PY'
import pathlib, shutil, subprocess, sys

repo, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
files = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True, check=True).stdout.decode().split("\0")
for f in files:
    if f and (repo / f).is_file():
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / f, dst / f)
PY
  "$work/tools/bin/python" -m build --outdir "$dist" "$work/src" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
  ls -l "$dist"
}

twine_check() {
  "$work/tools/bin/twine" check --strict "$dist"/*
}

package_files() {
  # Every file the source tree has under turnkit/ (Python or not; caches excluded) must be in the wheel: a data
  # file missing from pyproject's package-data would only fail for users of the wheel.
  "$py" - "$repo" "$dist" <<'PY'
import pathlib, subprocess, sys, zipfile

repo, dist = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
try:
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "--cached", "--others", "--exclude-standard", "turnkit"],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    source = {p for p in out if p and (repo / p).is_file()}
except (OSError, subprocess.CalledProcessError):
    source = {str(p.relative_to(repo)) for p in (repo / "turnkit").rglob("*") if p.is_file()}
source = {p for p in source if "__pycache__" not in p and not p.endswith((".pyc", ".pyo"))}
(wheel,) = dist.glob("*.whl")
shipped = set(zipfile.ZipFile(wheel).namelist())
missing = sorted(source - shipped)
data = sorted(p for p in source if not p.endswith(".py"))
print(f"{len(source)} package files in the source tree ({len(data)} non-Python: {', '.join(data) or 'none'}); "
      f"{len(shipped)} files in {wheel.name}")
if missing:
    sys.exit(f"missing from the wheel ({len(missing)}; add them to [tool.setuptools.package-data] in "
             f"pyproject.toml): " + ", ".join(missing))
PY
}

install_wheel() {
  rm -rf "$venv"
  "$py" -m venv "$venv"
  local whl
  whl=$(ls "$dist"/*.whl)
  # torch first and pinned, as .ci/setup.sh does: the CPU wheel is on disk, an unpinned one pulls CUDA packages.
  quiet_pip "$venv/bin/pip" install "${pins[@]}" "torch==2.13.0"
  quiet_pip "$venv/bin/pip" install "${pins[@]}" "${whl}[${extras}]"
  cd "$run"
  # The import must come from the venv's site-packages, never from the checkout.
  "$venv/bin/python" - "$repo" <<'PY'
import pathlib, sys, turnkit

where = pathlib.Path(turnkit.__file__).resolve()
assert pathlib.Path(sys.argv[1]).resolve() not in where.parents, f"turnkit imported from the checkout: {where}"
assert "site-packages" in where.parts, f"turnkit not imported from site-packages: {where}"
print(f"turnkit {turnkit.__version__} from {where.parent}")
PY
}

cli_list() {
  cd "$run"
  "$venv/bin/turnkit" list | tee "$work/envs.txt"
  grep -q '^turnkit/' "$work/envs.txt" || { echo "turnkit list printed no turnkit/ env" >&2; exit 1; }
}

cli_eval() {
  cd "$run"
  local env_id
  for env_id in $(awk '/^turnkit\// { print $1 }' "$work/envs.txt"); do
    echo "  eval $env_id (oracle, 2 episodes)"
    "$venv/bin/turnkit" eval "$env_id" --agent oracle --episodes 2 --quiet --out "eval-${env_id#turnkit/}" \
      || { echo "turnkit eval failed on $env_id" >&2; exit 1; }
  done
  echo "  eval turnkit/MathEpisodes-v0 (the embedded tiny policy, 2 episodes)"
  "$venv/bin/turnkit" eval turnkit/MathEpisodes-v0 --agent tiny --episodes 2 --quiet --out eval-tiny
}

sandbox_calls() {
  cd "$run"
  "$venv/bin/python" - <<'PY'
import gymnasium, turnkit  # noqa: F401  (turnkit registers the envs)
from turnkit.sandbox import Limits, LocalSandbox

with LocalSandbox(Limits(wall_time_s=10, memory_mb=256)) as sb:
    sb.write_file("solution.py", "def add(a, b):\n    return a + b\n")
    r = sb.run_python("from solution import add\nprint(add(2, 3))")
    assert r.ok and r.stdout.strip() == "5", r
print("LocalSandbox.run_python:", r.stdout.strip())
env = gymnasium.make("turnkit/MathEpisodes-v0", tools=["python", "submit"])
env.reset(seed=0)
obs = env.step("<python>6 + 5</python>")[0]
env.close()
assert "11" in obs, obs
print("python tool call:", obs.strip().splitlines()[0][:100])
PY
  if docker info >/dev/null 2>&1; then
    "$venv/bin/python" - <<'PY'
from turnkit.sandbox.docker import DockerSandbox
from turnkit.sandbox.image import image_exists

if not image_exists():
    print("DockerSandbox: skipped (no turnkit sandbox image; .ci/docker.sh builds it)")
else:
    with DockerSandbox() as sb:
        r = sb.run_python("print(6 * 7)")
        assert r.ok and r.stdout.strip() == "42", r
    print("DockerSandbox.run_python:", r.stdout.strip())
PY
  else
    echo "DockerSandbox: skipped (no Docker engine; .ci/docker.sh starts one)"
  fi
}

cli_train() {
  cd "$run"
  "$venv/bin/turnkit" train --out train --quiet --threads 1 --set steps=1 --set grpo.group_size=2 \
    --set groups_per_step=1 --set sampling.max_new_tokens=4 --set max_turns=1 --set eval.every=0 --set log.checkpoint_every=1000
  test -f train/config.json
}

cli_synth() {
  cd "$run"
  "$venv/bin/turnkit" synth turnkit/MathEpisodes-v0 --policy tiny --iterations 1 --tasks 1 --simulations 2 \
    --root-multiplier 1 --epochs 1 --eval-episodes 2 --quiet --out synth
  test -s synth/dataset.jsonl
}

serve_env() {
  cd "$run"
  "$venv/bin/turnkit" serve-env turnkit/MathEpisodes-v0 --port 0 >serve.log 2>&1 &
  server_pid=$!
  trap 'kill "$server_pid" 2>/dev/null || true' EXIT  # this step runs in a subshell: stop the server if it fails
  local url= i
  for i in $(seq 300); do
    url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' serve.log | head -1 || true)
    [ -n "$url" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat serve.log >&2; echo "turnkit serve-env exited early" >&2; exit 1; }
    sleep 0.2
  done
  [ -n "$url" ] || { cat serve.log >&2; echo "turnkit serve-env printed no URL within 60s" >&2; exit 1; }
  echo "  server at $url"
  # One reset over HTTP (stateless /reset) and one over the WebSocket session, as docs/integrations.md shows.
  "$venv/bin/python" - "$url" <<'PY'
import json, sys, urllib.request

import gymnasium, turnkit  # noqa: F401
from openenv.core import GenericEnvClient

url = sys.argv[1]
want = gymnasium.make("turnkit/MathEpisodes-v0").reset(seed=0)[0]
req = urllib.request.Request(f"{url}/reset", data=json.dumps({"seed": 0}).encode(),
                             headers={"content-type": "application/json"})
with urllib.request.urlopen(req, timeout=30) as resp:
    got = json.load(resp)["observation"]["message"]
assert got == want, (got, want)
print("POST /reset:", got.splitlines()[0][:80])
with GenericEnvClient(base_url=url).sync() as client:
    got = client.reset(seed=0).observation["message"]
assert got == want, (got, want)
print("WebSocket reset:", got.splitlines()[0][:80])
PY
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

view_folders() {
  cd "$run"
  "$venv/bin/turnkit" view . --port 0 >view.log 2>&1 &
  server_pid=$!
  trap 'kill "$server_pid" 2>/dev/null || true' EXIT
  local url= i
  for i in $(seq 300); do
    url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' view.log | head -1 || true)
    [ -n "$url" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat view.log >&2; echo "turnkit view exited early" >&2; exit 1; }
    sleep 0.2
  done
  [ -n "$url" ] || { cat view.log >&2; echo "turnkit view printed no URL within 60s" >&2; exit 1; }
  # The page and its static files come from the installed wheel; the API finds the folders the steps above wrote.
  "$venv/bin/python" - "$url" <<'PY'
import json, sys, urllib.request

url = sys.argv[1]
get = lambda path: urllib.request.urlopen(url + path, timeout=30).read().decode()
assert "<html" in get("/").lower()
for name in ("app.js", "style.css"):
    assert get(f"/static/{name}"), name
ids = {s["id"]: s["kinds"] for s in json.loads(get("/api/sources"))["sources"]}
for want in ("eval-tiny", "train", "synth"):
    assert want in ids, (want, ids)
page = json.loads(get("/api/episodes?id=eval-tiny&limit=5"))
print("turnkit view:", ", ".join(f"{k} ({'/'.join(v)})" for k, v in sorted(ids.items())), "|", page["total"], "episodes in eval-tiny")
PY
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

mkdir -p "$run"
echo "wheel-smoke: repo $repo, work folder $work, python $("$py" -c 'import sys; print(sys.version.split()[0])')"
step "build the sdist and wheel (python -m build)" build_dists
step "twine check --strict (metadata, README rendering)" twine_check
step "every package file is in the wheel" package_files
step "install the wheel [${extras}] into a new venv" install_wheel
t_smoke=$EPOCHREALTIME
step "turnkit list" cli_list
step "turnkit eval on every registered env" cli_eval
step "sandboxed code and a tool call" sandbox_calls
step "turnkit train (1 step)" cli_train
step "turnkit synth (1 tiny iteration)" cli_synth
step "turnkit serve-env answers a reset" serve_env
step "turnkit view serves the folders above" view_folders
echo "wheel-smoke: timings"
printf '  %s\n' "${timings[@]}"
echo "wheel-smoke: all passed: smoke set $(elapsed "$t_smoke")s after the install, $(elapsed "$t_start")s in all"
