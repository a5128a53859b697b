#!/usr/bin/env bash
# How long `rsbuilder generate` takes after a one-field edit of a kind, next to a full
# `cargo build` of the operator after the same edit. Prints the figures; asserts nothing.
#
#   scripts/bench-generate.sh [RUNS]      (default 3 runs; builds rsbuilder in release first)
#
# The project is made in a temporary directory with its own target directory, which is built
# once before timing, so the figures are incremental rebuilds, as in daily work.
set -euo pipefail

runs="${1:-3}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
rsbuilder="$root/target/release/rsbuilder"

work="$(mktemp -d -t rsbuilder-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/otp-operator"
cd "$work/otp-operator"
export CARGO_TARGET_DIR="$work/target"
"$rsbuilder" init --domain learn.com 2>/dev/null
"$rsbuilder" create api --group appotp --version v1 --kind AppOTP 2>/dev/null
"$rsbuilder" create api --group fleet --version v1 --kind Ship 2>/dev/null

# Wall time of a command, in seconds.
seconds() {
  local start=$EPOCHREALTIME
  "$@" >/dev/null 2>&1
  awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'
}

echo "warming up: the first build of the project (cold), then its first generate"
echo "cold cargo build: $(seconds cargo build) s; first rsbuilder generate: $(seconds "$rsbuilder" generate) s"

types=api/src/appotp/v1/app_otp.rs

printf '\n%-4s %22s %30s\n' run "rsbuilder generate (s)" "cargo build, operator (s)"
for run in $(seq "$runs"); do
  # One new field per run: the same edit is then timed for both.
  sed -i "s|    pub size: i32,|    pub size: i32,\n\n    /// Bench field $run.\n    pub field_$run: Option<i32>,|" "$types"
  generate=$(seconds "$rsbuilder" generate)
  build=$(seconds cargo build)
  printf '%-4s %22s %30s\n' "$run" "$generate" "$build"
done
