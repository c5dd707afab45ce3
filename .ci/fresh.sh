#!/usr/bin/env bash
# Fresh-machine check: do the README's `make test` and `make quickstart` really set up a bare Debian machine?
#
# Builds a clean Debian bookworm root with debootstrap holding only what a bare machine image has (python3 +
# venv, git, make, ca-certificates, and a venv first on PATH, since Debian's own pip refuses installs under
# PEP 668), clones the repo into it (default: this repo's committed HEAD) and runs the two README commands
# there, as root, with nothing of this machine's Python, apt packages, Chromium or Docker visible. Reports the
# CPU, the Chromium, torch and transformers versions, pytest's counts and pass/fail; exits 0 only if all passed.
#
#   .ci/fresh.sh [options] [SOURCE [REF]]     SOURCE: a git repo (default: this one); REF: default HEAD
#     --only test|quickstart   run one of the two commands (default: `make test`, then `make quickstart`)
#     --with PATH              also copy PATH from SOURCE's working tree over the clone (repeatable), e.g. to
#                              check uncommitted .ci/ changes: --with .ci --with Makefile
#     --rebuild                rebuild the cached base root (debootstrap, a few minutes)
#     --keep                   keep the root directory afterwards (its path is printed)
#
# The base root is cached as $TURNKIT_FRESH_CACHE/base-bookworm-<recipe hash>.tar.gz (default cache:
# /var/cache/turnkit-fresh; logs go to its logs/ folder); each run unpacks a new copy under
# ${TURNKIT_FRESH_WORK:-/var/tmp/turnkit-fresh} and deletes it afterwards.
#
# How the root is entered: `unshare` gives it private mount and PID namespaces, then pivot_root (not chroot:
# the kernel refuses to create user namespaces, which bubblewrap needs, inside a chroot). /proc is mounted
# fresh for the new PID namespace, /sys (with /sys/fs/cgroup) and /dev (with /dev/pts) are bound from the host,
# /dev/shm and /run are new tmpfs. This workplace's machine image is part of what a fresh CI machine has, so
# /opt/wheels (the CPU torch wheel) is bound read-only, /etc/pip.conf, /etc/resolv.conf and the local CA
# certificates (/usr/local/share/ca-certificates: the egress proxy's) are copied and the PIP_* variables are
# passed through; the user's ~/.config/pip (local mirrors) is not.
# Mounts live only in the private namespace: nothing is mounted on the host and nothing needs unmounting,
# and killing the namespace's first process kills everything started in the root (dockerd, containerd,
# Chromium); the EXIT trap does that and checks it. The root's dockerd shares the host's network namespace
# (apt and pip need the network), so it must keep off the host dockerd's docker0 bridge: the root's
# /etc/docker/daemon.json (read by any dockerd, whatever .ci/docker.sh passes) gives it its own bridge,
# $TURNKIT_FRESH_BRIDGE (default tkfresh0; a second run at once needs its own name and CIDR), created here on
# $TURNKIT_FRESH_BRIDGE_CIDR (default 10.199.254.1/24) and deleted on exit, and
# ip-forward off, so that it changes no host setting. (Not bridge "none": then dockerd deletes any docker0 it
# finds, the host's. Not a cgroup-parent of its own: DockerSandbox reads OOM kills from .../docker/<id>.)
# Its socket, state, containerd and data root are the root's own /run and /var/lib/docker; the cgroups of
# its containers are removed on exit if it could not remove them itself.
set -euo pipefail

usage() { sed -n '2,19p' "$0"; }
die() { echo "fresh.sh: $*" >&2; exit 2; }

targets=(test quickstart)
with=()
rebuild=0
keep=0
pos=()
while [ $# -gt 0 ]; do
  case "$1" in
    --only) case "${2:-}" in test|quickstart) targets=("$2") ;; *) die "--only takes test or quickstart" ;; esac
            shift 2 ;;
    --with) with+=("${2:?--with needs a path}"); shift 2 ;;
    --rebuild) rebuild=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) pos+=("$1"); shift ;;
  esac
done
[ ${#pos[@]} -le 2 ] || die "too many arguments (see --help)"
repo=$(cd "$(dirname "$0")/.." && pwd)
src=${pos[0]:-$repo}
ref=${pos[1]:-HEAD}
[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, mounts, namespaces)"

suite=bookworm
mirror=${TURNKIT_FRESH_MIRROR:-http://deb.debian.org/debian}
cache=${TURNKIT_FRESH_CACHE:-/var/cache/turnkit-fresh}
stamp=$(date -u +%Y%m%dT%H%M%SZ)
work=${TURNKIT_FRESH_WORK:-/var/tmp/turnkit-fresh}/$stamp
root=$work/root
logs=$cache/logs/$stamp
bridge=${TURNKIT_FRESH_BRIDGE:-tkfresh0}
bridge_cidr=${TURNKIT_FRESH_BRIDGE_CIDR:-10.199.254.1/24}
export DEBIAN_FRONTEND=noninteractive

# What a bare machine image has. Changing this recipe changes the cache key, so the base is rebuilt.
base_pkgs="python3 python3-venv git make ca-certificates"
base_recipe="$suite $mirror minbase --no-install-recommends $base_pkgs; apt lists removed; venv /opt/venv; v1"
base=$cache/base-$suite-$(printf '%s' "$base_recipe" | sha256sum | cut -c1-12).tar.gz

ns_pid=""
ns_id=""
bridge_made=0
build=""
# Unmounts whatever is still mounted under $1 on the host (only debootstrap mounts there), deepest first.
umount_under() {
  local m
  findmnt -rn -o TARGET | awk -v d="$1/" 'index($0 "/", d) == 1' | sort -r | while read -r m; do
    umount -l "$m" || echo "fresh.sh: could not unmount $m" >&2
  done
}
cleanup() {
  local rc=$? p left=()
  trap - EXIT INT TERM
  if [ -n "$ns_pid" ] && kill -0 "$ns_pid" 2>/dev/null; then
    echo "fresh.sh: stopping everything in the root"
    kill -KILL "$ns_pid" 2>/dev/null || true
    wait "$ns_pid" 2>/dev/null || true
  fi
  if [ -n "$ns_id" ]; then  # no process may be left in the root's PID namespace
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      left=()
      for p in /proc/[0-9]*; do
        [ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$ns_id" ] && left+=("${p#/proc/}")
      done
      [ ${#left[@]} -eq 0 ] && break
      sleep 1
    done
    if [ ${#left[@]} -gt 0 ]; then echo "fresh.sh: processes left from the root: ${left[*]}" >&2; rc=1; fi
  fi
  if [ "$bridge_made" -eq 1 ]; then ip link del "$bridge" 2>/dev/null || true; fi
  # Empty cgroups the root's containers leave when its dockerd is killed rather than stopped.
  for p in "$root"/var/lib/docker/containers/*/; do
    [ -d "$p" ] || continue
    find /sys/fs/cgroup -depth -type d -name "$(basename "$p")" -exec rmdir {} + 2>/dev/null || true
  done
  for d in "$build" "$work"; do
    if [ -z "$d" ] || [ ! -d "$d" ]; then continue; fi
    umount_under "$d"
    if findmnt -rn -o TARGET | awk -v d="$d/" 'index($0 "/", d) == 1' | grep -q .; then
      echo "fresh.sh: something is still mounted under $d; not deleting it" >&2; rc=1
    elif [ "$d" = "$work" ] && [ "$keep" -eq 1 ]; then
      echo "fresh.sh: kept $root"
    else
      rm -rf "$d"
    fi
  done
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs "$@" inside root $1 in new mount and PID namespaces (see the header), in the background; sets ns_pid.
enter() {
  local r=$1; shift
  local env=(PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
             LANG=C.UTF-8 TERM=dumb VIRTUAL_ENV=/opt/venv DEBIAN_FRONTEND=noninteractive)
  local v
  while IFS= read -r v; do env+=("$v=${!v}"); done < <(compgen -e | grep '^PIP_' || true)
  # shellcheck disable=SC2016  # the script is for the inner bash
  unshare --mount --pid --fork --kill-child --propagation private -- bash -euc '
    r=$1; n=$2; shift 2
    mount --bind "$r" "$r"
    mount -t proc proc "$r/proc"
    mount --rbind /sys "$r/sys"
    mount --rbind /dev "$r/dev"
    mount -t tmpfs -o mode=1777,nosuid,nodev shm "$r/dev/shm"
    mount -t tmpfs -o mode=755,nosuid,nodev run "$r/run"
    mkdir -m 1777 "$r/run/lock"
    if [ -d /opt/wheels ]; then
      mkdir -p "$r/opt/wheels"
      mount --bind /opt/wheels "$r/opt/wheels"
      mount -o remount,bind,ro "$r/opt/wheels"
    fi
    cd "$r"
    mkdir -p .host
    pivot_root . .host
    cd /
    umount -l /.host
    rmdir /.host
    exec env -i "${@:1:n}" "${@:n+1}"
  ' enter "$r" "${#env[@]}" "${env[@]}" "$@" &
  ns_pid=$!
  for _ in $(seq 50); do
    ns_id=$(readlink "/proc/$ns_pid/ns/pid_for_children" 2>/dev/null || true)
    [ -n "$ns_id" ] && [ "$ns_id" != "$(readlink /proc/self/ns/pid)" ] && break
    sleep 0.1
  done
}
# Runs "$@" in root $1 and waits; returns its status.
run_in() {
  local rc=0
  enter "$@"
  wait "$ns_pid" || rc=$?
  ns_pid=""
  return "$rc"
}

build_base() {
  command -v debootstrap >/dev/null || { echo "fresh.sh: apt-get install debootstrap"; apt-get update -qq;
                                         apt-get install -y -qq debootstrap >/dev/null; }
  build=$cache/build.$$
  rm -rf "$build"
  mkdir -p "$build"
  echo "fresh.sh: debootstrap $suite (minbase) from $mirror"
  debootstrap --variant=minbase "$suite" "$build" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { tail -n 20 "$cache/debootstrap.log" >&2; die "debootstrap failed (log: $cache/debootstrap.log)"; }
  rm -f "$build/etc/apt/sources.list"
  cat >"$build/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # No init system runs here: package scripts must not start services (docker.io's dockerd).
  printf '#!/bin/sh\nexit 101\n' >"$build/usr/sbin/policy-rc.d"
  chmod 755 "$build/usr/sbin/policy-rc.d"
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$build/etc/hosts"
  echo fresh >"$build/etc/hostname"
  cp /etc/resolv.conf "$build/etc/resolv.conf"
  echo "fresh.sh: apt-get install $base_pkgs; python3 -m venv /opt/venv"
  run_in "$build" /bin/sh -ec "apt-get update -qq; apt-get upgrade -y -qq >/dev/null
    apt-get install -y -qq --no-install-recommends $base_pkgs >/dev/null
    python3 -m venv /opt/venv
    apt-get clean; rm -rf /var/lib/apt/lists/*" || die "base set-up failed"
  tar -C "$build" -czf "$base.tmp" .
  mv "$base.tmp" "$base"
  rm -rf "$build"
  build=""
  echo "fresh.sh: cached $base ($(du -h "$base" | cut -f1))"
}

t0=$SECONDS
mkdir -p "$cache" "$logs"
if [ "$rebuild" -eq 1 ] || [ ! -f "$base" ]; then build_base; fi

mkdir -p "$root"
tar -C "$root" -xzf "$base"
cp /etc/resolv.conf "$root/etc/resolv.conf"
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
# This machine image's own CAs (a TLS-inspecting egress proxy): without them pip cannot reach PyPI at all.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
mkdir -p "$root/etc/docker"
printf '{"bridge": "%s", "ip-forward": false}\n' "$bridge" >"$root/etc/docker/daemon.json"

# The repo, as a clone: a committed state, nothing of this machine's working tree unless --with says so.
dst=$root/root/turnkit
git clone -q --no-checkout "$src" "$dst"
if [ -d "$src" ]; then sha=$(git -C "$src" rev-parse --verify "$ref^{commit}")
else sha=$(git -C "$dst" rev-parse --verify "$ref^{commit}" 2>/dev/null || git -C "$dst" rev-parse --verify "origin/$ref^{commit}"); fi
git -C "$dst" -c advice.detachedHead=false checkout -q --detach "$sha"
desc="$src @ $(git -C "$dst" log -1 --format='%h %s' | cut -c1-100)"
for p in "${with[@]}"; do
  [ -e "$src/$p" ] || die "--with $p: no such path in $src"
  tar -C "$src" -cf - "$p" | tar -C "$dst" -xf -
  desc+=" + working-tree $p"
done
echo "fresh.sh: source $desc"

cat >"$root/root/fresh-inner.sh" <<'EOF'
#!/bin/bash
# Runs inside the fresh root: the README's commands, then facts for the report. Not `set -e`: every step runs.
set -uo pipefail
cd /root/turnkit
out=/root/fresh-logs
mkdir -p "$out"
update-ca-certificates >/dev/null 2>&1 || echo "update-ca-certificates failed" >&2
echo "python3: $(command -v python3) ($(python3 --version 2>&1)); kernel $(uname -r)"
for t in "$@"; do
  echo "=== make $t"
  s=$SECONDS
  make "$t" 2>&1 | tee "$out/$t.log"
  echo "$t ${PIPESTATUS[0]} $((SECONDS - s))" >>"$out/results"
done
{ chromium --version 2>/dev/null || echo "chromium: not installed"; } >"$out/chromium"
python3 -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")' \
  2>&1 | tail -n 1 >"$out/versions"
python3 -m pip freeze --exclude-editable >"$out/pip-freeze.txt" 2>/dev/null
cp -r runs/quickstart "$out/" 2>/dev/null || true
cp /var/log/turnkit-dockerd.log "$out/dockerd.log" 2>/dev/null || true
# Before the namespace is torn down: what did the run leave behind?
for p in /proc/[0-9]*; do
  c=$(cat "$p/comm" 2>/dev/null) || continue
  case "$c" in chrom*|dockerd|containerd*|bwrap) echo "${p#/proc/} $c" ;; esac
done >"$out/leftovers"
if [ -f /var/run/docker.pid ]; then  # stop dockerd cleanly (it stops its containers and containerd)
  kill "$(cat /var/run/docker.pid)" 2>/dev/null
  for _ in $(seq 30); do [ -f /var/run/docker.pid ] || break; sleep 1; done
fi
EOF
chmod +x "$root/root/fresh-inner.sh"

# The root dockerd's bridge (see the header); a leftover from an interrupted run is replaced.
command -v ip >/dev/null || die "needs ip (iproute2) for the root dockerd's bridge"
ip link del "$bridge" 2>/dev/null || true
if ip -4 route | grep -q "^${bridge_cidr%.*}\."; then
  die "$bridge_cidr overlaps a route here; set TURNKIT_FRESH_BRIDGE_CIDR to a free /24 (e.g. 10.123.45.1/24)"
fi
ip link add "$bridge" type bridge
bridge_made=1
ip addr add "$bridge_cidr" dev "$bridge"
ip link set "$bridge" up

cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "fresh.sh: CPU $cpu ($(nproc) cores); running make ${targets[*]} in $root (logs: $logs)"
t1=$SECONDS
run_in "$root" /root/fresh-inner.sh "${targets[@]}" || true
cp -r "$root/root/fresh-logs/." "$logs/" 2>/dev/null || true

# Report.
ok=1
echo
echo "=== fresh.sh report ($stamp)"
echo "source:    $desc"
echo "CPU:       $cpu ($(nproc) cores)"
echo "chromium:  $(cat "$logs/chromium" 2>/dev/null || echo '?')"
echo "python:    $(cat "$logs/versions" 2>/dev/null || echo '?')"
pins() { grep -v '^#' "$1" | awk -F'==' 'NF == 2 { n = tolower($1); gsub(/[-_.]+/, "-", n); print n "==" $2 }' | sort; }
if [ -f "$dst/.ci/constraints.txt" ] && [ -s "$logs/pip-freeze.txt" ]; then
  off=$(comm -23 <(pins "$dst/.ci/constraints.txt") <(pins "$logs/pip-freeze.txt") | tr '\n' ' ')
  echo "pins:      $(pins "$logs/pip-freeze.txt" | wc -l) packages installed;" \
       "${off:+not as pinned in .ci/constraints.txt: }${off:-all as pinned in .ci/constraints.txt}"
fi
for t in "${targets[@]}"; do
  line=$(grep "^$t " "$logs/results" 2>/dev/null || true)
  if [ -z "$line" ]; then echo "make $t: did not run"; ok=0; continue; fi
  read -r _ rc secs <<<"$line"
  verdict=PASS; [ "$rc" -eq 0 ] || { verdict="FAIL (exit $rc)"; ok=0; }
  echo "make $t:  $verdict in $((secs / 60))m$((secs % 60))s"
  if [ "$t" = test ]; then
    counts=$(grep -E '[0-9]+ (passed|failed|error)' "$logs/test.log" | tail -n 1 | sed 's/=//g; s/^ *//' || true)
    echo "  pytest:  ${counts:-no summary line}"
    grep -E '^(FAILED|ERROR) ' "$logs/test.log" | cut -c1-160 | sed 's/^/  /' || true
  fi
done
# dockerd and containerd stay up by design (.ci/docker.sh); a Chromium or bwrap still running is a leak.
leaks=$(grep -vE ' (dockerd|containerd.*)$' "$logs/leftovers" 2>/dev/null || true)
if [ -n "$leaks" ]; then
  echo "leaked:    still running after the commands (then killed):"; while read -r l; do echo "  $l"; done <<<"$leaks"; ok=0
else
  echo "leaked:    nothing (no Chromium or bwrap left running; dockerd stopped, the root's namespace killed)"
fi
echo "wall:      $(((SECONDS - t0) / 60))m$(((SECONDS - t0) % 60))s in all, $(((SECONDS - t1) / 60))m$(((SECONDS - t1) % 60))s in the root"
echo "logs:      $logs"
if [ "$ok" -eq 1 ]; then echo "result:    PASS"; else echo "result:    FAIL"; exit 1; fi
