#!/usr/bin/env bash
# Makes a Docker engine and the offline sandbox image available (idempotent):
#   1. start dockerd (vfs storage, no iptables: works inside containers/VMs) unless `docker info` already works;
#   2. build turnkit-sandbox:py311 from the host's own files if it is missing (no registry is needed).
# Logs: ${TURNKIT_DOCKERD_LOG:-/var/log/turnkit-dockerd.log}.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
log=${TURNKIT_DOCKERD_LOG:-/var/log/turnkit-dockerd.log}

if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
  echo "docker.sh: dockerd/docker not installed; Docker sandbox tests will be skipped" >&2
  exit 0
fi

if ! docker info >/dev/null 2>&1; then
  echo "docker.sh: starting dockerd (log: $log)"
  mkdir -p "$(dirname "$log")"
  setsid nohup dockerd --storage-driver=vfs --iptables=false >"$log" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    echo "docker.sh: dockerd did not come up; last log lines:" >&2
    tail -n 20 "$log" >&2 || true
    exit 1
  fi
fi

"$py" -m turnkit.sandbox.image build
