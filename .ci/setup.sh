#!/usr/bin/env bash
# Installs everything turnkit's tests and main job need on a fresh Debian machine (idempotent, quiet when done).
# apt: bubblewrap (LocalSandbox), docker.io (DockerSandbox); pip: torch (CPU wheel) + turnkit with extras;
# then Chromium for the design env (.ci/chromium.sh), dockerd and the offline sandbox image (.ci/docker.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

need_apt=()
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
command -v dockerd >/dev/null || need_apt+=(docker.io)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: apt-get install ${need_apt[*]}"
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

py=${PYTHON:-python3}
# torch first and pinned: the CPU wheel is on disk; an unpinned torch would pull GBs of CUDA packages.
"$py" -c "import torch" 2>/dev/null || "$py" -m pip install -q "torch==2.13.0"
if ! "$py" -c "import turnkit, transformers, peft, pexpect, docker, PIL, datasets, trl, pytest, ruff" 2>/dev/null \
   || [ "$("$py" -c 'import turnkit,os;print(os.path.dirname(os.path.dirname(turnkit.__file__)))')" != "$PWD" ]; then
  echo "setup: pip install -e .[train,sandbox,browser,search,trl,dev]"
  "$py" -m pip install -q -e ".[train,sandbox,browser,search,trl,dev]"
fi

bash .ci/chromium.sh
bash .ci/docker.sh
