#!/usr/bin/env bash
# How fast rsbuilder scaffolds, next to copying the same tree: `rsbuilder init` followed by
# `rsbuilder create api` against `cp -r` of the project they make, both on tmpfs when
# /dev/shm exists, in one run, repeated; prints each median and their ratio. The goal is at
# most 25 ms and a ratio of 5 or less.
#
#   scripts/bench-scaffold.sh [RUNS]
set -euo pipefail

runs="${1:-30}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cargo build --quiet --release --manifest-path "$root/Cargo.toml" --bin rsbuilder
rsbuilder="$root/target/release/rsbuilder"
base="/dev/shm"
[[ -d "$base" && -w "$base" ]] || base="${TMPDIR:-/tmp}"
work="$(mktemp -d "$base/rsbuilder-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Seconds since the epoch, with nanoseconds; a difference in milliseconds.
now() { date +%s.%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b - a) * 1000 }'; }

scaffold() {
  local dir="$1"
  mkdir -p "$dir"
  (cd "$dir" && "$rsbuilder" init --domain learn.com 2>/dev/null \
    && "$rsbuilder" create api --group appotp --version v1 --kind AppOTP 2>/dev/null)
}

scaffold "$work/reference"
files="$(find "$work/reference" -type f | wc -l)"

declare -a scaffold_times copy_times
for i in $(seq "$runs"); do
  start="$(now)"
  scaffold "$work/s$i/otp-operator"
  end="$(now)"
  scaffold_times+=("$(ms "$start" "$end")")
  start="$(now)"
  cp -r "$work/reference" "$work/c$i"
  end="$(now)"
  copy_times+=("$(ms "$start" "$end")")
  rm -rf "$work/s$i" "$work/c$i"
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
s="$(median "${scaffold_times[@]}")"
c="$(median "${copy_times[@]}")"
printf 'files: %d, runs: %d, on %s\n' "$files" "$runs" "$base"
printf 'rsbuilder init + create api: %.1f ms (median)\n' "$s"
printf 'cp -r of the same tree:      %.1f ms (median)\n' "$c"
awk -v s="$s" -v c="$c" 'BEGIN { printf "ratio: %.2f\n", s / c }'
