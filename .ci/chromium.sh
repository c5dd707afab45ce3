#!/usr/bin/env bash
# Installs what turnkit.browser (and the CollabDesign env) needs on a Debian machine: the Debian `chromium`
# package (headless; found on PATH or via $TURNKIT_CHROMIUM), the DejaVu fonts the reference pages use, Pillow
# (screenshot decoding). Idempotent and quiet when everything is there.
#
# turnkit.browser drives the system Chromium directly over the DevTools pipe; it needs no Playwright (and
# `playwright install` would try to download a browser, which fails offline).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

need_apt=()
if [ -z "${TURNKIT_CHROMIUM:-}" ] && ! command -v chromium >/dev/null; then need_apt+=(chromium); fi
if ! dpkg -s fonts-dejavu-core >/dev/null 2>&1; then need_apt+=(fonts-dejavu-core); fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "chromium.sh: apt-get install ${need_apt[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

py=${PYTHON:-python3}
"$py" -c "import PIL" 2>/dev/null || { echo "chromium.sh: pip install pillow"; "$py" -m pip install -q pillow; }

# Smoke test: one render in a fresh browser, which must leave no process behind.
"$py" - <<'PY'
from turnkit.browser import Browser, RenderCache, owned_chromium_pids

with Browser(viewport=(64, 48), cache=RenderCache(0)) as b:
    r = b.render("<body style='margin:0;background:#00ff00'></body>")
assert r.pixels[10, 10].tolist() == [0, 255, 0], r.pixels[10, 10]
assert not owned_chromium_pids(), owned_chromium_pids()
PY
