#!/usr/bin/env bash
# Build cost of a generated project next to scripts/bench/plain, the smallest kube 5 operator
# with the same reconcile, measured in one run on this machine, so that the ratios hold whatever
# the machine's speed.
#
#   scripts/bench-build-vs-plain.sh [RUNS]                 RUNS cold builds of each (default 2)
#   PEER_BIN=/path/to/operator scripts/bench-build-vs-plain.sh
#
# Prints, for the `init` + `create api` project and for the plain program:
#   1. a cold debug `cargo build` (each with its own empty target directory);
#   2. after a one-field edit of the types, what it takes to see it: `rsbuilder generate` here
#      (the api crate and the CRDs), `cargo build` there (the program, which is all there is),
#      median of 5;
#   3. the size of the stripped release binary (both release profiles strip), and a prebuilt
#      peer's (PEER_BIN) when given: nothing of another project is fetched or built here.
# and the ratios. Asserts nothing.
set -euo pipefail

runs="${1:-2}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cargo build --release --quiet --manifest-path "$root/Cargo.toml" --bin rsbuilder
rsbuilder="${CARGO_TARGET_DIR:-$root/target}/release/rsbuilder"

work="$(mktemp -d -t rsbuilder-vs-plain.XXXXXX)"
trap 'rm -rf "$work"' EXIT

seconds() {
  local start=$EPOCHREALTIME
  "$@" >/dev/null 2>&1
  awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }

mkdir "$work/otp-operator"
(cd "$work/otp-operator" && "$rsbuilder" init --domain learn.com 2>/dev/null \
  && "$rsbuilder" create api --group appotp --version v1 --kind AppOTP 2>/dev/null)
cp -R "$root/scripts/bench/plain" "$work/plain"
(cd "$work/otp-operator" && cargo fetch --quiet)
(cd "$work/plain" && cargo fetch --quiet)

ours_cold=()
plain_cold=()
for run in $(seq "$runs"); do
  ours_cold+=("$(cd "$work/otp-operator" && CARGO_TARGET_DIR="$work/target-ours-$run" seconds cargo build)")
  plain_cold+=("$(cd "$work/plain" && CARGO_TARGET_DIR="$work/target-plain-$run" seconds cargo build)")
done

# A one-field edit, then what shows it; five times each, a new field each time.
(cd "$work/otp-operator" && CARGO_TARGET_DIR="$work/target-ours-1" "$rsbuilder" generate >/dev/null 2>&1)
types="$work/otp-operator/api/src/appotp/v1/app_otp.rs"
ours_edit=()
for i in 1 2 3 4 5; do
  sed -i "s/    pub size: i32,.*/    pub size: i32,\n    pub extra$i: Option<String>,/" "$types"
  ours_edit+=("$(cd "$work/otp-operator" && CARGO_TARGET_DIR="$work/target-ours-1" seconds "$rsbuilder" generate)")
done
spec="$work/plain/src/main.rs"
plain_edit=()
for i in 1 2 3 4 5; do
  sed -i "0,/    pub size: i32,/s//    pub size: i32,\n    #[serde(default)]\n    pub extra$i: Option<String>,/" "$spec"
  plain_edit+=("$(cd "$work/plain" && CARGO_TARGET_DIR="$work/target-plain-1" seconds cargo build)")
done

(cd "$work/otp-operator" && CARGO_TARGET_DIR="$work/target-ours-1" cargo build --quiet --release --bin manager)
ours_size=$(stat -c %s "$work/target-ours-1/release/manager")
(cd "$work/plain" && CARGO_TARGET_DIR="$work/target-plain-1" cargo build --quiet --release)
plain_size=$(stat -c %s "$work/target-plain-1/release/plain-kube")

echo
echo "| work | this project | plain kube 5 | ratio |"
echo "|---|---|---|---|"
row=""
for run in $(seq "$runs"); do
  i=$((run - 1))
  row+="$(ratio "${ours_cold[$i]}" "${plain_cold[$i]}") "
done
echo "| cold debug build ($runs runs) | ${ours_cold[*]} s | ${plain_cold[*]} s | $row|"
ours_median=$(median "${ours_edit[@]}")
plain_median=$(median "${plain_edit[@]}")
echo "| a one-field edit, shown (median of 5) | $ours_median s (generate) | $plain_median s (build) | $(ratio "$ours_median" "$plain_median") |"
echo "| stripped release binary | $(mib "$ours_size") | $(mib "$plain_size") | $(ratio "$ours_size" "$plain_size") |"
if [[ -n "${PEER_BIN:-}" ]]; then
  peer_size=$(stat -c %s "$PEER_BIN")
  echo "| stripped release binary of the peer ($PEER_BIN) | $(mib "$ours_size") | $(mib "$peer_size") (peer) | $(ratio "$ours_size" "$peer_size") |"
fi
