#!/usr/bin/env bash
# The running manager, measured side by side with plain kube in one run on this machine.
#
#   scripts/bench-manager.sh [N,N,...] [RUNS]        default: 0,1000,10000 objects, 3 runs
#   PEER_BIN=/path/to/operator PEER_CRD=/path/to/crd.yaml scripts/bench-manager.sh
#
# Scaffolds a fresh project (`init`, `create api --group appotp --version v1 --kind AppOTP`),
# builds its manager in release mode, and builds beside it scripts/bench/plain/, the smallest
# kube 5 `Controller` with the same reconcile (read, finalizer, the `Ready` condition by
# server-side apply only when it changes, one event) and no runtime: the lower bound. Any other
# operator joins only as a prebuilt binary that reconciles AppOTP objects and its CRD (PEER_BIN,
# PEER_CRD); nothing of another project is fetched or built here.
# Each program then runs against the project's emulated API server (hack/kube_emulator.py, in a
# virtualenv with kmock from PyPI), one after the other, with the same objects: see
# scripts/bench/manager.py for the figures. The manager runs as deployed: leader election,
# metrics (on loopback) and backoff on. N=0 gives the idle rows. Prints one table with the ratios to each peer; asserts
# nothing. IDLE (default 60) and CREATES (default 100) set the idle period and the latency's
# creates.
set -euo pipefail

objects="${1:-0,1000,10000}"
runs="${2:-3}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d -t rsbuilder-bench-manager.XXXXXX)"
trap 'rm -rf "$work"' EXIT
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"

cargo build --quiet --release --manifest-path "$root/Cargo.toml" --bin rsbuilder
rsbuilder="$CARGO_TARGET_DIR/release/rsbuilder"
project="$work/otp-operator"
mkdir "$project"
(cd "$project" && "$rsbuilder" init --domain learn.com 2>/dev/null \
  && "$rsbuilder" create api --group appotp --version v1 --kind AppOTP 2>/dev/null)

echo "building the manager and scripts/bench/plain in release mode" >&2
(cd "$project" && cargo build --quiet --release --locked --bin manager)
manager="$CARGO_TARGET_DIR/release/manager"
cargo build --quiet --release --locked --manifest-path "$root/scripts/bench/plain/Cargo.toml"
plain="$CARGO_TARGET_DIR/release/plain-kube"

venv="${BENCH_VENV:-$work/venv}"
if ! "$venv/bin/python" -c 'import kmock, yaml' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "kmock==0.8" "pyyaml==6.0.3"
fi

size() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.2f", b / 1048576 }'; }
echo "| program | stripped binary (MiB) | commit |"
echo "|---|---|---|"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "| rsbuilder manager | $(size "$manager") | rsbuilder $commit |"
echo "| plain kube 5 | $(size "$plain") | scripts/bench/plain at $commit |"
# The emulator, one Python process, is saturated during a sync of thousands of objects and can
# answer a Lease renewal seconds late; the manager then steps down, as it must, which would end
# the run. A longer Lease keeps leader election on without measuring the emulator's queue.
manager_flags="--leader-elect --leader-elect-lease-duration 60s --leader-elect-renew-deadline 45s"
manager_flags+=" --metrics-bind-address 127.0.0.1:18443 --health-probe-bind-address 127.0.0.1:18081"
programs=(--program "rsbuilder=$manager $manager_flags" --program "plain-kube=$plain")
crds=()
if [[ -n "${PEER_BIN:-}" ]]; then
  echo "| peer | $(size "$PEER_BIN") | $PEER_BIN |"
  programs+=(--program "peer=$PEER_BIN")
  [[ -n "${PEER_CRD:-}" ]] && crds+=(--crd "$PEER_CRD")
fi
echo
echo "Machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), $(uname -sr)"
echo
"$venv/bin/python" "$root/scripts/bench/manager.py" --project "$project" --objects "$objects" --runs "$runs" \
  --idle "${IDLE:-60}" --creates "${CREATES:-100}" "${programs[@]}" "${crds[@]}"
